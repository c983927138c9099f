// device_info(): CUDA device 0, read through the runtime API (plain C, so g++ compiles this file;
// the static CUDA runtime is linked where the build has CUDA).
#include "core/device.h"

#ifdef FLASHLAB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace flashlab::cuda {

#ifdef FLASHLAB_HAVE_CUDA

const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    DeviceInfo d;
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      int driver = 0;
      cudaDriverGetVersion(&driver);
      d.why_absent = driver == 0
                         ? std::string("no NVIDIA driver is installed (no GPU on this machine?)")
                         : std::string("no usable CUDA device: ") + cudaGetErrorString(err);
      cudaGetLastError();  // clear the error so later calls start clean
      return d;
    }
    if (count == 0) {
      d.why_absent = "no CUDA device found";
      return d;
    }
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
      d.why_absent = "cannot read the properties of CUDA device 0";
      cudaGetLastError();
      return d;
    }
    d.present = true;
    d.count = count;
    d.name = prop.name;
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    d.sms = prop.multiProcessorCount;
    d.total_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    d.l2_bytes = prop.l2CacheSize;
    cudaDriverGetVersion(&d.driver_version);
    cudaRuntimeGetVersion(&d.runtime_version);
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      d.free_bytes = static_cast<int64_t>(free_b);
    cudaGetLastError();
    return d;
  }();
  return info;
}

#else

const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    DeviceInfo d;
    d.why_absent = "this flashlab was built without CUDA (FLASHLAB_CUDA=OFF or no nvcc found)";
    return d;
  }();
  return info;
}

#endif

}  // namespace flashlab::cuda
