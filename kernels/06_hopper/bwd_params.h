// What the Hopper backward's host side and its kernel share: the parameters and the block shape
// per head dim.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/fa2_bwd/params.h"
#include "fwd_params.h"  // the dQ pass tiles the problem as the forward does
#include "schedule.h"    // the dQ pass's blocks

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

// One backward. The tensor maps describe Q, dO (boxes of Br rows), K, V (Bc rows) for the loads
// and dK, dV (64 rows: one consumer warpgroup's keys, the whole block's at d = 256) for the
// stores; `b` is what every backward of the ladder is told (common/fa2_bwd/params.h): the
// workspace with LSE2, D and the fp32 dQ accumulator, the sizes, the causal offset and the
// scales.
struct BwdParams {
  CUtensorMap q_map, do_map, k_map, v_map, dk_map, dv_map;
  ::flashlab::cuda::BwdParams b;
  // Rows of one query head in the workspace (common/fa2_bwd/params.h): of LSE2 and D (Nq_pad,
  // or a packed batch's lse_rows), of the dQ accumulator (Nq, or total_q), and of the turn
  // counters in Q blocks (ceil(Nq / Br), or a packed batch's turn_blocks below).
  int lse_head_rows, accum_head_rows, turn_head_blocks;
  // The blocks' order (bwd_kernel.cuh: block_in): chunks of kv_chunk K/V heads one after another,
  // and in each chunk the K blocks in order, all the chunk's heads at each K block. A packed
  // batch works it out per sequence, from the SM count.
  int kv_chunk;
  int sms;
  // hopper-deterministic: [heads][turn_head_blocks][b.dq_splits] turn counters,
  // zeroed before the launch. K block j adds its dQ partial of Q block i into split j mod
  // dq_splits once the counter holds one past the split's last writer (j - dq_splits + 1, or 0
  // for the first), then sets it to j + 1 (bwd_dq_writer.cuh). Null for hopper.
  int* dq_turn;
  // A packed batch only (the kernels of kPacked; common/packed.h), what the map kernel
  // (seq_maps.cuh) wrote into the workspace before the launch: sequence b's tensor maps at
  // seq_maps[6 b ..] (kSeqMaps: Q, dO, K, V, dK, dV), clipped at its last row; the sequences in
  // the order their blocks are numbered (most keys first) and where each one's blocks start.
  const CUtensorMap* seq_maps = nullptr;
  const int* seq_order = nullptr;    // [B]
  const int* block_start = nullptr;  // [B + 1], in seq_order's order
};

// A packed batch's maps of one sequence, in this order.
enum SeqMap : int { kMapQ, kMapDO, kMapK, kMapV, kMapDK, kMapDV, kSeqMaps };

// A packed batch's turn counters: sequence b's Q blocks start at packed_turn_block(cu_q[b], b)
// of a head, which leaves room for its ceil(nq / Br) blocks before the next sequence's start
// (floor((c + n) / Br) + 1 - floor(c / Br) >= ceil(n / Br)); a head has turn_blocks of them.
__host__ __device__ inline int packed_turn_block(int first_token, int b, int Br) {
  return first_token / Br + b;
}
inline int64_t packed_turn_blocks(int64_t total_q, int64_t B, int Br) {
  return total_q / Br + B + 1;
}

// The block shapes are the outer-K pass's (common/fa2_bwd/blocks.h), not a copy of them:
// hopper-deterministic's dQ splits are summed by that pass's convert kernel, which must walk the
// blocks that wrote them. kStages Q blocks in flight.
//
// d = 64 and 128: Bc = 128 keys per block, 64 per consumer warpgroup (the rows of its dK_j, dV_j
// accumulators); Br query rows per step: 64 at d = 128, where dK_j and dV_j take 128 registers a
// thread, and 128 at d = 64, where they take 64 and the score tiles can be twice as wide. Each
// consumer warpgroup computes a 64 x 64 piece of dQ_i: at d = 128 the columns 64w .. 64w + 63 of
// all 64 rows, at d = 64 the rows 64w .. 64w + 63 (bwd_consumer.cuh).
//
// d = 256 (kSplitD): 64 keys of dK_j and dV_j over the whole head dim would be 256 registers a
// thread in one warpgroup; Bc = Br = 64 and the two consumer warpgroups split the head dim
// instead, warpgroup w holding columns 128w .. 128w + 127 of dK_j and dV_j
// (bwd_consumer_split_d.cuh). The kernel computes no dQ: the dQ pass does (DqParams below), and
// hopper-deterministic runs the same two kernels, which add nothing concurrently.
template <int D>
struct BwdTraits {
  static_assert(D == 64 || D == 128 || D == 256, "head dims 64, 128 and 256");
  static constexpr int Bc = ::flashlab::cuda::outer_k_bc(D);
  static constexpr int Br = ::flashlab::cuda::outer_k_br(D);
  static constexpr int kStages = 2;
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr bool kSplitD = D == 256;
  // dS^T buffers: at d = 128 two, step n writing buffer n % 2, so that the consumer warpgroups
  // meet once a step (dS^T whole) instead of twice (and dS^T read by both dQ products): one may
  // start the next step while the other's dQ product still runs. At d = 64 (32 KiB a buffer) the
  // second does not fit beside the rest.
  static constexpr int kDsBuffers = D == 128 ? 2 : 1;
  static_assert(::flashlab::cuda::kRowPad % Br == 0, "LSE2 and D are padded for whole blocks");
};

// The launcher, one explicit instantiation per (dtype, head dim, deterministic, packed). A packed
// batch's kernel takes `blocks` blocks (Hkv ceil(nk / Bc) per sequence); a dense one works its
// grid out from the sizes.
template <class T, int D, bool kDeterministic, bool kPacked>
void launch_bwd(const BwdParams& p, int blocks, cudaStream_t stream);

// One dQ pass. `f` is a forward's tiling of the problem (tiles, sizes, band, a packed batch's
// order): its maps are Q and dO (boxes of Br rows), K and V (Bc rows); a packed batch's sequence b
// has its maps at f.seq_maps[4 b ..] in the order of DqMap, written by the map kernel.
struct DqParams {
  hopper_fwd::FwdParams f;
  CUtensorMap do_map;
  void* dq;           // [B*H, Nq, d], or a packed batch's [total_q, H, d]
  const float* lse2;  // the workspace's LSE2 and D (common/fa2_bwd/params.h)
  const float* dd;
  int lse_head_rows;  // rows of one query head in LSE2 and D
  float scale;        // softmax scale
};
enum DqMap : int { kDqMapQ, kDqMapK, kDqMapV, kDqMapDO, kDqMaps };

// The dQ pass at d = 256 (bwd_dq_pass.cuh): one block per tile of Br query rows (two consumer
// warpgroups of 64), K/V blocks of Bc keys.
struct DqTraits {
  static constexpr int D = 256, Br = ::flashlab::FLASHLAB_FOLDER::kDqPassBr,
                       Bc = ::flashlab::FLASHLAB_FOLDER::kDqPassBc, kKStages = 2;
  static constexpr int kThreads = 384;  // a producer warpgroup, two consumer warpgroups
};

// The dQ pass's launcher, one explicit instantiation per (dtype, banded, packed).
template <class T, bool kBanded, bool kPacked>
void launch_dq_pass(const DqParams& p, cudaStream_t stream);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
