// The block shape of FA2's outer-K backward pass (outer_k.cuh): Bc keys per K block at every head
// dim, Br queries per step at head dim d. The convert pass's split mode walks the same blocks to
// know which dQ splits a row has, and the Hopper backward (kernels/06_hopper) takes its blocks from
// here too: hopper-deterministic's dQ splits are summed by that convert pass.
//
// Plain constants with no other header, so that host code which only needs the sizes (split
// counts, workspace formulas, a CPU twin) reads them here without including a kernel.
#pragma once

namespace flashlab::cuda {

inline constexpr int kOuterKBc = 128;
inline constexpr int outer_k_br(int d) {
  return d == 64 ? 128 : 64;
}

}  // namespace flashlab::cuda
