// Every CUDA call is checked: a failure throws std::runtime_error naming the call, the file and
// line, and CUDA's own message, so the CLI can print one clear line and exit non-zero.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace flashlab::cuda {

inline void check(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA error in ") + what + " (" + file + ":" +
                             std::to_string(line) + "): " + cudaGetErrorString(err));
  }
}

}  // namespace flashlab::cuda

#define FLASHLAB_CUDA_CHECK(expr) ::flashlab::cuda::check((expr), #expr, __FILE__, __LINE__)
// After every launch: catches bad launch configurations at once (asynchronous faults surface at
// the next checked synchronisation).
#define FLASHLAB_CHECK_LAUNCH() \
  ::flashlab::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
