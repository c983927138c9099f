// Wall-clock timing of a CPU pass (steady clock) and the summary every report prints.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace flashlab {

struct TimeStats {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int repeats = 0;
};

inline TimeStats summarize(std::vector<double> ms) {
  TimeStats s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  s.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  s.min_ms = ms.front();
  s.max_ms = ms.back();
  s.repeats = static_cast<int>(n);
  return s;
}

// Milliseconds taken by f().
template <class F>
double time_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

}  // namespace flashlab
