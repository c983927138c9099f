// recompute, CUDA: the first FlashAttention backward of the ladder -- no N x N matrix anywhere.
//
// What it changes from naive: S and P are never stored. The forward kept only LSE; a preprocess
// kernel computes D = rowsum(O*dO) (chapter 16.1), and the main kernels recompute
// P = exp2(S * scale*log2e - LSE*log2e) tile by tile. Nothing is written by two CTAs, so no
// atomics: each gradient has one owner.
//
//   preprocess   D, LSE2                                        (common/fa2_bwd/preprocess.cuh)
//   dK, dV       outer loop over K blocks (Bc = 128, 64 at d = 256; 8 warps), inner over Q
//                blocks (Br = 64 or 128): S^T, P^T, dV += P^T dO, dP^T, dS^T, dK += dS^T Q --
//                4 matmuls
//                                                              (common/fa2_bwd/outer_k.cuh,
//                                                              DqMode::none)
//   dQ           outer loop over Q blocks (Br = 128, 8 warps: 4 x 2 tiles at d = 128, 8 x 1 at
//                d = 64; Br = 64 in 2 x 4 at d = 256), inner over K blocks (Bc = 64): S, P, dP,
//                dS, dQ += dS K -- 3 matmuls, S and dP computed a second time
//                                                              (common/fa2_bwd/dq_outer_q.cuh)
//
//        dK,dV kernel                         dQ kernel
//        K block j  -->  Q blocks i = 0..     Q block i  -->  K blocks j = 0..
//        (owns dK_j, dV_j)                    (owns dQ_i)
//        caller's stream                      a second stream, forked after the preprocess and
//                                             joined back, so its first CTAs fill the SMs that
//                                             the dK,dV kernel's last wave leaves idle
//
// Limits: fp16/bf16, d = 64, 128 or 256. 7 matmuls instead of FA2's 5: the price of no atomics.
// Extra memory: LSE2 and D, two padded fp32 rows per query.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>

#include "common/dispatch.cuh"
#include "common/fa2_bwd/params.h"
#include "core/cuda_check.h"
#include "core/device_api.h"

namespace flashlab::cuda {

namespace {

// Its kernels are the shared FA2 backward's (common/fa2_bwd), and so are its limits (packed
// batches too: params.h).
std::string recompute_check(const Problem& p) {
  std::string why = shape_check(p, "recompute", kFa2BwdLimits);
  return why.empty() ? bwd_packed_check(p, "recompute") : why;
}

size_t recompute_workspace(const Problem& p, const LaunchOptions&) {
  return bwd_workspace_bytes(p, 0);
}

// The dK/dV kernel and the dQ kernel read the same inputs and write different outputs, so they
// may run at the same time. Neither leaves room on an SM for the other (registers), but launched
// on a second stream the dQ kernel's first CTAs take the SMs that the dK/dV kernel's last, partial
// wave leaves idle. One side stream and its two events per device, made on first use.
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};

const SideStream& side_stream() {
  static std::mutex mutex;
  static std::map<int, SideStream> per_device;
  int dev = 0;
  FLASHLAB_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard lock(mutex);
  auto it = per_device.find(dev);
  if (it == per_device.end()) {
    SideStream s;
    FLASHLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    FLASHLAB_CUDA_CHECK(cudaEventCreateWithFlags(&s.fork, cudaEventDisableTiming));
    FLASHLAB_CUDA_CHECK(cudaEventCreateWithFlags(&s.join, cudaEventDisableTiming));
    it = per_device.emplace(dev, s).first;
  }
  return it->second;
}

void recompute_backward(const DeviceTensors& t) {
  const BwdParams p = bwd_make_params(t);
  const auto main = static_cast<cudaStream_t>(t.stream);
  const SideStream& side = side_stream();
  dispatch_dtype_head_dims<64, 128, 256>(t.problem, [&]<class T, int kD>() {
    launch_bwd_preprocess<T, kD>(p, main);
    // fork: the dQ kernel waits for the preprocess (LSE2, D), then runs beside dK/dV ...
    FLASHLAB_CUDA_CHECK(cudaEventRecord(side.fork, main));
    FLASHLAB_CUDA_CHECK(cudaStreamWaitEvent(side.stream, side.fork, 0));
    launch_bwd_outer_k<T, kD, DqMode::none>(p, main);
    launch_bwd_dq_outer_q<T, kD>(p, side.stream);
    // ... join: whatever the caller queues next on its stream comes after both.
    FLASHLAB_CUDA_CHECK(cudaEventRecord(side.join, side.stream));
    FLASHLAB_CUDA_CHECK(cudaStreamWaitEvent(main, side.join, 0));
  });
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = recompute_check,
                       .workspace_bytes = recompute_workspace,
                       .backward = recompute_backward,
                       .axes = kGroupedHeads | kWindow | kPacked});
