// Tile-level pieces the backward kernels share: cp.async loads of a [rows x d] tile into swizzled
// shared memory (zero-filled past the end of the tensor), ldmatrix address helpers for the three
// fragment shapes the backward needs, and the register-level C -> A fragment conversion.
//
// Naming: a tile is stored row-major, `kCols` 16-bit elements per row, swizzled in 16-byte chunks
// (mma.cuh's swizzled_offset), so both ldmatrix and ldmatrix.trans read it without bank conflicts.
#pragma once

#include <cstdint>

#include "common/mma.cuh"

namespace flashlab::cuda::bwd {

// ---- global -> shared ---------------------------------------------------------------------------

// Loads rows [row0, row0 + kRows) of a [n_rows x kD] tensor into a swizzled kRows x kD tile.
// Rows at or past n_rows are zero-filled and never read from global memory. Each thread always
// copies the same 16-byte column chunk, of rows r, r + kRowsPerPass, ...: one address computed
// here, then constant steps (kRowsPerPass is a multiple of 8, so the swizzle pattern repeats).
template <int kRows, int kD, int kThreads, class T>
__device__ __forceinline__ void load_tile_async(T* smem, const T* gmem, int row0, int n_rows) {
  constexpr int kChunksPerRow = kD / 8;  // 16-byte chunks
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && kRows % kRowsPerPass == 0 && kRowsPerPass % 8 == 0,
                "every thread loads the same number of chunks, in one swizzle phase");
  const int r = static_cast<int>(threadIdx.x) / kChunksPerRow;
  const int col = (static_cast<int>(threadIdx.x) % kChunksPerRow) * 8;
  const T* src = gmem + static_cast<int64_t>(row0 + r) * kD + col;
  const uint32_t dst = smem_addr(smem + swizzled_offset<kD>(r, col));
  if (row0 + kRows <= n_rows) {  // the whole tile is in the tensor: no test per row
#pragma unroll
    for (int it = 0; it < kRows / kRowsPerPass; ++it)
      cp_async_16(dst + it * kRowsPerPass * kD * 2, src + it * kRowsPerPass * kD, true);
    return;
  }
#pragma unroll
  for (int it = 0; it < kRows / kRowsPerPass; ++it) {
    const bool valid = row0 + r + it * kRowsPerPass < n_rows;
    // An invalid row still needs a legal address in the instruction: point at the tensor's start.
    cp_async_16(dst + it * kRowsPerPass * kD * 2, valid ? src + it * kRowsPerPass * kD : gmem,
                valid);
  }
}

// Loads kRows floats starting at `gmem` (always in bounds: LSE2 and D are padded to kRowPad).
template <int kRows>
__device__ __forceinline__ void load_rows_async(float* smem, const float* gmem, int first_thread) {
  const int c = static_cast<int>(threadIdx.x) - first_thread;
  if (c >= 0 && c < kRows / 4) cp_async_16(smem_addr(smem + 4 * c), gmem + 4 * c, true);
}

// ---- shared -> registers (ldmatrix) -------------------------------------------------------------
//
// Three shapes, all for a 16x16 (A) or 16 x (2 x n8) (B) piece at (r0, c0) of a swizzled tile:
//
//   a_rowmajor: A = tile[r0.., c0..]          (rows = m, cols = k)   ldmatrix
//   a_colmajor: A = tile[r0.., c0..]^T        (rows = k, cols = m)   ldmatrix.trans
//   b_nk:       B = tile[r0.., c0..]^T        (rows = n, cols = k)   ldmatrix      -> 2 n8 tiles
//   b_kn:       B = tile[r0.., c0..]          (rows = k, cols = n)   ldmatrix.trans -> 2 n8 tiles
//
// The lane -> address maps follow the order of mma.m16n8k16's fragment registers (mma.cuh).

// Offset of (r0 + lane_row, c0 + 8 * lane_chunk) in a swizzled tile, written so the lane-dependent
// part is computed once and only a constant XOR and add remain per call: r0 is a multiple of 8 and
// c0 of 16, so ((c0/8 + lane_chunk) ^ (row & 7)) == (c0/8) ^ (lane_chunk ^ (lane_row & 7)).
template <int kCols>
__device__ __forceinline__ int lane_offset(int r0, int c0, int lane_row, int lane_chunk) {
  const int lane_xor = lane_chunk ^ (lane_row & 7);
  return (r0 + lane_row) * kCols + (((c0 >> 3) ^ lane_xor) << 3);
}

template <int kCols, class T>
__device__ __forceinline__ void ldsm_a_rowmajor(uint32_t (&a)[4], const T* tile, int r0, int c0) {
  const int lane = threadIdx.x % 32;
  ldmatrix_x4(a, smem_addr(tile + lane_offset<kCols>(r0, c0, lane % 16, lane / 16)));
}

template <int kCols, class T>
__device__ __forceinline__ void ldsm_a_colmajor(uint32_t (&a)[4], const T* tile, int k0, int m0) {
  const int lane = threadIdx.x % 32;
  ldmatrix_x4_trans(
      a, smem_addr(tile + lane_offset<kCols>(k0, m0, lane % 8 + (lane / 16) * 8, (lane / 8) % 2)));
}

// b[0..1]: n-tile n0..n0+7, b[2..3]: n-tile n0+8..n0+15.
template <int kCols, class T>
__device__ __forceinline__ void ldsm_b_nk(uint32_t (&b)[4], const T* tile, int n0, int k0) {
  const int lane = threadIdx.x % 32;
  ldmatrix_x4(
      b, smem_addr(tile + lane_offset<kCols>(n0, k0, lane % 8 + (lane / 16) * 8, (lane / 8) % 2)));
}

template <int kCols, class T>
__device__ __forceinline__ void ldsm_b_kn(uint32_t (&b)[4], const T* tile, int k0, int n0) {
  const int lane = threadIdx.x % 32;
  ldmatrix_x4_trans(
      b, smem_addr(tile + lane_offset<kCols>(k0, n0, lane % 8 + ((lane / 8) % 2) * 8, lane / 16)));
}

// Two mma's sharing one A fragment: acc[0] += A * B(n-tile 0), acc[1] += A * B(n-tile 1).
template <class T>
__device__ __forceinline__ void mma_pair(float (&acc0)[4], float (&acc1)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[4]) {
  const uint32_t b0[2] = {b[0], b[1]};
  const uint32_t b1[2] = {b[2], b[3]};
  mma_16816<T>(acc0, a, b0);
  mma_16816<T>(acc1, a, b1);
}

// ---- registers -> registers
// -----------------------------------------------------------------------

// The C fragments of two neighbouring n8 tiles (16 rows x 16 cols, fp32) become the A fragment of
// the next product (rows x k16), rounded to T: how P feeds P^T.dO and dS feeds dS^T.Q without a
// trip through shared memory.
template <class T>
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&c0)[4],
                                       const float (&c1)[4]) {
  a[0] = ElemTraits<T>::pack(c0[0], c0[1]);
  a[1] = ElemTraits<T>::pack(c0[2], c0[3]);
  a[2] = ElemTraits<T>::pack(c1[0], c1[1]);
  a[3] = ElemTraits<T>::pack(c1[2], c1[3]);
}

// ---- causal schedule
// ------------------------------------------------------------------------------

// The first Q block (of Br rows) that sees any key of K block j (of Bc keys). Query i sees key k
// iff k <= i + offset, so the first query that sees key j*Bc is j*Bc - offset.
// Shared by the outer-K kernel (where its Q loop starts) and the deterministic convert kernel
// (which splits were written for a row), so the two can never disagree.
__host__ __device__ __forceinline__ int first_q_block(int j, int Bc, int Br, int offset,
                                                      bool causal) {
  if (!causal) return 0;
  const int first_query = j * Bc - offset;
  return first_query <= 0 ? 0 : first_query / Br;
}

}  // namespace flashlab::cuda::bwd
