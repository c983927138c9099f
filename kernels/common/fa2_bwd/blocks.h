// The block shape of FA2's outer-K backward pass (outer_k.cuh): Bc keys per K block and Br queries
// per step, at head dim d. The convert pass's split mode walks the same blocks to know which dQ
// splits a row has, and the Hopper backward (kernels/06_hopper) takes its blocks from here too:
// hopper-deterministic's dQ splits are summed by that convert pass.
//
//   d     Bc    Br    why (outer_k.cuh has the register and shared-memory arithmetic)
//   64    128   128   dK_j, dV_j are small: wide score tiles, half the steps
//   128   128   64
//   256   64    64    dK_j + dV_j of 128 keys would be 256 fp32 registers a thread; of 64, 128
//
// Plain constants with no other header, so that host code which only needs the sizes (split
// counts, workspace formulas, a CPU twin) reads them here without including a kernel.
#pragma once

namespace flashlab::cuda {

// Bc at d = 64 and 128.
inline constexpr int kOuterKBc = 128;
inline constexpr int outer_k_bc(int d) {
  return d == 256 ? 64 : kOuterKBc;
}
inline constexpr int outer_k_br(int d) {
  return d == 64 ? 128 : 64;
}

}  // namespace flashlab::cuda
