// ring: context parallelism. The sequence is cut into 2R chunks and spread over R ranks
// (schedule.h: zigzag, or contiguous as the contrast); each rank keeps its Q shard and the K/V
// shards go round the ring (mailbox.h), one step each:
//
//   forward, rank r, step t = 0 .. R-1, holding the K/V shard of rank s = (r - t) mod R:
//     t < R-1: send the shard on to rank r+1                 (NCCL: on the communication stream,
//                                                             while this step computes)
//     per Q tile of its shard (tiled's loop, the keys of shard s only, masked by global rows):
//       O_t, LSE_t = the tile's attention over shard s's keys
//       merged in place into the running O, LSE:             (the online softmax's rescaling, one
//         LSE' = max + log(exp(LSE - max) + exp(LSE_t - max))  level up: whole blocks of keys)
//         O'   = exp(LSE - LSE') O + exp(LSE_t - LSE') O_t
//     t < R-1: receive the next shard from rank r-1
//
//   backward, rank r, step t, holding shard s's K, V and its dK, dV accumulators:
//     t < R-1: send K, V on                                  (as in the forward)
//     per K tile of shard s, per Q tile of its own shard (FA2's outer-K loop):
//       P, dS recomputed from LSE; dV_s += P^T dO, dK_s += dS^T Q (the travelling accumulators),
//       dQ += dS K_s (the rank's own accumulator: dQ never leaves its rank)
//     send dK_s, dV_s on to rank r+1 (after the last step that is their owner)
//     receive the next K, V and dK, dV from rank r-1
//
// dK, dV travel with their block rather than being reduced at the end: a rank keeps one shard's
// accumulators instead of the whole sequence's (a reduce-scatter at the end would need every
// rank to hold dK, dV for all N keys, R times the memory), the transfer overlaps the next step's
// compute, and the sum over ranks has one fixed order: shard s's dK is added to by ranks s, s+1,
// ..., s+R-1, in that order, every run. With dQ summed over the steps in step order and each
// rank one thread, every output is bitwise reproducible.
//
// Each rank is one std::thread; its work within a step runs on that thread alone. Q, dO, O, LSE
// are read from the rank's own rows of the host tensors; K and V only ever from the messages.
#include <cmath>
#include <exception>
#include <limits>
#include <thread>
#include <vector>

#include "common/cpu/bwd.h"
#include "common/cpu/fwd.h"
#include "common/cpu/tiles.h"
#include "core/dtype.h"
#include "core/version.h"
#include "mailbox.h"
#include "ring.h"

namespace flashlab::cpu::FLASHLAB_FOLDER {

namespace plan = ::flashlab::FLASHLAB_FOLDER;

namespace {

using plan::Chunk;
using plan::Shard;

// What every rank of one run shares (read-only, but the ring and each rank's own row of counts).
template <class T>
struct Run {
  const Problem& p;
  const Inputs& in;
  const CpuOptions& o;
  Sharding sh;
  int R;
  bool dry;
  Ring<T> ring;
  RingCounts* counts;
  std::vector<Counters> per_rank;
  Run(const Problem& p_, const Inputs& in_, const CpuOptions& o_, Sharding sh_, RingCounts* c)
      : p(p_),
        in(in_),
        o(o_),
        sh(sh_),
        R(ranks_of(o_)),
        dry(o_.dry_run),
        ring(R),
        counts(c),
        per_rank(static_cast<size_t>(R)) {}
  Shard q_shard(int r) const { return plan::shard(p.shape.Nq, R, r, sh); }
  Shard k_shard(int r) const { return plan::shard(p.shape.Nk, R, r, sh); }
  // Bytes of K and V of a shard of n keys (every K/V head of the batch), as stored; of dK and dV
  // as accumulated (fp32, fp64 for fp64).
  int64_t kv_bytes(int64_t n) const {
    return 2 * p.shape.kv_head_count() * n * p.shape.d * dtype_bytes(p.dtype);
  }
  int64_t grad_bytes(int64_t n) const {
    return 2 * p.shape.kv_head_count() * n * p.shape.d * compute_bytes(p.dtype);
  }
};

// Runs rank(r) for r = 0 .. R-1 on threads of their own; the first exception of a rank stops the
// ring and is thrown here once every thread is joined.
template <class T, class F>
void run_ranks(Run<T>& run, F&& rank) {
  std::vector<std::exception_ptr> failed(static_cast<size_t>(run.R));
  std::vector<std::thread> threads;
  for (int r = 0; r < run.R; ++r)
    threads.emplace_back([&, r] {
      try {
        rank(r);
      } catch (...) {
        failed[static_cast<size_t>(r)] = std::current_exception();
        run.ring.stop();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

// Rank r's own K/V shard, copied out of the inputs: [K/V head][shard row][d].
template <class T>
Message<T> own_kv(const Run<T>& run, int r) {
  const Shape& s = run.p.shape;
  const Shard ks = run.k_shard(r);
  Message<T> m;
  m.owner = r;
  m.bytes = run.kv_bytes(ks.size());
  if (run.dry) return m;
  m.K.resize(static_cast<size_t>(s.kv_head_count() * ks.size() * s.d));
  m.V.resize(m.K.size());
  for (int64_t kh = 0; kh < s.kv_head_count(); ++kh)
    for (const Chunk& c : {ks.first, ks.second}) {
      const int64_t from = (kh * s.Nk + c.begin) * s.d,
                    to = (kh * ks.size() + ks.local(c.begin)) * s.d;
      std::copy_n(&run.in.K[from], c.size() * s.d, &m.K[to]);
      std::copy_n(&run.in.V[from], c.size() * s.d, &m.V[to]);
    }
  return m;
}

// A copy of a K/V message to send on (the rank keeps computing on its own).
template <class T>
Message<T> forwarded(const Message<T>& held, int step) {
  Message<T> m;
  m.kind = Payload::kv;
  m.step = step;
  m.owner = held.owner;
  m.bytes = held.bytes;
  m.K = held.K;
  m.V = held.V;
  return m;
}

// The running O, LSE of one row merged with a step's partial: O_t / l and m + log l.
template <class T>
void merge_row(T* o, T& lse, const T* o_t, T m_t, T l_t, int64_t d) {
  const T lse_t = m_t + std::log(l_t);
  if (lse == -std::numeric_limits<T>::infinity()) {  // the row's first keys
    for (int64_t k = 0; k < d; ++k) o[k] = o_t[k] / l_t;
    lse = lse_t;
    return;
  }
  const T most = std::max(lse, lse_t);
  const T merged = most + std::log(std::exp(lse - most) + std::exp(lse_t - most));
  const T a = std::exp(lse - merged), b = std::exp(lse_t - merged) / l_t;
  for (int64_t k = 0; k < d; ++k) o[k] = a * o[k] + b * o_t[k];
  lse = merged;
}

template <class T>
void forward_rank(Run<T>& run, int r, Forward& out) {
  const Problem& p = run.p;
  const Shape& s = p.shape;
  const int64_t d = s.d, heads = s.heads();
  const Shard qs = run.q_shard(r);
  const int64_t nq = qs.size();
  const bool dry = run.dry;
  const T scale = static_cast<T>(p.softmax_scale());
  Counters& cnt = run.per_rank[static_cast<size_t>(r)];
  std::vector<T> O(dry ? 0 : static_cast<size_t>(heads * nq * d), T(0));
  std::vector<T> LSE(dry ? 0 : static_cast<size_t>(heads * nq),
                     -std::numeric_limits<T>::infinity());
  FwdTile<T> t(dry ? 0 : run.o.Br, dry ? 0 : run.o.Bc, dry ? 0 : d);
  Message<T> held = own_kv(run, r);

  for (int step = 0; step < run.R; ++step) {
    const int src = plan::source_of(r, step, run.R);
    const Shard ks = run.k_shard(src);
    if (step < run.R - 1) {
      if (run.counts) run.counts->fwd_bytes[r][step] = held.bytes;
      run.ring.send(r, forwarded(held, step));
    }
    int64_t flops = 0;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kh = s.kv_of(h);
      for (const Chunk& qc : {qs.first, qs.second}) {
        const Blocks qb{qc.size(), run.o.Br};
        for (int64_t i = 0; i < qb.count(); ++i) {
          const int64_t r0 = qc.begin + qb.begin(i), rows = qb.size(i);
          bool started = false;
          for (const Chunk& kc : {ks.first, ks.second}) {
            const Blocks kb{kc.size(), run.o.Bc};
            for (int64_t j = 0; j < kb.count(); ++j) {
              const int64_t c0 = kc.begin + kb.begin(j), cols = kb.size(j);
              const TileMask mask = tile_mask(p, r0, rows, c0, cols);
              if (!count_tile(cnt, mask)) continue;
              if (!started) {  // Q_i is read at the step's first tile it computes
                started = true;
                cnt.elems_read += rows * d;
                if (!dry) t.start(&run.in.Q[(h * s.Nq + r0) * d], rows, d);
              }
              cnt.elems_read += 2 * cols * d;  // K_j, V_j
              flops += 2 * (2 * rows * cols * d);
              if (dry) continue;
              const int64_t at = (kh * ks.size() + ks.local(c0)) * d;
              t.scores(&held.K[at], &held.V[at], rows, cols, d);
              scale_and_mask(t.S.data(), rows, cols, scale, mask, p, r0, c0);
              online_softmax_step(t, rows, cols, d);
            }
          }
          if (!started) continue;  // no key of this shard is seen by the tile: nothing to merge
          // The merge reads the running O, LSE (from the second step on) and writes them.
          if (step > 0) cnt.elems_read += rows * (d + 1);
          cnt.elems_written += rows * (d + 1);
          if (dry) continue;
          for (int64_t rr = 0; rr < rows; ++rr) {
            if (t.l[rr] == T(0)) continue;  // this row saw none of the shard's keys
            const int64_t lr = h * nq + qs.local(r0) + rr;
            merge_row(&O[lr * d], LSE[lr], &t.O[rr * d], t.m[rr], t.l[rr], d);
          }
        }
      }
    }
    cnt.matmul_flops += flops;
    if (run.counts) run.counts->fwd_flops[r][step] = flops;
    if (step < run.R - 1) held = run.ring.receive(r, Payload::kv, step);
  }
  if (dry) return;
  for (int64_t h = 0; h < heads; ++h)
    for (const Chunk& qc : {qs.first, qs.second})
      for (int64_t g = qc.begin; g < qc.end; ++g) {
        const int64_t lr = h * nq + qs.local(g);
        const bool saw_none = LSE[lr] == -std::numeric_limits<T>::infinity();
        for (int64_t k = 0; k < d; ++k)
          out.O[(h * s.Nq + g) * d + k] =
              saw_none ? 0.0 : round_to(p.dtype, static_cast<double>(O[lr * d + k]));
        out.LSE[h * s.Nq + g] = static_cast<double>(LSE[lr]);
      }
}

template <class T>
void backward_rank(Run<T>& run, int r, const Forward& fwd, Gradients& g) {
  const Problem& p = run.p;
  const Shape& s = p.shape;
  const Inputs& in = run.in;
  const int64_t d = s.d, heads = s.heads();
  const Shard qs = run.q_shard(r);
  const int64_t nq = qs.size();
  const bool dry = run.dry;
  const T scale = static_cast<T>(p.softmax_scale());
  Counters& cnt = run.per_rank[static_cast<size_t>(r)];

  // D = rowsum(O * dO) of the rank's own rows.
  std::vector<T> D(dry ? 0 : static_cast<size_t>(heads * nq));
  cnt.elems_read += 2 * heads * nq * d;
  cnt.elems_written += heads * nq;
  if (!dry)
    for (int64_t h = 0; h < heads; ++h)
      for (const Chunk& qc : {qs.first, qs.second})
        for (int64_t row = qc.begin; row < qc.end; ++row) {
          T sum = 0;
          const int64_t at = (h * s.Nq + row) * d;
          for (int64_t k = 0; k < d; ++k)
            sum += static_cast<T>(fwd.O[at + k]) * static_cast<T>(in.dO[at + k]);
          D[h * nq + qs.local(row)] = sum;
        }

  const int64_t Br = dry ? 0 : run.o.Br, Bc = dry ? 0 : run.o.Bc, dd = dry ? 0 : d;
  QBlock<T> q(Br, dd);
  KBlock<T> k(Bc, dd);
  std::vector<T> P(Br * Bc), dS(Br * Bc);
  std::vector<T> dQ(dry ? 0 : static_cast<size_t>(heads * nq * d), T(0));
  Message<T> held = own_kv(run, r), grads;
  const auto fresh_grads = [&](const Message<T>& kv) {  // zero accumulators for a shard
    Message<T> m;
    m.kind = Payload::grad;
    m.owner = kv.owner;
    m.bytes = run.grad_bytes(run.k_shard(kv.owner).size());
    if (!dry) {
      m.dK.assign(kv.K.size(), T(0));
      m.dV.assign(kv.K.size(), T(0));
    }
    return m;
  };
  grads = fresh_grads(held);

  for (int step = 0; step < run.R; ++step) {
    const int src = plan::source_of(r, step, run.R);
    const Shard ks = run.k_shard(src);
    if (step < run.R - 1) {
      if (run.counts) run.counts->bwd_kv_bytes[r][step] = held.bytes;
      run.ring.send(r, forwarded(held, step));
    }
    int64_t flops = 0;
    for (int64_t kh = 0; kh < s.kv_head_count(); ++kh)
      for (const Chunk& kc : {ks.first, ks.second}) {
        const Blocks kb{kc.size(), run.o.Bc};
        for (int64_t j = 0; j < kb.count(); ++j) {
          const int64_t c0 = kc.begin + kb.begin(j), cols = kb.size(j);
          const int64_t at = (kh * ks.size() + ks.local(c0)) * d;
          bool loaded = false;
          for (int64_t h = s.first_q_of(kh); h < s.first_q_of(kh) + s.group(); ++h)
            for (const Chunk& qc : {qs.first, qs.second}) {
              const Blocks qb{qc.size(), run.o.Br};
              for (int64_t i = 0; i < qb.count(); ++i) {
                const int64_t r0 = qc.begin + qb.begin(i), rows = qb.size(i);
                const TileMask mask = tile_mask(p, r0, rows, c0, cols);
                if (!count_tile(cnt, mask)) continue;
                if (!loaded) {  // K_j, V_j, and the accumulators dK_j, dV_j read at the first
                  loaded = true;
                  cnt.elems_read += 4 * cols * d;
                  cnt.elems_written += 2 * cols * d;  // dK_j, dV_j written back after the loop
                  if (!dry) {
                    load_rows(k.K.data(), &held.K[at], cols, d);
                    load_transposed(k.Kt.data(), &held.K[at], cols, d);
                    load_transposed(k.Vt.data(), &held.V[at], cols, d);
                  }
                }
                // Q_i, dO_i, LSE_i, D_i in; dQ_i's local accumulator read and written.
                cnt.elems_read += 2 * rows * d + 2 * rows + rows * d;
                cnt.elems_written += rows * d;
                flops += 5 * 2 * rows * cols * d;
                if (dry) continue;
                const int64_t row0 = h * s.Nq + r0, lq = h * nq + qs.local(r0);
                load_rows(q.Q.data(), &in.Q[row0 * d], rows, d);
                load_rows(q.dO.data(), &in.dO[row0 * d], rows, d);
                load_rows(q.lse.data(), &fwd.LSE[row0], rows, 1);
                std::copy_n(&D[lq], rows, q.D.begin());
                recompute_P(P.data(), q, k, rows, cols, p, mask, r0, c0);
                mm_tn(&grads.dV[at], d, P.data(), cols, q.dO.data(), d, rows, cols, d);
                compute_dS(dS.data(), P.data(), q, k, rows, cols, d);
                mm_nn(&dQ[lq * d], d, dS.data(), cols, k.K.data(), d, rows, d, cols);
                mm_tn(&grads.dK[at], d, dS.data(), cols, q.Q.data(), d, rows, cols, d);
              }
            }
        }
      }
    cnt.matmul_flops += flops;
    if (run.counts) run.counts->bwd_flops[r][step] = flops;
    if (run.R > 1) {  // the accumulators go on (after the last step: home)
      grads.step = step;
      if (run.counts) run.counts->bwd_grad_bytes[r][step] = grads.bytes;
      run.ring.send(r, std::move(grads));
      if (step < run.R - 1) held = run.ring.receive(r, Payload::kv, step);
      grads = run.ring.receive(r, Payload::grad, step);
    }
  }
  // grads now holds the rank's own shard's dK, dV: every rank has added to them.
  const Shard own = run.k_shard(r);
  cnt.elems_written += heads * nq * d + 2 * s.kv_head_count() * own.size() * d;  // dQ, dK, dV
  if (dry) return;
  for (int64_t h = 0; h < heads; ++h)
    for (const Chunk& qc : {qs.first, qs.second})
      for (int64_t row = qc.begin; row < qc.end; ++row)
        for (int64_t e = 0; e < d; ++e)
          g.dQ[(h * s.Nq + row) * d + e] =
              round_to(p.dtype, static_cast<double>(scale * dQ[(h * nq + qs.local(row)) * d + e]));
  for (int64_t kh = 0; kh < s.kv_head_count(); ++kh)
    for (const Chunk& kc : {own.first, own.second})
      for (int64_t key = kc.begin; key < kc.end; ++key)
        for (int64_t e = 0; e < d; ++e) {
          const int64_t from = (kh * own.size() + own.local(key)) * d + e;
          g.dK[(kh * s.Nk + key) * d + e] =
              round_to(p.dtype, static_cast<double>(scale * grads.dK[from]));
          g.dV[(kh * s.Nk + key) * d + e] = round_to(p.dtype, static_cast<double>(grads.dV[from]));
        }
}

// Sizes the count rows of a pass: R ranks x R steps of zeros.
void size_counts(RingCounts* c, int R, bool backward) {
  if (!c) return;
  const PerRankStep zeros(static_cast<size_t>(R), std::vector<int64_t>(static_cast<size_t>(R), 0));
  c->ranks = R;
  if (backward) {
    c->bwd_kv_bytes = c->bwd_grad_bytes = c->bwd_flops = zeros;
  } else {
    c->fwd_bytes = c->fwd_flops = zeros;
  }
}

void check_run(const Problem& p, const CpuOptions& o, const char* who) {
  check_problem(p, o, who);
  const std::string why = check_ranks(p, ranks_of(o));
  if (!why.empty()) throw std::invalid_argument(std::string(who) + ": " + why);
}

}  // namespace

std::string check_ranks(const Problem& p, int ranks) {
  if (ranks < 1 || ranks > kMaxRanks)
    return "the ranks must be in 1.." + std::to_string(kMaxRanks) + " (got " +
           std::to_string(ranks) + ")";
  if (p.shape.packed() && ranks > 1)  // the harness runs a packed batch sequence by sequence
    return "a packed batch (--seqlens) runs sequence by sequence on one rank: the ring shards one "
           "sequence";
  // 2R chunks of at least one row each (one rank: its two chunks may hold one row between them).
  const int64_t n = std::min(p.shape.Nq, p.shape.Nk);
  if (ranks > 1 && n < 2 * ranks)
    return "the ring cuts the sequence into 2R chunks of at least one row: R = " +
           std::to_string(ranks) + " ranks need " + std::to_string(2 * ranks) +
           " query rows and keys, and the sequence has " + std::to_string(n) +
           (p.shape.Nq <= p.shape.Nk ? " query rows" : " keys");
  return "";
}

void ring_forward(const Problem& p, const Inputs& in, const CpuOptions& o, Sharding sh,
                  Forward& out, Counters& cnt, RingCounts* counts) {
  check_run(p, o, "ring_forward");
  if (!o.dry_run) check_inputs(p, in, "ring_forward");
  prepare_forward(p, o.dry_run, out);
  size_counts(counts, ranks_of(o), false);
  with_compute_type(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    Run<T> run(p, in, o, sh, counts);
    run_ranks(run, [&](int r) { forward_rank(run, r, out); });
    for (const Counters& c : run.per_rank) cnt += c;
  });
}

void ring_backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                   Sharding sh, Gradients& g, Counters& cnt, RingCounts* counts) {
  check_run(p, o, "ring_backward");
  if (!o.dry_run) check_backward(p, in, fwd, "ring_backward");
  prepare_gradients(p, o.dry_run, g);
  size_counts(counts, ranks_of(o), true);
  with_compute_type(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    Run<T> run(p, in, o, sh, counts);
    run_ranks(run, [&](int r) { backward_rank(run, r, fwd, g); });
    for (const Counters& c : run.per_rank) cnt += c;
  });
}

RingCounts ring_counts(const Problem& p, const CpuOptions& o, Sharding sh) {
  CpuOptions dry = o;
  dry.dry_run = true;
  RingCounts c;
  c.sharding = sh == Sharding::zigzag ? "zigzag" : "contiguous";
  Forward f;
  Gradients g;
  Counters ignored;
  ring_forward(p, Inputs{}, dry, sh, f, ignored, &c);
  ring_backward(p, Inputs{}, Forward{}, dry, sh, g, ignored, &c);
  const int R = c.ranks;
  const Shape& s = p.shape;
  const int64_t row = s.kv_head_count() * s.d;
  for (int r = 0; r < R; ++r) {
    c.rows.push_back(plan::shard(s.Nq, R, r, sh).size());
    const int64_t next = plan::shard(s.Nk, R, (r + 1) % R, sh).size();
    c.fwd_closed.push_back(plan::fwd_closed_form(row, s.Nk, next, dtype_bytes(p.dtype), R));
    c.bwd_closed.push_back(
        plan::bwd_closed_form(row, s.Nk, next, dtype_bytes(p.dtype), compute_bytes(p.dtype), R));
  }
  return c;
}

}  // namespace flashlab::cpu::FLASHLAB_FOLDER

namespace flashlab::cpu {

namespace {

namespace ring = ::flashlab::cpu::FLASHLAB_FOLDER;
using ring::Sharding;

template <Sharding sh>
void forward(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out, Counters& c) {
  ring::ring_forward(p, in, o, sh, out, c, nullptr);
}

template <Sharding sh>
void backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
              Gradients& g, Counters& c) {
  ring::ring_backward(p, in, fwd, o, sh, g, c, nullptr);
}

template <Sharding sh>
RingCounts counts(const Problem& p, const CpuOptions& o) {
  return ring::ring_counts(p, o, sh);
}

// Per rank, the most it holds at once (the backward, which holds more): its dQ and D in T; the
// K/V shard it computes on, the copy it sends and the one it receives (doubles); two sets of dK,
// dV accumulators (its own and the one arriving) in T; the outer-K tiles. Shards differ by at most
// two rows: each is taken at its largest.
int64_t scratch_bytes(const Problem& p, const CpuOptions& o) {
  const Shape& s = p.shape;
  const int R = ring::ranks_of(o);
  const int64_t e = compute_bytes(p.dtype), d = s.d;
  const int64_t nq = 2 * ((s.Nq + 2 * R - 1) / (2 * R)), nk = 2 * ((s.Nk + 2 * R - 1) / (2 * R));
  const int64_t Br = o.Br, Bc = o.Bc;
  const int64_t tiles = (2 * Br * d + 2 * Br) + 3 * Bc * d + 2 * Br * Bc;
  const int64_t kv = 2 * s.kv_head_count() * nk * d;
  const int64_t per_rank = e * (s.heads() * nq * (d + 1) + 2 * kv + tiles) + 8 * 3 * kv;
  return R * per_rank;
}

// None on the CPU (the GPU side's, per rank, is counted by its run: kernels/09_ring/cuda.cu).
int64_t workspace(const Problem&, const CpuOptions&) {
  return 0;
}

const RingSpec kZigzag = {"zigzag", ring::check_ranks, counts<Sharding::zigzag>};
const RingSpec kContiguous = {"contiguous", ring::check_ranks, counts<Sharding::contiguous>};

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "ring",
    .pass = Pass::both,
    .idea = "context parallelism: the sequence over R ranks in zigzag chunks (rank r: chunks r "
            "and 2R-1-r), K/V shards passed round a ring, partial O and LSE merged by the "
            "log-sum-exp rule; dK, dV travel home with their shard",
    .deterministic = true,
    .workspace = "CPU: 0 (ranks are threads). GPU, per rank: 2 K/V shards, fp32 O, LSE and dQ of "
                 "its rows, 4 fp32 dK/dV shards, one block's outputs, the block kernels' workspace",
    .workspace_bytes = cpu::workspace,
    .cpu_forward = cpu::forward<cpu::ring::Sharding::zigzag>,
    .cpu_backward = cpu::backward<cpu::ring::Sharding::zigzag>,
    .cpu_scratch_bytes = cpu::scratch_bytes,
    .axes = kGroupedHeads | kWindow,
    .ring = &cpu::kZigzag,
});

// clang-format off (the build finds the entry by its first line)
FLASHLAB_VARIANT(contiguous, {
    .id = "ring-contiguous",
    .pass = Pass::both,
    .idea = "ring with contiguous shards (rank r: rows [rN/R, (r+1)N/R)): under the causal mask "
            "the early ranks idle, the contrast zigzag removes",
    .deterministic = true,
    .workspace = "CPU: 0 (ranks are threads). GPU, per rank: 2 K/V shards, fp32 O, LSE and dQ of "
                 "its rows, 4 fp32 dK/dV shards, one block's outputs, the block kernels' workspace",
    .workspace_bytes = cpu::workspace,
    .cpu_forward = cpu::forward<cpu::ring::Sharding::contiguous>,
    .cpu_backward = cpu::backward<cpu::ring::Sharding::contiguous>,
    .cpu_scratch_bytes = cpu::scratch_bytes,
    .axes = kGroupedHeads | kWindow,
    .ring = &cpu::kContiguous,
});
// clang-format on
