// recompute's second kernel: dQ by an outer loop over Q blocks, no atomics (chapter 16.3.2 without
// storing dS: S and dP are simply recomputed, which is what makes this rung cost 7 matmuls).
//
// One CTA owns Br queries of one query head (grouped heads: it reads K/V head h / group), keeps Q_i, dO_i in shared memory and dQ_i in registers for
// the whole loop, and streams the K, V blocks that the queries see:
//
//   S    = Q_i K_j^T                  P  = exp2(S * scale*log2e - LSE2_i)      (masked -> 0)
//   dP   = dO_i V_j^T                 dS = P * (dP - D_i)
//   dQ_i += dS K_j                    dQ = scale * dQ_i, cast, stored once at the end
//
// Tiles and warps (Br = 128 queries per CTA at d = 64 and 128, 64 at d = 256; Bc = 64 keys per
// step, 8 warps). The warp grids depend on the head dim:
//
//   d = 128: the outer-K kernel's grids with the roles of queries and keys swapped. Every warp
//   tile is 32 wide in both directions, so a 16 x 16 fragment read from shared memory feeds 4
//   mma's, not 2 as with 16-query warps.
//
//     S, dP (Br x Bc)            dQ_i (Br x d)
//     queries x keys: 4 x 2      queries x d: 4 x 2, 32 x d/2 each, accumulated in registers
//     +-----+-----+              +---------+---------+
//     | w0  | w4  |  32 x 32     | w0      | w4      |
//     | w1  | w5  |  each        | w1      | w5      |
//     | w2  | w6  |              | w2      | w6      |
//     | w3  | w7  |              | w3      | w7      |
//     +-----+-----+              +---------+---------+
//
//   dS, rounded to T, goes through shared memory (swizzled, stmatrix on sm_90), because the warps
//   that multiply it by K_j own other columns of dQ_i. Two barriers per step: one when K_j, V_j
//   have landed (which also frees dS and the buffers of step j-1), one when dS is written.
//
//   d = 64: 8 x 1 grids, 16 queries per warp across all Bc keys and all d columns of dQ_i. A
//   warp's dS rows are its own dQ rows, so dS goes from the score accumulators straight into the
//   A fragments of dS K_j (C -> A in registers): no dS in shared memory and one barrier per step.
//   With only d/16 = 4 k-steps per score tile, the wider tiles' saving in ldmatrix did not pay
//   for the round trip of dS through shared memory (docs/perf.md, backward step 10).
//
//   d = 256: Br = 64 queries, 2 x 4 grids (32 x 16 of S and dP, 32 x 64 of dQ_i: 64 registers,
//   where 128 queries would take 128 beside S and dP, and Q_i, dO_i alone 128 KiB), dS through
//   shared memory as at d = 128.
//
// Shared memory: Q_i, dO_i, 2 x K_j, 2 x V_j (cp.async one step ahead), and dS (Br x Bc) where it
// is shared: 144 KiB at d = 128, 64 KiB at d = 64, 200 KiB at d = 256.
//
// Packed batches (common/packed.h): dq_outer_q_packed_kernel, the same body on a grid of the
// longest sequence's Q blocks x (sequence, query head); a CTA past its sequence's rows returns at
// once, the others run on their sequence's rows (stride H d for Q, dO, dQ; Hkv d for K, V),
// lengths and band, and read and write nothing outside it.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/fa2_bwd/params.h"
#include "common/packed.h"
#include "common/smem_opt_in.h"
#include "common/sm80/mma.cuh"
#include "common/sm80/tiles.cuh"
#include "common/sm90/bulk.cuh"
#include "core/cuda_check.h"

namespace flashlab::cuda::bwd {

template <int kD>
struct OuterQTraits {
  static constexpr int Br = kD == 256 ? 64 : 128;  // d = 256: see the picture above
  static constexpr int Bc = 64;
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static_assert(kD == 64 || kD == 128 || kD == 256, "head dims 64, 128 and 256");
  static_assert(Br <= kRowPad && kRowPad % Br == 0, "LSE2 and D are padded for whole blocks");

  // S, dP: queries x keys.
  static constexpr int kSWarpRows = kD == 64 ? 8 : kD == 128 ? 4 : 2;
  static constexpr int kSRows = Br / kSWarpRows;             // 16 or 32 queries
  static constexpr int kSCols = Bc / (kWarps / kSWarpRows);  // 64, 32 or 16 keys
  static constexpr int kQWarpRows = kSWarpRows;              // dQ: queries x d
  static constexpr int kQRows = Br / kQWarpRows;             // 16 or 32 queries
  static constexpr int kQCols = kD / (kWarps / kQWarpRows);  // d, d/2 or d/4
  static_assert(kSRows % 16 == 0 && kSCols % 16 == 0 && kQRows % 16 == 0 && kQCols % 16 == 0,
                "warp tiles are made of 16 x 16 pieces");
  // A warp whose score tile spans all Bc keys owns the same queries in dQ_i: dS stays in its
  // registers.
  static constexpr bool kDsInRegisters = kSCols == Bc;

  static constexpr int kTileQ = Br * kD;
  static constexpr int kTileKV = Bc * kD;
  static constexpr int kTileS = kDsInRegisters ? 0 : Br * Bc;
  static constexpr size_t kSmemBytes = (2 * kTileQ + 4 * kTileKV + kTileS) * 2;
  static_assert(kSmemBytes <= 227 * 1024, "more shared memory than a block can have");
};

template <class T, int kD, bool kPacked>
__device__ __forceinline__ void dq_outer_q_body(const BwdParams& p) {
  using Tr = OuterQTraits<kD>;
  constexpr int Br = Tr::Br, Bc = Tr::Bc, kThreads = Tr::kThreads;
  constexpr int kSM = Tr::kSRows / 16, kSN = Tr::kSCols / 8;  // m16 and n8 tiles of S, dP
  constexpr int kQM = Tr::kQRows / 16, kQN = Tr::kQCols / 8;  // ... of dQ_i

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sdO = sQ + Tr::kTileQ;
  T* sK = sdO + Tr::kTileQ;       // [2][Bc x d]
  T* sV = sK + 2 * Tr::kTileKV;   // [2][Bc x d]
  T* sdS = sV + 2 * Tr::kTileKV;  // [Br x Bc], unless dS stays in registers

  // Q block. Causal: the last blocks see the most keys, so they are launched first; the light
  // ones then fill the GPU at the end instead of one long block running alone.
  const int i =
      p.causal ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
  const int64_t bh = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, qd = lane % 4;  // fragment row group, column quad (mma.cuh)
  const int q0 = i * Br;
  // This warp's place in each warp grid.
  const int s_row0 = (warp % Tr::kSWarpRows) * Tr::kSRows;  // queries of its S, dP tile
  const int s_col0 = (warp / Tr::kSWarpRows) * Tr::kSCols;  // keys of it
  const int q_row0 = (warp % Tr::kQWarpRows) * Tr::kQRows;
  const int q_col0 = (warp / Tr::kQWarpRows) * Tr::kQCols;
  // This lane's ldmatrix / stmatrix offsets at those origins (sm80/tiles.cuh).
  const Ldsm<Frag::a_rowmajor, kD> ld_s_a(s_row0, 0);     // Q_i, dO_i rows (queries) of S, dP
  const Ldsm<Frag::b_nk, kD> ld_s_b(s_col0, 0);           // K_j, V_j rows (keys) of S, dP
  const Ldsm<Frag::b_kn, kD> ld_q_b(0, q_col0);           // K_j columns of dQ_i
  const Ldsm<Frag::a_rowmajor, Bc> ld_q_a(q_row0, 0);     // dS rows (queries) of dQ_i (smem)
  const Ldsm<Frag::a_rowmajor, Bc> st_s(s_row0, s_col0);  // stmatrix of dS: the A map (smem)
  const uint32_t aQ = smem_addr(sQ), adO = smem_addr(sdO), adS = smem_addr(sdS);

  // Dense: the problem's rows and band. Packed: blockIdx.y is (sequence, query head); the
  // sequence's own rows, lengths and band.
  int Nq = p.Nq, Nk = p.Nk;
  Band band = p.band;
  int64_t q_stride = kD, kv_stride = kD;  // elements between two rows
  int64_t q_base, kv_base, lse_base;      // row 0 of this head in Q, dO, dQ; K, V; LSE2, D
  if constexpr (kPacked) {
    const int b = static_cast<int>(blockIdx.y) / p.H;
    const int64_t h = static_cast<int>(blockIdx.y) - b * p.H;
    const SeqRows sr = seq_rows(p.cu_q, p.cu_k, b);
    if (q0 >= sr.nq) return;
    Nq = sr.nq;
    Nk = sr.nk;
    band = seq_band(p.band, Nq, Nk);
    q_stride = static_cast<int64_t>(p.H) * kD;
    kv_stride = static_cast<int64_t>(p.Hkv) * kD;
    q_base = sr.q0 * q_stride + h * kD;
    kv_base = sr.k0 * kv_stride + (h / p.group) * kD;
    lse_base = h * p.lse_rows + bwd_packed_lse_start(sr.q0, b);
  } else {
    const int64_t kvh = static_cast<int>(blockIdx.y) / p.group;  // grouped heads: its K/V head
    q_base = bh * p.Nq * kD;
    kv_base = kvh * p.Nk * kD;
    lse_base = bh * p.Nq_pad;
  }
  const T* Q = static_cast<const T*>(p.Q) + q_base;
  const T* K = static_cast<const T*>(p.K) + kv_base;
  const T* V = static_cast<const T*>(p.V) + kv_base;
  const T* dO = static_cast<const T*>(p.dO) + q_base;

  // LSE2 and D of this thread's S rows (s_row0 + 16m + g + 8h) stay in registers.
  float lse2[kSM][2], dd[kSM][2];
#pragma unroll
  for (int m = 0; m < kSM; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = lse_base + q0 + s_row0 + 16 * m + g + 8 * h;  // padded: in bounds
      lse2[m][h] = p.LSE2[r];
      dd[m][h] = p.D[r];
    }

  // The K blocks any row of this block sees: from the window's left side (0 without one) to the
  // causal diagonal or the window's right side (common/band.h).
  const BlockRange kr = band.k_blocks(i, Br, Bc);
  const int n_begin = kr.begin, n_end = kr.end;

  float acc_dQ[kQM][kQN][4] = {};

  if (n_end > n_begin) {
    load_tile_async<Br, kD, kThreads>(sQ, Q, q0, Nq, q_stride);
    load_tile_async<Br, kD, kThreads>(sdO, dO, q0, Nq, q_stride);
    load_tile_async<Bc, kD, kThreads>(sK, K, n_begin * Bc, Nk, kv_stride);
    load_tile_async<Bc, kD, kThreads>(sV, V, n_begin * Bc, Nk, kv_stride);
    cp_async_commit();
  }

  for (int jb = n_begin, buf = 0; jb < n_end; ++jb, buf ^= 1) {
    // K_jb, V_jb have landed, and every warp is done with buffer buf^1 and with dS.
    cp_async_wait<0>();
    __syncthreads();
    if (jb + 1 < n_end) {
      load_tile_async<Bc, kD, kThreads>(sK + (buf ^ 1) * Tr::kTileKV, K, (jb + 1) * Bc, Nk,
                                        kv_stride);
      load_tile_async<Bc, kD, kThreads>(sV + (buf ^ 1) * Tr::kTileKV, V, (jb + 1) * Bc, Nk,
                                        kv_stride);
    }
    cp_async_commit();
    const uint32_t aKj = smem_addr(sK + buf * Tr::kTileKV);
    const uint32_t aVj = smem_addr(sV + buf * Tr::kTileKV);
    const int key0 = jb * Bc;

    // ---- S = Q_i K_j^T and dP = dO_i V_j^T on this warp's kSRows queries x kSCols keys ----
    // Element e of n8 tile n of m16 tile m: query row s_row0 + 16m + g (+8 for e >= 2), key
    // column s_col0 + 8n + 2qd (+1 for odd e).
    auto scores = [&](float(&acc)[kSM][kSN][4], uint32_t sA, uint32_t sB) {
      score_tile<T, kD>(acc, ld_s_a, sA, ld_s_b, sB);
    };
    float s[kSM][kSN][4] = {};
    scores(s, aQ, aKj);
    float dp[kSM][kSN][4] = {};
    scores(dp, adO, aVj);

    // ---- P = exp2(S * scale*log2e - LSE2), dS = P * (dP - D), rounded to T ----
    // Two copies of the loop: the masked one runs only on tiles that cross the causal diagonal
    // or the end of the keys.
    uint32_t ds[kSM][kSN][2];  // dS as T pairs: [0] row g, [1] row g + 8
    auto softmax_ds = [&](auto masked) {
#pragma unroll
      for (int m = 0; m < kSM; ++m)
#pragma unroll
        for (int n = 0; n < kSN; ++n) {
          float v[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float pv = fast_exp2(fmaf(s[m][n][e], p.scale_log2, -lse2[m][e / 2]));
            if constexpr (decltype(masked)::value) {
              const int query = q0 + s_row0 + 16 * m + g + (e / 2) * 8;
              const int key = key0 + s_col0 + 8 * n + 2 * qd + e % 2;
              if (key >= Nk || !band.sees(query, key)) pv = 0.f;
            }
            v[e] = pv * (dp[m][n][e] - dd[m][e / 2]);
          }
          ds[m][n][0] = ElemTraits<T>::pack(v[0], v[1]);
          ds[m][n][1] = ElemTraits<T>::pack(v[2], v[3]);
        }
    };
    const bool mask_tile = band.cuts(q0, Br, key0, Bc);
    if (mask_tile) {
      softmax_ds(std::true_type{});
    } else {
      softmax_ds(std::false_type{});
    }

    // ---- dQ_i += dS K_j: this warp's kQRows queries x kQCols columns; k runs over the Bc keys ----
    // A 16 x 16 piece of dS (n8 tiles n, n+1; rows g and g+8) holds its values where an A
    // fragment wants them.
    auto ds_piece = [&](uint32_t(&a)[4], int m, int n) {
      a[0] = ds[m][n][0];
      a[1] = ds[m][n][1];
      a[2] = ds[m][n + 1][0];
      a[3] = ds[m][n + 1][1];
    };
    auto dq_step = [&](int kk, const uint32_t(&a)[kQM][4]) {
#pragma unroll
      for (int n = 0; n < kQN / 2; ++n) {
        uint32_t b[4];
        ld_q_b(b, aKj, 16 * kk, 16 * n);
#pragma unroll
        for (int m = 0; m < kQM; ++m) mma_pair<T>(acc_dQ[m][2 * n], acc_dQ[m][2 * n + 1], a[m], b);
      }
    };
    if constexpr (Tr::kDsInRegisters) {
#pragma unroll
      for (int kk = 0; kk < Bc / 16; ++kk) {
        uint32_t a[kQM][4];
#pragma unroll
        for (int m = 0; m < kQM; ++m) ds_piece(a[m], m, 2 * kk);
        dq_step(kk, a);
      }
    } else {
      // dS into shared memory, one piece per stmatrix on sm_90, else 8 plain stores.
#pragma unroll
      for (int m = 0; m < kSM; ++m)
#pragma unroll
        for (int n = 0; n < kSN; n += 2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
          uint32_t piece[4];
          ds_piece(piece, m, n);
          sm90::stmatrix_x4(st_s.at(adS, 16 * m, 8 * n), piece);
#else
#pragma unroll
          for (int h = 0; h < 4; ++h) {
            const int r = s_row0 + 16 * m + g + 8 * (h % 2), c = s_col0 + (n + h / 2) * 8 + 2 * qd;
            st_shared_u32(adS + 2 * swizzled_offset<Bc>(r, c), ds[m][n + h / 2][h % 2]);
          }
#endif
        }
      __syncthreads();  // dS of the whole block is in shared memory
#pragma unroll
      for (int kk = 0; kk < Bc / 16; ++kk) {
        uint32_t a[kQM][4];
#pragma unroll
        for (int m = 0; m < kQM; ++m) ld_q_a(a[m], adS, 16 * m, 16 * kk);
        dq_step(kk, a);
      }
    }
  }

  // ---- dQ_i = scale * acc (zeros for rows that see no key) ----
  T* dQ = static_cast<T*>(p.dQ) + (kPacked ? q_base : bh * p.Nq * kD);
#pragma unroll
  for (int m = 0; m < kQM; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = q0 + q_row0 + 16 * m + g + 8 * h;
      if (row >= Nq) continue;
#pragma unroll
      for (int n = 0; n < kQN; ++n)
        *reinterpret_cast<uint32_t*>(dQ + static_cast<int64_t>(row) * q_stride + q_col0 + 8 * n +
                                     2 * qd) =
            ElemTraits<T>::pack(acc_dQ[m][n][2 * h] * p.scale, acc_dQ[m][n][2 * h + 1] * p.scale);
    }
}

template <class T, int kD>
__global__ void __launch_bounds__(OuterQTraits<kD>::kThreads, 1)
    dq_outer_q_kernel(const BwdParams p) {
  dq_outer_q_body<T, kD, false>(p);
}

template <class T, int kD>
__global__ void __launch_bounds__(OuterQTraits<kD>::kThreads, 1)
    dq_outer_q_packed_kernel(const BwdParams p) {
  dq_outer_q_body<T, kD, true>(p);
}

}  // namespace flashlab::cuda::bwd

namespace flashlab::cuda {

template <class T, int kD>
void launch_bwd_dq_outer_q(const BwdParams& p, void* stream) {
  using bwd::dq_outer_q_kernel;
  using bwd::dq_outer_q_packed_kernel;
  using Tr = bwd::OuterQTraits<kD>;
  // Above 48 KiB a kernel must opt in: once per instantiation (dense and packed) and device.
  FLASHLAB_CUDA_CHECK(opt_in_smem(&dq_outer_q_kernel<T, kD>, static_cast<int>(Tr::kSmemBytes)));
  FLASHLAB_CUDA_CHECK(
      opt_in_smem(&dq_outer_q_packed_kernel<T, kD>, static_cast<int>(Tr::kSmemBytes)));
  // Packed: the longest sequence's Q blocks x (sequence, query head), p.BH = B H.
  const dim3 grid((p.Nq + Tr::Br - 1) / Tr::Br, p.BH);
  const auto st = static_cast<cudaStream_t>(stream);
  if (p.cu_q != nullptr)
    dq_outer_q_packed_kernel<T, kD><<<grid, Tr::kThreads, Tr::kSmemBytes, st>>>(p);
  else
    dq_outer_q_kernel<T, kD><<<grid, Tr::kThreads, Tr::kSmemBytes, st>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda
