// hopper: the forward of the Hopper rung, as plain loops over tiles. The arithmetic is tiled's
// (online softmax over K/V blocks); what the twin shows is the CUDA kernel's schedule, taken
// from the same function (schedule.h): per Q block, the K/V blocks from the diagonal down, the
// ones that need a mask (ragged last block, blocks crossing the diagonal) first, then the rest
// with no mask at all. Under the causal mask the Q blocks end at the last row, so the ragged block
// is each head's first (schedule.h); the twin computes its real rows only.
//
//   for each (head, Q block i):                    one CTA: Br/64 consumer warpgroups of 64 rows
//                                                  (2 at d = 128, 3 at d = 64)
//     for it in 0 .. n_kv - 1:   j = n_kv - 1 - it  K_j, V_j arrive by the copy engine
//       S = scale Q_i K_j^T       masked only while it < n_masked
//       online softmax step (m, l, O_i)
//     O_i = O_i / l, LSE_i = m + log l
//
// What the twin cannot show is the overlap (copies, products and softmax at once): that is
// measured by the ablation on the GPU (`flashlab lab hopper`).
//
// The backward is FA2's outer-K pass (common/cpu/bwd.h), as the CUDA kernel runs it: one worker
// per (head, K block j) walks the Q blocks that see its keys, dK_j and dV_j on chip, and adds each
// dQ_i partial into an accumulator. hopper's workers race (atomic adds, as the bulk reduce-adds
// race at L2). hopper-deterministic's take turns: worker j adds into split j mod 2 of Q block i
// only once the workers before it in that split have (a counter per (head, Q block, split), as on
// the GPU), and the convert sums the two splits in order, so every element of dQ is the same sum
// on every run; its workers walk their Q blocks downwards, as the kernel's do (bwd_schedule.cuh
// says why). At d = 256 both run two passes instead: the outer-K pass computes dK and dV alone,
// and an outer-Q pass (recompute's) computes dQ, each element once, as the CUDA dQ pass does.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/band.h"
#include "common/cpu/bwd.h"
#include "common/cpu/fwd.h"
#include "common/cpu/tiles.h"
#include "common/fa2_bwd/blocks.h"
#include "core/dtype.h"
#include "core/version.h"
#include "schedule.h"

namespace flashlab::cpu {

namespace {

namespace plan = ::flashlab::FLASHLAB_FOLDER;  // schedule.h: what the twin shares with the kernel

template <class T>
void hopper_fwd(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out,
                Counters& cnt) {
  const Shape& s = p.shape;
  const int64_t d = s.d;
  const Blocks qb{s.Nq, o.Br}, kb{s.Nk, o.Bc};
  const bool dry = o.dry_run;
  const T scale = static_cast<T>(p.softmax_scale());
  const cuda::Band band = cuda::band_of(p);  // the keys each row sees, as the kernel has them
  prepare_forward(p, dry, out);
  Counters total;

#pragma omp parallel num_threads(thread_count(o, p)) reduction(+ : total)
  {
    FwdTile<T> t(dry ? 0 : o.Br, dry ? 0 : o.Bc, dry ? 0 : d);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t h = 0; h < s.heads(); ++h)
      for (int64_t i = 0; i < qb.count(); ++i) {
        const plan::BlockSchedule sc =
            plan::block_schedule(o.Br, o.Bc, band.banded, band.Nq, band.Nk, band.offset, band.left,
                                 band.right, static_cast<int>(i));
        const int64_t r0 = sc.first_row(), rows = sc.q_end - r0;  // the block's real rows
        const int64_t kh = s.kv_of(h);                            // the K/V head it reads
        total.tiles_computed += sc.n_kv;
        total.tiles_skipped += kb.count() - sc.n_kv;
        total.elems_read += rows * d;  // Q_i
        if (!dry) t.start(&in.Q[(h * s.Nq + r0) * d], rows, d);
        for (int it = 0; it < sc.n_kv; ++it) {
          const int64_t j = sc.kv_block(it), c0 = kb.begin(j), cols = kb.size(j);
          const TileMask mask = tile_mask(p, r0, rows, c0, cols);
          const bool masked = sc.masked(it);
          // The schedule promises that the tail of the loop needs no mask: hold it to that.
          if (!masked && (mask != TileMask::none || cols != o.Bc))
            throw std::logic_error("hopper schedule: an unmasked iteration meets a mask");
          total.elems_read += 2 * cols * d;                 // K_j, V_j
          total.matmul_flops += 2 * (2 * rows * cols * d);  // Q K^T and P V
          if (dry) continue;
          t.scores(&in.K[(kh * s.Nk + c0) * d], &in.V[(kh * s.Nk + c0) * d], rows, cols, d);
          scale_and_mask(t.S.data(), rows, cols, scale, masked ? mask : TileMask::none, p, r0, c0);
          online_softmax_step(t, rows, cols, d);
        }
        total.elems_written += rows * d + rows;  // O_i, LSE_i
        if (!dry)
          write_rows(t, p.dtype, rows, d, &out.O[(h * s.Nq + r0) * d], &out.LSE[h * s.Nq + r0]);
      }
  }
  cnt += total;
}

void hopper_forward(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out,
                    Counters& cnt) {
  check_problem(p, o, "hopper_forward");
  if (!o.dry_run) check_inputs(p, in, "hopper_forward");
  with_compute_type(p.dtype, [&](auto zero) { hopper_fwd<decltype(zero)>(p, in, o, out, cnt); });
}

// A dQ policy that adds in turns, into S splits: worker (h, j) owns split s = j mod S, waits until
// the counter of (h, Q block i, s) says its rank -- how many workers of split s before it visit Q
// block i too --, stores (rank 0: the split's first writer) or adds its partial, and passes the
// turn on. Under the causal mask alone the Q blocks a K block visits are a suffix of the head's,
// so the rank is j / S; a window leaves out blocks on both sides, so the rank counts the visits.
// OpenMP's dynamic schedule hands the (h, j) iterations out in order, so the workers j waits for
// have all started and wait only for smaller j: the waits always end.
template <class T>
struct TurnDQ {
  static constexpr bool computes_dq = true;
  static constexpr bool q_down = true;      // as the kernel: every worker reaches block i together
  std::vector<T>& accum;                    // [S][heads * Nq * d]
  std::vector<std::atomic<int64_t>>& turn;  // [heads][Q blocks][S]
  const Problem& p;
  int64_t Br, Bc, q_blocks, S, split_stride;
  void count(Counters& c, int64_t rows, int64_t dd) const {
    c.elems_read += rows * dd;
    c.elems_written += rows * dd;
  }
  void add(int64_t h, int64_t j, int64_t r0, int64_t rows, const T* partial) {
    const int64_t s = j % S, Nq = p.shape.Nq, Nk = p.shape.Nk, d = p.shape.d;
    int64_t rank = 0;
    for (int64_t before = s; before < j; before += S)
      rank += tile_mask(p, r0, rows, before * Bc, std::min(Bc, Nk - before * Bc)) != TileMask::full;
    std::atomic<int64_t>& t = turn[static_cast<size_t>((h * q_blocks + r0 / Br) * S + s)];
    while (t.load(std::memory_order_acquire) != rank) std::this_thread::yield();
    T* base = &accum[s * split_stride + (h * Nq + r0) * d];
    for (int64_t e = 0; e < rows * d; ++e) base[e] = rank == 0 ? partial[e] : base[e] + partial[e];
    t.store(rank + 1, std::memory_order_release);
  }
};

// The CPU options with the dQ pass's blocks (schedule.h).
CpuOptions dq_pass_blocks(const CpuOptions& o) {
  CpuOptions b = o;
  b.Br = plan::kDqPassBr;
  b.Bc = plan::kDqPassBc;
  return b;
}

template <class T, bool kTurns>
void hopper_bwd(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                Gradients& g, Counters& cnt) {
  const Shape& s = p.shape;
  prepare_gradients(p, o.dry_run, g);
  const std::vector<T> D = preprocess_D<T>(p, in, fwd, o, cnt);
  if (plan::two_pass_backward(s.d)) {
    // Two passes, both backwards alike: dK, dV by the outer-K pass without dQ, then dQ by the
    // outer-Q pass in the CUDA dQ pass's blocks (bwd_dq_pass.cuh: 128 query rows, 64 keys).
    NoDQ<T> no_dq;
    outer_k_pass(p, in, fwd.LSE, D, o, g, cnt, no_dq);
    outer_q_dq_pass(p, in, fwd.LSE, D, dq_pass_blocks(o), g, cnt);
    return;
  }
  if constexpr (kTurns) {
    const int64_t q_blocks = (s.Nq + o.Br - 1) / o.Br,
                  S = plan::deterministic_dq_splits(s.Nk, o.Bc);
    std::vector<T> accum(o.dry_run ? 0 : static_cast<size_t>(S * s.q_elems()), T(0));
    std::vector<std::atomic<int64_t>> turn(
        static_cast<size_t>(o.dry_run ? 0 : s.heads() * q_blocks * S));
    for (auto& t : turn) t.store(0);
    TurnDQ<T> dq{accum, turn, p, o.Br, o.Bc, q_blocks, S, s.q_elems()};
    outer_k_pass(p, in, fwd.LSE, D, o, g, cnt, dq);
    // Convert: dQ = round(scale * (split 0 + split 1 + ...)), always in this order.
    cnt.elems_read += S * s.q_elems();
    cnt.elems_written += s.q_elems();
    if (o.dry_run) return;
    const T scale = static_cast<T>(p.softmax_scale());
#pragma omp parallel for num_threads(thread_count(o, p))
    for (int64_t e = 0; e < s.q_elems(); ++e) {
      T sum = 0;
      for (int64_t k = 0; k < S; ++k) sum += accum[k * s.q_elems() + e];
      g.dQ[e] = round_to(p.dtype, static_cast<double>(scale * sum));
    }
  } else {
    std::vector<T> accum(o.dry_run ? 0 : static_cast<size_t>(s.q_elems()), T(0));
    AtomicAddDQ<T> dq{accum, s.Nq, s.d};
    outer_k_pass(p, in, fwd.LSE, D, o, g, cnt, dq);
    convert_dq(p, o, accum, g, cnt);
  }
}

template <bool kTurns>
void hopper_backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                     Gradients& g, Counters& cnt) {
  check_problem(p, o, "hopper_backward");
  if (!o.dry_run) check_backward(p, in, fwd, "hopper_backward");
  with_compute_type(p.dtype,
                    [&](auto zero) { hopper_bwd<decltype(zero), kTurns>(p, in, fwd, o, g, cnt); });
}

// The two passes at d = 256: D and the larger of the passes' tiles (the outer-Q pass's blocks of
// 128 query rows keep more a thread than the outer-K pass's); no accumulator.
int64_t two_pass_scratch_bytes(const Problem& p, const CpuOptions& o) {
  return std::max(outer_k_scratch_bytes(p, o), outer_k_scratch_bytes(p, dq_pass_blocks(o)));
}
// The backward's scratch: D, the outer-K pass's tiles and the dQ accumulator (splits).
int64_t hopper_scratch_bytes(const Problem& p, const CpuOptions& o) {
  const int64_t bwd =
      plan::two_pass_backward(p.shape.d)
          ? two_pass_scratch_bytes(p, o)
          : outer_k_scratch_bytes(p, o) + compute_bytes(p.dtype) * p.shape.q_elems();
  return std::max(fwd_tile_scratch_bytes(p, o), bwd);
}
int64_t deterministic_scratch_bytes(const Problem& p, const CpuOptions& o) {
  if (plan::two_pass_backward(p.shape.d)) return two_pass_scratch_bytes(p, o);
  const int64_t S = plan::deterministic_dq_splits(p.shape.Nk, o.Bc);
  return outer_k_scratch_bytes(p, o) + compute_bytes(p.dtype) * S * p.shape.q_elems() +
         8 * p.shape.heads() * ((p.shape.Nq + o.Br - 1) / o.Br) * S;
}

// The backward's: D and LSE*log2e, one fp32 dQ accumulator (none at d = 256, where the dQ pass
// writes dQ itself); the forward's: one tile counter.
int64_t hopper_workspace(const Problem& p, const CpuOptions&) {
  const int64_t accumulators = plan::two_pass_backward(p.shape.d) ? 0 : 1;
  return p.shape.lse_elems() * 4 * 2 + accumulators * p.shape.q_elems() * 4 + 4;
}
// ... with S = 2 fp32 dQ splits and turn counters per (head, Q block of the CUDA kernel: 64 rows
// at d = 128, 128 at 64, split), as the CUDA version allocates; at d = 256 neither.
int64_t deterministic_workspace(const Problem& p, const CpuOptions&) {
  const int d = static_cast<int>(p.shape.d);
  if (plan::two_pass_backward(d)) return p.shape.lse_elems() * 4 * 2;
  const int64_t br = cuda::outer_k_br(d),
                S = plan::deterministic_dq_splits(p.shape.Nk, cuda::outer_k_bc(d));
  return p.shape.lse_elems() * 4 * 2 + S * p.shape.q_elems() * 4 +
         p.shape.heads() * ((p.shape.Nq + br - 1) / br) * S * 4;
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "hopper",
    .pass = Pass::both,
    .idea = "the Hopper machinery (FA3): tiles by the bulk tensor copy engine on mbarriers from a "
            "producer warpgroup, asynchronous warpgroup products (wgmma), consumer warpgroups in "
            "pingpong so softmax overlaps the products; dQ by bulk reduce-add, at d = 256 by a "
            "second pass (sm_90a only)",
    .deterministic = false,
    .workspace = "backward: 2*B*H*Nq*4 (D, LSE*log2e) + B*H*Nq*d*4 (fp32 dQ accumulator; none "
                 "at d = 256, where a second pass computes dQ); forward: 4 (the counter of the "
                 "causal tile order); 776*B more for a packed batch (six tensor maps and the "
                 "order per sequence)",
    .workspace_bytes = cpu::hopper_workspace,
    .cpu_forward = cpu::hopper_forward,
    .cpu_backward = cpu::hopper_backward<false>,
    .cpu_scratch_bytes = cpu::hopper_scratch_bytes,
    .axes = kGroupedHeads | kWindow,
});

FLASHLAB_VARIANT(deterministic,
                 {
                     .id = "hopper-deterministic",
                     .pass = Pass::bwd,
                     .idea = "hopper's backward with dQ added in a fixed order: K block j adds "
                             "into split j mod 2 of Q block i after the blocks before it in that "
                             "split, taking turns on a counter in global memory; the convert "
                             "pass sums the two splits in order (bitwise reproducible); at "
                             "d = 256 hopper's two passes, which add nothing concurrently",
                     .deterministic = true,
                     .workspace = "2*B*H*Nq*4 (D, LSE*log2e) + 2*B*H*Nq*d*4 (two fp32 dQ "
                                  "splits) + 2*B*H*ceil(Nq/Br)*4 (turn counters; Br = 64 at "
                                  "d = 128, 128 at d = 64; at d = 256 neither splits nor "
                                  "counters: hopper's two passes), and 776*B more for a packed "
                                  "batch (six tensor maps and the order per sequence)",
                     .workspace_bytes = cpu::deterministic_workspace,
                     .cpu_forward = nullptr,
                     .cpu_backward = cpu::hopper_backward<true>,
                     .cpu_scratch_bytes = cpu::deterministic_scratch_bytes,
                     .axes = kGroupedHeads | kWindow,
                 });
