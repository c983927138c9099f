// The producer of the backward: thread 0 of the producer warpgroup issues every load of the block.
//
//   K_j, V_j     ─TMA─▶ sK, sV          once, on kv_full
//   Q_i, dO_i    ─TMA─▶ stage s         s = n mod kStages (the n-th Q block visited), on q_full[s]
//   LSE2_i, D_i  ─bulk copy─▶ stage s   Br floats each (plain bulk copies), on the same q_full[s]
//
// A stage is refilled only after both consumer warpgroups released it on q_empty[s] (the parity
// flips each lap of the ring). The copy engine zero-fills the rows past a head's end (a packed
// batch's: its sequence's, through the sequence's maps); LSE2 and D are padded to whole blocks
// (common/fa2_bwd/params.h: per head, or per sequence of a packed batch, with +inf and 0), so
// their copies never run past the workspace or into the next sequence's rows.
#pragma once

#include <cstdint>

#include "bwd_schedule.cuh"
#include "common/sm90/sync.cuh"
#include "common/sm90/tma.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

template <class T, int D, bool kDeterministic, bool kPacked>
__device__ void produce(const BwdParams& p, const BwdSmem<T, D>& sm, int j, int kv_head) {
  using Tr = BwdTraits<D>;
  constexpr int Br = Tr::Br, Bc = Tr::Bc, S = Tr::kStages;
  const Where<kPacked> at{p, sm.place};
  const QRange qr = q_range<Br, Bc, kDeterministic>(at.band(), p.b.group, j);
  if constexpr (kPacked) {  // the sequence's maps, made by the map kernel (seq_maps.cuh)
    for (int m = kMapQ; m <= kMapV; ++m) sm90::tensormap_acquire(at.map(m));
  }
  sm90::mbar_arrive_expect_tx(sm.kv_full, 2 * Bc * D * 2);
  for (int blk = 0; blk < D / 64; ++blk) {
    sm90::tma_load_3d(sm.k() + blk * Bc * 64, at.map(kMapK), 64 * blk, j * Bc, kv_head,
                      sm.kv_full);
    sm90::tma_load_3d(sm.v() + blk * Bc * 64, at.map(kMapV), 64 * blk, j * Bc, kv_head,
                      sm.kv_full);
  }
  QStep st = qr.first();
  for (int n = 0; n < qr.count(); ++n, st = qr.next(st)) {
    const int i = st.i, s = n % S;
    const int head = kv_head * qr.group + st.h;  // the query head of this step
    sm90::mbar_wait(sm.q_empty + s, ((n / S) & 1) ^ 1);  // both warpgroups are done with it
    sm90::mbar_arrive_expect_tx(sm.q_full + s, 2 * Br * D * 2 + 2 * Br * 4);
    for (int blk = 0; blk < D / 64; ++blk) {
      sm90::tma_load_3d(sm.q(s) + blk * Br * 64, at.map(kMapQ), 64 * blk, i * Br, head,
                        sm.q_full + s);
      sm90::tma_load_3d(sm.dO(s) + blk * Br * 64, at.map(kMapDO), 64 * blk, i * Br, head,
                        sm.q_full + s);
    }
    const int64_t rows = at.lse_row(head, i, Br);
    sm90::bulk_load(sm.lse2(s), p.b.LSE2 + rows, Br * 4, sm.q_full + s);
    sm90::bulk_load(sm.d(s), p.b.D + rows, Br * 4, sm.q_full + s);
  }
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
