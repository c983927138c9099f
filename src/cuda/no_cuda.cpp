// Without CUDA: the runner reports that no device can be used, and so do the counters and the
// ceilings.
#ifndef FLASHLAB_HAVE_CUDA
#include <stdexcept>

#include "cuda/ceilings.h"
#include "cuda/counters.h"
#include "cuda/runner.h"

namespace flashlab::cuda {

int64_t required_device_bytes(const Version&, const Problem&, const LaunchOptions&) {
  return 0;
}

RunResult run(const Version&, const Problem&, const Inputs&, const Forward*, const RunOptions&) {
  throw std::runtime_error(device_info().why_absent);
}

RunResult run_generated(const Version&, const Problem&, uint64_t, const RunOptions&) {
  throw std::runtime_error(device_info().why_absent);
}

const CounterStatus& counter_status() {
  static const CounterStatus s = [] {
    CounterStatus c;
    const std::string off = counters_disabled_by_env();
    c.why_not = off.empty() ? device_info().why_absent : off;
    return c;
  }();
  return s;
}

PassCounters measure_pass(const std::function<void()>&, const std::function<void()>&,
                          const L2Flush&) {
  throw std::runtime_error(counter_status().why_not);
}

CounterPlan plan_for_chip(const std::string&) {
  throw std::runtime_error("this flashlab was built without CUDA, so without CUPTI");
}

std::vector<Ceiling> measure_ceilings() {
  throw std::runtime_error(device_info().why_absent);
}

PassFloor time_plain_read(size_t) {
  throw std::runtime_error(device_info().why_absent);
}

PassFloor time_empty_kernel(int, int, int) {
  throw std::runtime_error(device_info().why_absent);
}

}  // namespace flashlab::cuda
#endif
