// How a CPU twin's count of a pass splits over the CUDA kernels that run the pass: what the io
// lab sets beside each kernel's hardware counters. A version's entry names its kernels and their
// shares (VersionEntry::kernel_counts); the shares of the FA2 backward's phases are counted here
// by dry runs of the same phases the twins run:
//
//   preprocess_kernel   D = rowsum(O * dO)                            preprocess_counts()
//   outer_k_kernel      dK, dV (and, but for recompute, dQ partials)  outer_k_counts_without_dq()
//   dq_outer_q_kernel   recompute's second pass: the rest of the count
//   convert_dq_kernel   read the accumulator (atomic-dq) or each written split
//                       (deterministic-dq), write dQ                  convert_counts()
#pragma once

#include <vector>

#include "common/cpu/bwd.h"
#include "core/version.h"

namespace flashlab::cpu {

inline Counters minus(Counters a, const Counters& b) {
  a.matmul_flops -= b.matmul_flops;
  a.elems_read -= b.elems_read;
  a.elems_written -= b.elems_written;
  a.atomic_adds -= b.atomic_adds;
  a.tiles_computed -= b.tiles_computed;
  a.tiles_skipped -= b.tiles_skipped;
  return a;
}

inline Counters preprocess_counts(const Problem& p, CpuOptions o) {
  o.dry_run = true;
  Counters c;
  preprocess_D<float>(p, Inputs{}, Forward{}, o, c);
  return c;
}

inline Counters outer_k_counts_without_dq(const Problem& p, CpuOptions o) {
  o.dry_run = true;
  Counters c;
  Gradients g;
  NoDQ<float> none;
  outer_k_pass(p, Inputs{}, HostTensor{}, std::vector<float>{}, o, g, c, none);
  return c;
}

// The convert pass: atomic-dq reads the one accumulator; deterministic-dq reads, for each Q block,
// the split of every K block that visited it. Both write dQ once.
inline Counters convert_counts(const Problem& p, const CpuOptions& o, bool per_k_block_splits) {
  const Shape& s = p.shape;
  Counters c;
  c.elems_written = s.q_elems();
  if (!per_k_block_splits) {
    c.elems_read = s.q_elems();
    return c;
  }
  const Blocks qb{s.Nq, o.Br}, kb{s.Nk, o.Bc};
  for (int64_t i = 0; i < qb.count(); ++i)
    for (int64_t j = 0; j < kb.count(); ++j)
      if (tile_mask(p, qb.begin(i), qb.size(i), kb.begin(j), kb.size(j)) != TileMask::full)
        c.elems_read += s.heads() * qb.size(i) * s.d;
  return c;
}

// The backward of atomic-dq and deterministic-dq: preprocess, the outer-K pass, convert.
inline std::vector<KernelCount> one_pass_backward_kernels(const Problem& p, const CpuOptions& o,
                                                          const Counters& total,
                                                          bool per_k_block_splits) {
  const Counters pre = preprocess_counts(p, o), convert = convert_counts(p, o, per_k_block_splits);
  return {{"preprocess_kernel", pre},
          {"outer_k_kernel", minus(minus(total, pre), convert)},
          {"convert_dq_kernel", convert}};
}

}  // namespace flashlab::cpu
