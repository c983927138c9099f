// The SM clock of the GPU, and what holds it below its maximum, read through NVML (the driver's
// management library, opened at run time: a machine without it, or without a GPU, reads nothing).
// The timed runs record it before and after, because a long kernel's time follows the clock: on a
// 700 W H200 the d = 128 backward runs at 1980 MHz for its first 40-60 ms of load and then at
// 1635-1800 MHz under the power limit, 12 % slower (docs/perf.md, "The pass on a timeline").
#pragma once

#include <cstdint>
#include <string>

namespace flashlab::cuda {

struct ClockReading {
  bool known = false;    // false: no NVML, no GPU, or the query failed
  int sm_mhz = 0;        // the SM clock now
  int max_sm_mhz = 0;    // the most it can run at
  uint64_t reasons = 0;  // NVML's clocks-event reasons, a bit mask
  // The reasons that hold the clock down (power cap, power brake, thermal), in words; empty when
  // none does (idle and application settings are not counted).
  std::string held_by() const;
  // The clock was read, is below its maximum, and a reason of the board's above holds it there.
  bool held_down() const { return known && sm_mhz < max_sm_mhz && !held_by().empty(); }
};

// The clock just before a pass's timed repeats and just after them.
struct PassClock {
  ClockReading before, after;
};

// The clock of CUDA device 0 (the device device_info() describes). Cheap after the first call.
ClockReading read_clock();

}  // namespace flashlab::cuda
