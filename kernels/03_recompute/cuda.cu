// recompute, CUDA: the first FlashAttention backward of the ladder -- no N x N matrix anywhere.
//
// What it changes from naive: S and P are never stored. The forward kept only LSE; a preprocess
// kernel computes D = rowsum(O*dO) (chapter 16.1), and the main kernels recompute
// P = exp2(S * scale*log2e - LSE*log2e) tile by tile. Nothing is written by two CTAs, so no
// atomics: each gradient has one owner.
//
//   preprocess   D, LSE2                                        (common/bwd_preprocess.cuh)
//   dK, dV       outer loop over K blocks (Bc = 128, 8 warps), inner over Q blocks
//                (Br = 64 or 128): S^T, P^T, dV += P^T dO, dP^T, dS^T, dK += dS^T Q -- 4 matmuls
//                                                              (common/bwd_outer_k.cuh,
//                                                              DqMode::none)
//   dQ           outer loop over Q blocks (Br = 128, 8 warps x 16 queries), inner over K blocks
//                (Bc = 64): S, P, dP, dS, dQ += dS K -- 3 matmuls, S and dP computed a second time
//                                                              (common/bwd_dq_outer_q.cuh)
//
//        dK,dV kernel                         dQ kernel
//        K block j  -->  Q blocks i = 0..     Q block i  -->  K blocks j = 0..
//        (owns dK_j, dV_j)                    (owns dQ_i)
//
// Limits: fp16/bf16, d = 64 or 128. 7 matmuls instead of FA2's 5: the price of no atomics.
// Extra memory: LSE2 and D, two padded fp32 rows per query.
#include <cuda_runtime.h>

#include "common/bwd_dispatch.cuh"
#include "common/bwd_params.h"
#include "cuda/device_api.h"

namespace flashlab::cuda {

namespace {

size_t recompute_workspace(const Problem& p) {
  return bwd_workspace_bytes(p, 0);
}

void recompute_backward(const DeviceTensors& t) {
  const BwdParams p = bwd_make_params(t);
  bwd_dispatch(t.problem, [&]<class T, int kD>() {
    launch_bwd_preprocess<T, kD>(p, t.stream);
    launch_bwd_outer_k<T, kD, DqMode::none>(p, t.stream);
    launch_bwd_dq_outer_q<T, kD>(p, t.stream);
  });
}

}  // namespace

const Version recompute{.check = bwd_check,
                        .workspace_bytes = recompute_workspace,
                        .forward = nullptr,
                        .backward = recompute_backward};

}  // namespace flashlab::cuda
