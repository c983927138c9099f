// Without CUDA: the runner reports that no device can be used.
#ifndef FLASHLAB_HAVE_CUDA
#include <stdexcept>

#include "cuda/runner.h"

namespace flashlab::cuda {

const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    DeviceInfo d;
    d.why_absent = "this flashlab was built without CUDA (FLASHLAB_CUDA=OFF or no nvcc found)";
    return d;
  }();
  return info;
}

std::span<const Version> hopper_ablation() {
  return {};
}

int64_t required_device_bytes(const Version&, const Problem&) {
  return 0;
}

RunResult run(const Version&, const Problem&, const Inputs&, const Forward*, const RunOptions&) {
  throw std::runtime_error(device_info().why_absent);
}

}  // namespace flashlab::cuda
#endif
