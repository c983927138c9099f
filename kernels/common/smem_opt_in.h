// Above 48 KiB of dynamic shared memory a kernel must opt in (cudaFuncSetAttribute), and the
// opt-in belongs to the device that was current when it was made. One process that drives several
// GPUs (the ring, kernels/09_ring) launches the same kernel on each, so the opt-in is made once per
// (kernel, device), not once per process.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <set>
#include <tuple>

namespace flashlab::cuda {

// Raises `kernel`'s dynamic shared memory limit to `bytes` on the current device, unless that was
// done before. Thread-safe; returns CUDA's error (the caller checks it).
template <class Kernel>
cudaError_t opt_in_smem(Kernel* kernel, int bytes) {
  static std::mutex guard;
  static std::set<std::tuple<const void*, int, int>> done;  // (kernel, device, bytes)
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), device, bytes);
  std::lock_guard<std::mutex> lock(guard);
  if (done.count(key)) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) done.insert(key);
  return e;
}

}  // namespace flashlab::cuda
