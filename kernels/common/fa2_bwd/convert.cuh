// Backward convert (FA2's last step): the fp32 dQ accumulator -> dQ in the storage dtype.
//
//   atomic-dq:        dQ = scale * accum                                   (one fp32 buffer)
//   deterministic-dq: dQ = scale * (split[0] + split[1] + ... + split[J])  always in this order
//                     (nsplits splits; split s holds the sum over the K blocks of outer-K CTA s)
//
// Why scale here: the main kernel works with dS = dL/dS where S = scale * Q K^T, so the true
// gradient is dQ = scale * dS K; multiplying once at the end saves a multiply per partial.
// For the splits, J is the last split whose CTA visited this row's Q block: CTA s's first and
// smallest K block is j = s, which covers every Q block from first_q_block(s) on (the same
// function the outer-K kernel's loop starts from), and its later K blocks cover subsets of that.
// Splits that were never written are never read, so nothing has to be zeroed first.
//
// One thread per 8 consecutive elements of dQ (two 16-byte loads per split, one 16-byte store).
// The accumulator's columns are permuted in groups of 8 (dq_accum_col); a group stays whole.
#pragma once

#include <cstdint>

#include "common/fa2_bwd/params.h"
#include "common/sm80/tiles.cuh"

namespace flashlab::cuda::bwd {

template <class T, int kD>
__global__ void __launch_bounds__(256)
    convert_dq_kernel(const BwdParams p, DqMode mode, int splits, int outer_k_Br, int outer_k_Bc) {
  const int64_t chunk = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n_chunks = static_cast<int64_t>(p.BH) * p.Nq * (kD / 8);
  if (chunk >= n_chunks) return;
  const int64_t at = chunk * 8;                      // element offset in dQ and in a split
  const int q = static_cast<int>((at / kD) % p.Nq);  // query row inside its head
  const int q_block = q / outer_k_Br;
  const int col =
      static_cast<int>(at % kD);  // a multiple of 8: one permuted group (sm80/tiles.cuh)
  const int64_t accum_at = at - col + dq_accum_col(q, col);

  float acc[8] = {};
  for (int j = 0; j < splits; ++j) {
    // Splits: stop at the first split s whose K block j = s never visited this Q block (the
    // causal schedule is monotone in j), so unwritten memory is never read. atomic-dq's single
    // buffer was zeroed.
    if (mode == DqMode::split &&
        first_q_block(j, outer_k_Bc, outer_k_Br, p.offset, p.causal) > q_block)
      break;
    const float4* src = reinterpret_cast<const float4*>(p.dQ_accum + j * p.split_stride + accum_at);
    const float4 lo = src[0], hi = src[1];
    acc[0] += lo.x, acc[1] += lo.y, acc[2] += lo.z, acc[3] += lo.w;
    acc[4] += hi.x, acc[5] += hi.y, acc[6] += hi.z, acc[7] += hi.w;
  }
  uint4 out;
  out.x = ElemTraits<T>::pack(acc[0] * p.scale, acc[1] * p.scale);
  out.y = ElemTraits<T>::pack(acc[2] * p.scale, acc[3] * p.scale);
  out.z = ElemTraits<T>::pack(acc[4] * p.scale, acc[5] * p.scale);
  out.w = ElemTraits<T>::pack(acc[6] * p.scale, acc[7] * p.scale);
  *reinterpret_cast<uint4*>(static_cast<T*>(p.dQ) + at) = out;
}

}  // namespace flashlab::cuda::bwd
