// FA2 backward, outer loop over K blocks (chapter 16.2): one CTA owns Bc keys of one head, keeps
// K_j and V_j in shared memory and dK_j, dV_j in registers, and walks the Q blocks that see them.
// Shared by three versions through DqMode:
//
//   none   (recompute)        S, P, dV, dP, dS, dK       4 matmuls; dQ comes from another kernel
//   atomic (atomic-dq)        ... + dQ_i += dS K_j       5 matmuls; fp32 atomicAdd (red.global.add)
//   split  (deterministic-dq) ... + split_s += dS K_j    5 matmuls; one writer per split element
//
// Grid: none and atomic launch one CTA per K block (grid.x = ceil(Nk/Bc)). split launches
// grid.x = nsplits (bwd_dq_splits: a few per head, enough to fill the GPU) and CTA s walks its
// K blocks one after another, snaking so that causal work evens out across the CTAs:
//
//   nsplits = 3, Tc = 8:   group g = 0      1        2
//                          CTA 0: j = 0  -> 5  ->  6      each K block: the whole body below,
//                          CTA 1: j = 1  -> 4  ->  7      dK_j, dV_j stored at its end;
//                          CTA 2: j = 2  -> 3             dQ partials into split s
//
// The first K block of CTA s (j = s, its smallest) stores its partials into split s; the later
// ones add into it (red.global.add). Each split element is only ever touched by one thread of one
// CTA, always in the same program order, so the sums are the same bits on every run.
//
// Per Q block i, in the paper's notation (S is Br x Bc; this kernel computes its transpose, so
// that each warp's rows are keys and dK, dV never need a cross-warp reduction):
//
//   S^T  = K_j Q_i^T                  P^T = exp2(S^T * scale*log2e - LSE2_i)   (masked -> 0)
//   dV_j += P^T dO_i                  dP^T = V_j dO_i^T
//   dS^T = P^T * (dP^T - D_i)         dK_j += dS^T Q_i
//   dQ_i += dS K_j                    (dS^T goes through shared memory: every warp needs all keys)
//
// Tiles and warps (Bc = 128 keys per K block, Br = 64 queries per step, 8 warps):
//
//            Q_i / dO_i (Br x d, double-buffered, cp.async one step ahead)
//            +------------------+
//   K_j  w0  | S^T, dP^T: 16 x Br per warp          dK_j, dV_j: 16 x d per warp (registers)
//   V_j  w1  |                  |
//  (Bc x d)  ...                |                   dQ_i = dS K_j (Br x d):
//        w7  |                  |                      +---------+---------+
//            +------------------+                      | w0      | w4      |  16 rows each,
//                                                      | w1      | w5      |  d/2 columns each
//   Shared memory: K_j, V_j, 2 x Q_i, 2 x dO_i,        | w2      | w6      |
//   dS^T (Bc x Br), 2 x (LSE2_i, D_i) -- all 16-bit    | w3      | w7      |
//   tiles swizzled (conflict-free ldmatrix).           +---------+---------+
//
// Masking: only tiles that cross the causal diagonal or the last (ragged) K block are masked;
// fully masked Q blocks are never visited (the loop starts at first_q_block), and a K block that no
// query sees skips its Q loop whole and stores zeros for dK_j, dV_j. Padding query rows have
// LSE2 = +inf (P = 0) and zero dO and D, so they contribute nothing without a test.
#pragma once

#include <cstdint>

#include "common/bwd_params.h"
#include "common/bwd_tiles.cuh"
#include "common/check.cuh"
#include "common/mma.cuh"

namespace flashlab::cuda::bwd {

// Block sizes (the same for both head dims): 8 warps, 16 keys each, give Bc = 128; Br = 64 keeps
// the two per-warp 16 x Br score tiles (S^T, dP^T) at 32 fp32 registers each, next to the
// 2 x (16 x d) dK, dV accumulators (128 registers at d = 128): the largest tiles that fit one
// thread's 255 registers without spilling. Shared memory: 145 KiB at d = 128, 81 KiB at d = 64.
template <int kD>
struct OuterKTraits {
  static constexpr int Br = 64;
  static constexpr int Bc = 128;
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static_assert(Bc == 16 * kWarps, "each warp owns 16 keys");
  static_assert(kD == 64 || kD == 128, "head dims 64 and 128");

  static constexpr int kTileKV = Bc * kD;  // elements
  static constexpr int kTileQ = Br * kD;
  static constexpr int kTileDS = Bc * Br;
  static constexpr size_t smem_bytes(DqMode mode) {
    const int elems = 2 * kTileKV + 4 * kTileQ + (mode == DqMode::none ? 0 : kTileDS);
    return elems * 2 + 4 * Br * sizeof(float);  // + 2 buffers of LSE2 and D
  }
};

template <class T, int kD, DqMode kMode>
__global__ void __launch_bounds__(OuterKTraits<kD>::kThreads, 1) outer_k_kernel(const BwdParams p) {
  using Tr = OuterKTraits<kD>;
  constexpr int Br = Tr::Br, Bc = Tr::Bc, kThreads = Tr::kThreads;
  constexpr int kNT = Br / 8;  // n8 tiles across a 16 x Br score tile
  // The k loops of S^T and dP^T stay rolled at d = 128: unrolled, the compiler hoists every
  // ldmatrix of the loop ahead of its mma's and runs out of registers (spills) beside the
  // 128 accumulator registers. At d = 64 there is room to unroll.
  [[maybe_unused]] constexpr int kScoreUnroll = kD == 128 ? 1 : kD / 16;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + Tr::kTileKV;
  T* sQ = sV + Tr::kTileKV;       // [2][Br x d]
  T* sdO = sQ + 2 * Tr::kTileQ;   // [2][Br x d]
  T* sdS = sdO + 2 * Tr::kTileQ;  // [Bc x Br], dS^T; only used when kMode != none
  float* sLSE2 = reinterpret_cast<float*>(sdS + (kMode == DqMode::none ? 0 : Tr::kTileDS));
  float* sD = sLSE2 + 2 * Br;

  const int64_t bh = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, qd = lane % 4;  // fragment row group, column quad (mma.cuh)
  const int warp_key0 = 16 * warp;        // this warp's first key inside the block

  const T* Q = static_cast<const T*>(p.Q) + bh * p.Nq * kD;
  const T* K = static_cast<const T*>(p.K) + bh * p.Nk * kD;
  const T* V = static_cast<const T*>(p.V) + bh * p.Nk * kD;
  const T* dO = static_cast<const T*>(p.dO) + bh * p.Nq * kD;
  const float* LSE2 = p.LSE2 + bh * p.Nq_pad;
  const float* D = p.D + bh * p.Nq_pad;

  const int m_end = (p.Nq + Br - 1) / Br;
  const int n_kblocks = (p.Nk + Bc - 1) / Bc;
  constexpr bool kWalk = kMode == DqMode::split;  // several K blocks per CTA; else exactly one
  const int n_split = gridDim.x;

  // The K blocks of this CTA, group by group (snake order, see the picture). The body is the same
  // code for every K block; nothing but j and `first` lives from one K block to the next. For
  // none and atomic the loop has one trip, known at compile time, and vanishes.
  for (int grp = 0; kWalk ? grp * n_split < n_kblocks : grp < 1; ++grp) {
    const int j = kWalk ? grp * n_split + (grp % 2 ? n_split - 1 - blockIdx.x : blockIdx.x)
                        : static_cast<int>(blockIdx.x);
    if (kWalk && j >= n_kblocks) continue;  // the last group may be partial (uniform per CTA)
    const bool first = grp == 0;  // split: this CTA's first K block stores, later ones add
    const int key0 = j * Bc;
    const int m_begin = first_q_block(j, Bc, Br, p.offset, p.causal);

    float acc_dK[kD / 8][4] = {};
    float acc_dV[kD / 8][4] = {};

    auto load_q_block = [&](int i, int buf) {
      load_tile_async<Br, kD, kThreads>(sQ + buf * Tr::kTileQ, Q, i * Br, p.Nq);
      load_tile_async<Br, kD, kThreads>(sdO + buf * Tr::kTileQ, dO, i * Br, p.Nq);
      load_rows_async<Br>(sLSE2 + buf * Br, LSE2 + i * Br, 0);
      load_rows_async<Br>(sD + buf * Br, D + i * Br, Br / 4);
    };

    if (m_begin < m_end) {
      load_tile_async<Bc, kD, kThreads>(sK, K, key0, p.Nk);
      load_tile_async<Bc, kD, kThreads>(sV, V, key0, p.Nk);
      load_q_block(m_begin, 0);
      cp_async_commit();
    }

    for (int i = m_begin, buf = 0; i < m_end; ++i, buf ^= 1) {
      // Block i has landed, and every warp is done with block i-1's buffers and with dS^T.
      cp_async_wait<0>();
      __syncthreads();
      if (i + 1 < m_end) load_q_block(i + 1, buf ^ 1);  // overlaps with this step's five matmuls
      cp_async_commit();

      const T* sQi = sQ + buf * Tr::kTileQ;
      const T* sdOi = sdO + buf * Tr::kTileQ;
      const float* sLSE2i = sLSE2 + buf * Br;
      const float* sDi = sD + buf * Br;

      // ---- S^T = K_j Q_i^T (16 x Br per warp) ----
      float s[kNT][4] = {};
#pragma unroll 1
      for (int kk = 0; kk < kD / 16; ++kk) {
        uint32_t a[4];
        ldsm_a_rowmajor<kD>(a, sK, warp_key0, kk * 16);
#pragma unroll
        for (int nn = 0; nn < Br / 16; ++nn) {
          uint32_t b[4];
          ldsm_b_nk<kD>(b, sQi, nn * 16, kk * 16);
          mma_pair<T>(s[2 * nn], s[2 * nn + 1], a, b);
        }
      }

      // ---- P^T = exp2(S^T * scale*log2e - LSE2), masked entries -> 0 ----
      // Element e of n8 tile n: key row g (+8 for e >= 2), query column n*8 + 2*qd (+1 for odd e).
      const bool mask_tile = (p.causal && key0 + Bc - 1 > i * Br + p.offset) || key0 + Bc > p.Nk;
#pragma unroll
      for (int n = 0; n < kNT; ++n) {
        const float2 lse2 = *reinterpret_cast<const float2*>(sLSE2i + n * 8 + 2 * qd);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float pv = fast_exp2(fmaf(s[n][e], p.scale_log2, -(e % 2 ? lse2.y : lse2.x)));
          if (mask_tile) {
            const int key = key0 + warp_key0 + g + (e / 2) * 8;
            const int query = i * Br + n * 8 + 2 * qd + e % 2;
            if (key >= p.Nk || (p.causal && key > query + p.offset)) pv = 0.f;
          }
          s[n][e] = pv;
        }
      }

      // ---- P^T rounded to T once, as the A fragments of P^T dO (16 registers instead of 32):
      // the fp32 copy dies here, which keeps d = 128 under 255 registers. dS below uses the same
      // rounded P, as a plain low-precision implementation would.
      uint32_t pa[Br / 16][4];
#pragma unroll
      for (int kk = 0; kk < Br / 16; ++kk) c_to_a<T>(pa[kk], s[2 * kk], s[2 * kk + 1]);

        // ---- dV_j += P^T dO_i: P^T straight from registers as the A operand ----
#pragma unroll
      for (int kk = 0; kk < Br / 16; ++kk) {
#pragma unroll
        for (int nn = 0; nn < kD / 16; ++nn) {
          uint32_t b[4];
          ldsm_b_kn<kD>(b, sdOi, kk * 16, nn * 16);
          mma_pair<T>(acc_dV[2 * nn], acc_dV[2 * nn + 1], pa[kk], b);
        }
      }

      // ---- dP^T = V_j dO_i^T ----
      float dp[kNT][4] = {};
#pragma unroll 1
      for (int kk = 0; kk < kD / 16; ++kk) {
        uint32_t a[4];
        ldsm_a_rowmajor<kD>(a, sV, warp_key0, kk * 16);
#pragma unroll
        for (int nn = 0; nn < Br / 16; ++nn) {
          uint32_t b[4];
          ldsm_b_nk<kD>(b, sdOi, nn * 16, kk * 16);
          mma_pair<T>(dp[2 * nn], dp[2 * nn + 1], a, b);
        }
      }

      // ---- dS^T = P^T * (dP^T - D): D is per query, i.e. per column here ----
      // pa[kk] holds P^T of n8 tiles 2kk (regs 0,1) and 2kk+1 (regs 2,3), two values per register.
#pragma unroll
      for (int n = 0; n < kNT; ++n) {
        const float2 d = *reinterpret_cast<const float2*>(sDi + n * 8 + 2 * qd);
        const float2 p_lo = ElemTraits<T>::unpack(pa[n / 2][(n % 2) * 2]);      // row g
        const float2 p_hi = ElemTraits<T>::unpack(pa[n / 2][(n % 2) * 2 + 1]);  // row g + 8
        dp[n][0] = p_lo.x * (dp[n][0] - d.x);
        dp[n][1] = p_lo.y * (dp[n][1] - d.y);
        dp[n][2] = p_hi.x * (dp[n][2] - d.x);
        dp[n][3] = p_hi.y * (dp[n][3] - d.y);
      }

      // ---- dK_j += dS^T Q_i (scaled by `scale` once, at the end) ----
#pragma unroll
      for (int kk = 0; kk < Br / 16; ++kk) {
        uint32_t a[4];
        c_to_a<T>(a, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
        for (int nn = 0; nn < kD / 16; ++nn) {
          uint32_t b[4];
          ldsm_b_kn<kD>(b, sQi, kk * 16, nn * 16);
          mma_pair<T>(acc_dK[2 * nn], acc_dK[2 * nn + 1], a, b);
        }
      }

      if constexpr (kMode != DqMode::none) {
        // ---- dS^T -> shared memory: dQ_i needs, for each query, the dS of all Bc keys ----
#pragma unroll
        for (int n = 0; n < kNT; ++n) {
          const int r = warp_key0 + g, c = n * 8 + 2 * qd;
          *reinterpret_cast<uint32_t*>(sdS + swizzled_offset<Br>(r, c)) =
              ElemTraits<T>::pack(dp[n][0], dp[n][1]);
          *reinterpret_cast<uint32_t*>(sdS + swizzled_offset<Br>(r + 8, c)) =
              ElemTraits<T>::pack(dp[n][2], dp[n][3]);
        }
        __syncthreads();

        // ---- dQ_i (partial over this K block) = dS K_j: warp (wm, wn) owns 16 rows x d/2 ----
        const int wm = warp % 4, wn = warp / 4;
        constexpr int kCols = kD / 2;
        float dq[kCols / 8][4] = {};
#pragma unroll
        for (int kk = 0; kk < Bc / 16; ++kk) {
          uint32_t a[4];
          ldsm_a_colmajor<Br>(a, sdS, kk * 16, wm * 16);  // dS = (dS^T)^T: the .trans load
#pragma unroll
          for (int nn = 0; nn < kCols / 16; ++nn) {
            uint32_t b[4];
            ldsm_b_kn<kD>(b, sK, kk * 16, wn * kCols + nn * 16);
            mma_pair<T>(dq[2 * nn], dq[2 * nn + 1], a, b);
          }
        }

        // atomic: every K block adds into the same fp32 buffer (order varies run to run).
        // split:  CTA s owns split s; its first K block stores, its later ones add. The element a
        //         thread touches depends only on (threadIdx, i), so one thread does every store and
        //         add of an element, in program order: the same sum, bit for bit, on every run.
        float* dst = p.dQ_accum + (kMode == DqMode::split ? blockIdx.x * p.split_stride : 0) +
                     bh * p.Nq * kD;
#pragma unroll
        for (int n = 0; n < kCols / 8; ++n) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = i * Br + wm * 16 + g + 8 * h;
            if (row >= p.Nq) continue;
            float* at = dst + static_cast<int64_t>(row) * kD + wn * kCols + n * 8 + 2 * qd;
            if (kMode == DqMode::atomic || (kMode == DqMode::split && !first)) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
              atomicAdd(reinterpret_cast<float2*>(at), make_float2(dq[n][2 * h], dq[n][2 * h + 1]));
#else
              atomicAdd(at, dq[n][2 * h]);
              atomicAdd(at + 1, dq[n][2 * h + 1]);
#endif
            } else {
              *reinterpret_cast<float2*>(at) = make_float2(dq[n][2 * h], dq[n][2 * h + 1]);
            }
          }
        }
      }
    }

    // ---- dK_j = scale * dS^T Q, dV_j = P^T dO: one store per key row (zeros if never visited)
    // ----
    T* dK = static_cast<T*>(p.dK) + bh * p.Nk * kD;
    T* dV = static_cast<T*>(p.dV) + bh * p.Nk * kD;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = key0 + warp_key0 + g + 8 * h;
        if (key >= p.Nk) continue;
        const int64_t at = static_cast<int64_t>(key) * kD + n * 8 + 2 * qd;
        *reinterpret_cast<uint32_t*>(dK + at) =
            ElemTraits<T>::pack(acc_dK[n][2 * h] * p.scale, acc_dK[n][2 * h + 1] * p.scale);
        *reinterpret_cast<uint32_t*>(dV + at) =
            ElemTraits<T>::pack(acc_dV[n][2 * h], acc_dV[n][2 * h + 1]);
      }
    }
    // The next K block reloads K, V, Q and dO: every warp must be done reading this one's tiles.
    if constexpr (kWalk) __syncthreads();
  }  // K blocks of this CTA
}

}  // namespace flashlab::cuda::bwd

namespace flashlab::cuda {

template <class T, int kD, DqMode kMode>
void launch_bwd_outer_k(const BwdParams& p, void* stream) {
  using bwd::outer_k_kernel;
  using Tr = bwd::OuterKTraits<kD>;
  constexpr size_t kSmem = Tr::smem_bytes(kMode);
  // Above 48 KiB a kernel must opt in; done once per instantiation.
  static const cudaError_t opt_in = cudaFuncSetAttribute(
      outer_k_kernel<T, kD, kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  FLASHLAB_CUDA_CHECK(opt_in);
  const int n_kblocks = (p.Nk + Tr::Bc - 1) / Tr::Bc;
  // split: nsplits CTAs per head walk the K blocks (bwd_dq_splits); otherwise one per K block.
  const dim3 grid(kMode == DqMode::split ? p.dq_splits : n_kblocks, p.BH);
  outer_k_kernel<T, kD, kMode><<<grid, Tr::kThreads, kSmem, static_cast<cudaStream_t>(stream)>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda
