// ring on CUDA — context parallelism over the GPUs of one machine, one rank a GPU, NCCL between
// them. The schedule is the CPU twin's (schedule.h, cpu.cpp); what a rank computes at a step is
// done by the kernels of the rungs below (the best this GPU runs: `hopper` on an H100/H200,
// `tiled` elsewhere; the harness picks them from the registry, RingCuda::forward_blocks), so this
// file is the ring only: buffers, streams, transfers, merges.
//
// One process drives every GPU it uses, from one host thread: ranks 0 .. R-1 are devices
// 0 .. R-1, their communicators made together by ncclCommInitAll, every step's transfers of all
// ranks issued inside one ncclGroupStart / ncclGroupEnd (the way NCCL lets one thread drive
// several GPUs without deadlock), the kernels launched rank after rank (launches are
// asynchronous, so the GPUs run together). No launcher, no second process: `flashlab run
// --ranks R --backend cuda` is the whole entry point, and R = 1 is a ring of one on one GPU.
//
// A rank r, on device r, with two streams:
//
//   comm stream      | send K,V(t) -> r+1, recv K,V(t+1) <- r-1 |  (and, backward, dK,dV)
//                     \ waits: step t-1's compute done            \  (the buffer it fills is free)
//   compute stream   | step t: block kernels + merges             | step t+1 (waits: K,V(t+1) in)
//
//   buffers: own K/V shard (never written), two travelling K/V buffers (the one received at step
//   t is computed on at step t+1 while the next is received into the other), Q, dO per chunk.
//
// A step is a few pairs (a chunk of the rank's queries, a chunk of the held shard's keys), each a
// problem of its own: full (plain attention), diagonal (causal attention on a square block) or
// skipped (schedule.h: pair_kind). The forward's block kernel writes the pair's O (in the storage
// dtype) and LSE, merged into the rank's fp32 running O and LSE by merge.cuh's log-sum-exp rule;
// after the last step O is cast to the storage dtype. The backward's block kernel, given the final
// O and LSE, writes the pair's dQ, dK, dV, added into fp32 accumulators: dQ stays on its rank;
// the step's dK, dV go into a partial for the held shard, added (in step order) to the
// accumulator that arrives from rank r-1 and sent on to rank r+1, so that after the last step
// each shard's dK, dV go home holding every rank's share, summed in the order s, s+1, ..., s+R-1
// (the twin's order, every run: bitwise reproducible, as the block kernels are deterministic).
// Transfers of dK, dV lag one step behind their compute: step t's accumulator travels while
// step t+1 computes.
//
// A ring of one (R = 1) still moves its blocks through NCCL: it sends its own K/V to itself before
// its only step and computes on the copy it receives, and its dK, dV go "home" to itself through
// NCCL at the end, so a one-GPU test exercises the transfers and their ordering, not a shortcut.
//
// Limits: Nq = Nk (self-attention; the twin takes Nq != Nk), no window, no packed batch or paged
// cache; fp16 and bf16; the head dims and shapes the block kernels take. Each block's O and dK,
// dV are rounded to the storage dtype by the block kernel before they are merged or summed in
// fp32: a little more error than one kernel over the whole sequence (the GPU tests hold it to the
// same budget). Timing: a pass's time is the slowest rank's span from its start event to its end
// event; the ranks are synchronised before each pass, and L2 is not emptied between runs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/cuda_check.h"
#include "core/device.h"
#include "core/device_api.h"
#include "core/dtype.h"
#include "merge.cuh"
#include "nccl_api.h"
#include "schedule.h"

namespace flashlab::cuda {

namespace {

namespace plan = ::flashlab::FLASHLAB_FOLDER;
namespace ring_kernels = FLASHLAB_FOLDER::ring_kernels;
using plan::Chunk;
using plan::PairKind;
using plan::Shard;
using plan::Sharding;

std::string ring_check(const Problem& p) {
  if (p.shape.Nq != p.shape.Nk)
    return "ring on CUDA takes self-attention (Nq = Nk), where every pair of chunks is a full, a "
           "causal-diagonal or a skipped block of a rung's kernel; Nq != Nk runs on its CPU twin "
           "(--backend cpu)";
  if (p.dtype != DType::f16 && p.dtype != DType::bf16)
    return "ring on CUDA stores fp16 or bf16 (got " + to_string(p.dtype) + ")";
  return "";
}

std::string ring_unavailable(int, int) {
#ifndef FLASHLAB_HAVE_NCCL
  return "this flashlab was built without NCCL (no nccl.h at configure time): the ring's GPU side "
         "passes its blocks with it";
#else
  std::string why;
  return FLASHLAB_FOLDER::nccl_api(&why) ? std::string() : why;
#endif
}

int ranks_of(const LaunchOptions& l) {
  return l.ranks > 0 ? l.ranks : 1;
}

// The cut of the sequence, as the twin makes it (Nq = Nk: queries and keys share it).
struct Geometry {
  Problem p;
  int R;
  Sharding sh;
  int64_t heads, kvh, d;
  Geometry(const Problem& p_, int R_, Sharding sh_)
      : p(p_), R(R_), sh(sh_), heads(p_.shape.heads()), kvh(p_.shape.kv_head_count()),
        d(p_.shape.d) {}
  Shard shard(int r) const { return plan::shard(p.shape.Nq, R, r, sh); }
  Chunk chunk(int r, int which) const { return which == 0 ? shard(r).first : shard(r).second; }
  int64_t chunk_id(int r, int which) const { return plan::chunk_index(R, r, which, sh); }
  int64_t max_chunk() const { return (p.shape.Nq + 2 * R - 1) / (2 * R); }
  int64_t max_shard() const {
    int64_t m = 0;
    for (int r = 0; r < R; ++r) m = std::max(m, shard(r).size());
    return m;
  }
#ifdef FLASHLAB_HAVE_NCCL
  // A K/V (or dK/dV) buffer of shard s: K of its first chunk, K of its second, V of its first,
  // V of its second, each [B Hkv, rows, d]. Offsets in elements.
  int64_t k_off(int s, int which) const { return which == 0 ? 0 : kvh * shard(s).first.size() * d; }
  int64_t v_off(int s, int which) const { return kvh * shard(s).size() * d + k_off(s, which); }
#endif
  int64_t kv_elems(int s) const { return 2 * kvh * shard(s).size() * d; }
  // The problem a pair of chunks is for its block kernel.
  Problem pair(int64_t nq, int64_t nk, PairKind kind) const {
    Problem b = p;
    b.shape.Nq = nq;
    b.shape.Nk = nk;
    b.causal = kind == PairKind::diagonal;
    b.scale = p.softmax_scale();
    return b;
  }
  // Calls f(q_which, k_which, problem) for every pair rank r computes when it holds shard s.
  template <class F>
  void for_pairs(int r, int s, F&& f) const {
    for (int qw = 0; qw < 2; ++qw)
      for (int kw = 0; kw < 2; ++kw) {
        const int64_t nq = chunk(r, qw).size(), nk = chunk(s, kw).size();
        const PairKind kind = plan::pair_kind(chunk_id(r, qw), chunk_id(s, kw), p.causal);
        if (kind == PairKind::skipped || nq == 0 || nk == 0) continue;
        f(qw, kw, pair(nq, nk, kind));
      }
  }
};

std::vector<Problem> block_problems_of(const Geometry& g) {
  std::vector<Problem> out;
  std::set<std::tuple<int64_t, int64_t, bool>> seen;
  for (int r = 0; r < g.R; ++r)
    for (int t = 0; t < g.R; ++t)
      g.for_pairs(r, plan::source_of(r, t, g.R), [&](int, int, const Problem& b) {
        if (seen.insert({b.shape.Nq, b.shape.Nk, b.causal}).second) out.push_back(b);
      });
  return out;
}

// The block kernels' workspace: the most any pair asks, forward or backward.
size_t block_workspace(const Geometry& g, const LaunchOptions& l) {
  size_t most = 0;
  for (const Problem& b : block_problems_of(g)) {
    if (l.ring_forward && l.ring_forward->workspace_bytes)
      most = std::max(most, l.ring_forward->workspace_bytes(b, LaunchOptions{}));
    if (l.ring_backward && l.ring_backward->workspace_bytes)
      most = std::max(most, l.ring_backward->workspace_bytes(b, LaunchOptions{}));
  }
  return most;
}

// One rank's device memory, one allocation: byte offsets of every buffer. The inputs come first
// and are written once (the upload); everything after `poisoned` is set to NaN before every run.
struct Layout {
  size_t Q[2], dO[2], own;                            // inputs (storage dtype)
  size_t poisoned;                                    // from here on: NaN before each run
  size_t O[2], LSE[2], dQ[2], grads;                  // outputs (grads: the own shard's dK, dV)
  size_t O_acc[2], LSE_acc[2], dQ_acc[2];             // fp32 running O, LSE, dQ per query chunk
  size_t kv[2];                                       // the travelling K/V buffers
  size_t part, g_in, g_out[2];                        // fp32 dK, dV: this step's, arriving, leaving
  size_t O_b, LSE_b, dQ_b, dK_b, dV_b;                // one block's outputs
  size_t work;                                        // the block kernels' workspace
  size_t outputs_bytes = 0, total = 0;

  Layout(const Geometry& g, int r, size_t work_bytes) {
    size_t at = 0;
    const auto take = [&](size_t bytes) {
      const size_t here = at;
      at += (bytes + 255) / 256 * 256;
      return here;
    };
    const size_t e = 2, f = 4;
    const int64_t hd = g.heads * g.d, mk = g.max_shard(), mc = g.max_chunk();
    for (int c = 0; c < 2; ++c) Q[c] = take(e * hd * g.chunk(r, c).size());
    for (int c = 0; c < 2; ++c) dO[c] = take(e * hd * g.chunk(r, c).size());
    own = take(e * g.kv_elems(r));
    poisoned = at;
    for (int c = 0; c < 2; ++c) {
      O[c] = take(e * hd * g.chunk(r, c).size());
      LSE[c] = take(f * g.heads * g.chunk(r, c).size());
      dQ[c] = take(e * hd * g.chunk(r, c).size());
    }
    grads = take(e * g.kv_elems(r));
    outputs_bytes = at - poisoned;
    for (int c = 0; c < 2; ++c) {
      O_acc[c] = take(f * hd * g.chunk(r, c).size());
      LSE_acc[c] = take(f * g.heads * g.chunk(r, c).size());
      dQ_acc[c] = take(f * hd * g.chunk(r, c).size());
    }
    for (int c = 0; c < 2; ++c) kv[c] = take(e * 2 * g.kvh * mk * g.d);
    part = take(f * 2 * g.kvh * mk * g.d);
    g_in = take(f * 2 * g.kvh * mk * g.d);
    for (int c = 0; c < 2; ++c) g_out[c] = take(f * 2 * g.kvh * mk * g.d);
    O_b = take(e * hd * mc);
    LSE_b = take(f * g.heads * mc);
    dQ_b = take(e * hd * mc);
    dK_b = take(e * g.kvh * mc * g.d);
    dV_b = take(e * g.kvh * mc * g.d);
    work = take(work_bytes);
    total = at;
  }
};

int64_t rank_bytes_of(const Geometry& g, const LaunchOptions& l) {
  const size_t work = block_workspace(g, l);
  size_t most = 0;
  for (int r = 0; r < g.R; ++r) most = std::max(most, Layout(g, r, work).total);
  return static_cast<int64_t>(most);
}

template <Sharding sh>
std::vector<Problem> block_problems(const Problem& p, int ranks) {
  return block_problems_of(Geometry(p, ranks, sh));
}

template <Sharding sh>
int64_t rank_bytes(const Problem& p, const LaunchOptions& l) {
  return rank_bytes_of(Geometry(p, ranks_of(l), sh), l);
}

#ifdef FLASHLAB_HAVE_NCCL

using FLASHLAB_FOLDER::nccl;

// The events of one pass of one rank: its start and end on the compute stream, and per step the
// compute's and the transfer's (index R: the backward's last transfer, dK and dV going home).
struct PassEvents {
  cudaEvent_t start = nullptr, end = nullptr;
  std::vector<cudaEvent_t> comp_start, comp_end, comm_start, comm_end;
  std::vector<bool> comm_used;  // whether step t moved anything in the last run
};

struct Rank {
  int dev = 0;
  cudaStream_t compute = nullptr, comm = nullptr;
  ncclComm_t nccl_comm = nullptr;
  unsigned char* base = nullptr;
  PassEvents fwd, bwd;
  template <class X = void>
  X* at(size_t offset) const {
    return reinterpret_cast<X*>(base + offset);
  }
};

float elapsed_ms(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  FLASHLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Everything one run of the ring holds, freed on every path out (the destructor never throws).
class Ring {
 public:
  Ring(const Geometry& g, const LaunchOptions& launch) : g_(g), launch_(launch) {}

  // Checks every GPU's free memory, then allocates, makes the streams, events and communicators.
  // What it made before a failure is freed by the destructor.
  void open() {
    const int R = g_.R;
    const size_t work = block_workspace(g_, launch_);
    for (int r = 0; r < R; ++r) layouts_.emplace_back(g_, r, work);
    // Every GPU has room before anything is allocated.
    for (int r = 0; r < R; ++r) {
      FLASHLAB_CUDA_CHECK(cudaSetDevice(r));
      size_t free_b = 0, total_b = 0;
      FLASHLAB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      if (layouts_[r].total > free_b)
        throw std::runtime_error("ring: rank " + std::to_string(r) + " needs " +
                                 std::to_string(layouts_[r].total >> 20) + " MiB on GPU " +
                                 std::to_string(r) + " and " + std::to_string(free_b >> 20) +
                                 " MiB are free");
    }
    ranks_.resize(static_cast<size_t>(R));
    for (int r = 0; r < R; ++r) {
      Rank& k = ranks_[r];
      k.dev = r;
      FLASHLAB_CUDA_CHECK(cudaSetDevice(r));
      FLASHLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&k.compute, cudaStreamNonBlocking));
      FLASHLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&k.comm, cudaStreamNonBlocking));
      FLASHLAB_CUDA_CHECK(cudaMalloc(&k.base, layouts_[r].total));
      for (PassEvents* e : {&k.fwd, &k.bwd}) {
        FLASHLAB_CUDA_CHECK(cudaEventCreate(&e->start));
        FLASHLAB_CUDA_CHECK(cudaEventCreate(&e->end));
        for (auto* v : {&e->comp_start, &e->comp_end, &e->comm_start, &e->comm_end}) {
          v->resize(static_cast<size_t>(R + 1));
          for (cudaEvent_t& ev : *v) FLASHLAB_CUDA_CHECK(cudaEventCreate(&ev));
        }
        e->comm_used.assign(static_cast<size_t>(R + 1), false);
      }
    }
    std::vector<ncclComm_t> comms(static_cast<size_t>(R));
    std::vector<int> devs(static_cast<size_t>(R));
    for (int r = 0; r < R; ++r) devs[r] = r;
    FLASHLAB_NCCL_CHECK(nccl().CommInitAll(comms.data(), R, devs.data()));
    for (int r = 0; r < R; ++r) ranks_[r].nccl_comm = comms[r];
    comms_made_ = true;
  }

  ~Ring() {
    // After a failure a transfer may wait forever for a peer that never comes: abort the
    // communicators first (that ends their kernels), then wait for the streams. Otherwise wait,
    // then finalize them together (one thread, several communicators: a group) and destroy them.
    if (comms_made_ && !healthy_)
      for (Rank& k : ranks_) {
        cudaSetDevice(k.dev);
        nccl().CommAbort(k.nccl_comm);
      }
    for (Rank& k : ranks_) {
      cudaSetDevice(k.dev);
      if (k.compute) cudaStreamSynchronize(k.compute);
      if (k.comm) cudaStreamSynchronize(k.comm);
    }
    if (comms_made_ && healthy_) {
      bool finalized = nccl().GroupStart() == ncclSuccess;
      if (finalized) {
        for (Rank& k : ranks_) finalized = nccl().CommFinalize(k.nccl_comm) == ncclSuccess && finalized;
        finalized = nccl().GroupEnd() == ncclSuccess && finalized;
      }
      for (Rank& k : ranks_) {
        cudaSetDevice(k.dev);
        if (finalized)
          nccl().CommDestroy(k.nccl_comm);
        else
          nccl().CommAbort(k.nccl_comm);
      }
    }
    for (Rank& k : ranks_) {
      cudaSetDevice(k.dev);
      for (PassEvents* e : {&k.fwd, &k.bwd}) {
        for (cudaEvent_t ev : {e->start, e->end})
          if (ev) cudaEventDestroy(ev);
        for (auto* v : {&e->comp_start, &e->comp_end, &e->comm_start, &e->comm_end})
          for (cudaEvent_t ev : *v)
            if (ev) cudaEventDestroy(ev);
      }
      if (k.base) cudaFree(k.base);
      if (k.compute) cudaStreamDestroy(k.compute);
      if (k.comm) cudaStreamDestroy(k.comm);
    }
    cudaGetLastError();
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  // Any exception while the ring runs leaves NCCL in an unknown state: abort, not finalize.
  void mark_failed() { healthy_ = false; }

  void upload(const Inputs& in) {
    const Shape& s = g_.p.shape;
    const int64_t d = g_.d, N = s.Nq;
    for (int r = 0; r < g_.R; ++r) {
      const Rank& k = ranks_[r];
      const Layout& L = layouts_[r];
      FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
      for (int c = 0; c < 2; ++c) {
        const Chunk ch = g_.chunk(r, c);
        put(rows_of(in.Q, g_.heads, N, ch, d), k.at(L.Q[c]));
        put(rows_of(in.dO, g_.heads, N, ch, d), k.at(L.dO[c]));
      }
      std::vector<uint16_t> kv;
      for (const HostTensor* x : {&in.K, &in.V})
        for (int c = 0; c < 2; ++c) {
          const std::vector<uint16_t> part = rows_of(*x, g_.kvh, N, g_.chunk(r, c), d);
          kv.insert(kv.end(), part.begin(), part.end());
        }
      put(kv, k.at(L.own));
    }
  }

  // One run of both passes (timed: the ranks are synchronised before each pass).
  template <class T>
  void run() {
    for (int r = 0; r < g_.R; ++r) {
      const Rank& k = ranks_[r];
      const Layout& L = layouts_[r];
      FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
      FLASHLAB_CUDA_CHECK(cudaMemsetAsync(k.base + L.poisoned, 0xFF, L.total - L.poisoned, k.compute));
    }
    synchronize();
    forward<T>();
    synchronize();
    backward<T>();
    synchronize();
  }

  void synchronize() {
    for (const Rank& k : ranks_) {
      FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
      FLASHLAB_CUDA_CHECK(cudaStreamSynchronize(k.comm));
      FLASHLAB_CUDA_CHECK(cudaStreamSynchronize(k.compute));
    }
  }

  // The outputs of the last run in the global layout.
  void download(Forward& f, Gradients& gr) {
    const Shape& s = g_.p.shape;
    const int64_t d = g_.d, N = s.Nq;
    f.O.assign(s.q_elems(), 0.0);
    f.LSE.assign(s.lse_elems(), 0.0);
    gr.dQ.assign(s.q_elems(), 0.0);
    gr.dK.assign(s.kv_elems(), 0.0);
    gr.dV.assign(s.kv_elems(), 0.0);
    for (int r = 0; r < g_.R; ++r) {
      const Rank& k = ranks_[r];
      const Layout& L = layouts_[r];
      FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
      for (int c = 0; c < 2; ++c) {
        const Chunk ch = g_.chunk(r, c);
        scatter_rows(get<uint16_t>(k.at(L.O[c]), g_.heads * ch.size() * d), f.O, g_.heads, N, ch, d);
        scatter_rows(get<uint16_t>(k.at(L.dQ[c]), g_.heads * ch.size() * d), gr.dQ, g_.heads, N, ch,
                     d);
        scatter_rows(get<float>(k.at(L.LSE[c]), g_.heads * ch.size()), f.LSE, g_.heads, N, ch, 1);
      }
      const std::vector<uint16_t> w = get<uint16_t>(k.at(L.grads), g_.kv_elems(r));
      for (int c = 0; c < 2; ++c) {
        const Chunk ch = g_.chunk(r, c);
        const int64_t n = g_.kvh * ch.size() * d;
        const std::vector<uint16_t> dk(w.begin() + g_.k_off(r, c), w.begin() + g_.k_off(r, c) + n);
        const std::vector<uint16_t> dv(w.begin() + g_.v_off(r, c), w.begin() + g_.v_off(r, c) + n);
        scatter_rows(dk, gr.dK, g_.kvh, N, ch, d);
        scatter_rows(dv, gr.dV, g_.kvh, N, ch, d);
      }
    }
  }

  // The last run's times, per rank and step (ms), and each pass's span: the slowest rank's.
  void read_times(double& fwd_ms, double& bwd_ms, RingStepTimes& st) const {
    const int R = g_.R;
    fwd_ms = bwd_ms = 0;
    const auto sized = [&](std::vector<std::vector<double>>& v) {
      v.assign(static_cast<size_t>(R), std::vector<double>(static_cast<size_t>(R), 0.0));
    };
    sized(st.fwd_compute), sized(st.fwd_comm), sized(st.bwd_compute), sized(st.bwd_comm);
    st.bwd_home.assign(static_cast<size_t>(R), 0.0);
    for (int r = 0; r < R; ++r) {
      const Rank& k = ranks_[r];
      FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
      fwd_ms = std::max<double>(fwd_ms, elapsed_ms(k.fwd.start, k.fwd.end));
      bwd_ms = std::max<double>(bwd_ms, elapsed_ms(k.bwd.start, k.bwd.end));
      for (int t = 0; t < R; ++t) {
        st.fwd_compute[r][t] = elapsed_ms(k.fwd.comp_start[t], k.fwd.comp_end[t]);
        st.bwd_compute[r][t] = elapsed_ms(k.bwd.comp_start[t], k.bwd.comp_end[t]);
        if (k.fwd.comm_used[t]) st.fwd_comm[r][t] = elapsed_ms(k.fwd.comm_start[t], k.fwd.comm_end[t]);
        if (k.bwd.comm_used[t]) st.bwd_comm[r][t] = elapsed_ms(k.bwd.comm_start[t], k.bwd.comm_end[t]);
      }
      st.bwd_home[r] = elapsed_ms(k.bwd.comm_start[R], k.bwd.comm_end[R]);
    }
  }

  int64_t peak_bytes() const {
    size_t m = 0;
    for (const Layout& L : layouts_) m = std::max(m, L.total);
    return static_cast<int64_t>(m);
  }
  int64_t workspace_bytes() const {
    size_t m = 0;
    for (const Layout& L : layouts_) m = std::max(m, L.total - L.poisoned - L.outputs_bytes);
    return static_cast<int64_t>(m);
  }

 private:
  // Rows `ch` of every head of a host tensor [heads, n, d], as 16-bit words, head after head.
  std::vector<uint16_t> rows_of(const HostTensor& x, int64_t heads, int64_t n, const Chunk& ch,
                                int64_t d) const {
    std::vector<uint16_t> w(static_cast<size_t>(heads * ch.size() * d));
    size_t i = 0;
    const bool half = g_.p.dtype == DType::f16;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t e = (h * n + ch.begin) * d; e < (h * n + ch.end) * d; ++e) {
        const float v = static_cast<float>(x[static_cast<size_t>(e)]);
        w[i++] = half ? float_to_half_bits(v) : float_to_bf16_bits(v);
      }
    return w;
  }
  template <class W>
  void scatter_rows(const std::vector<W>& w, HostTensor& x, int64_t heads, int64_t n,
                    const Chunk& ch, int64_t d) const {
    size_t i = 0;
    const bool half = g_.p.dtype == DType::f16;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t e = (h * n + ch.begin) * d; e < (h * n + ch.end) * d; ++e) {
        if constexpr (std::is_same_v<W, float>)
          x[static_cast<size_t>(e)] = w[i++];
        else
          x[static_cast<size_t>(e)] = half ? half_bits_to_float(w[i++]) : bf16_bits_to_float(w[i++]);
      }
  }
  static void put(const std::vector<uint16_t>& w, void* dst) {
    if (!w.empty())
      FLASHLAB_CUDA_CHECK(cudaMemcpy(dst, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
  }
  template <class W>
  static std::vector<W> get(const void* src, int64_t n) {
    std::vector<W> w(static_cast<size_t>(n));
    if (n) FLASHLAB_CUDA_CHECK(cudaMemcpy(w.data(), src, w.size() * sizeof(W), cudaMemcpyDeviceToHost));
    return w;
  }

  // The K/V buffer rank r sends at step t, and the one it computes on.
  const void* sent_kv(int r, int t) const {
    const Rank& k = ranks_[r];
    const Layout& L = layouts_[r];
    return t == 0 ? k.at(L.own) : k.at(L.kv[(t - 1) % 2]);
  }
  const void* held_kv(int r, int t) const {
    if (g_.R == 1) return ranks_[r].at(layouts_[r].kv[0]);  // the copy it sent itself
    return sent_kv(r, t);
  }

  // One round of transfers for every rank, grouped: K/V on (when kv), and the dK/dV accumulator
  // of step t-1 (when grads), with their events. t = R: the backward's home round.
  void transfer(PassEvents Rank::*pass, int t, bool kv, bool grads, bool home) {
    const int R = g_.R;
    for (int r = 0; r < R; ++r) {
      Rank& k = ranks_[r];
      PassEvents& e = k.*pass;
      FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
      // The buffers it fills were read by the previous step's compute.
      if (t > 0) FLASHLAB_CUDA_CHECK(cudaStreamWaitEvent(k.comm, e.comp_end[t - 1], 0));
      FLASHLAB_CUDA_CHECK(cudaEventRecord(e.comm_start[t], k.comm));
      e.comm_used[t] = true;
    }
    FLASHLAB_NCCL_CHECK(nccl().GroupStart());
    for (int r = 0; r < R; ++r) {
      const Rank& k = ranks_[r];
      const Layout& L = layouts_[r];
      const int next = (r + 1) % R, prev = (r + R - 1) % R;
      if (kv) {
        const int s_now = plan::source_of(r, t, R), s_next = plan::source_of(r, t + 1, R);
        // A ring of one sends its own shard to itself: what it receives is its shard again.
        const int s_in = R == 1 ? s_now : s_next;
        FLASHLAB_NCCL_CHECK(nccl().Send(sent_kv(r, t), 2 * g_.kv_elems(s_now), ncclInt8, next,
                                        k.nccl_comm, k.comm));
        FLASHLAB_NCCL_CHECK(nccl().Recv(k.at(L.kv[t % 2]), 2 * g_.kv_elems(s_in), ncclInt8, prev,
                                        k.nccl_comm, k.comm));
      }
      if (grads) {
        // The accumulator finished at step t-1 (shard s_{t-1}) goes to rank r+1, which holds that
        // shard at step t (home: t = R); rank r-1's arrives for the shard held at step t.
        const int s_out = plan::source_of(r, t - 1, R), s_in = home ? r : plan::source_of(r, t, R);
        FLASHLAB_NCCL_CHECK(nccl().Send(k.at(L.g_out[(t - 1) % 2]), 4 * g_.kv_elems(s_out),
                                        ncclInt8, next, k.nccl_comm, k.comm));
        FLASHLAB_NCCL_CHECK(nccl().Recv(k.at(L.g_in), 4 * g_.kv_elems(s_in), ncclInt8, prev,
                                        k.nccl_comm, k.comm));
      }
    }
    FLASHLAB_NCCL_CHECK(nccl().GroupEnd());
    for (int r = 0; r < R; ++r) {
      Rank& k = ranks_[r];
      FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
      FLASHLAB_CUDA_CHECK(cudaEventRecord((k.*pass).comm_end[t], k.comm));
    }
  }

  void start_pass(PassEvents Rank::*pass) {
    for (Rank& k : ranks_) {
      PassEvents& e = k.*pass;
      FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
      FLASHLAB_CUDA_CHECK(cudaEventRecord(e.start, k.compute));
      FLASHLAB_CUDA_CHECK(cudaStreamWaitEvent(k.comm, e.start, 0));
      e.comm_used.assign(e.comm_used.size(), false);
    }
  }

  // The compute stream of rank r at step t: waits for the block it computes on, then records the
  // step's start.
  void start_step(PassEvents Rank::*pass, int r, int t) {
    Rank& k = ranks_[r];
    PassEvents& e = k.*pass;
    FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
    const int arrived = g_.R == 1 ? 0 : t - 1;  // the transfer that brought this step's block
    if (arrived >= 0 && e.comm_used[arrived])
      FLASHLAB_CUDA_CHECK(cudaStreamWaitEvent(k.compute, e.comm_end[arrived], 0));
    FLASHLAB_CUDA_CHECK(cudaEventRecord(e.comp_start[t], k.compute));
  }

  DeviceTensors block(int r, int t, int qw, int kw, const Problem& b) const {
    const Rank& k = ranks_[r];
    const Layout& L = layouts_[r];
    const int s = plan::source_of(r, t, g_.R);
    const auto* kv = static_cast<const uint16_t*>(held_kv(r, t));
    DeviceTensors x;
    x.problem = b;
    x.Q = k.at(L.Q[qw]);
    x.K = kv + g_.k_off(s, kw);
    x.V = kv + g_.v_off(s, kw);
    x.dO = k.at(L.dO[qw]);
    x.workspace = k.at(L.work);
    x.stream = k.compute;
    return x;
  }

  template <class T>
  void forward() {
    const int R = g_.R;
    const Version& kernels = *launch_.ring_forward;
    start_pass(&Rank::fwd);
    std::vector<std::array<bool, 2>> started(static_cast<size_t>(R), {false, false});
    for (int t = 0; t < R; ++t) {
      if (t < R - 1 || R == 1) transfer(&Rank::fwd, t, /*kv=*/true, /*grads=*/false, false);
      for (int r = 0; r < R; ++r) {
        start_step(&Rank::fwd, r, t);
        const Rank& k = ranks_[r];
        const Layout& L = layouts_[r];
        g_.for_pairs(r, plan::source_of(r, t, R), [&](int qw, int kw, const Problem& b) {
          DeviceTensors x = block(r, t, qw, kw, b);
          x.O = k.at(L.O_b);
          x.LSE = k.at<float>(L.LSE_b);
          kernels.forward(x);
          ring_kernels::merge<T>(k.at<float>(L.O_acc[qw]), k.at<float>(L.LSE_acc[qw]), k.at<T>(L.O_b),
                               k.at<float>(L.LSE_b), g_.heads * b.shape.Nq, static_cast<int>(g_.d),
                               !started[r][qw], k.compute);
          started[r][qw] = true;
        });
        FLASHLAB_CUDA_CHECK(cudaEventRecord(k.fwd.comp_end[t], k.compute));
      }
    }
    for (int r = 0; r < R; ++r) {
      const Rank& k = ranks_[r];
      const Layout& L = layouts_[r];
      FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
      for (int c = 0; c < 2; ++c) {
        const int64_t n = g_.chunk(r, c).size();
        if (n > 0 && !started[r][c])  // the diagonal block of step 0 always starts it
          throw std::logic_error("ring: a query chunk met no key chunk");
        ring_kernels::finalize<T>(k.at<T>(L.O[c]), k.at<float>(L.LSE[c]), k.at<float>(L.O_acc[c]),
                                  k.at<float>(L.LSE_acc[c]), g_.heads * n, static_cast<int>(g_.d),
                                  k.compute);
      }
      FLASHLAB_CUDA_CHECK(cudaEventRecord(k.fwd.end, k.compute));
    }
  }

  template <class T>
  void backward() {
    const int R = g_.R;
    const Version& kernels = *launch_.ring_backward;
    start_pass(&Rank::bwd);
    for (int r = 0; r < R; ++r) {
      const Rank& k = ranks_[r];
      const Layout& L = layouts_[r];
      FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
      for (int c = 0; c < 2; ++c)
        FLASHLAB_CUDA_CHECK(cudaMemsetAsync(k.at(L.dQ_acc[c]), 0,
                                            4 * g_.heads * g_.chunk(r, c).size() * g_.d, k.compute));
    }
    for (int t = 0; t < R; ++t) {
      const bool kv = t < R - 1 || R == 1, grads = t > 0;
      if (kv || grads) transfer(&Rank::bwd, t, kv, grads, false);
      for (int r = 0; r < R; ++r) {
        start_step(&Rank::bwd, r, t);
        const Rank& k = ranks_[r];
        const Layout& L = layouts_[r];
        const int s = plan::source_of(r, t, R);
        const int64_t n_s = g_.kv_elems(s);
        FLASHLAB_CUDA_CHECK(cudaMemsetAsync(k.at(L.part), 0, 4 * n_s, k.compute));
        g_.for_pairs(r, s, [&](int qw, int kw, const Problem& b) {
          DeviceTensors x = block(r, t, qw, kw, b);
          x.O = k.at(L.O[qw]);
          x.LSE = k.at<float>(L.LSE[qw]);
          x.dQ = k.at(L.dQ_b);
          x.dK = k.at(L.dK_b);
          x.dV = k.at(L.dV_b);
          kernels.backward(x);
          const int64_t nk = g_.kvh * b.shape.Nk * g_.d;
          ring_kernels::add<T>(k.at<float>(L.dQ_acc[qw]), k.at<T>(L.dQ_b), g_.heads * b.shape.Nq * g_.d,
                               k.compute);
          ring_kernels::add<T>(k.at<float>(L.part) + g_.k_off(s, kw), k.at<T>(L.dK_b), nk, k.compute);
          ring_kernels::add<T>(k.at<float>(L.part) + g_.v_off(s, kw), k.at<T>(L.dV_b), nk, k.compute);
        });
        // The shard's accumulator: what rank r-1 sent (from step 1 on) plus this step's part.
        if (grads) FLASHLAB_CUDA_CHECK(cudaStreamWaitEvent(k.compute, k.bwd.comm_end[t], 0));
        ring_kernels::combine(k.at<float>(L.g_out[t % 2]), grads ? k.at<float>(L.g_in) : nullptr,
                              k.at<float>(L.part), n_s, k.compute);
        FLASHLAB_CUDA_CHECK(cudaEventRecord(k.bwd.comp_end[t], k.compute));
      }
    }
    // Home: each accumulator goes to its owner (rank r+1), the own one arrives from rank r-1.
    transfer(&Rank::bwd, R, /*kv=*/false, /*grads=*/true, /*home=*/true);
    for (int r = 0; r < R; ++r) {
      const Rank& k = ranks_[r];
      const Layout& L = layouts_[r];
      FLASHLAB_CUDA_CHECK(cudaSetDevice(k.dev));
      FLASHLAB_CUDA_CHECK(cudaStreamWaitEvent(k.compute, k.bwd.comm_end[R], 0));
      ring_kernels::convert<T>(k.at<T>(L.grads), k.at<float>(L.g_in), g_.kv_elems(r), k.compute);
      for (int c = 0; c < 2; ++c)
        ring_kernels::convert<T>(k.at<T>(L.dQ[c]), k.at<float>(L.dQ_acc[c]),
                                 g_.heads * g_.chunk(r, c).size() * g_.d, k.compute);
      FLASHLAB_CUDA_CHECK(cudaEventRecord(k.bwd.end, k.compute));
    }
  }

  Geometry g_;
  LaunchOptions launch_;
  std::vector<Layout> layouts_;
  std::vector<Rank> ranks_;
  bool comms_made_ = false;
  bool healthy_ = true;
};

bool same_bits(const HostTensor& a, const HostTensor& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

template <Sharding sh>
RingOutcome run(const RingJob& job) {
  const Problem& p = job.problem;
  const int R = ranks_of(job.launch);
  if (const std::string why = ring_check(p); !why.empty()) throw std::runtime_error(why);
  if (!job.inputs) throw std::runtime_error("ring: no inputs");
  if (!job.launch.ring_forward || !job.launch.ring_backward || !job.launch.ring_forward->forward ||
      !job.launch.ring_backward->backward)
    throw std::runtime_error("ring: no block kernels were given for its ranks");
  const DeviceInfo& dev = device_info();
  if (!dev.present) throw std::runtime_error(dev.why_absent);
  if (R > dev.count)
    throw std::runtime_error("ring on CUDA runs one rank a GPU: " + std::to_string(R) +
                             " ranks need " + std::to_string(R) + " GPUs, and " +
                             std::to_string(dev.count) + " are visible");
  nccl();  // the library, or its reason, before anything is allocated
  // The caller's current device again on every way out (the ring switches between its GPUs).
  struct DeviceGuard {
    int device = 0;
    DeviceGuard() { FLASHLAB_CUDA_CHECK(cudaGetDevice(&device)); }
    ~DeviceGuard() { cudaSetDevice(device); }
  } guard;
  const Geometry g(p, R, sh);
  RingOutcome out;
  {
    Ring ring(g, job.launch);
    try {
      ring.open();
      ring.upload(*job.inputs);
      const auto once = [&] {
        if (p.dtype == DType::f16)
          ring.run<__half>();
        else
          ring.run<__nv_bfloat16>();
      };
      once();
      ring.download(out.fwd, out.grads);
      for (int i = 0; i < job.warmup; ++i) once();
      std::vector<RingStepTimes> steps;
      for (int i = 0; i < job.repeats; ++i) {
        once();
        double f = 0, b = 0;
        steps.emplace_back();
        ring.read_times(f, b, steps.back());
        out.fwd_ms.push_back(f);
        out.bwd_ms.push_back(b);
      }
      for (int i = 0; i < job.bitwise_repeats; ++i) {
        once();
        Forward f;
        Gradients gr;
        ring.download(f, gr);
        const bool o = !same_bits(f.O, out.fwd.O), l = !same_bits(f.LSE, out.fwd.LSE);
        const bool q = !same_bits(gr.dQ, out.grads.dQ), k = !same_bits(gr.dK, out.grads.dK);
        const bool v = !same_bits(gr.dV, out.grads.dV);
        out.differing_runs.O += o, out.differing_runs.LSE += l, out.differing_runs.dQ += q;
        out.differing_runs.dK += k, out.differing_runs.dV += v;
        if (o || l || q || k || v) ++out.bitwise_mismatches;
      }
      // Medians per rank and step over the timed runs.
      if (!steps.empty()) {
        RingStepTimes& m = out.steps;
        m = steps.front();
        const auto med = [&](auto field, int r, int t) {
          std::vector<double> v;
          for (const RingStepTimes& s : steps) v.push_back((s.*field)[r][t]);
          return median(v);
        };
        for (int r = 0; r < R; ++r) {
          for (int t = 0; t < R; ++t) {
            m.fwd_compute[r][t] = med(&RingStepTimes::fwd_compute, r, t);
            m.fwd_comm[r][t] = med(&RingStepTimes::fwd_comm, r, t);
            m.bwd_compute[r][t] = med(&RingStepTimes::bwd_compute, r, t);
            m.bwd_comm[r][t] = med(&RingStepTimes::bwd_comm, r, t);
          }
          std::vector<double> v;
          for (const RingStepTimes& s : steps) v.push_back(s.bwd_home[r]);
          m.bwd_home[r] = median(v);
        }
      }
      out.peak_device_bytes = ring.peak_bytes();
      out.workspace_bytes = ring.workspace_bytes();
    } catch (...) {
      ring.mark_failed();
      throw;
    }
  }
  return out;
}

#else  // built without NCCL: the entry stays, and says why it cannot run

template <Sharding>
RingOutcome run(const RingJob&) {
  throw std::runtime_error(ring_unavailable(0, 0));
}

#endif  // FLASHLAB_HAVE_NCCL

// The kernels a rank runs on a pair of chunks, best first (the harness takes the first this GPU
// runs and whose check takes every pair): the Hopper rung, else the FA2 rungs; backward kernels
// that are bitwise deterministic, so that the ring is.
constexpr const char* kForwardBlocks[] = {"hopper", "tiled"};
constexpr const char* kBackwardBlocks[] = {"hopper-deterministic", "deterministic-dq", "recompute"};

template <Sharding sh>
constexpr RingCuda kRing = {.forward_blocks = kForwardBlocks,
                            .backward_blocks = kBackwardBlocks,
                            .block_problems = block_problems<sh>,
                            .rank_bytes = rank_bytes<sh>,
                            .run = run<sh>};

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = flashlab::cuda::ring_check,
                       .unavailable = flashlab::cuda::ring_unavailable,
                       .axes = flashlab::kGroupedHeads,
                       .ring = &flashlab::cuda::kRing<flashlab::FLASHLAB_FOLDER::Sharding::zigzag>});

// clang-format off (the build finds the entry by its first line)
FLASHLAB_CUDA_VARIANT(contiguous, {.check = flashlab::cuda::ring_check,
                                   .unavailable = flashlab::cuda::ring_unavailable,
                                   .axes = flashlab::kGroupedHeads,
                                   .ring = &flashlab::cuda::kRing<flashlab::FLASHLAB_FOLDER::Sharding::contiguous>});
// clang-format on
