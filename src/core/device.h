// The GPU this process may use, if any: found once, on first use, and cached. Kept at the bottom
// of the lab because every layer asks it something: the kernels their SM count, the runner its
// memory, the reports the machine. Without CUDA in the build it says so and reports no device.
#pragma once

#include <cstdint>
#include <string>

namespace flashlab::cuda {

struct DeviceInfo {
  bool present = false;
  std::string why_absent;  // set when present == false: no CUDA build, no device, driver error
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  int count = 0;  // visible devices (CUDA_VISIBLE_DEVICES applies); the rest describes device 0
  int64_t total_bytes = 0, free_bytes = 0;
  int64_t l2_bytes = 0;
  int driver_version = 0, runtime_version = 0;
};

// Cheap; cached after the first call. Never throws: a missing driver or device is a reason.
const DeviceInfo& device_info();

}  // namespace flashlab::cuda
