// read_clock(): NVML by dlopen, so the binary needs neither its headers nor its library to build
// and runs where it is missing. Only the handful of functions used are declared, with NVML's
// stable C signatures.
#include "core/clock.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "core/device.h"

#ifdef FLASHLAB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace flashlab::cuda {

namespace {

using NvmlDevice = struct NvmlDeviceOpaque*;
using NvmlReturn = int;  // 0 is NVML_SUCCESS
constexpr int kClockSm = 1;  // NVML_CLOCK_SM

// NVML's clocks-event reason bits that mean the clock is held down by the board.
constexpr uint64_t kSwPowerCap = 0x4, kHwSlowdown = 0x8, kSwThermal = 0x20, kHwThermal = 0x40,
                   kHwPowerBrake = 0x80;

struct Nvml {
  bool ok = false;
  NvmlDevice dev = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*reasons)(NvmlDevice, unsigned long long*) = nullptr;
};

// How NVML finds CUDA device 0: its PCI bus id ("0000:3B:00.0"); empty without CUDA or a device.
std::string pci_bus_id() {
#ifdef FLASHLAB_HAVE_CUDA
  if (!device_info().present) return {};
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, 0) == cudaSuccess) return bus;
  cudaGetLastError();
#endif
  return {};
}

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string bus = pci_bus_id();
    if (bus.empty()) return;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<NvmlReturn (*)()>(dlsym(lib, "nvmlInit_v2"));
    auto by_bus = reinterpret_cast<NvmlReturn (*)(const char*, NvmlDevice*)>(
        dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.clock = reinterpret_cast<decltype(n.clock)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    n.max_clock = reinterpret_cast<decltype(n.max_clock)>(dlsym(lib, "nvmlDeviceGetMaxClockInfo"));
    n.reasons = reinterpret_cast<decltype(n.reasons)>(
        dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons"));
    if (!n.reasons)  // its name before NVML 12.2
      n.reasons = reinterpret_cast<decltype(n.reasons)>(
          dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    if (!init || !by_bus || !n.clock || !n.max_clock || !n.reasons) return;
    if (init() != 0 || by_bus(bus.c_str(), &n.dev) != 0) return;
    n.ok = true;
  });
  return n;
}

}  // namespace

std::string ClockReading::held_by() const {
  std::string s;
  const auto add = [&](uint64_t bit, const char* what) {
    if (!(reasons & bit)) return;
    if (!s.empty()) s += ", ";
    s += what;
  };
  add(kSwPowerCap, "power cap");
  add(kHwPowerBrake, "power brake");
  add(kHwSlowdown, "hardware slowdown");
  add(kSwThermal | kHwThermal, "temperature");
  return s;
}

ClockReading read_clock() {
  ClockReading r;
  const Nvml& n = nvml();
  if (!n.ok) return r;
  unsigned mhz = 0, max_mhz = 0;
  unsigned long long reasons = 0;
  if (n.clock(n.dev, kClockSm, &mhz) != 0 || n.max_clock(n.dev, kClockSm, &max_mhz) != 0 ||
      n.reasons(n.dev, &reasons) != 0)
    return r;
  r.known = true;
  r.sm_mhz = static_cast<int>(mhz);
  r.max_sm_mhz = static_cast<int>(max_mhz);
  r.reasons = reasons;
  return r;
}

}  // namespace flashlab::cuda
