// A packed batch's tensor maps, one set per sequence, made on the device before a forward or a
// backward of the rung.
//
// The copy engine clips a box at the edges of its map: a dense head's map ends at the head's last
// row, so ragged tails cost no code. A packed batch's sequences lie one after another in one
// tensor ([total, H, d]), and one map over all of it would let a box run into the next sequence:
// its rows loaded (they would have to be masked) and, worse, O or dK, dV written over them. So
// every sequence gets its own maps, the host's templates with two fields replaced: the base
// address (the sequence's first token) and the row extent (its length).
//
//   template m (host, by value)      seq_maps[n_maps b + m] (workspace, 128 bytes each)
//   dims (d, rows, heads) strides    = template m, global_address = base + start(b) heads d 2 bytes,
//   (heads d 2, d 2) bytes             global_dim[1] = len(b)          (tensormap.replace)
//
//   forward (4 maps):  Q, K, V, O      units: its H ceil(nq / Br) tiles (fwd_schedule.cuh)
//   backward (6 maps): Q, dO, K, V, dK, dV   units: its Hkv ceil(nk / Bc) blocks (bwd_kernel.cuh)
//
// The same kernel numbers the units: the sequences by keys, most first (the heaviest tiles or
// blocks start first, and the last ones to run are the short sequences'), each one's units in a
// run starting at unit_start[rank]. One block of 256 threads; a thread per sequence, each finding
// its rank and its run's start by counting (B <= kMaxPackedSeqs, check() refuses more).
// The maps are written by ordinary stores and tensormap.replace (the generic proxy): a release
// fence here, and an acquire fence by every thread that issues a copy with one (fwd_kernel.cuh,
// bwd_producer.cuh, bwd_consumer.cuh).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/sm90/tma.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER {

// The most sequences a packed batch may have: the map kernel's shared arrays.
inline constexpr int kMaxPackedSeqs = 1024;
// The most maps a sequence has (the backward's six).
inline constexpr int kMaxSeqMaps = 6;

struct SeqMapsParams {
  CUtensorMap tmpl[kMaxSeqMaps];  // over the whole batch (tensor_map_packed)
  const unsigned char* base[kMaxSeqMaps];
  int64_t row_bytes[kMaxSeqMaps];  // one token's row: heads d 2
  bool of_keys[kMaxSeqMaps];       // the map's rows are the sequence's keys (else its queries)
  int n_maps;
  const int32_t* cu_q;
  const int32_t* cu_k;
  int B;
  // A sequence's units: unit_heads ceil(len / unit_rows), len its keys or its queries.
  int unit_heads, unit_rows;
  bool units_of_keys;
  CUtensorMap* maps;  // [B][n_maps], 128-byte aligned
  int* order;         // [B]
  int* unit_start;    // [B + 1]
};

__global__ void __launch_bounds__(256) seq_maps_kernel(const __grid_constant__ SeqMapsParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ int nk_of[kMaxPackedSeqs], units_of[kMaxPackedSeqs];
  for (int b = threadIdx.x; b < p.B; b += blockDim.x) {
    const int nq = p.cu_q[b + 1] - p.cu_q[b];
    nk_of[b] = p.cu_k[b + 1] - p.cu_k[b];
    const int len = p.units_of_keys ? nk_of[b] : nq;
    units_of[b] = p.unit_heads * ((len + p.unit_rows - 1) / p.unit_rows);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < p.B; b += blockDim.x) {
    // Rank: the sequences before b in the order (more keys, or as many and an earlier index).
    int rank = 0, start = 0;
    for (int c = 0; c < p.B; ++c) {
      const bool before = nk_of[c] > nk_of[b] || (nk_of[c] == nk_of[b] && c < b);
      rank += before;
      start += before ? units_of[c] : 0;
    }
    p.order[rank] = b;
    p.unit_start[rank] = start;
    if (rank == p.B - 1) p.unit_start[p.B] = start + units_of[b];
    const int nq = p.cu_q[b + 1] - p.cu_q[b];
    for (int m = 0; m < p.n_maps; ++m) {
      CUtensorMap* dst = p.maps + p.n_maps * b + m;
      const uint4* src = reinterpret_cast<const uint4*>(&p.tmpl[m]);
      uint4* to = reinterpret_cast<uint4*>(dst);
#pragma unroll
      for (int i = 0; i < 8; ++i) to[i] = src[i];
      const int64_t first = p.of_keys[m] ? p.cu_k[b] : p.cu_q[b];
      const int len = p.of_keys[m] ? nk_of[b] : nq;
      sm90::tensormap_set_address(dst, p.base[m] + first * p.row_bytes[m]);
      // A sequence of length 0 keeps a map of one row: no copy ever uses it.
      sm90::tensormap_set_rows(dst, len > 0 ? len : 1);
    }
  }
  sm90::tensormap_release();
#endif
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER
