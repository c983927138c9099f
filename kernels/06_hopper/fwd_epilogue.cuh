// The epilogue of a consumer warpgroup: O = acc / l and LSE = m ln 2 + ln l for its 64 rows.
//
// With the bulk store (the rung), the warpgroup writes its O rows, packed to 16 bits, into its
// rows of the shared O tile (at d = 256 its rows of the Q buffer, which its last S has read, or
// its two 64 x 64 slots block by block: the traits' kOStage, fwd_params.h), in the same 128-byte
// swizzle the copy engine expects; after a proxy fence and a barrier of the warpgroup, one thread
// stores the 64 x D rows with D / 64 bulk tensor copies, which clip the rows past Nq, and goes on
// without waiting: the copy runs while the next tile's products do, and is waited for (for its
// reads of shared memory) only before the warpgroup writes its O rows again. Without it, every
// thread stores its pairs of O straight from registers (4-byte stores, a row test on each). LSE
// goes from registers to global memory either way: one float per row.
#pragma once

#include <cmath>

#include "common/sm80/mma.cuh"
#include "common/sm90/bulk.cuh"
#include "common/sm90/sync.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/wgmma.cuh"
#include "fwd_schedule.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd {

// Where row `row` of head `head` of the tile's sequence lives: its O row (elements) and its LSE.
// Dense: [B H, Nq, d] and [B H, Nq]; packed: [total_q, H, d] and [H, total_q] (common/packed.h).
template <bool kPacked, int D>
__device__ int64_t o_row_at(const FwdParams& p, const SeqView& v, int head, int row) {
  if constexpr (kPacked) return (static_cast<int64_t>(v.q_tok + row) * p.heads + head) * D;
  return (static_cast<int64_t>(head) * p.Nq + row) * D;
}
template <bool kPacked>
__device__ int64_t lse_at(const FwdParams& p, const SeqView& v, int head, int row) {
  if constexpr (kPacked) return static_cast<int64_t>(head) * p.total_q + v.q_tok + row;
  return static_cast<int64_t>(head) * p.Nq + row;
}

// o_map: O's tensor map (the problem's, or the packed batch's sequence's); v: the sequence.
template <class T, int D, bool kCausal, unsigned kIdeaBits>
__device__ void store_o_lse(const FwdParams& p, const Smem<T, D, kCausal>& sm,
                            const BlockSchedule& sc, const CUtensorMap* o_map, const SeqView& v,
                            int head, int wg, int t, float (&o)[D / 2], const float (&m)[2],
                            const float (&l)[2]) {
  constexpr FwdIdeas kIdeas = ideas_of(kIdeaBits);
  constexpr bool kPacked = (kIdeaBits & kPackedBatch) != 0;
  const int Nq = kPacked ? v.nq : p.Nq;
  constexpr int Br = FwdTraits<D, kCausal>::Br;
  constexpr OStage kOStage = FwdTraits<D, kCausal>::kOStage;  // where O is staged (fwd_params.h)
  constexpr float kLn2 = 0.6931471805599453f;
  const int lane = t % 32, qd = lane % 4;
  const int row_in_wg = 16 * (t / 32) + lane / 4;  // + 8 for the second row of the thread
  float inv[2], lse[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float lt = quad_sum(l[h]);
    inv[h] = lt > 0.f ? 1.f / lt : 0.f;
    lse[h] = lt > 0.f ? m[h] * kLn2 + logf(lt) : -INFINITY;
  }
  // The bulk store is given rows from 0 on only: one starting above row 0 (the padding of a
  // causal head's first block, schedule.h) raised an illegal-instruction error on the H200 (Nq =
  // 1 and 17), so such a warpgroup stores from registers, which test every row. (Without the
  // mask no block starts above row 0, and the kernel has no such branch.)
  if (kIdeas.tma_epilogue && (!kCausal || sc.q0 + 64 * wg >= 0)) {
    // O's pairs of block b (columns 64 b ..), packed to 16 bits, at `base` + the swizzled offset
    // of their row and column in a [rows][64] block (the copy engine's layout).
    const auto write_block = [&](int b, uint32_t base) {
#pragma unroll
      for (int i = 32 * b; i < 32 * b + 32; i += 2) {
        const int h = (i >> 1) & 1, col = 8 * (i >> 2) + 2 * qd;
        st_shared_u32(base + sm90::swizzle128_offset(row_in_wg + 8 * h, col % 64),
                      ElemTraits<T>::pack(o[i] * inv[h], o[i + 1] * inv[h]));
      }
    };
    if (t == 0 && kPacked) sm90::tensormap_acquire(o_map);
    if constexpr (kOStage == OStage::slots) {
      // Block by block through the warpgroup's slots: a slot is written again once the store
      // issued from it kOSlots blocks before has read it.
      constexpr int kSlots = FwdTraits<D, kCausal>::kOSlots;
      const uint32_t slots = smem_addr(sm.o()) + wg * kSlots * 64 * 128;
#pragma unroll
      for (int b = 0; b < D / 64; ++b) {
        if (t == 0) sm90::bulk_wait_read<kSlots - 1>();
        sm90::named_sync(kEpilogueBarrierId + wg, 128);
        write_block(b, slots + (b % kSlots) * 64 * 128);
        sm90::fence_proxy_async();
        sm90::named_sync(kEpilogueBarrierId + wg, 128);
        if (t == 0) {
          sm90::tma_store_3d(o_map, 64 * b, sc.q0 + 64 * wg, head,
                             sm.o() + (wg * kSlots + b % kSlots) * 64 * 64);
          sm90::bulk_commit();
        }
      }
    } else {
      // The warpgroup's rows of a Br x D tile (its own, or the Q buffer), all blocks at once.
      if (t == 0) sm90::bulk_wait_read();  // the last tile's store has read these rows
      sm90::named_sync(kEpilogueBarrierId + wg, 128);
      const uint32_t o_base = smem_addr(sm.o()) + wg * 64 * 128;
#pragma unroll
      for (int b = 0; b < D / 64; ++b) write_block(b, o_base + b * Br * 128);
      sm90::fence_proxy_async();
      sm90::named_sync(kEpilogueBarrierId + wg, 128);
      if (t == 0) {
        for (int b = 0; b < D / 64; ++b)
          sm90::tma_store_3d(o_map, 64 * b, sc.q0 + 64 * wg, head,
                             sm.o() + b * Br * 64 + wg * 64 * 64);
        sm90::bulk_commit();
        if constexpr (kOStage == OStage::in_q) {  // the rows are Q's: free once the store has
          sm90::bulk_wait_read();                  // read them
          sm90::mbar_arrive(sm.q_empty());
        }
      }
    }
  } else {
    if constexpr (kOStage == OStage::in_q) {  // every thread of the warpgroup is past its last S:
      sm90::named_sync(kEpilogueBarrierId + wg, 128);  // Q's rows are free
      if (t == 0) sm90::mbar_arrive(sm.q_empty());
    }
    T* O = static_cast<T*>(p.o);
#pragma unroll
    for (int i = 0; i < D / 2; i += 2) {
      const int h = (i >> 1) & 1, col = 8 * (i >> 2) + 2 * qd;
      const int row = sc.q0 + 64 * wg + row_in_wg + 8 * h;
      if (row >= 0 && row < Nq)
        *reinterpret_cast<uint32_t*>(O + o_row_at<kPacked, D>(p, v, head, row) + col) =
            ElemTraits<T>::pack(o[i] * inv[h], o[i + 1] * inv[h]);
    }
  }
  if (qd == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = sc.q0 + 64 * wg + row_in_wg + 8 * h;
      if (row >= 0 && row < Nq) p.lse[lse_at<kPacked>(p, v, head, row)] = lse[h];
    }
  }
}

// A tile no row of which sees a key (causal, Nq > Nk): O = 0 and LSE = -inf for the warpgroup's
// 64 rows, from registers.
// (Packed: also every tile of a sequence without keys.)
template <class T, int D, bool kPacked>
__device__ void store_empty_rows(const FwdParams& p, const BlockSchedule& sc, const SeqView& v,
                                 int head, int wg, int t) {
  const int Nq = kPacked ? v.nq : p.Nq;
  T* O = static_cast<T*>(p.o);
  const int row0 = sc.q0 + 64 * wg;
  for (int i = t; i < 64 * D / 2; i += 128) {
    const int r = row0 + i / (D / 2);
    if (r >= 0 && r < Nq)
      reinterpret_cast<uint32_t*>(O + o_row_at<kPacked, D>(p, v, head, r))[i % (D / 2)] = 0;
  }
  if (t < 64 && row0 + t >= 0 && row0 + t < Nq)
    p.lse[lse_at<kPacked>(p, v, head, row0 + t)] = -INFINITY;
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
