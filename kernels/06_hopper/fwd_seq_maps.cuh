// A packed batch's tensor maps, one set per sequence, made on the device before the forward.
//
// The copy engine clips a box at the edges of its map: a dense head's map ends at the head's last
// row, so ragged tails cost no code. A packed batch's sequences lie one after another in one
// tensor ([total, H, d]), and one map over all of it would let a box run into the next sequence:
// its rows loaded (they would have to be masked) and, worse, O written over them. So every
// sequence gets its own maps (Q, K, V, O), the host's template with two fields replaced: the
// base address (the sequence's first token) and the row extent (its length).
//
//   template (host, by value)        seq_maps[4 b + m] (workspace, 128 bytes each)
//   dims (d, rows, H) strides        = template, global_address = base + start(b) H d 2 bytes,
//   (H d 2, d 2) bytes                 global_dim[1] = len(b)          (tensormap.replace)
//
// The same kernel numbers the tiles: the sequences by keys, most first (the heaviest tiles start
// first, and the last ones to run are the short sequences'), each one's H ceil(nq / Br) tiles in
// a run starting at tile_start[rank]. One block of 256 threads; a thread per sequence, each
// finding its rank and its run's start by counting (B <= kMaxPackedSeqs, check() refuses more).
// The maps are written by ordinary stores and tensormap.replace (the generic proxy): a release
// fence here, and an acquire fence by every thread that issues a copy with one (fwd_kernel.cuh).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/sm90/tma.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd {

// The most sequences a packed batch may have: the map kernel's shared arrays.
inline constexpr int kMaxPackedSeqs = 1024;

struct SeqMapsParams {
  CUtensorMap tmpl[4];  // Q, K, V, O over the whole batch (tensor_map_packed)
  const unsigned char* base[4];
  int64_t row_bytes[4];  // one token's row: H d 2 (Q, O) or Hkv d 2 (K, V)
  const int32_t* cu_q;
  const int32_t* cu_k;
  int B, heads, Br;
  CUtensorMap* maps;  // [B][4], 128-byte aligned
  int* order;         // [B]
  int* tile_start;    // [B + 1]
};

__global__ void __launch_bounds__(256) seq_maps_kernel(const __grid_constant__ SeqMapsParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ int nk_of[kMaxPackedSeqs], tiles_of[kMaxPackedSeqs];
  for (int b = threadIdx.x; b < p.B; b += blockDim.x) {
    const int nq = p.cu_q[b + 1] - p.cu_q[b];
    nk_of[b] = p.cu_k[b + 1] - p.cu_k[b];
    tiles_of[b] = p.heads * ((nq + p.Br - 1) / p.Br);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < p.B; b += blockDim.x) {
    // Rank: the sequences before b in the order (more keys, or as many and an earlier index).
    int rank = 0, start = 0;
    for (int c = 0; c < p.B; ++c) {
      const bool before = nk_of[c] > nk_of[b] || (nk_of[c] == nk_of[b] && c < b);
      rank += before;
      start += before ? tiles_of[c] : 0;
    }
    p.order[rank] = b;
    p.tile_start[rank] = start;
    if (rank == p.B - 1) p.tile_start[p.B] = start + tiles_of[b];
    const int64_t first[4] = {p.cu_q[b], p.cu_k[b], p.cu_k[b], p.cu_q[b]};
    const int len[4] = {p.cu_q[b + 1] - p.cu_q[b], nk_of[b], nk_of[b], p.cu_q[b + 1] - p.cu_q[b]};
    for (int m = 0; m < 4; ++m) {
      CUtensorMap* dst = p.maps + 4 * b + m;
      const uint4* src = reinterpret_cast<const uint4*>(&p.tmpl[m]);
      uint4* to = reinterpret_cast<uint4*>(dst);
#pragma unroll
      for (int i = 0; i < 8; ++i) to[i] = src[i];
      sm90::tensormap_set_address(dst, p.base[m] + first[m] * p.row_bytes[m]);
      // A sequence of length 0 keeps a map of one row: no copy ever uses it.
      sm90::tensormap_set_rows(dst, len[m] > 0 ? len[m] : 1);
    }
  }
  sm90::tensormap_release();
#endif
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
