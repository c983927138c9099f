// recompute's second kernel: dQ by an outer loop over Q blocks, no atomics (chapter 16.3.2 without
// storing dS: S and dP are simply recomputed, which is what makes this rung cost 7 matmuls).
//
// One CTA owns Br queries of one head, keeps Q_i, dO_i and dQ_i (registers) for the whole loop and
// streams the K, V blocks that the queries see:
//
//   S    = Q_i K_j^T                  P  = exp2(S * scale*log2e - LSE2_i)      (masked -> 0)
//   dP   = dO_i V_j^T                 dS = P * (dP - D_i)
//   dQ_i += dS K_j                    dQ = scale * dQ_i, cast, stored once at the end
//
// Tiles and warps (Br = 128 queries per CTA, Bc = 64 keys per step, 8 warps):
//
//                  K_j / V_j (Bc x d, double-buffered, cp.async one step ahead)
//                  +----------+
//   Q_i, dO_i  w0  | S, dP: 16 x Bc per warp     dQ_i: 16 x d per warp (registers)
//   (Br x d)   w1  |          |
//              ..  |          |   Each warp's rows are its own: dS feeds dS K_j straight from
//              w7  |          |   registers (C -> A fragments), one __syncthreads per step.
//                  +----------+
//
// Shared memory: Q_i, dO_i, 2 x K_j, 2 x V_j = 128 KiB at d = 128, 64 KiB at d = 64.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/bwd_params.h"
#include "common/bwd_tiles.cuh"
#include "common/check.cuh"
#include "common/mma.cuh"

namespace flashlab::cuda::bwd {

// Br = 128 with 16 rows per warp; Bc = 64 keeps S and dP at 32 registers each beside the
// 16 x d dQ accumulator (64 registers at d = 128).
template <int kD>
struct OuterQTraits {
  static constexpr int Br = 128;
  static constexpr int Bc = 64;
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static_assert(Br == 16 * kWarps, "each warp owns 16 queries");
  static_assert(Br <= kRowPad && kRowPad % Br == 0, "LSE2 and D are padded for whole blocks");

  static constexpr int kTileQ = Br * kD;
  static constexpr int kTileKV = Bc * kD;
  static constexpr size_t kSmemBytes = (2 * kTileQ + 4 * kTileKV) * 2;
};

template <class T, int kD>
__global__ void __launch_bounds__(OuterQTraits<kD>::kThreads, 1)
    dq_outer_q_kernel(const BwdParams p) {
  using Tr = OuterQTraits<kD>;
  constexpr int Br = Tr::Br, Bc = Tr::Bc, kThreads = Tr::kThreads;
  constexpr int kNT = Bc / 8;  // n8 tiles across a 16 x Bc score tile

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sdO = sQ + Tr::kTileQ;
  T* sK = sdO + Tr::kTileQ;      // [2][Bc x d]
  T* sV = sK + 2 * Tr::kTileKV;  // [2][Bc x d]

  // Q block. Causal: the last blocks see the most keys, so they are launched first; the light
  // ones then fill the GPU at the end instead of one long block running alone.
  const int i =
      p.causal ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
  const int64_t bh = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, qd = lane % 4;
  const int q0 = i * Br;
  const int warp_q0 = 16 * warp;
  // This lane's ldmatrix offsets (bwd_tiles.cuh): its warp's 16 rows of Q_i and dO_i, and K_j, V_j
  // read both ways.
  const Ldsm<Frag::a_rowmajor, kD> ld_q(warp_q0, 0);
  const Ldsm<Frag::b_nk, kD> ld_kv(0, 0);
  const Ldsm<Frag::b_kn, kD> ld_k_t(0, 0);
  const uint32_t aQ = smem_addr(sQ), adO = smem_addr(sdO);

  const T* Q = static_cast<const T*>(p.Q) + bh * p.Nq * kD;
  const T* K = static_cast<const T*>(p.K) + bh * p.Nk * kD;
  const T* V = static_cast<const T*>(p.V) + bh * p.Nk * kD;
  const T* dO = static_cast<const T*>(p.dO) + bh * p.Nq * kD;

  // Each thread's two rows (g and g+8 of its warp): their LSE2 and D stay in registers.
  float lse2[2], dd[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t r = bh * p.Nq_pad + q0 + warp_q0 + g + 8 * h;  // padded: always in bounds
    lse2[h] = p.LSE2[r];
    dd[h] = p.D[r];
  }

  // Causal: the last key any row of this block sees is (last row) + offset.
  const int n_blocks = (p.Nk + Bc - 1) / Bc;
  int n_end = n_blocks;
  if (p.causal) {
    const int last = min(p.Nq - 1, q0 + Br - 1) + p.offset;
    n_end = last < 0 ? 0 : min(n_blocks, last / Bc + 1);
  }

  float acc_dQ[kD / 8][4] = {};

  if (n_end > 0) {
    load_tile_async<Br, kD, kThreads>(sQ, Q, q0, p.Nq);
    load_tile_async<Br, kD, kThreads>(sdO, dO, q0, p.Nq);
    load_tile_async<Bc, kD, kThreads>(sK, K, 0, p.Nk);
    load_tile_async<Bc, kD, kThreads>(sV, V, 0, p.Nk);
    cp_async_commit();
  }

  for (int jb = 0, buf = 0; jb < n_end; ++jb, buf ^= 1) {
    cp_async_wait<0>();
    __syncthreads();  // K_jb, V_jb landed; every warp is done with buffer buf^1
    if (jb + 1 < n_end) {
      load_tile_async<Bc, kD, kThreads>(sK + (buf ^ 1) * Tr::kTileKV, K, (jb + 1) * Bc, p.Nk);
      load_tile_async<Bc, kD, kThreads>(sV + (buf ^ 1) * Tr::kTileKV, V, (jb + 1) * Bc, p.Nk);
    }
    cp_async_commit();
    const uint32_t aKj = smem_addr(sK + buf * Tr::kTileKV);
    const uint32_t aVj = smem_addr(sV + buf * Tr::kTileKV);
    const int key0 = jb * Bc;

    // ---- S = Q_i K_j^T and dP = dO_i V_j^T (16 x Bc per warp) ----
    float s[kNT][4] = {};
    float dp[kNT][4] = {};
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t aq[4], ado[4];
      ld_q(aq, aQ, 0, kk * 16);
      ld_q(ado, adO, 0, kk * 16);
#pragma unroll
      for (int nn = 0; nn < Bc / 16; ++nn) {
        uint32_t bk[4], bv[4];
        ld_kv(bk, aKj, nn * 16, kk * 16);
        mma_pair<T>(s[2 * nn], s[2 * nn + 1], aq, bk);
        ld_kv(bv, aVj, nn * 16, kk * 16);
        mma_pair<T>(dp[2 * nn], dp[2 * nn + 1], ado, bv);
      }
    }

    // ---- P = exp2(S * scale*log2e - LSE2), dS = P * (dP - D) ----
    // Element e of n8 tile n: query row g (+8 for e >= 2), key column n*8 + 2*qd (+1 for odd e).
    // Two copies of the loop, as in the outer-K kernel: the masked one runs only on tiles that
    // cross the causal diagonal or the end of the keys, and the other has no test per element.
    auto softmax_ds = [&](auto masked) {
#pragma unroll
      for (int n = 0; n < kNT; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float pv = fast_exp2(fmaf(s[n][e], p.scale_log2, -lse2[e / 2]));
          if constexpr (decltype(masked)::value) {
            const int query = q0 + warp_q0 + g + (e / 2) * 8;
            const int key = key0 + n * 8 + 2 * qd + e % 2;
            if (key >= p.Nk || (p.causal && key > query + p.offset)) pv = 0.f;
          }
          dp[n][e] = pv * (dp[n][e] - dd[e / 2]);
        }
      }
    };
    const bool mask_tile = (p.causal && key0 + Bc - 1 > q0 + p.offset) || key0 + Bc > p.Nk;
    if (mask_tile) {
      softmax_ds(std::true_type{});
    } else {
      softmax_ds(std::false_type{});
    }

    // ---- dQ_i += dS K_j: dS from registers, K_j read transposed ----
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk) {
      uint32_t a[4];
      c_to_a<T>(a, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
      for (int nn = 0; nn < kD / 16; ++nn) {
        uint32_t b[4];
        ld_k_t(b, aKj, kk * 16, nn * 16);
        mma_pair<T>(acc_dQ[2 * nn], acc_dQ[2 * nn + 1], a, b);
      }
    }
  }

  // ---- dQ_i = scale * acc (zeros for rows that see no key) ----
  T* dQ = static_cast<T*>(p.dQ) + bh * p.Nq * kD;
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = q0 + warp_q0 + g + 8 * h;
      if (row >= p.Nq) continue;
      *reinterpret_cast<uint32_t*>(dQ + static_cast<int64_t>(row) * kD + n * 8 + 2 * qd) =
          ElemTraits<T>::pack(acc_dQ[n][2 * h] * p.scale, acc_dQ[n][2 * h + 1] * p.scale);
    }
  }
}

}  // namespace flashlab::cuda::bwd

namespace flashlab::cuda {

template <class T, int kD>
void launch_bwd_dq_outer_q(const BwdParams& p, void* stream) {
  using bwd::dq_outer_q_kernel;
  using Tr = bwd::OuterQTraits<kD>;
  static const cudaError_t opt_in = cudaFuncSetAttribute(
      dq_outer_q_kernel<T, kD>, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  FLASHLAB_CUDA_CHECK(opt_in);
  const dim3 grid((p.Nq + Tr::Br - 1) / Tr::Br, p.BH);
  dq_outer_q_kernel<T, kD>
      <<<grid, Tr::kThreads, Tr::kSmemBytes, static_cast<cudaStream_t>(stream)>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda
