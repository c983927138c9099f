// Tile-level pieces the backward kernels share: cp.async loads of a [rows x d] tile into swizzled
// shared memory (zero-filled past the end of the tensor), ldmatrix address helpers for the four
// fragment shapes the backward needs, and the register-level C -> A fragment conversion.
//
// Naming: a tile is stored row-major, `kCols` 16-bit elements per row, swizzled in 16-byte chunks
// (mma.cuh's swizzled_offset), so both ldmatrix and ldmatrix.trans read it without bank conflicts.
#pragma once

#include <cstdint>

#include "common/sm80/mma.cuh"

namespace flashlab::cuda::bwd {

// ---- global -> shared ---------------------------------------------------------------------------

// Loads rows [row0, row0 + kRows) of a [n_rows x kD] tensor into a swizzled kRows x kD tile; the
// tensor's rows are `stride` elements apart (kD for a dense head, H kD or Hkv kD in a packed
// batch). Rows at or past n_rows are zero-filled and never read from global memory. Each thread always
// copies the same 16-byte column chunk, of rows r, r + kRowsPerPass, ...: one address computed
// here, then constant steps (kRowsPerPass is a multiple of 8, so the swizzle pattern repeats).
template <int kRows, int kD, int kThreads, class T>
__device__ __forceinline__ void load_tile_async(T* smem, const T* gmem, int row0, int n_rows,
                                                int64_t stride = kD) {
  constexpr int kChunksPerRow = kD / 8;  // 16-byte chunks
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && kRows % kRowsPerPass == 0 && kRowsPerPass % 8 == 0,
                "every thread loads the same number of chunks, in one swizzle phase");
  const int r = static_cast<int>(threadIdx.x) / kChunksPerRow;
  const int col = (static_cast<int>(threadIdx.x) % kChunksPerRow) * 8;
  const T* src = gmem + static_cast<int64_t>(row0 + r) * stride + col;
  const uint32_t dst = smem_addr(smem + swizzled_offset<kD>(r, col));
  if (row0 + kRows <= n_rows) {  // the whole tile is in the tensor: no test per row
#pragma unroll
    for (int it = 0; it < kRows / kRowsPerPass; ++it)
      cp_async_16(dst + it * kRowsPerPass * kD * 2, src + it * kRowsPerPass * stride, true);
    return;
  }
#pragma unroll
  for (int it = 0; it < kRows / kRowsPerPass; ++it) {
    const bool valid = row0 + r + it * kRowsPerPass < n_rows;
    // An invalid row still needs a legal address in the instruction: point at the tensor's start.
    cp_async_16(dst + it * kRowsPerPass * kD * 2, valid ? src + it * kRowsPerPass * stride : gmem,
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
// Four shapes, each a 16x16 (A) or 16 x (2 x n8) (B) piece whose top-left corner is (row, col) of a
// swizzled tile:
//
//   a_rowmajor: A = tile[row.., col..]        (rows = m, cols = k)   ldmatrix
//   a_colmajor: A = tile[row.., col..]^T      (rows = k, cols = m)   ldmatrix.trans
//   b_nk:       B = tile[row.., col..]^T      (rows = n, cols = k)   ldmatrix      -> 2 n8 tiles
//   b_kn:       B = tile[row.., col..]        (rows = k, cols = n)   ldmatrix.trans -> 2 n8 tiles
//
// Lane l supplies the row address of 8x8 matrix l/8, in the order of mma.m16n8k16's fragment
// registers (mma.cuh). That gives two lane maps: (row l%16, chunk l/16) for a_rowmajor and b_kn
// (and stmatrix, which writes where a_rowmajor reads), and (row l%8 + 8(l/16), chunk (l/8)%2) for
// a_colmajor and b_nk.
//
// Addresses. A warp reads the same shape many times, at its origin (r0, c0) plus constant steps
// (dr, dc) from the unrolled loops. The lane's byte offset at the origin is computed once; a piece
// further on is then one XOR and one constant add away:
//
//   lane_off = 2 kCols (r0 + lane_row) + 16 ((c0/8 + lane_chunk) ^ (lane_row & 7))    once
//   byte offset of the lane's row of piece (r0 + dr, c0 + dc) = (lane_off ^ 2 dc) + 2 kCols dr
//
// which holds when r0 and dr are multiples of 8 (the swizzle's row & 7 stays the lane's own), c0
// and dc multiples of 16, and c0 a multiple of a power of two that dc stays below (the warp tile's
// width): then the chunk bits of c0, dc and the lane's chunk never overlap, so adding them is
// XORing them, and the XOR stays inside the chunk field (16 chunk < 2 kCols, the row stride).
enum class Frag { a_rowmajor, a_colmajor, b_nk, b_kn };

template <Frag kF, int kCols>
struct Ldsm {
  static constexpr bool kTrans = kF == Frag::a_colmajor || kF == Frag::b_kn;
  uint32_t lane_off;  // bytes from the tile's start to this lane's row at the warp's origin

  __device__ __forceinline__ Ldsm(int r0, int c0) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const bool map16 = kF == Frag::a_rowmajor || kF == Frag::b_kn;
    const int lane_row = map16 ? lane % 16 : lane % 8 + (lane / 16) * 8;
    const int lane_chunk = map16 ? lane / 16 : (lane / 8) % 2;
    lane_off = static_cast<uint32_t>(2 * (r0 + lane_row) * kCols +
                                     16 * ((c0 / 8) ^ lane_chunk ^ (lane_row & 7)));
  }
  // Shared-memory address of this lane's row of the piece at (r0 + dr, c0 + dc) of `tile`.
  __device__ __forceinline__ uint32_t at(uint32_t tile, int dr, int dc) const {
    return tile + (lane_off ^ static_cast<uint32_t>(2 * dc)) +
           static_cast<uint32_t>(2 * kCols * dr);
  }
  __device__ __forceinline__ void operator()(uint32_t (&r)[4], uint32_t tile, int dr,
                                             int dc) const {
    if constexpr (kTrans) {
      ldmatrix_x4_trans(r, at(tile, dr, dc));
    } else {
      ldmatrix_x4(r, at(tile, dr, dc));
    }
  }
};

// Two mma's sharing one A fragment: acc[0] += A * B(n-tile 0), acc[1] += A * B(n-tile 1).
template <class T>
__device__ __forceinline__ void mma_pair(float (&acc0)[4], float (&acc1)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[4]) {
  const uint32_t b0[2] = {b[0], b[1]};
  const uint32_t b1[2] = {b[2], b[3]};
  mma_16816<T>(acc0, a, b0);
  mma_16816<T>(acc1, a, b1);
}

// A warp's score tile: acc (kM m16 x kN n8 tiles) += A * B^T over kK columns, where A's rows and
// B's rows are both rows of tiles stored k-contiguous (Q or dO, and K or V, or the other way round
// for the transposed products). Every fragment read from shared memory is used kN/2 or kM times.
template <class T, int kK, int kM, int kN, class LdA, class LdB>
__device__ __forceinline__ void score_tile(float (&acc)[kM][kN][4], const LdA& ld_a, uint32_t sA,
                                           const LdB& ld_b, uint32_t sB) {
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t a[kM][4], b[kN / 2][4];
#pragma unroll
    for (int m = 0; m < kM; ++m) ld_a(a[m], sA, 16 * m, 16 * kk);
#pragma unroll
    for (int n = 0; n < kN / 2; ++n) ld_b(b[n], sB, 16 * n, 16 * kk);
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int n = 0; n < kN / 2; ++n) mma_pair<T>(acc[m][2 * n], acc[m][2 * n + 1], a[m], b[n]);
  }
}

// ---- registers -> registers ---------------------------------------------------------------------

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

// ---- dQ accumulator layout ----------------------------------------------------------------------

// dQ_accum keeps row-major rows of d floats, but inside a row the groups of 8 floats are permuted:
// element (row, col) lives at column col ^ (8 * (row & 3)). The outer-K kernel's dQ fragment puts
// the 8 rows g = 0..7 of a warp at the same columns, and rows of 64 or 128 floats fall on the same
// banks; with the permutation, rows g and g + 1, + 2, + 3 use four different 8-float groups, so the
// warp's float2 stores into the shared-memory copy of a block (sm_90, see fa2_bwd/outer_k.cuh) hit all
// 32 banks and take the least two passes. The block is then one contiguous bulk copy to global
// memory. The convert kernel reads groups of 8 floats, which the permutation keeps together.
__host__ __device__ __forceinline__ int dq_accum_col(int row, int col) {
  return col ^ (8 * (row & 3));
}

// Which Q blocks meet which K blocks under a mask: common/band.h (Band::q_blocks, k_blocks),
// shared by the outer-K kernel (where its Q loop starts and ends) and the convert kernel (which
// dQ splits were written for a row), so the two can never disagree.

}  // namespace flashlab::cuda::bwd
