// A consumer warpgroup of the backward: 64 keys of the block's K block j (keys 64w .. 64w + 63 for
// warpgroup w), their dK_w and dV_w accumulators in registers over every Q block it visits.
//
// Per Q block i (stage s of the producer's ring):
//
//   S^T  = K_w Q_i^T              wgmma, both operands in shared memory   (64 x Br)
//   dP^T = V_w dO_i^T             wgmma, both in shared memory            (64 x Br)
//   P^T  = exp2(S^T scale log2e - LSE2_i)          fp32, masked on the diagonal and the tail
//   dS^T = P^T (dP^T - D_i)                         from the fp32 P, rounded once
//   dS^T -> shared memory
//   dV_w += P^T dO_i              wgmma, P^T from registers               (64 x d)
//   dK_w += dS^T Q_i              wgmma, dS^T from registers              (64 x d)
//   both warpgroups meet: all of dS^T is in shared memory (kDsReady)
//   dQ_i piece = dS K_j           wgmma, dS^T and K in shared memory, both MN-major (64 x 64)
//   dV, dK done: release stage s (q_empty[s])
//   dQ_i piece -> staging buffer n % 2 (fp32, the accumulator's layout) -> the dQ writer
//   both warpgroups meet: their dQ products are done with dS^T (kDsFree; at d = 128, where the
//   steps take turns on two dS^T buffers, once after the last step instead: a warpgroup writes
//   buffer n % 2 at step n after kDsReady of step n - 1, which the other passes only once its dQ
//   product of step n - 2, the last reader of that buffer, is done)
//
// After the last Q block, the epilogue: dK_w * scale, dV_w -> shared memory (over K_j, V_j) ->
// bulk tensor stores.
#pragma once

#include <cmath>
#include <cstdint>

#include "bwd_schedule.cuh"
#include "bwd_scores.cuh"
#include "common/sm80/mma.cuh"
#include "common/sm80/tiles.cuh"
#include "common/sm90/bulk.cuh"
#include "common/sm90/sync.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/wgmma.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

template <class T, int D, bool kDeterministic, bool kPacked>
struct Consumer {
  using Tr = BwdTraits<D>;
  static constexpr int Br = Tr::Br, Bc = Tr::Bc, S = Tr::kStages;
  static constexpr int NS = Br / 2;  // S^T (and dP^T) accumulators per thread: 64 x Br over 128
  static constexpr int NA = Br / 4;  // P^T (dS^T) as 16-bit pairs: the A operand, Br/16 k-steps
  static constexpr int NKV = D / 2;  // dK_w (dV_w) accumulators: 64 x D over 128 threads
  static constexpr int NQ = 32;      // the dQ piece: 64 x 64 over 128 threads
  static constexpr int kDsBuffers = Tr::kDsBuffers;
  // The masked copy's form (bwd_scores.cuh): by constants but in the packed deterministic kernel at
  // d = 64, where that form spilled 4 bytes and the other none (and the reverse in the dense one).
  static constexpr bool kMaskByConstants = !(D == 64 && kDeterministic && kPacked);

  const BwdParams& p;
  const BwdSmem<T, D>& sm;
  int w;  // consumer warpgroup: keys 64w .. 64w + 63 of the block
  int t;  // thread within the warpgroup
  int j, kv_head;

  float dk[NKV], dv[NKV];

  // Accumulator element e of this thread (sm90/wgmma.cuh): row 16 (t/32) + g + 8 ((e>>1)&1),
  // column 8 (e>>2) + 2 q + (e&1), where lane = 4 g + q.
  __device__ int row_of(int e) const { return frag_row(t, e); }
  __device__ int col_of(int e) const { return frag_col(t, e); }

  // The block's band and rows: the problem's, or its sequence's (bwd_schedule.cuh).
  __device__ Where<kPacked> at() const { return {p, sm.place}; }

  __device__ void run() {
    const QRange qr = q_range<Br, Bc, kDeterministic>(at().band(), p.b.group, j);
#pragma unroll
    for (int e = 0; e < NKV; ++e) dk[e] = dv[e] = 0.f;
    sm90::mbar_wait(sm.kv_full, 0);
    // The producer's order (QRange::next), the step's Q block and head worked out from the step
    // count (QRange::at): a division costs these threads fewer registers than carrying the
    // step's head along. The walk ends when the Q block (walking down) or the head (walking up)
    // runs past the range, so that the number of steps is not held too (at d = 64, where S^T,
    // dP^T, dK and dV take 192 of the 240 registers, it was one register too many).
    if (qr.count() > 0) {
      for (int n = 0;; ++n) {
        const QStep st = qr.at(n);
        if (qr.down ? st.i < qr.begin : st.h == qr.group) break;
        step(st.i, n);
      }
    }
    // Both warpgroups' last dQ products are done with K_j before the epilogue writes over it.
    if constexpr (kDsBuffers > 1) sm90::named_sync(kDsFree, 256);
    epilogue();
  }

 private:
  // S^T = X_w Y^T (X = K or V: this warpgroup's 64 rows; Y = Q_i or dO_i): K-major operands,
  // D/16 steps of k16 across the D/64 column blocks.
  __device__ void issue_scores(float (&acc)[NS], const T* x, const T* y) const {
    const uint64_t xd = sm90::smem_desc(smem_addr(x) + w * 64 * 128);
    const uint64_t yd = sm90::smem_desc(smem_addr(y));
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t blk = kk / 4, step = (kk % 4) * 32;
      sm90::wgmma_ss<T, Br>(acc, sm90::desc_advance(xd, blk * Bc * 128 + step),
                            sm90::desc_advance(yd, blk * Br * 128 + step), kk > 0);
    }
  }

  // acc += A Y (A = P^T or dS^T from registers, 64 x Br; Y = dO_i or Q_i, Br x D, MN-major).
  __device__ void issue_kv(float (&acc)[NKV], const uint32_t (&a)[NA], const T* y) const {
    const uint64_t yd = sm90::smem_desc(smem_addr(y), Br * 128);
#pragma unroll
    for (int kk = 0; kk < Br / 16; ++kk) {
      const uint32_t ak[4] = {a[4 * kk], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3]};
      sm90::wgmma_rs<T, D>(acc, ak, sm90::desc_advance(yd, kk * 16 * 128), 1);
    }
  }

  // This warpgroup's 64 x 64 piece of dQ_i = dS K_j, Bc/16 steps of k16. dS^T [Bc][Br] and K
  // [Bc][D] are both stored k-major-by-rows, i.e. MN-major for this product. At d = 128 the
  // piece is the 64 columns 64w.. of K (its column block w) for all 64 rows of dS; at d = 64 it is
  // the 64 query columns 64w.. of dS^T (its column block w) for all 64 columns of K.
  __device__ void issue_dq(float (&acc)[NQ], int n) const {
    const uint64_t ad = sm90::smem_desc(
        smem_addr(sm.dS(n % kDsBuffers)) + (Br == 128 ? w * Bc * 128 : 0), Bc * 128);
    const uint64_t bd =
        sm90::smem_desc(smem_addr(sm.k()) + (D == 128 ? w * Bc * 128 : 0), Bc * 128);
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk)
      sm90::wgmma_ss_tt<T, 64>(acc, sm90::desc_advance(ad, kk * 16 * 128),
                               sm90::desc_advance(bd, kk * 16 * 128), kk > 0);
  }

  __device__ void step(int i, int n) {
    const int s = n % S;
    sm90::mbar_wait(sm.q_full + s, (n / S) & 1);
    const T* q = sm.q(s);
    const T* dO = sm.dO(s);

    float st[NS], dp[NS];
    sm90::wgmma_fence();
    issue_scores(st, sm.k(), q);
    sm90::wgmma_commit();
    issue_scores(dp, sm.v(), dO);
    sm90::wgmma_commit();

    sm90::wgmma_wait<1>();  // S^T is done; dP^T may still run
    sm90::pin(st);
    if (at().band().cuts(i * Br, Br, j * Bc, Bc))
      probabilities<true, Br, kMaskByConstants>(st, sm.lse2(s), at().band(), p.b.scale_log2,
                                                j * Bc + 64 * w, i, t);
    else
      probabilities<false, Br>(st, sm.lse2(s), at().band(), p.b.scale_log2, j * Bc + 64 * w, i, t);

    sm90::wgmma_wait<0>();
    sm90::pin(dp);
    // dS^T = P^T (dP^T - D), from the fp32 P; then both to 16-bit pairs (A operands).
    const float* dd = sm.d(s);
#pragma unroll
    for (int e = 0; e < NS; e += 2) {
      const float2 d2 = *reinterpret_cast<const float2*>(dd + col_of(e));
      dp[e] = st[e] * (dp[e] - d2.x);
      dp[e + 1] = st[e + 1] * (dp[e + 1] - d2.y);
    }
    uint32_t pa[NA], dsa[NA];
#pragma unroll
    for (int e = 0; e < NS; e += 2) {
      pa[e / 2] = ElemTraits<T>::pack(st[e], st[e + 1]);
      dsa[e / 2] = ElemTraits<T>::pack(dp[e], dp[e + 1]);
    }

    // dS^T into shared memory for the dQ products (the last reader of this buffer is done: see
    // the head of this file).
    const uint32_t ds_tile = smem_addr(sm.dS(n % kDsBuffers));
#pragma unroll
    for (int e = 0; e < NS; e += 2) {
      const int r = 64 * w + row_of(e), c = col_of(e);
      st_shared_u32(ds_tile + (c / 64) * Bc * 128 + sm90::swizzle128_offset(r, c % 64), dsa[e / 2]);
    }
    sm90::fence_proxy_async();  // ordinary stores, read next by the tensor cores

    sm90::wgmma_fence();
    issue_kv(dv, pa, dO);
    issue_kv(dk, dsa, q);
    sm90::wgmma_commit();

    sm90::named_sync(kDsReady, 256);  // all of dS^T is in shared memory
    float dq[NQ];
    issue_dq(dq, n);
    sm90::wgmma_commit();

    sm90::wgmma_wait<1>();  // dV, dK done: Q_i, dO_i, LSE2_i, D_i are free
    sm90::pin(dv);
    sm90::pin(dk);
    sm90::mbar_arrive(sm.q_empty + s);
    sm90::wgmma_wait<0>();
    sm90::pin(dq);
    stage_dq(dq, n);
    // One buffer: both warpgroups' dQ products are done with dS^T (and K_j): the next step may
    // rewrite it, the epilogue may write over K_j.
    if constexpr (kDsBuffers == 1) sm90::named_sync(kDsFree, 256);
  }

  // The dQ piece into staging buffer n % 2, in the accumulator's layout (row r, column c at
  // r * D + dq_accum_col(r, c)), then handed to the dQ writer.
  __device__ void stage_dq(const float (&dq)[NQ], int n) const {
    const int buf = n % 2;
    sm90::mbar_wait(sm.dq_empty + buf, ((n / 2) & 1) ^ 1);  // the copy of step n - 2 has read it
    const int r0 = Br == 128 ? 64 * w : 0, c0 = D == 128 ? 64 * w : 0;
    const uint32_t tile = smem_addr(sm.dq(buf));
#pragma unroll
    for (int e = 0; e < NQ; e += 2) {
      const int r = r0 + row_of(e), c = c0 + col_of(e);
      st_shared_f32x2(tile + (r * D + bwd::dq_accum_col(r, c)) * 4, dq[e], dq[e + 1]);
    }
    sm90::fence_proxy_async();
    sm90::mbar_arrive(sm.dq_full + buf);
  }

  // dK_w = scale dS^T Q and dV_w = P^T dO as T, over K_j and V_j (free: the last step ended on
  // kDsFree), then out by bulk tensor stores, which clip rows past Nk (a packed batch's: past its
  // sequence's keys). A block whose keys no query sees (a sequence with no query rows) writes 0.
  __device__ void epilogue() {
    const uint32_t k_tile = smem_addr(sm.k()), v_tile = smem_addr(sm.v());
#pragma unroll
    for (int e = 0; e < NKV; e += 2) {
      const int r = 64 * w + row_of(e), c = col_of(e);
      const uint32_t at = (c / 64) * Bc * 128 + sm90::swizzle128_offset(r, c % 64);
      st_shared_u32(k_tile + at, ElemTraits<T>::pack(dk[e] * p.b.scale, dk[e + 1] * p.b.scale));
      st_shared_u32(v_tile + at, ElemTraits<T>::pack(dv[e], dv[e + 1]));
    }
    sm90::fence_proxy_async();
    sm90::named_sync(kEpilogue + w, 128);
    if (t == 0) {
      const CUtensorMap* dk_map = at().map(kMapDK);
      const CUtensorMap* dv_map = at().map(kMapDV);
      if constexpr (kPacked) {  // the sequence's maps, made by the map kernel (seq_maps.cuh)
        sm90::tensormap_acquire(dk_map);
        sm90::tensormap_acquire(dv_map);
      }
      for (int blk = 0; blk < D / 64; ++blk) {
        const int e = blk * Bc * 64 + 64 * w * 64;  // elements
        sm90::tma_store_3d(dk_map, 64 * blk, j * Bc + 64 * w, kv_head, sm.k() + e);
        sm90::tma_store_3d(dv_map, 64 * blk, j * Bc + 64 * w, kv_head, sm.v() + e);
      }
      sm90::bulk_commit();
      sm90::bulk_wait_read();
    }
  }
};

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
