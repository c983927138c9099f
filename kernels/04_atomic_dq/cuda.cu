// atomic-dq, CUDA: FA2's backward in one outer-K pass (chapter 16.2 / 16.3.1).
//
// What it changes from recompute: dQ is no longer a second outer-Q kernel that recomputes S and dP
// (7 matmuls). The outer-K kernel, which already has dS for its K block, multiplies it by K_j and
// adds the Br x d partial into one fp32 dQ accumulator at L2 (5 matmuls). A convert kernel
// then scales the accumulator by the softmax scale and casts it to fp16/bf16.
//
//   preprocess   D = rowsum(O*dO), LSE2 = LSE*log2(e)          (common/fa2_bwd/preprocess.cuh)
//   memset       dQ_accum = 0                                  (part of every backward call)
//   outer-K      grid (ceil(Nk/Bc), B*H), Bc = 128 keys, 8 warps, Br = 64 (d = 128) or 128
//                (d = 64) queries per step; Bc = Br = 64 at d = 256
//                dK, dV stored once per CTA; dQ_accum += dS K_j, one bulk reduce-add per step
//                on sm_90 (red.global.add elsewhere, and at d = 256)
//                                                              (common/fa2_bwd/outer_k.cuh)
//   convert      dQ = scale * dQ_accum                         (common/fa2_bwd/convert.cuh)
//
//        K block j=0     j=1     j=2 ...           dQ_accum (fp32, B*H*Nq*d)
//        +------+      +------+                   +------------------------+
//        | CTA  | ---> | CTA  | ---> add at L2 -> | rows of Q block i      | <- every CTA adds
//        +------+      +------+                   +------------------------+
//
// Limits: fp16/bf16, d = 64, 128 or 256. dQ is not bitwise reproducible: fp32 addition is not
// associative, and the order in which the K-block CTAs reach a row changes run to run (dK, dV are
// reproducible). Extra memory: 2 padded fp32 rows (LSE2, D) and one fp32 copy of dQ.
#include <cuda_runtime.h>

#include <string>

#include "common/dispatch.cuh"
#include "common/fa2_bwd/params.h"
#include "core/cuda_check.h"
#include "core/device_api.h"

namespace flashlab::cuda {

namespace {

// Its kernels are the shared FA2 backward's (common/fa2_bwd), and so are its limits (packed
// batches too: params.h).
std::string atomic_check(const Problem& p) {
  std::string why = shape_check(p, "atomic-dq", kFa2BwdLimits);
  return why.empty() ? bwd_packed_check(p, "atomic-dq") : why;
}

size_t atomic_workspace(const Problem& p, const LaunchOptions&) {
  return bwd_workspace_bytes(p, 1);
}

void atomic_backward(const DeviceTensors& t) {
  const BwdParams p = bwd_make_params(t);
  const int64_t accum_bytes = t.problem.shape.q_elems() * 4;
  FLASHLAB_CUDA_CHECK(
      cudaMemsetAsync(p.dQ_accum, 0, accum_bytes, static_cast<cudaStream_t>(t.stream)));
  dispatch_dtype_head_dims<64, 128, 256>(t.problem, [&]<class T, int kD>() {
    launch_bwd_preprocess<T, kD>(p, t.stream);
    launch_bwd_outer_k<T, kD, DqMode::atomic>(p, t.stream);
    launch_bwd_convert_dq<T, kD>(p, DqMode::atomic, 1, t.stream);
  });
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = atomic_check,
                       .workspace_bytes = atomic_workspace,
                       .backward = atomic_backward,
                       .axes = kGroupedHeads | kWindow | kPacked});
