// A consumer warpgroup of the backward at d = 256 (BwdTraits::kSplitD). At d = 64 and 128 each
// warpgroup owns 64 keys of the block and the whole head dim of their dK, dV (bwd_consumer.cuh);
// at d = 256 that would be 256 accumulator registers a thread. Here the block owns 64 keys and the
// two warpgroups split the head dim: warpgroup w holds dK_j[:, 128w ..] and dV_j[:, 128w ..]
// (64 + 64 registers). The two score tiles are computed once each, one per warpgroup, and meet in
// shared memory:
//
//   warpgroup 0                                   warpgroup 1
//   S^T  = K_j Q_i^T     (64 x 64, k = 256)       dP^T = V_j dO_i^T   (64 x 64, k = 256)
//   P^T  = exp2(S^T scale log2e - LSE2_i)         dP^T - D_i  ──▶ shared memory (fp32)
//          fp32, masked on the diagonal     ◀── kDpReady ──┘
//   dS^T = P^T (dP^T - D_i), from the fp32 P
//   P^T, dS^T ──▶ shared memory (16-bit)
//   ─────────────────────────────── kDsReady ───────────────────────────────
//   both, on their 128 columns of d (every operand from shared memory):
//     dV_w += P^T dO_i[:, 128w ..]     dK_w += dS^T Q_i[:, 128w ..]
//     release stage s (q_empty[s])
//
// dQ is not computed here: its partials, 64 x 256 fp32 a step added into an accumulator at L2,
// held this kernel near 300 TFLOP/s (docs/perf.md), and the dQ pass (bwd_dq_pass.cuh) computes
// dQ with the Q blocks outside instead, at the price of recomputing S and dP. Each warpgroup
// issues one 64 x 64 x 256 score product and two 64 x 128 x 64 products a step: the same work.
// After the last Q block, the epilogue: dK_w * scale, dV_w -> shared memory over K_j's and V_j's
// column blocks 2w, 2w + 1 -> bulk tensor stores.
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
struct ConsumerSplitD {
  using Tr = BwdTraits<D>;
  static constexpr int Br = Tr::Br, Bc = Tr::Bc, S = Tr::kStages;
  static_assert(Tr::kSplitD && Br == 64 && Bc == 64, "d = 256's blocks");
  // A step issues the next step's score product before it releases its own stage.
  static_assert(S >= 2, "the next step's stage must be another than this one's");
  static constexpr int NS = Br / 2;   // S^T (or dP^T) accumulators: 64 x 64 over 128 threads
  static constexpr int DW = D / 2;    // this warpgroup's columns of d
  static constexpr int NKV = DW / 2;  // dK_w (dV_w, dQ_w): 64 x 128 over 128 threads

  const BwdParams& p;
  const BwdSmem<T, D>& sm;
  int w;  // consumer warpgroup: columns DW w .. DW w + DW - 1 of d
  int t;  // thread within the warpgroup
  int j, kv_head;

  float dk[NKV], dv[NKV];
  float sc[NS];  // the step's S^T (warpgroup 0) or dP^T (1), issued a step ahead

  // Accumulator element e of this thread (sm90/wgmma.cuh): row 16 (t/32) + g + 8 ((e>>1)&1),
  // column 8 (e>>2) + 2 q + (e&1), where lane = 4 g + q. Both warpgroups' score tiles have this
  // layout, so thread t of warpgroup 0 finds its elements of dP^T where thread t of warpgroup 1
  // left them.
  __device__ int row_of(int e) const { return frag_row(t, e); }
  __device__ int col_of(int e) const { return frag_col(t, e); }

  __device__ Where<kPacked> at() const { return {p, sm.place}; }

  __device__ void run() {
    const QRange qr = q_range<Br, Bc, kDeterministic>(at().band(), p.b.group, j);
#pragma unroll
    for (int e = 0; e < NKV; ++e) dk[e] = dv[e] = 0.f;
    sm90::mbar_wait(sm.kv_full, 0);
    // The producer's order (QRange::next), worked out from the step.
    const int per_head = qr.end - qr.begin, count = qr.count();
    if (count > 0) issue_step_scores(0);
    for (int n = 0; n < count; ++n) {
      const int i = qr.down ? qr.end - 1 - n / qr.group : qr.begin + n % per_head;
      step(i, n, n + 1 < count);
    }
    epilogue();
  }

 private:
  // S^T = K_j Q_i^T or dP^T = V_j dO_i^T: all 64 keys, K-major operands, D/16 steps of k16
  // across the D/64 column blocks.
  __device__ void issue_scores(float (&acc)[NS], const T* x, const T* y) const {
    const uint64_t xd = sm90::smem_desc(smem_addr(x)), yd = sm90::smem_desc(smem_addr(y));
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t blk = kk / 4, step = (kk % 4) * 32;
      sm90::wgmma_ss<T, Br>(acc, sm90::desc_advance(xd, blk * Bc * 128 + step),
                            sm90::desc_advance(yd, blk * Br * 128 + step), kk > 0);
    }
  }

  // acc += A Y_w (A = P^T or dS^T [Bc][Br], K-major; Y_w = this warpgroup's column blocks 2w,
  // 2w + 1 of dO_i or Q_i, MN-major): Br/16 steps of k16.
  __device__ void issue_kv(float (&acc)[NKV], const T* a, const T* y) const {
    const uint64_t ad = sm90::smem_desc(smem_addr(a));
    const uint64_t yd = sm90::smem_desc(smem_addr(y) + 2 * w * Br * 128, Br * 128);
#pragma unroll
    for (int kk = 0; kk < Br / 16; ++kk)
      sm90::wgmma_ss_nt<T, DW>(acc, sm90::desc_advance(ad, kk * 32),
                               sm90::desc_advance(yd, kk * 16 * 128), 1);
  }

  // Warpgroup 1: dP^T - D_i into shared memory, element e of thread t at float4 (e / 4) 128 + t
  // (a warp's 32 threads write 512 contiguous bytes), then tell warpgroup 0.
  __device__ void hand_over_dp(float (&dp)[NS], int s) const {
    const float* dd = sm.d(s);
#pragma unroll
    for (int e = 0; e < NS; e += 2) {
      const float2 d2 = *reinterpret_cast<const float2*>(dd + col_of(e));
      dp[e] -= d2.x;
      dp[e + 1] -= d2.y;
    }
    float4* out = reinterpret_cast<float4*>(sm.dp());
#pragma unroll
    for (int e = 0; e < NS; e += 4)
      out[(e / 4) * 128 + t] = make_float4(dp[e], dp[e + 1], dp[e + 2], dp[e + 3]);
    sm90::named_arrive(kDpReady, 256);
  }

  // Warpgroup 0: dS^T = P^T (dP^T - D) from the fp32 P and warpgroup 1's dP^T - D; P^T and dS^T
  // to shared memory as 16-bit tiles (one 64-column block each, 128-byte swizzle).
  __device__ void write_p_ds(const float (&pt)[NS]) const {
    sm90::named_sync(kDpReady, 256);
    const float4* in = reinterpret_cast<const float4*>(sm.dp());
    uint32_t pa[NS / 2], dsa[NS / 2];
#pragma unroll
    for (int e = 0; e < NS; e += 4) {
      const float4 g = in[(e / 4) * 128 + t];
      pa[e / 2] = ElemTraits<T>::pack(pt[e], pt[e + 1]);
      pa[e / 2 + 1] = ElemTraits<T>::pack(pt[e + 2], pt[e + 3]);
      dsa[e / 2] = ElemTraits<T>::pack(pt[e] * g.x, pt[e + 1] * g.y);
      dsa[e / 2 + 1] = ElemTraits<T>::pack(pt[e + 2] * g.z, pt[e + 3] * g.w);
    }
    const uint32_t p_tile = smem_addr(sm.pt()), ds_tile = smem_addr(sm.dS());
#pragma unroll
    for (int e = 0; e < NS; e += 2) {
      const uint32_t off = sm90::swizzle128_offset(row_of(e), col_of(e));
      st_shared_u32(p_tile + off, pa[e / 2]);
      st_shared_u32(ds_tile + off, dsa[e / 2]);
    }
    sm90::fence_proxy_async();  // ordinary stores, read next by the tensor cores
  }

  // The score product of step n, S^T (warpgroup 0) or dP^T (1), once its stage has landed: the
  // operands chosen, not the code path, so that every warpgroup issues its products from the same
  // instructions.
  __device__ void issue_step_scores(int n) {
    const int s = n % S;
    sm90::mbar_wait(sm.q_full + s, (n / S) & 1);
    sm90::wgmma_fence();
    issue_scores(sc, w == 0 ? sm.k() : sm.v(), w == 0 ? sm.q(s) : sm.dO(s));
    sm90::wgmma_commit();
  }

  // Step n (Q block i): its score product was issued with the step before's products (or before
  // the loop), so that it ran while that step's dV and dK did; this step's follows its own.
  __device__ void step(int i, int n, bool next) {
    const int s = n % S;
    sm90::wgmma_wait<0>();
    sm90::pin(sc);
    if (w == 1) {
      hand_over_dp(sc, s);
    } else {
      if (at().band().cuts(i * Br, Br, j * Bc, Bc))
        probabilities<true, Br>(sc, sm.lse2(s), at().band(), p.b.scale_log2, j * Bc, i, t);
      else
        probabilities<false, Br>(sc, sm.lse2(s), at().band(), p.b.scale_log2, j * Bc, i, t);
      write_p_ds(sc);
    }
    // P^T and dS^T are whole in shared memory. The next step's writes over them wait for this
    // step's products of both warpgroups: warpgroup 0 writes after its own have completed and
    // after kDpReady, which warpgroup 1 reaches only once its own have.
    sm90::named_sync(kDsReady, 256);

    sm90::wgmma_fence();
    issue_kv(dv, sm.pt(), sm.dO(s));
    issue_kv(dk, sm.dS(), sm.q(s));
    sm90::wgmma_commit();
    if (next) {
      issue_step_scores(n + 1);
      sm90::wgmma_wait<1>();  // dV, dK done (the next scores may still run)
    } else {
      sm90::wgmma_wait<0>();
    }
    sm90::pin(dv);
    sm90::pin(dk);
    sm90::mbar_arrive(sm.q_empty + s);  // Q_i, dO_i, LSE2_i, D_i are free
  }

  // dK_w = scale dS^T Q and dV_w = P^T dO as T, over this warpgroup's column blocks of K_j and
  // V_j (no product reads them any more: the score products read all of K_j and V_j before the
  // last kDsReady), then out by bulk tensor stores, which clip rows past Nk.
  __device__ void epilogue() {
    // Nothing is in flight after the last step; the wait says so to the compiler, which cannot
    // see it through the loop's last iteration.
    sm90::wgmma_wait<0>();
    sm90::pin(dk);
    sm90::pin(dv);
    const uint32_t k_tile = smem_addr(sm.k()), v_tile = smem_addr(sm.v());
#pragma unroll
    for (int e = 0; e < NKV; e += 2) {
      const int r = row_of(e), c = DW * w + col_of(e);
      const uint32_t off = (c / 64) * Bc * 128 + sm90::swizzle128_offset(r, c % 64);
      st_shared_u32(k_tile + off, ElemTraits<T>::pack(dk[e] * p.b.scale, dk[e + 1] * p.b.scale));
      st_shared_u32(v_tile + off, ElemTraits<T>::pack(dv[e], dv[e + 1]));
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
      for (int blk = 2 * w; blk < 2 * w + 2; ++blk) {
        const int e = blk * Bc * 64;  // elements
        sm90::tma_store_3d(dk_map, 64 * blk, j * Bc, kv_head, sm.k() + e);
        sm90::tma_store_3d(dv_map, 64 * blk, j * Bc, kv_head, sm.v() + e);
      }
      sm90::bulk_commit();
      sm90::bulk_wait_read();
    }
  }
};

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
