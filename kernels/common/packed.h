// A packed batch (FlashAttention's varlen layout, core/problem.h) as the CUDA kernels see it:
// sequence b holds the tokens [cu_q[b], cu_q[b+1]) of Q, O, dO, dQ ([total_q, H, d]) and
// [cu_k[b], cu_k[b+1]) of K, V, dK, dV ([total_k, Hkv, d]); LSE is [H, total_q]. Within a
// sequence the problem is a dense one with Nq = its query length and Nk = its key length, so a
// kernel finds its sequence once, at the start, and from there on differs from the dense kernel
// only in its row stride (H d or Hkv d elements instead of d) and in these lengths.
//
//   token-major rows of one head:      dense [B, H, N, d]        packed [total, H, d]
//     row r of (sequence b, head h)    ((b H + h) N + r) d       ((cu[b] + r) H + h) d
//     next row                         + d                       + H d
//
// The band (common/band.h) of a sequence is the problem's with its own Nq, Nk and offset: the
// host's band_of() widens an unbounded side to the longest lengths, which covers every key of a
// shorter sequence as well, and a bounded side is the window's, the same for every sequence.
#pragma once

#include <cstdint>

#include "common/band.h"

namespace flashlab::cuda {

// Where sequence b's rows start (tokens) and how many it has.
struct SeqRows {
  int q0, k0;  // first query token, first key token
  int nq, nk;  // lengths (either may be 0)
};

FLASHLAB_BAND_HD SeqRows seq_rows(const int32_t* cu_q, const int32_t* cu_k, int b) {
  const int q0 = cu_q[b], k0 = cu_k[b];
  return {q0, k0, cu_q[b + 1] - q0, cu_k[b + 1] - k0};
}

#if defined(__CUDACC__)
// The same, read with loads the compiler may neither merge nor move: a kernel short of registers
// calls it again where it needs the offsets instead of keeping them live across its main loop.
__device__ __forceinline__ int reread_offset(const int32_t* at) {
  int v;
  asm volatile("ld.global.nc.b32 %0, [%1];\n" : "=r"(v) : "l"(at));
  return v;
}
__device__ __forceinline__ SeqRows seq_rows_reread(const int32_t* cu_q, const int32_t* cu_k, int b) {
  const int q0 = reread_offset(cu_q + b), k0 = reread_offset(cu_k + b);
  return {q0, k0, reread_offset(cu_q + b + 1) - q0, reread_offset(cu_k + b + 1) - k0};
}
#endif

// The band of a sequence of nq rows and nk keys, from the problem's (band_of on the host).
FLASHLAB_BAND_HD Band seq_band(Band band, int nq, int nk) {
  band.Nq = nq;
  band.Nk = nk;
  band.offset = nk - nq;
  return band;
}

// The sequence that holds row t of a layout where sequence b's rows start at start(b), a
// nondecreasing function: the largest b < B with start(b) <= t. With start(b) = cu[b], the
// sequence of token t (a sequence of length 0 holds no token and is never the answer).
template <class Start>
FLASHLAB_BAND_HD int seq_of(int B, int64_t t, Start start) {
  int lo = 0, hi = B - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (start(mid) <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace flashlab::cuda
