// Warpgroup matrix products (wgmma, sm_90a): the four warps of a warpgroup (128 threads, warps
// 4k .. 4k+3) issue one m64nNk16 product together; it runs asynchronously on the tensor cores
// while the threads go on, and is waited for by group.
//
//   fence()            before the first product, and whenever ordinary code has written the
//                      registers a product reads or accumulates into (rescaled O, packed P)
//   wgmma_ss / _rs     D (64 x N, fp32) (+)= A (64 x 16) * B (16 x N); A from shared memory (ss)
//                      or from registers (rs), B always from shared memory
//   commit()           closes a group of issued products
//   wait<n>()          returns when at most n groups are still running; only then may the
//                      accumulators (and, for rs, the A registers) be touched again
//
// Accumulator layout (one thread, warp w of the warpgroup, lane = 4 g + q): element i of d[N/2]
// sits at row 16 w + g + 8 ((i >> 1) & 1), column 8 (i >> 2) + 2 q + (i & 1). A register A
// operand (four 32-bit registers of two 16-bit values) has the layout of a 64 x 16 slab of it:
// a[k] holds columns 2q, 2q+1 (k = 0, 1) or 8 + 2q, 9 + 2q (k = 2, 3) of rows g (k even) and
// g + 8 (k odd). So the accumulator of S, packed in pairs to 16 bits, is P's A operand as it is.
//
// Shared operands are described by a 64-bit descriptor. The kernels use one shared layout only
// (smem_desc): tiles whose rows are 64 16-bit elements (128 bytes), stored with the 128-byte
// swizzle (the 16-byte chunk c of row r sits at chunk c ^ (r mod 8)) starting on a 1024-byte
// boundary, which is also what the copy engine writes. A tile wider than 64 columns is a sequence
// of such 64-column blocks.
//   K-major operand (the product's k runs along a row: Q and K in S = Q K^T): 8-row groups 1024
//     bytes apart (stride byte offset); each k16 step moves the start address by 32 bytes.
//   MN-major operand (k runs down the rows: V in O += P V): 8-row groups along k 1024 bytes
//     apart (stride byte offset), 64-column blocks along n `block_bytes` apart (leading byte
//     offset); each k16 step moves the start address by 16 rows = 2048 bytes.
// The wgmma ceiling (src/cuda/ceilings.cu) stores its K-major operands without swizzle
// (smem_desc_unswizzled), in "core matrices" of 8 rows x 8 elements, each 128 contiguous bytes:
//
//          k 0..7   k 8..15
//        +--------+--------+
//   rows | core   | core   |   core matrices adjacent along M (or N): stride byte offset apart
//   0..7 | 128 B  | 128 B  |   core matrices adjacent along k: leading byte offset apart;
//        +--------+--------+   each k16 step moves the start address by two leading offsets
//   8..15| core   | core   |
//        +--------+--------+
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace flashlab::cuda::sm90 {

// Byte offset of element (row, col) in a [rows][64] 16-bit tile with the 128-byte swizzle.
__host__ __device__ constexpr uint32_t swizzle128_offset(int row, int col) {
  return static_cast<uint32_t>(row * 128 + ((((col * 2) >> 4) ^ (row & 7)) << 4) + (col * 2 & 15));
}

// Descriptor of a 128-byte-swizzled operand starting at shared address `addr` (1024-aligned tile;
// k-steps may add 32-byte multiples). `lead_bytes` is the distance between 64-column blocks of an
// MN-major operand (unused, by the hardware's definition, for K-major ones).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lead_bytes = 16) {
  constexpr uint64_t kStrideBytes = 1024;  // 8 rows of 128 bytes
  constexpr uint64_t kSwizzle128 = 1;
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         static_cast<uint64_t>((lead_bytes & 0x3FFFF) >> 4) << 16 | (kStrideBytes >> 4) << 32 |
         kSwizzle128 << 62;
}

// Descriptor of an unswizzled K-major operand starting at shared address `addr` (16-byte aligned):
// core matrices adjacent along k are `lead_bytes` apart, those adjacent along M or N
// `stride_bytes`.
__device__ __forceinline__ uint64_t smem_desc_unswizzled(uint32_t addr, uint32_t lead_bytes,
                                                         uint32_t stride_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
         static_cast<uint64_t>((lead_bytes & 0x3FFFF) >> 4) << 16 |
         static_cast<uint64_t>((stride_bytes & 0x3FFFF) >> 4) << 32;  // base offset 0, no swizzle
}

// The descriptor of the operand `bytes` further on in shared memory (16-byte multiples): the start
// address is the low field, in 16-byte units, and the rest of the descriptor does not depend on
// it. So a k step, or a ring's next stage, is one addition on the low word, where building the
// descriptor again masks, shifts and merges (a handful of instructions per product issued).
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

template <class T, int N>
__device__ void wgmma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, int scale_d);
template <class T, int N>
__device__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, int scale_d);
template <class T, int N>
__device__ void wgmma_ss_tt(float (&d)[N / 2], uint64_t a, uint64_t b, int scale_d);
template <class T, int N>
__device__ void wgmma_ss_nt(float (&d)[N / 2], uint64_t a, uint64_t b, int scale_d);
// FP8 (e4m3 x e4m3, fp32 accumulators in the layout above): m64nNk32, both operands K-major in
// shared memory -- 8-bit products have no transpose, so a B operand whose k runs down the rows (V
// in O += P V) must be stored transposed. One k32 step is 32 bytes of a row, as a k16 step of a
// 16-bit type: the same descriptors serve.
template <int N>
__device__ void wgmma_ss_e4m3(float (&d)[N / 2], uint64_t a, uint64_t b, int scale_d);
// The same with A (64 x 32 codes) from four registers of four codes each: a[k] holds the codes of
// k-columns 4q .. 4q+3 (k = 0, 1) or 16 + 4q .. 19 + 4q (k = 2, 3) of rows g (k even) and g + 8
// (k odd), the lowest byte first. Where a 16-bit A register holds two neighbouring columns, an
// 8-bit one holds four: an accumulator (pairs of columns 8 apart) is not this operand as it is.
template <int N>
__device__ void wgmma_rs_e4m3(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, int scale_d);

// Descriptor of a K-major operand whose rows are 64 bytes, stored with the 64-byte swizzle (the
// 16-byte chunk c of row r at chunk c ^ ((r / 2) mod 4), as the copy engine writes it): 8-row
// groups 512 bytes apart; the tile starts on a 512-byte boundary, k steps add 32 bytes. (FP8 at
// d = 64: a row of Q or K is 64 bytes.)
__device__ __forceinline__ uint64_t smem_desc_sw64(uint32_t addr) {
  constexpr uint64_t kStrideBytes = 512;  // 8 rows of 64 bytes
  constexpr uint64_t kSwizzle64 = 2;
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | uint64_t{1} << 16 |
         (kStrideBytes >> 4) << 32 | kSwizzle64 << 62;
}

// The generated shapes: wgmma_ss<T, N> (A K-major and B K-major, both in shared memory),
// wgmma_rs<T, N> (A in registers, B MN-major in shared memory) and wgmma_ss_tt<T, N> (A and B
// both MN-major in shared memory: the backward's dQ = dS K, with dS stored as dS^T and K as K)
// and wgmma_ss_nt<T, N> (A K-major, B MN-major, both in shared memory: the backward's dV += P^T dO
// at d = 256, where P^T is shared by the two consumer warpgroups).
// An MN-major A is described like an MN-major B: 8-row groups along k 1024 bytes apart, k16 steps
// of 16 rows. scale_d = 0 overwrites D,
// 1 accumulates into it.
#include "common/sm90/wgmma_ops.inc"

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Pins registers at this point of the program: the compiler may not move their reads or writes
// across it. Used around issue and wait, since the compiler does not know that a product is still
// writing an accumulator after its instruction has been issued.
template <int N>
__device__ __forceinline__ void pin(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

template <int N>
__device__ __forceinline__ void pin(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

}  // namespace flashlab::cuda::sm90
