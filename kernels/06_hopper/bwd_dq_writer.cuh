// The dQ writer of the backward: thread 32 of the producer warpgroup (a warp of its own, so that it
// never waits behind the loads) sends each staged dQ_i partial to the fp32 accumulator in global
// memory. The consumers hand a partial over and go on; they wait only when both staging buffers
// are still on their way out.
//
//   consumers: dQ_i piece ─▶ staging buffer b = n mod 2 ─▶ dq_full[b]
//   writer:    wait dq_full[b] ─▶ [hopper-deterministic: wait for the turn]
//              ─▶ one bulk reduce-add of the Br x D block at L2 (or a bulk store) ─▶ dq_empty[b]
//
// hopper: one accumulator, every K block adds into it, in whatever order the blocks arrive.
// hopper-deterministic: K block j adds into split j mod S (S = dq_splits), and within a split the
// K blocks j = s, s + S, s + 2S, ... take turns on each Q block, by a counter per (head, Q block,
// split) in global memory: K block j writes once the counter holds j - S + 1 (K block j - S, the
// one before it in the split, has written), or 0 if j - S does not meet that Q block (a window's
// left side, or j < S), and then sets it to j + 1. A split's first writer of a Q block stores
// instead of adding, so the splits need no zeroing. Every element of every split is the same sum in the same
// order on every run, and the convert pass sums the splits in order.
#pragma once

#include <cstdint>

#include "bwd_schedule.cuh"
#include "common/sm80/mma.cuh"
#include "common/sm90/bulk.cuh"
#include "common/sm90/sync.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

// kLean: the thread has 24 registers (kProducerRegs, bwd_kernel.cuh), and only n, j and kv_head
// live across the loop; the rest (the range, the step's Q block and head) is worked out again
// from them at each step: held across the loop and the turn's wait, it spilled at d = 64. With 32
// registers (hopper-deterministic at d = 128) the steps are counted on (QRange::next), which
// keeps the work between one turn and the next short (the two forms measured the same, within the
// spread of two runs: docs/perf.md, "The last spills of the Hopper backward").
template <class T, int D, bool kDeterministic, bool kPacked, bool kLean>
__device__ void write_dq(const BwdParams& p, const BwdSmem<T, D>& sm, int j, int kv_head) {
  constexpr int Br = BwdTraits<D>::Br, Bc = BwdTraits<D>::Bc;
  const Where<kPacked> at{p, sm.place};
  // The band's first K block for Q block i is max(0, floor((i Br + offset - left) / Bc))
  // (common/band.h: Band::k_blocks), Bc = 128 a shift.
  static_assert(Bc == 128, "the first K block by a shift");
  // This block's dQ split (hopper-deterministic), held across the loop unless kLean.
  const int held_split = kLean ? 0 : j % (kDeterministic ? p.b.dq_splits : 1);
  QRange qr = q_range<Br, Bc, kDeterministic>(at.band(), p.b.group, j);
  QStep st = qr.first();
  for (int n = 0;; ++n) {
    if constexpr (kLean) {
      qr = q_range<Br, Bc, kDeterministic>(at.band(), p.b.group, j);
      if (n >= qr.count()) break;
      st = qr.at(n);
    } else {
      if (n > 0) st = qr.next(st);
      if (n >= qr.count()) break;
    }
    const int i = st.i, buf = n % 2;
    const int head = kv_head * qr.group + st.h;  // the query head of this step
    // This block's split, and its place in the split's chain of turns.
    const int S = kDeterministic ? p.b.dq_splits : 1;
    sm90::mbar_wait(sm.dq_full + buf, (n / 2) & 1);
    // The chain of Q block i in this split: the split's K blocks that meet Q block i are the
    // first one at or past the band's first K block and every S-th after it. The counter holds
    // one past the last writer's K block (0: none yet); this block's turn comes after j - S, or
    // first of all when j - S does not meet Q block i (always j < S without a window's left side).
    const Band& band = at.band();
    const bool first = j - S < max(0, (i * Br + band.offset - band.left) >> 7);
    const int rows = min(Br, band.Nq - i * Br);  // the last Q block may be ragged
    float* dst = p.b.dQ_accum + (kLean ? j % S : held_split) * p.b.split_stride +
                 at.accum_row(head, i, Br) * D;
    const uint32_t bytes = static_cast<uint32_t>(rows * D * 4);
    int* turn = kDeterministic
                    ? p.dq_turn + at.turn_block(head, i) * S + (kLean ? j % S : held_split)
                    : nullptr;
    if constexpr (kDeterministic) {
      // A K/V head's K blocks start in order of j (block_in), and a block waits only for smaller
      // ones, which never wait for a larger one: the wait always ends. What is written after
      // the wait (dst, bytes, turn) is worked out before it, so that only those live across it.
      const int want = first ? 0 : j - S + 1;
      while (sm90::load_acquire(turn) != want) {
      }
      sm90::fence_proxy_async_global();  // the earlier blocks' additions, seen by this one's
    }
    if (kDeterministic && first)  // the split's first writer of these rows
      sm90::bulk_store(dst, smem_addr(sm.dq(buf)), bytes);
    else
      sm90::bulk_reduce_add_f32(dst, smem_addr(sm.dq(buf)), bytes);
    sm90::bulk_commit();
    if constexpr (kDeterministic) {
      sm90::bulk_wait_all();  // the addition is done in memory, not only read from shared memory
      sm90::fence_proxy_async_global();
      sm90::store_release(turn, j + 1);
    } else {
      sm90::bulk_wait_read();
    }
    sm90::mbar_arrive(sm.dq_empty + buf);
  }
  sm90::bulk_wait_all();  // shared memory must outlive the copies
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
