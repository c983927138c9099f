// hopper: the forward of the Hopper rung, as plain loops over tiles. The arithmetic is tiled's
// (online softmax over K/V blocks); what the twin shows is the CUDA kernel's schedule, taken
// from the same function (schedule.h): per Q block, the K/V blocks from the diagonal down, the
// ones that need a mask (ragged last block, blocks crossing the diagonal) first, then the rest
// with no mask at all.
//
//   for each (head, Q block i):                    one CTA: 2 consumer warpgroups of 64 rows
//     for it in 0 .. n_kv - 1:   j = n_kv - 1 - it  K_j, V_j arrive by the copy engine
//       S = scale Q_i K_j^T       masked only while it < n_masked
//       online softmax step (m, l, O_i)
//     O_i = O_i / l, LSE_i = m + log l
//
// What the twin cannot show is the overlap (copies, products and softmax at once): that is
// measured by the ablation on the GPU (`flashlab lab hopper`).
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "common/cpu_fwd.h"
#include "common/cpu_tiles.h"
#include "core/dtype.h"
#include "schedule.h"
#include "version_folder.h"

namespace flashlab::cpu {

namespace {

template <class T>
void hopper_fwd(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out,
                Counters& cnt) {
  const Shape& s = p.shape;
  const int64_t d = s.d;
  const Blocks qb{s.Nq, o.Br}, kb{s.Nk, o.Bc};
  const bool dry = o.dry_run;
  const T scale = static_cast<T>(p.softmax_scale());
  out.P.clear();
  if (dry) {
    out.O.clear();
    out.LSE.clear();
  } else {
    out.O.resize(static_cast<size_t>(s.q_elems()));
    out.LSE.resize(static_cast<size_t>(s.lse_elems()));
  }
  Counters total;

#pragma omp parallel num_threads(thread_count(o, p)) reduction(+ : total)
  {
    FwdTile<T> t(dry ? 0 : o.Br, dry ? 0 : o.Bc, dry ? 0 : d);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t h = 0; h < s.heads(); ++h)
      for (int64_t i = 0; i < qb.count(); ++i) {
        const ::flashlab::FLASHLAB_FOLDER::BlockSchedule sc =
            ::flashlab::FLASHLAB_FOLDER::block_schedule(
                o.Br, o.Bc, p.causal, static_cast<int>(s.Nq), static_cast<int>(s.Nk),
                static_cast<int>(p.causal_offset()), static_cast<int>(i));
        const int64_t r0 = qb.begin(i), rows = qb.size(i);
        total.tiles_computed += sc.n_kv;
        total.tiles_skipped += kb.count() - sc.n_kv;
        total.elems_read += rows * d;  // Q_i
        if (!dry) t.start(&in.Q[(h * s.Nq + r0) * d], rows, d);
        for (int it = 0; it < sc.n_kv; ++it) {
          const int64_t j = sc.kv_block(it), c0 = kb.begin(j), cols = kb.size(j);
          const TileMask mask = tile_mask(p, r0, rows, c0, cols);
          const bool masked = it < sc.n_masked;
          // The schedule promises that the tail of the loop needs no mask: hold it to that.
          if (!masked && (mask != TileMask::none || cols != o.Bc))
            throw std::logic_error("hopper schedule: an unmasked iteration meets a mask");
          total.elems_read += 2 * cols * d;                 // K_j, V_j
          total.matmul_flops += 2 * (2 * rows * cols * d);  // Q K^T and P V
          if (dry) continue;
          t.scores(&in.K[(h * s.Nk + c0) * d], &in.V[(h * s.Nk + c0) * d], rows, cols, d);
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

int64_t no_workspace(const Problem&, const CpuOptions&) {
  return 0;
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "hopper",
    .pass = Pass::fwd,
    .idea = "the Hopper machinery (FA3): tiles by the bulk tensor copy engine on mbarriers from a "
            "producer warpgroup, asynchronous warpgroup products (wgmma), consumer warpgroups in "
            "pingpong so softmax overlaps the products (sm_90a only)",
    .deterministic = true,
    .workspace = "0",
    .workspace_bytes = cpu::no_workspace,
    .cpu_forward = cpu::hopper_forward,
    .cpu_backward = nullptr,
    .cpu_scratch_bytes = cpu::fwd_tile_scratch_bytes,
});
