// The Hopper backward kernel: FA2's outer loop over K blocks (one block per K block j of a head,
// dK_j and dV_j accumulated in registers over the Q blocks that see it), with the forward's
// machinery. cuda.cu draws the pipeline.
//
//   producer warpgroup, 24 registers a thread:
//     thread 0    K_j, V_j once; then Q_i, dO_i (bulk tensor copies) and LSE2_i, D_i (plain bulk
//                 copies) into a ring of kStages stages, each completing on its `q_full` barrier
//     thread 32   the dQ writer: each staged dQ_i partial is added into the fp32 accumulator by
//                 one bulk reduce-add at L2; for hopper-deterministic only when it is this K
//                 block's turn on Q block i (a counter in global memory), so the additions into
//                 every element happen in the order j = 0, 1, 2, ... on every run
//   consumer warpgroups w = 0, 1, 240 registers a thread: keys 64w .. 64w + 63 of the block
//     S^T  = K_w Q_i^T              wgmma, both operands in shared memory   (64 x Br)
//     dP^T = V_w dO_i^T             wgmma, both in shared memory            (64 x Br)
//     P^T  = exp2(S^T scale log2e - LSE2_i)          fp32, masked on the diagonal and the tail
//     dS^T = P^T (dP^T - D_i)                         from the fp32 P, rounded once
//     dV_w += P^T dO_i              wgmma, P^T from registers               (64 x d)
//     dK_w += dS^T Q_i              wgmma, dS^T from registers              (64 x d)
//     dS^T -> shared memory; both warpgroups meet
//     dQ_i piece = dS K_j           wgmma, dS^T and K in shared memory, both MN-major (64 x 64)
//     dQ_i piece -> staging buffer n % 2 (fp32, the accumulator's layout) -> the dQ writer
//   epilogue: dK_w * scale, dV_w -> shared memory (over K_j, V_j) -> bulk tensor stores
//
// Shared memory (every 16-bit tile in 64-column blocks of 128-byte swizzled rows, 1024-aligned):
//   K, V          [D/64][Bc][64]               once per block; later dK, dV on their way out
//   Q, dO         [kStages][D/64][Br][64]
//   LSE2, D       [kStages][Br] fp32
//   dS^T          [Br/64][Bc][64]
//   dQ staging    [2][Br][D] fp32, columns permuted as in the accumulator (sm80/tiles.cuh)
//   barriers      kv_full, q_full[s], q_empty[s], dq_full[2], dq_empty[2]
// 208 KiB at d = 128, 192 KiB at d = 64.
//
// Built for sm_90a only: wgmma and setmaxnreg exist nowhere else.
#pragma once

#include <cmath>
#include <cstdint>

#include "bwd_params.h"
#include "common/sm80/mma.cuh"
#include "common/sm80/tiles.cuh"
#include "common/sm90/bulk.cuh"
#include "common/sm90/sync.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/wgmma.cuh"
#include "core/cuda_check.h"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

// Named barriers (0 is __syncthreads): the 256 consumer threads meet when dS^T is whole in shared
// memory, and when both warpgroups' dQ products are done with it; each consumer warpgroup gathers
// for its epilogue.
constexpr uint32_t kDsReady = 1;
constexpr uint32_t kDsFree = 2;
constexpr uint32_t kEpilogue = 3;  // + w

template <int D>
struct BwdLayout {
  using Tr = BwdTraits<D>;
  static constexpr int Br = Tr::Br, Bc = Tr::Bc, S = Tr::kStages;
  static constexpr int kKV = Bc * D * 2;  // bytes of one K or V tile
  static constexpr int kQ = Br * D * 2;   // one Q or dO stage
  static constexpr int kK = 0;
  static constexpr int kV = kK + kKV;
  static constexpr int kQs = kV + kKV;
  static constexpr int kdOs = kQs + S * kQ;
  static constexpr int kdS = kdOs + S * kQ;
  static constexpr int kdQ = kdS + Bc * Br * 2;
  static constexpr int kLse2 = kdQ + 2 * Br * D * 4;
  static constexpr int kD = kLse2 + S * Br * 4;
  static constexpr int kBars = kD + S * Br * 4;
  static constexpr int kBytes = kBars + (1 + 2 * S + 4) * 8;
  static constexpr int kLaunchBytes = kBytes + 1024;  // room to align the base to 1024 bytes
  static_assert(kKV % 1024 == 0 && kQ % 1024 == 0 && (Bc * Br * 2) % 1024 == 0, "1024-byte tiles");
  static_assert(kLaunchBytes <= 227 * 1024, "more shared memory than a block can have");
};

template <class T, int D>
struct BwdSmem {
  using L = BwdLayout<D>;
  unsigned char* base;
  uint64_t* kv_full;
  uint64_t* q_full;    // [kStages]
  uint64_t* q_empty;   // [kStages]
  uint64_t* dq_full;   // [2]
  uint64_t* dq_empty;  // [2]

  __device__ explicit BwdSmem(unsigned char* raw) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
    base = raw + ((1024 - (a & 1023)) & 1023);
    kv_full = reinterpret_cast<uint64_t*>(base + L::kBars);
    q_full = kv_full + 1;
    q_empty = q_full + L::S;
    dq_full = q_empty + L::S;
    dq_empty = dq_full + 2;
  }
  __device__ T* k() const { return reinterpret_cast<T*>(base + L::kK); }
  __device__ T* v() const { return reinterpret_cast<T*>(base + L::kV); }
  __device__ T* q(int s) const { return reinterpret_cast<T*>(base + L::kQs + s * L::kQ); }
  __device__ T* dO(int s) const { return reinterpret_cast<T*>(base + L::kdOs + s * L::kQ); }
  __device__ T* dS() const { return reinterpret_cast<T*>(base + L::kdS); }
  __device__ float* dq(int b) const {
    return reinterpret_cast<float*>(base + L::kdQ) + b * L::Br * D;
  }
  __device__ float* lse2(int s) const {
    return reinterpret_cast<float*>(base + L::kLse2) + s * L::Br;
  }
  __device__ float* d(int s) const { return reinterpret_cast<float*>(base + L::kD) + s * L::Br; }
};

// The Q blocks K block j visits: from the first that sees any of its keys to the last; hopper
// walks them upwards, hopper-deterministic downwards. Its K blocks take turns on each Q block in
// the order j = 0, 1, 2, ..., and walking down, every K block of a head reaches Q block i at the
// same step (the last block first, for all of them), so each turn comes right after the one
// before. Walking up, K block j would reach Q block i about j Bc / Br steps before K block 0 does
// (it starts at its diagonal) and wait for it there: under the causal mask that made the
// deterministic backward twice as slow (H200, bf16, N = 4096).
struct QRange {
  int begin, end;
  bool down;
  __device__ int count() const { return end - begin; }
  __device__ int block(int n) const { return down ? end - 1 - n : begin + n; }
};
template <int Br, int Bc, bool kDown>
__device__ QRange q_range(const ::flashlab::cuda::BwdParams& b, int j) {
  return {bwd::first_q_block(j, Bc, Br, b.offset, b.causal), (b.Nq + Br - 1) / Br, kDown};
}

// ---- producer: the loads -------------------------------------------------------------------------
template <class T, int D, bool kDeterministic>
__device__ void produce(const BwdParams& p, const BwdSmem<T, D>& sm, int j, int head) {
  using Tr = BwdTraits<D>;
  constexpr int Br = Tr::Br, Bc = Tr::Bc, S = Tr::kStages;
  const QRange qr = q_range<Br, Bc, kDeterministic>(p.b, j);
  sm90::mbar_arrive_expect_tx(sm.kv_full, 2 * Bc * D * 2);
  for (int blk = 0; blk < D / 64; ++blk) {
    sm90::tma_load_3d(sm.k() + blk * Bc * 64, &p.k_map, 64 * blk, j * Bc, head, sm.kv_full);
    sm90::tma_load_3d(sm.v() + blk * Bc * 64, &p.v_map, 64 * blk, j * Bc, head, sm.kv_full);
  }
  const int64_t rows = static_cast<int64_t>(head) * p.b.Nq_pad;
  for (int n = 0; n < qr.count(); ++n) {
    const int i = qr.block(n), s = n % S;
    sm90::mbar_wait(sm.q_empty + s, ((n / S) & 1) ^ 1);  // both warpgroups are done with it
    sm90::mbar_arrive_expect_tx(sm.q_full + s, 2 * Br * D * 2 + 2 * Br * 4);
    for (int blk = 0; blk < D / 64; ++blk) {
      sm90::tma_load_3d(sm.q(s) + blk * Br * 64, &p.q_map, 64 * blk, i * Br, head, sm.q_full + s);
      sm90::tma_load_3d(sm.dO(s) + blk * Br * 64, &p.do_map, 64 * blk, i * Br, head, sm.q_full + s);
    }
    sm90::bulk_load(sm.lse2(s), p.b.LSE2 + rows + i * Br, Br * 4, sm.q_full + s);
    sm90::bulk_load(sm.d(s), p.b.D + rows + i * Br, Br * 4, sm.q_full + s);
  }
}

// ---- the dQ writer ---------------------------------------------------------------------------------
template <class T, int D, bool kDeterministic>
__device__ void write_dq(const BwdParams& p, const BwdSmem<T, D>& sm, int j, int head) {
  constexpr int Br = BwdTraits<D>::Br, Bc = BwdTraits<D>::Bc;
  const QRange qr = q_range<Br, Bc, kDeterministic>(p.b, j);
  // hopper: one accumulator, every K block adds. hopper-deterministic: K block j adds into split
  // s = j mod S, and within a split the K blocks s, s + S, s + 2S, ... take turns (the first stores).
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
    if (kDeterministic && rank == 0)
      sm90::bulk_store(dst, smem_addr(sm.dq(buf)),
                       bytes);  // the split's first writer of these rows
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

// ---- a consumer warpgroup ----------------------------------------------------------------------
template <class T, int D, bool kDeterministic>
struct Consumer {
  using Tr = BwdTraits<D>;
  static constexpr int Br = Tr::Br, Bc = Tr::Bc, S = Tr::kStages;
  static constexpr int NS = Br / 2;  // S^T (and dP^T) accumulators per thread: 64 x Br over 128
  static constexpr int NA = Br / 4;  // P^T (dS^T) as 16-bit pairs: the A operand, Br/16 k-steps
  static constexpr int NKV = D / 2;  // dK_w (dV_w) accumulators: 64 x D over 128 threads
  static constexpr int NQ = 32;      // the dQ piece: 64 x 64 over 128 threads

  const BwdParams& p;
  const BwdSmem<T, D>& sm;
  int w;  // consumer warpgroup: keys 64w .. 64w + 63 of the block
  int t;  // thread within the warpgroup
  int j, head;

  float dk[NKV], dv[NKV];

  // Accumulator element e of this thread (sm90/wgmma.cuh): row 16 (t/32) + g + 8 ((e>>1)&1),
  // column 8 (e>>2) + 2 q + (e&1), where lane = 4 g + q.
  __device__ int row_of(int e) const { return 16 * (t / 32) + (t % 32) / 4 + 8 * ((e >> 1) & 1); }
  __device__ int col_of(int e) const { return 8 * (e >> 2) + 2 * (t % 4) + (e & 1); }

  __device__ void run() {
    const QRange qr = q_range<Br, Bc, kDeterministic>(p.b, j);
#pragma unroll
    for (int e = 0; e < NKV; ++e) dk[e] = dv[e] = 0.f;
    sm90::mbar_wait(sm.kv_full, 0);
    for (int n = 0; n < qr.count(); ++n) step(qr.block(n), n);
    epilogue();
  }

 private:
  // S^T = X_w Y^T (X = K or V: this warpgroup's 64 rows; Y = Q_i or dO_i): K-major operands,
  // D/16 steps of k16 across the D/64 column blocks.
  __device__ void issue_scores(float (&acc)[NS], const T* x, const T* y) const {
    const uint32_t xa = smem_addr(x) + w * 64 * 128, ya = smem_addr(y);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t blk = kk / 4, step = (kk % 4) * 32;
      sm90::wgmma_ss<T, Br>(acc, sm90::smem_desc(xa + blk * Bc * 128 + step),
                            sm90::smem_desc(ya + blk * Br * 128 + step), kk > 0);
    }
  }

  // acc += A Y (A = P^T or dS^T from registers, 64 x Br; Y = dO_i or Q_i, Br x D, MN-major).
  __device__ void issue_kv(float (&acc)[NKV], const uint32_t (&a)[NA], const T* y) const {
    const uint32_t ya = smem_addr(y);
#pragma unroll
    for (int kk = 0; kk < Br / 16; ++kk) {
      const uint32_t ak[4] = {a[4 * kk], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3]};
      sm90::wgmma_rs<T, D>(acc, ak, sm90::smem_desc(ya + kk * 16 * 128, Br * 128), 1);
    }
  }

  // This warpgroup's 64 x 64 piece of dQ_i = dS K_j, Bc/16 steps of k16. dS^T [Bc][Br] and K
  // [Bc][D] are both stored k-major-by-rows, i.e. MN-major for this product. At d = 128 the
  // piece is the 64 columns 64w.. of K (its column block w) for all 64 rows of dS; at d = 64 it is
  // the 64 query columns 64w.. of dS^T (its column block w) for all 64 columns of K.
  __device__ void issue_dq(float (&acc)[NQ]) const {
    const uint32_t a0 = smem_addr(sm.dS()) + (Br == 128 ? w * Bc * 128 : 0);
    const uint32_t b0 = smem_addr(sm.k()) + (D == 128 ? w * Bc * 128 : 0);
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk)
      sm90::wgmma_ss_tt<T, 64>(acc, sm90::smem_desc(a0 + kk * 16 * 128, Bc * 128),
                               sm90::smem_desc(b0 + kk * 16 * 128, Bc * 128), kk > 0);
  }

  // P^T = exp2(S^T scale log2e - LSE2) in place, 0 where a key is masked; the masked copy runs
  // only on tiles that cross the diagonal or the end of the keys. Padding queries (past Nq) have
  // LSE2 = +inf and give 0 without a test, as do rows that see no key.
  template <bool kMasked>
  __device__ void probabilities(float (&s)[NS], const float* lse2, int i) const {
    // Key k (a row here) is seen by the queries q >= k - offset, i.e. by the tile's columns
    // c >= k - offset - i Br; a key past Nk by none. Per row of the thread: the first column.
    int first_col[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = j * Bc + 64 * w + row_of(2 * r);
      first_col[r] = key >= p.b.Nk ? Br : p.b.causal ? key - p.b.offset - i * Br : 0;
    }
#pragma unroll
    for (int e = 0; e < NS; e += 2) {
      const float2 l2 = *reinterpret_cast<const float2*>(lse2 + col_of(e));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float& x = s[e + h];
        x = fast_exp2(fmaf(x, p.b.scale_log2, -(h ? l2.y : l2.x)));
        if constexpr (kMasked)
          if (col_of(e + h) < first_col[(e >> 1) & 1]) x = 0.f;
      }
    }
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
    const int key_end = j * Bc + Bc;
    if ((p.b.causal && key_end - 1 > i * Br + p.b.offset) || key_end > p.b.Nk)
      probabilities<true>(st, sm.lse2(s), i);
    else
      probabilities<false>(st, sm.lse2(s), i);

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

    // dS^T into shared memory for the dQ products (the last step's are done with it: kDsFree).
    const uint32_t ds_tile = smem_addr(sm.dS());
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
    issue_dq(dq);
    sm90::wgmma_commit();

    sm90::wgmma_wait<1>();  // dV, dK done: Q_i, dO_i, LSE2_i, D_i are free
    sm90::pin(dv);
    sm90::pin(dk);
    sm90::mbar_arrive(sm.q_empty + s);
    sm90::wgmma_wait<0>();
    sm90::pin(dq);
    stage_dq(dq, n);
    // Both warpgroups' dQ products are done with dS^T (and K_j): the next step may rewrite it,
    // the epilogue may write over K_j.
    sm90::named_sync(kDsFree, 256);
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
  // kDsFree), then out by bulk tensor stores, which clip rows past Nk.
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
      for (int blk = 0; blk < D / 64; ++blk) {
        const int at = blk * Bc * 64 + 64 * w * 64;  // elements
        sm90::tma_store_3d(&p.dk_map, 64 * blk, j * Bc + 64 * w, head, sm.k() + at);
        sm90::tma_store_3d(&p.dv_map, 64 * blk, j * Bc + 64 * w, head, sm.v() + at);
      }
      sm90::bulk_commit();
      sm90::bulk_wait_read();
    }
  }
};

// Registers per thread after setmaxnreg: 128 x 24 + 256 x 240 = 64512 of the SM's 65536.
constexpr uint32_t kProducerRegs = 24;
constexpr uint32_t kConsumerRegs = 240;

template <class T, int D, bool kDeterministic>
__global__ void __launch_bounds__(BwdTraits<D>::kThreads, 1)
    bwd_kernel(const __grid_constant__ BwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tr = BwdTraits<D>;
  extern __shared__ unsigned char smem_raw[];
  const BwdSmem<T, D> sm(smem_raw);
  const int j = blockIdx.x, head = blockIdx.y;

  if (threadIdx.x == 0) {
    sm90::mbar_init(sm.kv_full, 1);
    for (int s = 0; s < Tr::kStages; ++s) {
      sm90::mbar_init(sm.q_full + s, 1);
      sm90::mbar_init(sm.q_empty + s, 256);  // every consumer thread releases
    }
    for (int b = 0; b < 2; ++b) {
      sm90::mbar_init(sm.dq_full + b, 256);
      sm90::mbar_init(sm.dq_empty + b, 1);
    }
    sm90::mbar_fence_init();
    sm90::tma_prefetch_map(&p.q_map);
    sm90::tma_prefetch_map(&p.do_map);
    sm90::tma_prefetch_map(&p.k_map);
    sm90::tma_prefetch_map(&p.v_map);
  }
  __syncthreads();

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (wg == 0) {
    sm90::setmaxnreg_dec<kProducerRegs>();
    if (t == 0) produce<T, D, kDeterministic>(p, sm, j, head);
    if (t == 32) write_dq<T, D, kDeterministic>(p, sm, j, head);
    return;
  }
  sm90::setmaxnreg_inc<kConsumerRegs>();
  Consumer<T, D, kDeterministic> c{p, sm, wg - 1, t, j, head};
  c.run();
#endif
}

template <class T, int D, bool kDeterministic>
void launch_bwd(const BwdParams& p, cudaStream_t stream) {
  using Tr = BwdTraits<D>;
  constexpr int kSmem = BwdLayout<D>::kLaunchBytes;
  auto* kernel = &bwd_kernel<T, D, kDeterministic>;
  static const bool smem_raised = [kernel] {
    FLASHLAB_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)smem_raised;
  // blockIdx.x = K block (fastest), so a head's K blocks start in order: the deterministic turns
  // rely on it.
  const dim3 grid((p.b.Nk + Tr::Bc - 1) / Tr::Bc, p.b.BH);
  kernel<<<grid, Tr::kThreads, kSmem, stream>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
