// The quantization pass of the FP8 forward: Q, K, V (bf16) -> e4m3 codes and fp32 scales, exactly
// as the twin (cpu.cpp: quantize_inputs) computes them, written to the workspace (cuda.cu: the
// layout) for the forward kernel to load by bulk tensor copies.
//
//   one CTA = one scale block of one head of one tensor (Q: 128 rows, the forward's Br; K, V:
//   192 keys, its Bc); one thread = one row (192 threads: a Q block leaves 64 of them idle)
//
//     the block's rows in by contiguous 16-byte pieces through shared memory
//     each thread: its row (d bf16) -> fp32 x[d] in registers
//     hopper-fp8, Q and K:      x <- H D x / sqrt(d)   (signs D from the twin's seed, then the
//                               d log2 d butterflies of the Walsh-Hadamard transform, in fp32)
//     amax of the block      ->  s = amax / 448 (1 for a block of zeros)
//     code = e4m3(x (1 / s))    (round to nearest even, saturating: the hardware's cvt; 1 / s
//                               rounded once per block, then one product per code, as the twin)
//     the codes out through shared memory, by contiguous 16-byte pieces (V^T: transposed there)
//
//   Q, K: codes row-major, [B H or B Hkv][N][d], as the rows came.
//   V:    codes transposed, [B Hkv][d][Nk16] (Nk16 = Nk rounded up to 16 bytes, the copy engine's
//         stride unit; the keys from Nk to Nk16 hold zeros), the keys of each 16 in the order the
//         forward's P operand has them (v_column below).
//
// Why V is transposed here and not in the forward: an 8-bit wgmma reads both operands K-major
// (no transpose bits for e4m3), and in O += P V the reduction runs over the keys, so V's tile must
// have the keys contiguous. Writing V^T once in this pass, which reads and writes every element
// anyway, costs one strided store per code; transposing in shared memory inside the forward would
// redo it for every Q block that reads the K/V block (Nq / 128 times) and take a warpgroup's
// time there. The simplest correct form first; a measurement of the in-kernel transpose (FA3's
// choice, which keeps V in its own layout) is a later step.
//
// Per tensor (hopper-fp8-per-tensor): the scale needs the whole tensor's amax first, so the pass
// runs three times -- amax of every block folded into one slot per tensor (atomicMax on the
// float's bits: amax >= 0, so the bits order as the values), the slot turned into a scale, then
// the codes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace flashlab::cuda::FLASHLAB_FOLDER::fp8_quant {

constexpr int kQRows = 128;   // rows of a Q scale block: the forward's Br
constexpr int kKVRows = 192;  // rows (keys) of a K or V scale block: the forward's Bc
constexpr int kThreads = 192;  // a CTA: one thread a row of the larger block
constexpr float kE4m3Max = 448.f;  // e4m3's largest finite value
// The smallest scale: the smallest normal float, so that 1 / s stays finite (a block whose amax is
// below 448 x 2^-126 takes it; its codes are then x / 2^-126, well inside e4m3's range).
constexpr float kMinScale = 1.17549435e-38f;

// One tensor of the pass.
struct Tensor {
  const __nv_bfloat16* src;  // [heads][n][d]
  uint8_t* codes;            // [heads][n][d], or [heads][d][n_pad] when transposed
  float* scales;             // [heads][ceil(n / rows)], or one (per tensor)
  int heads, n;
  int rows;         // rows of a scale block: kQRows or kKVRows
  int n_pad;        // transposed: the row length of the codes, n rounded up to 16
  bool rotate;      // incoherent processing (Q and K of hopper-fp8)
  bool transposed;  // V
};

struct Params {
  Tensor t[3];          // Q, K, V
  uint32_t signs[4];    // bit c set: the Hadamard sign of column c is -1
};

enum Mode : int {
  kBlockScales = 0,  // amax and codes, a scale per block
  kTensorAmax = 1,   // per tensor, step 1: every block's amax folded into the tensor's slot
  kTensorCodes = 2,  // per tensor, step 3: codes with the tensor's scale
};

// The column of V^T that holds key `key`. Within each 16 keys, the forward's P operand (8-bit A
// from registers: fwd_kernel.cuh) puts in a thread's register the keys 2q, 2q+1, 8+2q, 9+2q -- the
// ones its accumulator holds -- at the k-columns 4q .. 4q+3. So key 2q + e goes to column 4q + e and
// key 8 + 2q + e to column 4q + 2 + e (e = 0, 1): k -> 4 ((k mod 8) / 2) + (k mod 2) + 2 (k / 8).
__host__ __device__ constexpr int v_column(int key) {
  const int k = key & 15;
  return (key & ~15) | (k & 6) << 1 | (k & 1) | (k & 8) >> 2;
}
static_assert(v_column(0) == 0 && v_column(1) == 1 && v_column(8) == 2 && v_column(9) == 3 &&
                  v_column(2) == 4 && v_column(15) == 15 && v_column(23) == 16 + 13,
              "the P operand's key order");

__device__ __forceinline__ float scale_of(float amax) {
  return amax > 0.f ? fmaxf(__fdiv_rn(amax, kE4m3Max), kMinScale) : 1.f;
}

// x <- H D x / sqrt(D): the twin's fwht (strides D/2 down to 1), on registers.
template <int D>
__device__ __forceinline__ void rotate(float (&x)[D], const uint32_t (&signs)[4]) {
#pragma unroll
  for (int c = 0; c < D; ++c)
    if ((signs[c / 32] >> (c % 32)) & 1u) x[c] = -x[c];
  // Stage st pairs columns h = D / 2^(st+1) apart; butterfly b of a stage is the pair (j, j + h),
  // j = (b / h) 2h + b % h. Constant trip counts, so every index is a constant once unrolled and
  // x stays in registers.
  constexpr int kStagesLog = D == 64 ? 6 : 7;
  static_assert(D == 64 || D == 128, "the kernels' head dims");
#pragma unroll
  for (int st = 0; st < kStagesLog; ++st) {
    const int h = D >> (st + 1);
#pragma unroll
    for (int b = 0; b < D / 2; ++b) {
      const int j = (b / h) * 2 * h + b % h;
      const float u = x[j], v = x[j + h];
      x[j] = u + v;
      x[j + h] = u - v;
    }
  }
  const float norm = __fdiv_rn(1.f, __fsqrt_rn(static_cast<float>(D)));
#pragma unroll
  for (int c = 0; c < D; ++c) x[c] *= norm;
}

// The largest value of the CTA's 192 threads (6 warps).
__device__ __forceinline__ float block_max(float v) {
  __shared__ float warp_max[kThreads / 32];
#pragma unroll
  for (int o = 16; o >= 1; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
  __syncthreads();
  v = warp_max[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) v = fmaxf(v, warp_max[w]);
  return v;
}

// Shared memory of one CTA (dynamic: 52,224 bytes at d = 128): the block's bf16 rows on the way
// in, its codes on the way out. A row is padded by 16 bytes, so that the threads reading (or
// writing) one row each start 4 banks apart and every access is whole 16-byte lanes without
// conflicts.
template <int D>
struct Staging {
  static constexpr int kIn = 2 * D + 16;        // a bf16 row
  static constexpr int kOut = D + 16;           // a row of codes (Q, K)
  static constexpr int kOutT = kKVRows + 16;    // a row of V^T: the block's 192 keys
  static constexpr int kBytes = kThreads * kIn;  // the largest of the three uses
  static_assert(kThreads * kOut <= kBytes && D * kOutT <= kBytes, "one buffer serves all three");
  static_assert(kQRows <= kThreads && kKVRows <= kThreads, "a thread a row");
};

template <int D, int kMode>
__global__ void __launch_bounds__(kThreads) quant_kernel(const __grid_constant__ Params p) {
  using S = Staging<D>;
  const Tensor& T = p.t[blockIdx.y];
  const int blocks = (T.n + T.rows - 1) / T.rows;
  if (static_cast<int>(blockIdx.x) >= T.heads * blocks) return;  // a shorter tensor's grid
  const int head = blockIdx.x / blocks, block = blockIdx.x % blocks;
  const int t = threadIdx.x;
  const int rows = min(T.rows, T.n - block * T.rows);  // real rows of the block
  const bool real = t < rows;
  extern __shared__ __align__(16) unsigned char buf[];

  // The block's rows come in as contiguous 16-byte pieces (its rows are contiguous in memory),
  // then each thread takes its own row from shared memory.
  constexpr int kPieces = D / 8;  // 16-byte pieces of a bf16 row
  const uint4* src = reinterpret_cast<const uint4*>(
      T.src + (static_cast<int64_t>(head) * T.n + static_cast<int64_t>(block) * T.rows) * D);
  for (int i = t; i < rows * kPieces; i += kThreads)
    *reinterpret_cast<uint4*>(buf + (i / kPieces) * S::kIn + (i % kPieces) * 16) = src[i];
  __syncthreads();
  float x[D];
  if (real) {
#pragma unroll
    for (int v = 0; v < kPieces; ++v) {
      const uint4 w = *reinterpret_cast<const uint4*>(buf + t * S::kIn + v * 16);
      const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[k]));
        x[8 * v + 2 * k] = f.x;
        x[8 * v + 2 * k + 1] = f.y;
      }
    }
    if (kMode == kBlockScales && T.rotate) rotate<D>(x, p.signs);  // per tensor: no rotation
  } else {
#pragma unroll
    for (int c = 0; c < D; ++c) x[c] = 0.f;
  }

  float s;
  if constexpr (kMode == kTensorCodes) {
    s = T.scales[0];
  } else {
    float amax = 0.f;
#pragma unroll
    for (int c = 0; c < D; ++c) amax = fmaxf(amax, fabsf(x[c]));
    amax = block_max(amax);  // its barrier also ends every thread's reads of the rows above
    if constexpr (kMode == kTensorAmax) {
      if (t == 0) atomicMax(reinterpret_cast<unsigned*>(T.scales), __float_as_uint(amax));
      return;
    }
    s = scale_of(amax);
    if (t == 0) T.scales[head * blocks + block] = s;
  }
  if constexpr (kMode == kTensorCodes) __syncthreads();  // no block_max: the reads end here

  // One division per thread, then a product per code: a division is a dozen instructions and a
  // slow path, d of them a row the largest share of the pass's arithmetic. The twin rounds the
  // same two steps (cpu.cpp: quantize_inputs), so the codes stay its own.
  const float inv_s = __fdiv_rn(1.f, s);
  uint8_t code[D];
#pragma unroll
  for (int c = 0; c < D; ++c)
    code[c] = static_cast<uint8_t>(
        __nv_cvt_float_to_fp8(__fmul_rn(x[c], inv_s), __NV_SATFINITE, __NV_E4M3));
  if (!T.transposed) {
    // Each thread writes its row of codes, then the block's rows leave as contiguous pieces.
#pragma unroll
    for (int v = 0; v < D / 16; ++v) {
      uint32_t w[4];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        w[k] = code[16 * v + 4 * k] | code[16 * v + 4 * k + 1] << 8 |
               code[16 * v + 4 * k + 2] << 16 | static_cast<uint32_t>(code[16 * v + 4 * k + 3]) << 24;
      *reinterpret_cast<uint4*>(buf + t * S::kOut + v * 16) = make_uint4(w[0], w[1], w[2], w[3]);
    }
    __syncthreads();
    uint4* dst = reinterpret_cast<uint4*>(
        T.codes + (static_cast<int64_t>(head) * T.n + static_cast<int64_t>(block) * T.rows) * D);
    for (int i = t; i < rows * (D / 16); i += kThreads)
      dst[i] = *reinterpret_cast<const uint4*>(buf + (i / (D / 16)) * S::kOut + (i % (D / 16)) * 16);
  } else {
    // V^T: thread t's codes are column v_column(t) of the block's d rows of 192 keys (the
    // padding keys' codes are 0: their x are 0); each row leaves as contiguous pieces, as far as
    // the row's length Nk16 reaches.
#pragma unroll
    for (int c = 0; c < D; ++c) buf[c * S::kOutT + v_column(t)] = code[c];
    __syncthreads();
    const int keys = min(T.rows, T.n_pad - block * T.rows);  // a multiple of 16
    uint8_t* dst = T.codes + static_cast<int64_t>(head) * D * T.n_pad + block * T.rows;
    for (int i = t; i < D * (keys / 16); i += kThreads) {
      const int c = i / (keys / 16), piece = i % (keys / 16);
      *reinterpret_cast<uint4*>(dst + static_cast<int64_t>(c) * T.n_pad + piece * 16) =
          *reinterpret_cast<const uint4*>(buf + c * S::kOutT + piece * 16);
    }
  }
}

// Per tensor, step 2: each slot's amax becomes its scale.
__global__ void tensor_scales_kernel(float* sq, float* sk, float* sv) {
  float* slot = threadIdx.x == 0 ? sq : threadIdx.x == 1 ? sk : sv;
  *slot = scale_of(__uint_as_float(*reinterpret_cast<unsigned*>(slot)));
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::fp8_quant
