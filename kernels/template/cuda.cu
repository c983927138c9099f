// template, CUDA: the launcher of the version's kernels. Open with what the kernel changes, its
// tile/warp picture and its limits (see kernels/04_atomic_dq/cuda.cu). Ask for one explicit
// instantiation per (dtype, head dim) in version.cmake (flashlab_instances, see README.md): the
// build writes each into an object of its own, so they compile in parallel. Name the folder's own
// device code under flashlab::cuda::FLASHLAB_FOLDER so a copy of the folder never clashes.
#include <cuda_runtime.h>

#include <string>

#include "core/cuda_check.h"
#include "core/device_api.h"
#include "util/error.h"

namespace flashlab::cuda {

namespace {

// Empty when the problem is supported, else one sentence saying why not (checked before any
// allocation; `flashlab run --backend cuda` turns it into an error with exit status 2).
std::string problem_check(const Problem& p) {
  if (p.dtype != DType::f16 && p.dtype != DType::bf16) return "this version stores fp16 or bf16";
  if (p.shape.d != 64 && p.shape.d != 128) return "this version is built for head dims 64 and 128";
  return {};
}

size_t workspace(const Problem& p, const LaunchOptions&) {
  return static_cast<size_t>(p.shape.lse_elems()) * 4;
}

// Launches only: no allocation, no synchronisation; every CUDA call checked.
void backward(const DeviceTensors& t) {
  (void)t;
  FLASHLAB_TODO("the CUDA kernels of this version's backward");
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = problem_check, .workspace_bytes = workspace, .backward = backward});
