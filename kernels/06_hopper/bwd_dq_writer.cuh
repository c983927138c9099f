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
// split) in global memory: K block j writes once the counter holds j / S and then sets it to
// j / S + 1. The first of a split stores instead of adding (it visits every Q block the later ones
// do), so the splits need no zeroing. Every element of every split is the same sum in the same
// order on every run, and the convert pass sums the splits in order.
#pragma once

#include <cstdint>

#include "bwd_schedule.cuh"
#include "common/sm80/mma.cuh"
#include "common/sm90/bulk.cuh"
#include "common/sm90/sync.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

template <class T, int D, bool kDeterministic>
__device__ void write_dq(const BwdParams& p, const BwdSmem<T, D>& sm, int j, int head) {
  constexpr int Br = BwdTraits<D>::Br, Bc = BwdTraits<D>::Bc;
  const QRange qr = q_range<Br, Bc, kDeterministic>(p.b, j);
  // This block's split, and its place in the split's chain of turns.
  const int S = kDeterministic ? p.b.dq_splits : 1, split = j % S, rank = j / S;
  float* accum = p.b.dQ_accum + split * p.b.split_stride + static_cast<int64_t>(head) * p.b.Nq * D;
  for (int n = 0; n < qr.count(); ++n) {
    const int i = qr.block(n), buf = n % 2;
    sm90::mbar_wait(sm.dq_full + buf, (n / 2) & 1);
    int* turn = kDeterministic
                    ? p.dq_turn + (static_cast<int64_t>(head) * p.q_blocks + i) * S + split
                    : nullptr;
    if constexpr (kDeterministic) {
      // The K blocks of a head start in the order of blockIdx.x, and a block waits only for
      // smaller ones, which never wait for a larger one: the wait always ends.
      while (sm90::load_acquire(turn) != rank) {
      }
      sm90::fence_proxy_async_global();  // the earlier blocks' additions, seen by this one's
    }
    const int rows = min(Br, p.b.Nq - i * Br);  // the last Q block may be ragged
    float* dst = accum + static_cast<int64_t>(i) * Br * D;
    const uint32_t bytes = static_cast<uint32_t>(rows * D * 4);
    if (kDeterministic && rank == 0)  // the split's first writer of these rows
      sm90::bulk_store(dst, smem_addr(sm.dq(buf)), bytes);
    else
      sm90::bulk_reduce_add_f32(dst, smem_addr(sm.dq(buf)), bytes);
    sm90::bulk_commit();
    if constexpr (kDeterministic) {
      sm90::bulk_wait_all();  // the addition is done in memory, not only read from shared memory
      sm90::fence_proxy_async_global();
      sm90::store_release(turn, rank + 1);
    } else {
      sm90::bulk_wait_read();
    }
    sm90::mbar_arrive(sm.dq_empty + buf);
  }
  sm90::bulk_wait_all();  // shared memory must outlive the copies
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
