// The host side of every CUDA version: find the device, check that the problem fits before any
// allocation, upload the (already rounded) inputs as fp16/bf16 words, poison the outputs, run once
// for the answer, time the passes with CUDA events, and check that repeated runs agree bitwise.
//
// One run, in order:
//   check(problem) -> free memory >= required -> allocate everything (RAII) -> upload
//   -> [poison, forward?, backward?] once: download the outputs
//   -> (counters only) each pass again under CUPTI's range profiler (cuda/counters.h)
//   -> warm-up runs -> repeats of [poison, flush L2, event, pass, event] per pass
//   -> bitwise_repeats runs compared with the first outputs, word by word.
// Nothing is allocated after the uploads, so the timed region holds launches only. The L2 flush
// (cuda/l2_flush.h) is the one the counters use: its buffer is allocated with the tensors and
// counted with them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/cuda_check.h"
#include "core/dtype.h"
#include "core/packed.h"
#include "core/paged.h"
#include "cuda/l2_flush.h"
#include "cuda/runner.h"
#include "run/registry.h"
#include "run/ring_blocks.h"

namespace flashlab::cuda {

namespace {

std::string gib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

// A device allocation that frees itself on every path out of run().
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);  // never throws from a destructor
  }
  void allocate(size_t bytes, int64_t& total) {
    if (bytes == 0) return;
    FLASHLAB_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    bytes_ = bytes;
    total += static_cast<int64_t>(bytes);
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream() { FLASHLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() { FLASHLAB_CUDA_CHECK(cudaEventCreate(&e_)); }
  ~Event() {
    if (e_) cudaEventDestroy(e_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// fp8 (the FP8 forwards' problem) is stored in bf16 too: its inputs and O are bf16, and the
// version quantizes to e4m3 itself (core/problem.h).
bool is_16bit(DType t) {
  return t == DType::f16 || t == DType::bf16 || t == DType::fp8;
}

std::vector<uint16_t> to_words(DType t, const HostTensor& x) {
  std::vector<uint16_t> w(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float f = static_cast<float>(x[i]);
    w[i] = t == DType::f16 ? float_to_half_bits(f) : float_to_bf16_bits(f);
  }
  return w;
}

HostTensor from_words(DType t, const std::vector<uint16_t>& w) {
  HostTensor x(w.size());
  for (size_t i = 0; i < w.size(); ++i)
    x[i] = t == DType::f16 ? half_bits_to_float(w[i]) : bf16_bits_to_float(w[i]);
  return x;
}

void upload_words(DType t, const HostTensor& x, size_t expect, const DeviceBuffer& dst,
                  const char* name) {
  if (x.size() != expect)
    throw std::runtime_error(std::string("input ") + name + " has " + std::to_string(x.size()) +
                             " elements, the shape needs " + std::to_string(expect));
  const std::vector<uint16_t> w = to_words(t, x);
  FLASHLAB_CUDA_CHECK(cudaMemcpy(dst.get(), w.data(), w.size() * 2, cudaMemcpyHostToDevice));
}

template <class W>
std::vector<W> download(const DeviceBuffer& src, size_t n) {
  std::vector<W> w(n);
  if (n)
    FLASHLAB_CUDA_CHECK(cudaMemcpy(w.data(), src.get(), n * sizeof(W), cudaMemcpyDeviceToHost));
  return w;
}

// The raw bits of every output of one run, for the bitwise comparison.
struct RawOutputs {
  std::vector<uint16_t> O, dQ, dK, dV;
  std::vector<float> LSE;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool same_bits(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  return a == b;
}

struct Sizes {
  size_t q, kv, lse;       // elements
  size_t table;            // block-table entries (a paged cache)
  size_t workspace;        // bytes
  bool fwd, bwd;           // which passes the version runs
  bool needs_o_lse_input;  // backward-only: O and LSE come from the caller
  // backward_refusal(v, p), asked once here: why the backward does not run, or empty.
  std::string bwd_refused;
};

Sizes sizes_of(const Version& v, const Problem& p, const LaunchOptions& launch) {
  Sizes s{};
  s.q = static_cast<size_t>(p.shape.q_elems());
  s.kv = static_cast<size_t>(p.shape.kv_elems());
  s.lse = static_cast<size_t>(p.shape.lse_elems());
  s.workspace = v.workspace_bytes ? v.workspace_bytes(p, launch) : 0;
  s.table = static_cast<size_t>(p.shape.num_pages());
  s.fwd = v.forward != nullptr;
  s.bwd_refused = backward_refusal(v, p);
  s.bwd = v.backward != nullptr && s.bwd_refused.empty();
  s.needs_o_lse_input = s.bwd && !s.fwd;
  return s;
}

// Bytes of the tensors and workspace one run holds (the L2 flush's buffer is added by run()).
int64_t tensor_bytes(const Sizes& s) {
  int64_t b = static_cast<int64_t>(2 * s.q + 2 * 2 * s.kv);                // Q, K, V
  b += static_cast<int64_t>(2 * s.q + 4 * s.lse);                          // O, LSE
  if (s.bwd) b += static_cast<int64_t>(2 * s.q + 2 * s.q + 2 * 2 * s.kv);  // dO, dQ, dK, dV
  return b + static_cast<int64_t>(4 * s.table + s.workspace);
}

// Inputs drawn on the device (run_generated): standard normals by Box-Muller from a hash of
// (seed, stream, index), rounded to the dtype. Not the host generator's numbers (core/rng.h); for
// timing shapes whose fp64 inputs would not fit the host.
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_normal_words(uint16_t* dst, size_t n, uint64_t key, bool bf16) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = mix64(key ^ mix64(i));
    const float u1 = (static_cast<float>(h >> 40) + 0.5f) * (1.0f / 16777216.0f);  // (0, 1)
    const float u2 = static_cast<float>((h >> 16) & 0xffffff) * (1.0f / 16777216.0f);
    const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    dst[i] =
        bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(z)) : __half_as_ushort(__float2half_rn(z));
  }
}

void fill_normal(DType t, const DeviceBuffer& dst, size_t n, uint64_t seed, uint64_t stream) {
  if (n == 0) return;
  const uint64_t key = seed * 0x100000001b3ull ^ (stream << 56);
  fill_normal_words<<<1024, 256>>>(static_cast<uint16_t*>(dst.get()), n, key, t != DType::f16);
  FLASHLAB_CUDA_CHECK(cudaGetLastError());
}

RunResult run_impl(const Version& v, const Problem& p, const Inputs* in, uint64_t seed,
                   const Forward* fwd_in, const RunOptions& opt);

// The id of the registry's version whose CUDA side is `c`.
std::string id_of(const Version* c) {
  for (const VersionInfo& v : versions())
    if (v.cuda == c) return v.id;
  return "?";
}

// A ring runs whole problems itself, over its GPUs (kernels/09_ring): the harness picks its block
// kernels and turns its outcome into a RunResult. No hardware counters, no L2 flush.
RunResult run_ring(const Version& v, const Problem& p, const Inputs& in, const RunOptions& opt) {
  if (v.check)
    if (const std::string why = v.check(p); !why.empty()) throw std::runtime_error(why);
  if (opt.counters) throw std::runtime_error("a ring has no hardware counters");
  RingJob job;
  job.problem = p;
  job.inputs = &in;
  job.launch = with_ring_blocks(v, p, opt.launch);
  job.warmup = opt.warmup;
  job.repeats = opt.repeats;
  job.bitwise_repeats = opt.bitwise_repeats;
  RingOutcome o = v.ring->run(job);
  RunResult r;
  r.fwd = std::move(o.fwd);
  r.grads = std::move(o.grads);
  r.fwd_time.ms = std::move(o.fwd_ms);
  r.bwd_time.ms = std::move(o.bwd_ms);
  r.workspace_bytes = o.workspace_bytes;
  r.peak_device_bytes = o.peak_device_bytes;
  r.bitwise_mismatches = o.bitwise_mismatches;
  r.bitwise_repeatable = o.bitwise_mismatches == 0;
  r.differing_runs = {o.differing_runs.O, o.differing_runs.LSE, o.differing_runs.dQ,
                      o.differing_runs.dK, o.differing_runs.dV};
  r.ring_blocks = id_of(job.launch.ring_forward) + ", " + id_of(job.launch.ring_backward);
  r.ring_steps = std::move(o.steps);
  return r;
}

}  // namespace

RunResult run(const Version& v, const Problem& p, const Inputs& in, const Forward* fwd_in,
              const RunOptions& opt) {
  if (v.ring) return run_ring(v, p, in, opt);
  return run_impl(v, p, &in, 0, fwd_in, opt);
}

RunResult run_generated(const Version& v, const Problem& p, uint64_t seed, const RunOptions& opt) {
  if (v.ring) throw std::runtime_error("a ring runs on host inputs (it shards them itself)");
  if (!v.forward)
    throw std::runtime_error("inputs drawn on the device feed a forward; this version has none");
  return run_impl(v, p, nullptr, seed, nullptr, opt);
}

int64_t required_device_bytes(const Version& v, const Problem& p, const LaunchOptions& launch) {
  if (v.ring) {  // its largest rank; without block kernels here, their workspace is not counted
    LaunchOptions l = launch;
    try {
      l = with_ring_blocks(v, p, launch);
    } catch (const std::runtime_error&) {
    }
    return v.ring->rank_bytes(p, l);
  }
  return tensor_bytes(sizes_of(v, p, launch));
}

namespace {

RunResult run_impl(const Version& v, const Problem& p, const Inputs* in, uint64_t seed,
                   const Forward* fwd_in, const RunOptions& opt) {
  // 1. Is the problem supported, and does it fit? Nothing is allocated before both answers.
  if (!v.forward && !v.backward)
    throw std::runtime_error("this version has no CUDA implementation in this build");
  if (v.check) {
    const std::string why = v.check(p);
    if (!why.empty()) throw std::runtime_error(why);
  }
  if (!is_16bit(p.dtype))
    throw std::runtime_error("CUDA versions store fp16 or bf16; " + to_string(p.dtype) +
                             " runs on the CPU backend only");
  const DeviceInfo& dev = device_info();
  if (!dev.present) throw std::runtime_error(dev.why_absent);

  const Sizes s = sizes_of(v, p, opt.launch);
  const bool flushes = opt.flush_l2 || opt.counters;  // the counters empty L2 before every run
  const int64_t need = tensor_bytes(s) + (flushes ? l2_flush_bytes() : 0);
  {
    size_t free_b = 0, total_b = 0;
    FLASHLAB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (need > static_cast<int64_t>(free_b))
      throw std::runtime_error("this problem needs " + gib(need) + " of device memory and " +
                               gib(static_cast<int64_t>(free_b)) + " is free (of " +
                               gib(static_cast<int64_t>(total_b)) + ")");
  }
  if (s.needs_o_lse_input) {
    if (!fwd_in) throw std::runtime_error("a backward-only version needs O and LSE from a forward");
    if (fwd_in->O.size() != s.q || fwd_in->LSE.size() != s.lse)
      throw std::runtime_error("the forward given to a backward-only version has the wrong shape");
  }

  // 2. Allocate and upload.
  RunResult res;
  int64_t allocated = 0;
  DeviceBuffer Q, K, V, O, LSE, dO, dQ, dK, dV, work, cu, table;
  Q.allocate(2 * s.q, allocated);
  K.allocate(2 * s.kv, allocated);
  V.allocate(2 * s.kv, allocated);
  O.allocate(2 * s.q, allocated);
  LSE.allocate(4 * s.lse, allocated);
  if (s.bwd) {
    dO.allocate(2 * s.q, allocated);
    dQ.allocate(2 * s.q, allocated);
    dK.allocate(2 * s.kv, allocated);
    dV.allocate(2 * s.kv, allocated);
  }
  work.allocate(s.workspace, allocated);
  // A packed batch: its cumulative offsets, queries then keys, B + 1 each.
  std::vector<int32_t> offsets;
  if (p.shape.packed()) {
    offsets = cu_seqlens(p.shape.lens_q);
    const std::vector<int32_t> keys = cu_seqlens(p.shape.lens_k);
    offsets.insert(offsets.end(), keys.begin(), keys.end());
    cu.allocate(4 * offsets.size(), allocated);
  }
  // The block table: the inputs', or (inputs drawn on the device) the seed's shuffled one.
  const std::vector<int32_t> drawn_table =
      !in && s.table > 0 ? shuffled_block_table(p.shape, seed) : std::vector<int32_t>{};
  const std::vector<int32_t>& block_table = in ? in->block_table : drawn_table;
  if (s.table > 0) {
    if (block_table.size() != s.table)
      throw std::runtime_error("the block table has " + std::to_string(block_table.size()) +
                               " entries, the shape needs " + std::to_string(s.table));
    table.allocate(4 * s.table, allocated);
  }
  std::optional<L2Flush> l2;
  if (flushes) {
    l2.emplace();
    allocated += static_cast<int64_t>(l2->bytes());
  }
  res.workspace_bytes = static_cast<int64_t>(s.workspace);
  res.peak_device_bytes = allocated;
  res.backward_refused = s.bwd_refused;

  if (in) {
    upload_words(p.dtype, in->Q, s.q, Q, "Q");
    upload_words(p.dtype, in->K, s.kv, K, "K");
    upload_words(p.dtype, in->V, s.kv, V, "V");
    if (s.bwd) upload_words(p.dtype, in->dO, s.q, dO, "dO");
  } else {  // streams 1..4 as the host generator's; a paged pool's unused slots hold values too
    fill_normal(p.dtype, Q, s.q, seed, 1);
    fill_normal(p.dtype, K, s.kv, seed, 2);
    fill_normal(p.dtype, V, s.kv, seed, 3);
    if (s.bwd) fill_normal(p.dtype, dO, s.q, seed, 4);
    FLASHLAB_CUDA_CHECK(cudaDeviceSynchronize());
  }
  if (!offsets.empty())
    FLASHLAB_CUDA_CHECK(
        cudaMemcpy(cu.get(), offsets.data(), 4 * offsets.size(), cudaMemcpyHostToDevice));
  if (s.table > 0)
    FLASHLAB_CUDA_CHECK(
        cudaMemcpy(table.get(), block_table.data(), 4 * s.table, cudaMemcpyHostToDevice));
  if (s.needs_o_lse_input) {
    upload_words(p.dtype, fwd_in->O, s.q, O, "O");
    std::vector<float> lse(fwd_in->LSE.begin(), fwd_in->LSE.end());
    FLASHLAB_CUDA_CHECK(cudaMemcpy(LSE.get(), lse.data(), 4 * s.lse, cudaMemcpyHostToDevice));
  }

  Stream stream;
  DeviceTensors t;
  t.problem = p;
  t.Q = Q.get();
  t.K = K.get();
  t.V = V.get();
  t.O = O.get();
  t.LSE = static_cast<float*>(LSE.get());
  t.dO = dO.get();
  t.dQ = dQ.get();
  t.dK = dK.get();
  t.dV = dV.get();
  t.workspace = work.get();
  if (!offsets.empty()) {
    t.cu_q = static_cast<const int32_t*>(cu.get());
    t.cu_k = t.cu_q + p.shape.B + 1;
  }
  if (s.table > 0) t.block_table = static_cast<const int32_t*>(table.get());
  t.launch = opt.launch;
  t.stream = stream.get();
  cudaStream_t st = stream.get();

  // Every output (and the workspace) starts as NaN: 0xFFFF is a NaN in fp16 and bf16, and
  // 0xFFFFFFFF in fp32. An element a kernel forgets to write shows up as NaN and fails its test.
  auto poison_grads = [&] {
    FLASHLAB_CUDA_CHECK(cudaMemsetAsync(dQ.get(), 0xFF, dQ.bytes(), st));
    FLASHLAB_CUDA_CHECK(cudaMemsetAsync(dK.get(), 0xFF, dK.bytes(), st));
    FLASHLAB_CUDA_CHECK(cudaMemsetAsync(dV.get(), 0xFF, dV.bytes(), st));
  };
  auto poison = [&] {
    if (s.fwd) {
      FLASHLAB_CUDA_CHECK(cudaMemsetAsync(O.get(), 0xFF, O.bytes(), st));
      FLASHLAB_CUDA_CHECK(cudaMemsetAsync(LSE.get(), 0xFF, LSE.bytes(), st));
    }
    if (s.bwd) poison_grads();
    if (work.get()) FLASHLAB_CUDA_CHECK(cudaMemsetAsync(work.get(), 0xFF, work.bytes(), st));
  };
  auto run_untimed = [&] {
    poison();
    if (s.fwd) v.forward(t);
    if (s.bwd) v.backward(t);
    FLASHLAB_CUDA_CHECK(cudaStreamSynchronize(st));
  };
  auto raw_outputs = [&] {
    RawOutputs r;
    if (s.fwd) {
      r.O = download<uint16_t>(O, s.q);
      r.LSE = download<float>(LSE, s.lse);
    }
    if (s.bwd) {
      r.dQ = download<uint16_t>(dQ, s.q);
      r.dK = download<uint16_t>(dK, s.kv);
      r.dV = download<uint16_t>(dV, s.kv);
    }
    return r;
  };

  // 3. The answer.
  run_untimed();
  const RawOutputs first = raw_outputs();
  if (s.fwd) {
    res.fwd.O = from_words(p.dtype, first.O);
    res.fwd.LSE.assign(first.LSE.begin(), first.LSE.end());
  }
  if (s.bwd) {
    res.grads.dQ = from_words(p.dtype, first.dQ);
    res.grads.dK = from_words(p.dtype, first.dK);
    res.grads.dV = from_words(p.dtype, first.dV);
  }

  // 3b. Hardware counters, when asked for: each pass again (as often as CUPTI needs to collect
  // every metric), from poisoned outputs; naive's backward gets its stored P from a forward first.
  if (opt.counters) {
    if (s.fwd)
      res.fwd_counters = measure_pass(
          poison, [&] { v.forward(t); }, *l2);
    if (s.bwd)
      res.bwd_counters = measure_pass(
          [&] {
            poison();
            if (s.fwd) v.forward(t);
          },
          [&] { v.backward(t); }, *l2);
  }

  // 4. Timing: each pass in a loop of its own, as compare_torch.py times PyTorch's: its warm-ups,
  // then its repeats, each between two events with L2 emptied just before it, on the same stream.
  // Not the two passes in turn: under the board's power limit a pass's clock depends on the load
  // before it, and a forward timed between backward passes would run at the clock the backward
  // leaves (docs/perf.md, "The pass on a timeline"). The backward's repeats keep the forward's O
  // and LSE (and poison only the gradients).
  const auto time_pass = [&](auto&& before_each, auto&& pass, PassTiming& out, PassClock& clock) {
    if (opt.pause_ms > 0) {
      FLASHLAB_CUDA_CHECK(cudaStreamSynchronize(st));
      std::this_thread::sleep_for(std::chrono::milliseconds(opt.pause_ms));
    }
    for (int i = 0; i < opt.warmup; ++i) {
      before_each();
      pass();
    }
    FLASHLAB_CUDA_CHECK(cudaStreamSynchronize(st));
    clock.before = read_clock();
    const int n = opt.repeats;
    std::vector<Event> ev(static_cast<size_t>(2 * n));
    for (int r = 0; r < n; ++r) {
      before_each();
      if (opt.flush_l2) l2->sweep(st);
      FLASHLAB_CUDA_CHECK(cudaEventRecord(ev[2 * r].get(), st));
      pass();
      FLASHLAB_CUDA_CHECK(cudaEventRecord(ev[2 * r + 1].get(), st));
    }
    FLASHLAB_CUDA_CHECK(cudaStreamSynchronize(st));
    clock.after = read_clock();
    for (int r = 0; r < n; ++r) {
      float ms = 0;
      FLASHLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 * r].get(), ev[2 * r + 1].get()));
      out.ms.push_back(ms);
    }
  };
  if (opt.repeats > 0) {
    if (s.fwd)
      time_pass(poison, [&] { v.forward(t); }, res.fwd_time, res.fwd_clock);
    if (s.bwd) {
      // O and LSE as the first run left them (a backward-only version's: uploaded, never
      // poisoned), then the backward alone.
      if (s.fwd) {
        poison();
        v.forward(t);
      }
      time_pass(poison_grads, [&] { v.backward(t); }, res.bwd_time, res.bwd_clock);
    }
  }

  // 5. Are repeated runs bitwise identical to the first?
  for (int i = 0; i < opt.bitwise_repeats; ++i) {
    run_untimed();
    const RawOutputs again = raw_outputs();
    const bool dO_ = !same_bits(first.O, again.O), dL = !same_bits(first.LSE, again.LSE);
    const bool dq = !same_bits(first.dQ, again.dQ), dk = !same_bits(first.dK, again.dK);
    const bool dv = !same_bits(first.dV, again.dV);
    res.differing_runs.O += dO_;
    res.differing_runs.LSE += dL;
    res.differing_runs.dQ += dq;
    res.differing_runs.dK += dk;
    res.differing_runs.dV += dv;
    if (dO_ || dL || dq || dk || dv) ++res.bitwise_mismatches;
  }
  res.bitwise_repeatable = res.bitwise_mismatches == 0;
  return res;
}

}  // namespace

}  // namespace flashlab::cuda
