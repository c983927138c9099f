// What the Hopper backward's host side and its kernel share: the parameters and the block shape
// per head dim.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "common/fa2_bwd/params.h"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

// One backward. The tensor maps describe Q, dO (boxes of Br rows), K, V (Bc rows) for the loads
// and dK, dV (64 rows: one consumer warpgroup's keys) for the stores; `b` is what every backward
// of the ladder is told (common/fa2_bwd/params.h): the workspace with LSE2, D and the fp32 dQ
// accumulator, the sizes, the causal offset and the scales.
struct BwdParams {
  CUtensorMap q_map, do_map, k_map, v_map, dk_map, dv_map;
  ::flashlab::cuda::BwdParams b;
  int q_blocks;  // ceil(Nq / Br)
  // The blocks' order (bwd_kernel.cuh: block_of): chunks of kv_chunk K/V heads one after another,
  // and in each chunk the K blocks in order, all the chunk's heads at each K block.
  int kv_chunk;
  // hopper-deterministic: [B*H][q_blocks][b.dq_splits] turn counters, zeroed before the launch.
  // K block j writes its dQ partial of Q block i into split j mod dq_splits once counter
  // (head, i, j mod dq_splits) == j / dq_splits, then sets it to j / dq_splits + 1
  // (bwd_dq_writer.cuh). Null for hopper.
  int* dq_turn;
};

// Bc = 128 keys per block, 64 per consumer warpgroup (the rows of its dK_j, dV_j accumulators);
// Br query rows per step: 64 at d = 128, where dK_j and dV_j take 128 registers a thread, and
// 128 at d = 64, where they take 64 and the score tiles can be twice as wide. These are the
// outer-K pass's blocks (common/fa2_bwd/blocks.h), not a copy of them: hopper-deterministic's
// dQ splits are summed by that pass's convert kernel, which must walk the blocks that wrote them.
// kStages Q blocks in flight. Each consumer warpgroup computes a 64 x 64 piece of dQ_i: at
// d = 128 the columns 64w .. 64w + 63 of all 64 rows, at d = 64 the rows 64w .. 64w + 63.
template <int D>
struct BwdTraits {
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  static constexpr int Bc = ::flashlab::cuda::kOuterKBc;
  static constexpr int Br = ::flashlab::cuda::outer_k_br(D);
  static constexpr int kStages = 2;
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static_assert(::flashlab::cuda::kRowPad % Br == 0, "LSE2 and D are padded for whole blocks");
};

// The launcher, one explicit instantiation per (dtype, head dim, deterministic).
template <class T, int D, bool kDeterministic>
void launch_bwd(const BwdParams& p, cudaStream_t stream);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
