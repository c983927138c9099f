// tiled: the FA2 forward. One worker per (head, Q block i) -- a thread block on the GPU -- keeps
// Q_i, the running row max m, the running sum l and the unnormalised O_i on chip, and streams
// the K, V blocks past them:
//
//   for j in K blocks:            (blocks no row sees -- above the diagonal, outside the window --
//                                  are skipped; K_j, V_j of the K/V head the query head reads)
//     S    = scale Q_i K_j^T      masked inside a diagonal block
//     m'   = max(m, rowmax S)
//     P    = exp(S - m')
//     l    = exp(m - m') l + rowsum P
//     O_i  = exp(m - m') O_i + P V_j
//   O_i = O_i / l,  LSE_i = m + log l      (a row that saw no key: O = 0, LSE = -inf)
#include <cmath>
#include <limits>
#include <vector>

#include "common/cpu/fwd.h"
#include "common/cpu/tiles.h"
#include "core/dtype.h"
#include "core/version.h"

namespace flashlab::cpu {

namespace {

template <class T>
void tiled(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out, Counters& cnt) {
  const Shape& s = p.shape;
  const int64_t d = s.d;
  const Blocks qb{s.Nq, o.Br}, kb{s.Nk, o.Bc};
  const bool dry = o.dry_run;
  const T scale = static_cast<T>(p.softmax_scale());
  prepare_forward(p, dry, out);
  Counters total;

#pragma omp parallel num_threads(thread_count(o, p)) reduction(+ : total)
  {
    FwdTile<T> t(dry ? 0 : o.Br, dry ? 0 : o.Bc, dry ? 0 : d);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t h = 0; h < s.heads(); ++h)
      for (int64_t i = 0; i < qb.count(); ++i) {
        const int64_t r0 = qb.begin(i), rows = qb.size(i), kh = s.kv_of(h);
        total.elems_read += rows * d;  // Q_i
        if (!dry) t.start(&in.Q[(h * s.Nq + r0) * d], rows, d);
        for (int64_t j = 0; j < kb.count(); ++j) {
          const int64_t c0 = kb.begin(j), cols = kb.size(j);
          const TileMask mask = tile_mask(p, r0, rows, c0, cols);
          if (!count_tile(total, mask)) continue;
          total.elems_read += 2 * cols * d;                 // K_j, V_j
          total.matmul_flops += 2 * (2 * rows * cols * d);  // Q K^T and P V
          if (dry) continue;
          t.scores(&in.K[(kh * s.Nk + c0) * d], &in.V[(kh * s.Nk + c0) * d], rows, cols, d);
          scale_and_mask(t.S.data(), rows, cols, scale, mask, p, r0, c0);
          online_softmax_step(t, rows, cols, d);
        }
        total.elems_written += rows * d + rows;  // O_i, LSE_i
        if (!dry)
          write_rows(t, p.dtype, rows, d, &out.O[(h * s.Nq + r0) * d], &out.LSE[h * s.Nq + r0]);
      }
  }
  cnt += total;
}

void tiled_forward(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out,
                   Counters& cnt) {
  check_problem(p, o, "tiled_forward");
  if (!o.dry_run) check_inputs(p, in, "tiled_forward");
  with_compute_type(p.dtype, [&](auto zero) { tiled<decltype(zero)>(p, in, o, out, cnt); });
}

int64_t no_workspace(const Problem&, const CpuOptions&) {
  return 0;
}

// The forward is one kernel (fwd_kernel.cuh): it moves all the twin counts.
std::vector<KernelCount> kernels(const Problem&, const CpuOptions&, bool backward,
                                 const Counters& total) {
  if (backward) return {};
  return {{"fwd_kernel", total}};
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "tiled",
    .pass = Pass::fwd,
    .idea = "FA2 forward: outer loop over Q blocks, online softmax, writes O and LSE only",
    .deterministic = true,
    .workspace = "0",
    .workspace_bytes = cpu::no_workspace,
    .cpu_forward = cpu::tiled_forward,
    .cpu_backward = nullptr,
    .cpu_scratch_bytes = cpu::fwd_tile_scratch_bytes,
    .feeds_backward = true,
    .kernel_counts = cpu::kernels,
    .axes = kGroupedHeads | kWindow,
});
