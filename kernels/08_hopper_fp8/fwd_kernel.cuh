// The FP8 forward kernel, first correct form: the twin's block schedule and roundings on e4m3
// tensor cores (wgmma m64nNk32, fp32 accumulators), its operands the quantization pass's codes
// (quant.cuh) brought by bulk tensor copies.
//
// One CTA per (query head, Q block of Br = 128 rows): two warpgroups of 64 rows each, no producer
// warp (thread 0 issues the copies), K/V blocks of Bc = 128 keys from the last one the block sees
// down to the first (the twin's order: where P is rounded depends on the running max).
//
//   shared memory (every tile 1024-byte aligned)
//     Q8    [Br][d]           e4m3, d bytes a row: 64-byte swizzle at d = 64, 128-byte at d = 128
//     K8    [2][Bc][d]        a ring of two stages, filled with V8^T of the same block
//     V8^T  [2][d][Bc]        keys contiguous (128 bytes a row, 128-byte swizzle)
//     P8    [2 warpgroups][64][Bc]   each warpgroup's P in e4m3, 128-byte swizzle
//     barriers  q_full, kv_full[2]
//
//   per K/V block j, in each warpgroup (rows 64 w .. 64 w + 63 of the block)
//     wait kv_full[j's stage]
//     S   = Q8 K8_j^T                 wgmma e4m3, both from shared memory, d / 32 steps of k32
//     S  *= scale log2(e) sQ_i sK_j;  mask (ragged keys, the causal diagonal)
//     m'  = max(m, rowmax S);  P = 2^(S - m');  l = 2^(m - m') l + rowsum P   (fp32)
//     P8  = e4m3(2^8 P) -> shared memory; proxy fence; barrier of the warpgroup
//     O  *= 2^(m - m') sV_{j+1} / sV_j    (O is kept in units of the current block's sV: the
//                                          product then accumulates into it unscaled)
//     O  += P8 V8_j                   wgmma e4m3, both from shared memory, Bc / 32 steps of k32
//     CTA barrier; thread 0 refills the stage with block j - 2
//   O = O sV_0 / (2^8 l) -> bf16 from registers;  LSE = m ln 2 + ln l (natural log, as `hopper`)
//
// P goes through shared memory, not registers: for 8-bit types the A operand's register layout
// differs from the accumulator's (a thread holds 4 consecutive k of a row where S gives it pairs
// 8 apart), so P from registers needs a permutation -- of the registers, or, as the next step,
// of V's keys within each 16 (written so by the quantization pass), after which the accumulator
// packs into the A operand as it is. That, a producer warp with setmaxnreg, products issued
// ahead of the softmax (two S tiles in flight) and pingpong between the warpgroups are what this
// form leaves for speed (README.md).
//
// Built for sm_90a only.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "common/sm80/mma.cuh"
#include "common/sm90/bulk.cuh"
#include "common/sm90/sync.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/wgmma.cuh"
#include "core/cuda_check.h"

namespace flashlab::cuda::FLASHLAB_FOLDER::fp8_fwd {

constexpr int Br = 128, Bc = 128;  // the twin's tiles: also the blocks of the scales
constexpr int kStages = 2;
constexpr int kThreads = 256;  // two warpgroups of 64 rows
constexpr float kPShift = 256.f;  // P is rounded as 2^8 P (cpu.cpp: why)

struct FwdParams {
  CUtensorMap q_map;   // Q8 [B H][Nq][d], boxes d x Br
  CUtensorMap k_map;   // K8 [B Hkv][Nk][d], boxes d x Bc
  CUtensorMap vt_map;  // V8^T [B Hkv][d][Nk16], boxes Bc x d
  const float* sq;     // [B H][q_blocks], or one (per tensor)
  const float* sk;     // [B Hkv][k_blocks], or one
  const float* sv;
  __nv_bfloat16* o;  // [B H][Nq][d]
  float* lse;        // [B H][Nq]
  int Nq, Nk;
  int group;          // query heads per K/V head: query head (b H + h) reads K/V head (b H + h) / group
  int causal_offset;  // Nk - Nq: query i sees keys j <= i + causal_offset
  float scale_log2;   // softmax scale * log2(e)
  int q_blocks, k_blocks;
  int per_tensor;  // one scale per tensor: every block reads index 0
};

// Byte offsets in shared memory, from a 1024-aligned base.
template <int D>
struct Smem {
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + Br * D;
  static constexpr int kV = kK + kStages * Bc * D;
  static constexpr int kP = kV + kStages * D * Bc;
  static constexpr int kBars = kP + 2 * 64 * Bc;
  static constexpr int kBytes = kBars + 8 * (1 + kStages);
  static constexpr int kLaunchBytes = kBytes + 1024;  // room to align the dynamic base
  static_assert(kK % 1024 == 0 && kV % 1024 == 0 && kP % 1024 == 0, "tiles 1024-aligned");
};

// A K-major operand tile whose rows are D bytes (Q8, K8): the swizzle the copy engine wrote.
template <int D>
__device__ __forceinline__ uint64_t kmajor_desc(uint32_t addr) {
  if constexpr (D == 64)
    return sm90::smem_desc_sw64(addr);
  else
    return sm90::smem_desc(addr);
}

__device__ __forceinline__ void st_shared_u16(uint32_t addr, uint16_t v) {
  asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"(v) : "memory");
}

template <int D, bool kCausal>
__global__ void __launch_bounds__(kThreads, 1) fwd_kernel(const __grid_constant__ FwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Smem<D>;
  constexpr int NS = Bc / 2, NO = D / 2;  // accumulators per thread: S (64 x Bc), O (64 x D)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* sm = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint64_t* q_full = reinterpret_cast<uint64_t*>(sm + L::kBars);
  uint64_t* kv_full = q_full + 1;

  const int q_block = blockIdx.x, qh = blockIdx.y, kvh = qh / p.group;
  const int q0 = q_block * Br;
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128, lane = t % 32;
  // The thread's two rows (accumulator layout, sm90/wgmma.cuh): row_lo and row_lo + 8.
  const int row_lo = q0 + 64 * wg + 16 * (t / 32) + lane / 4;

  // The K/V blocks the Q block sees: 0 .. last (the causal diagonal of its last real row).
  int last = p.k_blocks - 1;
  if constexpr (kCausal) {
    const int diag = min(q0 + Br, p.Nq) - 1 + p.causal_offset;
    last = diag < 0 ? -1 : min(last, diag / Bc);
  }
  const int n = last + 1;
  if (n == 0) {  // no row of the block sees a key: O = 0, LSE = -inf
    for (int i = threadIdx.x; i < Br * D / 2; i += kThreads) {
      const int r = q0 + i / (D / 2);
      if (r < p.Nq)
        reinterpret_cast<uint32_t*>(p.o + (static_cast<int64_t>(qh) * p.Nq + r) * D)[i % (D / 2)] = 0;
    }
    if (threadIdx.x < Br && q0 + threadIdx.x < p.Nq)
      p.lse[static_cast<int64_t>(qh) * p.Nq + q0 + threadIdx.x] = -INFINITY;
    return;
  }

  if (threadIdx.x == 0) {
    sm90::mbar_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) sm90::mbar_init(kv_full + s, 1);
    sm90::mbar_fence_init();
    sm90::tma_prefetch_map(&p.q_map);
    sm90::tma_prefetch_map(&p.k_map);
    sm90::tma_prefetch_map(&p.vt_map);
  }
  __syncthreads();
  // Block `it` of the visiting order (j = last - it) into stage it % 2: K8_j and V8_j^T on one
  // barrier, which expects both whole boxes (clipped parts arrive as zeros and count).
  auto load_kv = [&](int it) {
    const int stage = it % kStages, j = last - it;
    sm90::mbar_arrive_expect_tx(kv_full + stage, 2 * Bc * D);
    sm90::tma_load_3d(sm + L::kK + stage * Bc * D, &p.k_map, 0, j * Bc, kvh, kv_full + stage);
    sm90::tma_load_3d(sm + L::kV + stage * D * Bc, &p.vt_map, j * Bc, 0, kvh, kv_full + stage);
  };
  if (threadIdx.x == 0) {
    sm90::mbar_arrive_expect_tx(q_full, Br * D);
    sm90::tma_load_3d(sm + L::kQ, &p.q_map, 0, q0, qh, q_full);
    for (int it = 0; it < kStages && it < n; ++it) load_kv(it);
  }

  const uint32_t q_base = smem_addr(sm + L::kQ) + wg * 64 * D;
  const uint32_t p_base = smem_addr(sm + L::kP) + wg * 64 * Bc;
  const float sq = p.sq[p.per_tensor ? 0 : static_cast<int64_t>(qh) * p.q_blocks + q_block];
  float o[NO], s[NS];
#pragma unroll
  for (int i = 0; i < NO; ++i) o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float sv_now = 1.f;  // the sV that O is kept in units of

  sm90::mbar_wait(q_full, 0);
  for (int it = 0; it < n; ++it) {
    const int stage = it % kStages, j = last - it;
    const int64_t kv_scale = p.per_tensor ? 0 : static_cast<int64_t>(kvh) * p.k_blocks + j;
    const float sk = p.sk[kv_scale], sv = p.sv[kv_scale];
    sm90::mbar_wait(kv_full + stage, (it / kStages) & 1);

    // S = Q8 K8_j^T.
    const uint32_t k_base = smem_addr(sm + L::kK + stage * Bc * D);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk)
      sm90::wgmma_ss_e4m3<Bc>(s, kmajor_desc<D>(q_base + 32 * kk), kmajor_desc<D>(k_base + 32 * kk),
                              kk > 0);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::pin(s);

    // Scale and mask. Element i of the thread sits at key j Bc + 8 (i / 4) + 2 (lane % 4) + i % 2
    // of row row_lo + 8 ((i / 2) % 2). The scale goes on before the max: it differs per block.
    const float f = p.scale_log2 * sq * sk;
    const bool masked = (j + 1) * Bc > p.Nk || (kCausal && (j + 1) * Bc - 1 > q0 + p.causal_offset);
    const int key0 = j * Bc + 2 * (lane % 4);
#pragma unroll
    for (int i = 0; i < NS; ++i) {
      s[i] *= f;
      if (masked) {
        const int key = key0 + 8 * (i >> 2) + (i & 1);
        const int row = row_lo + 8 * ((i >> 1) & 1);
        if (key >= p.Nk || (kCausal && key > row + p.causal_offset)) s[i] = -INFINITY;
      }
    }

    // Online softmax (base 2) of the thread's two rows; a row with nothing visible yet keeps
    // m = -inf and uses 0 in its place, so that its P is 2^-inf = 0, never NaN.
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int k = 0; k < NS / 4; ++k) mx = fmaxf(mx, fmaxf(s[4 * k + 2 * h], s[4 * k + 2 * h + 1]));
      mx = quad_max(mx);
      const float m_new = fmaxf(m[h], mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      alpha[h] = fast_exp2(m[h] - m_use);
      m[h] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int k = 0; k < NS / 4; ++k)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * k + 2 * h + e];
          x = fast_exp2(x - m_use);
          sum += x;
        }
      l[h] = l[h] * alpha[h] + sum;
    }

    // P8 = e4m3(2^8 P) into the warpgroup's tile: row r, key c at byte r 128 + ((c / 16) ^ (r %
    // 8)) 16 + c % 16 (the 128-byte swizzle); each pair of neighbouring keys is one 16-bit store.
    const int r_lo = 16 * (t / 32) + lane / 4;
#pragma unroll
    for (int i = 0; i < NS; i += 2) {
      const int r = r_lo + 8 * ((i >> 1) & 1), c = 8 * (i >> 2) + 2 * (lane % 4);
      const __nv_fp8x2_storage_t pair =
          __nv_cvt_float2_to_fp8x2(make_float2(kPShift * s[i], kPShift * s[i + 1]), __NV_SATFINITE,
                                   __NV_E4M3);  // .x (key c) in the low byte
      st_shared_u16(p_base + r * 128 + ((((c >> 4) ^ (r & 7))) << 4) + (c & 15), pair);
    }
    sm90::fence_proxy_async();          // the stores, before the tensor cores read them
    sm90::named_sync(1 + wg, 128);      // every thread's part of the warpgroup's P

    // O in units of sV_j, then O += P8 V8_j.
    const float to_sv = sv_now / sv;
    sv_now = sv;
#pragma unroll
    for (int i = 0; i < NO; ++i) o[i] *= alpha[(i >> 1) & 1] * to_sv;
    const uint32_t v_base = smem_addr(sm + L::kV + stage * D * Bc);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Bc / 32; ++kk)
      sm90::wgmma_ss_e4m3<D>(o, sm90::smem_desc(p_base + 32 * kk), sm90::smem_desc(v_base + 32 * kk),
                             1);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::pin(o);

    // Both warpgroups are done with the stage: refill it.
    __syncthreads();
    if (threadIdx.x == 0 && it + kStages < n) load_kv(it + kStages);
  }

  // Epilogue: O sV / (2^8 l) to bf16, LSE = m ln 2 + ln l; rows past Nq are not stored.
  constexpr float kLn2 = 0.6931471805599453f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float lt = quad_sum(l[h]);
    const int row = row_lo + 8 * h;
    const float inv = lt > 0.f ? sv_now / (kPShift * lt) : 0.f;
    if (row < p.Nq) {
      __nv_bfloat16* out = p.o + (static_cast<int64_t>(qh) * p.Nq + row) * D;
#pragma unroll
      for (int i = 2 * h; i < NO; i += 4) {
        const int col = 8 * (i >> 2) + 2 * (lane % 4);
        *reinterpret_cast<__nv_bfloat162*>(out + col) =
            __floats2bfloat162_rn(o[i] * inv, o[i + 1] * inv);
      }
      if (lane % 4 == 0)
        p.lse[static_cast<int64_t>(qh) * p.Nq + row] = lt > 0.f ? m[h] * kLn2 + logf(lt) : -INFINITY;
    }
  }
#endif
}

// One CTA per (Q block, query head): grid q_blocks x heads (B H <= 65535, cuda.cu checks).
template <int D, bool kCausal>
void launch_fwd(const FwdParams& p, int heads, cudaStream_t stream) {
  constexpr int kSmem = Smem<D>::kLaunchBytes;
  auto* kernel = &fwd_kernel<D, kCausal>;
  static const bool smem_raised = [kernel] {
    FLASHLAB_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)smem_raised;
  kernel<<<dim3(p.q_blocks, heads), kThreads, kSmem, stream>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::fp8_fwd
