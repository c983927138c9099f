// What the GPU tests share: skipping without a device, the error measure and the error budget.
//
// Error of an output x against the fp64 reference r: ||x - r|| / ||r|| over the finite entries
// (RMS of x - r where r is zero everywhere).
// Entries where r is -inf (LSE of a row that sees no key) must be exactly -inf in x; NaN or Inf
// anywhere else fails outright (the runner poisons every output with NaN before each run, so an
// element a kernel never wrote shows up here).
//
// Budget for an output: kBudgetFactor x what its storage dtype forces, the larger of
//   - the error of a plain fp32-accumulating implementation in that dtype (reference::lowp_*),
//   - the error of the fp64 reference itself rounded to the output's dtype,
// plus kBudgetFloor, so that outputs whose forced error is ~1e-8 (LSE in fp32) are not held to
// a bar tighter than fp32 arithmetic on a different summation order can meet.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/dtype.h"
#include "core/problem.h"
#include "cuda/runner.h"

namespace flashlab::gpu_test {

constexpr double kBudgetFactor = 4.0;
constexpr double kBudgetFloor = 1e-5;

#define FLASHLAB_SKIP_WITHOUT_DEVICE()                                                  \
  do {                                                                                  \
    if (!::flashlab::cuda::device_info().present)                                       \
      GTEST_SKIP() << "no CUDA device: " << ::flashlab::cuda::device_info().why_absent; \
  } while (0)

struct ErrorStats {
  double rel = 0.0;      // ||x - r|| / ||r||
  double max_abs = 0.0;  // max |x - r|
  std::string bad;       // non-empty: NaN, misplaced Inf or a size mismatch (always a failure)
};

inline ErrorStats compare(const HostTensor& x, const HostTensor& r) {
  ErrorStats e;
  if (x.size() != r.size()) {
    e.bad = "size " + std::to_string(x.size()) + " vs reference " + std::to_string(r.size());
    return e;
  }
  double num = 0.0, den = 0.0;
  size_t n = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isinf(r[i])) {
      if (x[i] != r[i] && e.bad.empty())
        e.bad = "element " + std::to_string(i) + " is " + std::to_string(x[i]) + ", reference " +
                std::to_string(r[i]);
      continue;
    }
    if (!std::isfinite(x[i])) {
      if (e.bad.empty())
        e.bad = "element " + std::to_string(i) + " is " + std::to_string(x[i]) +
                " (never written, or overflow)";
      continue;
    }
    const double d = x[i] - r[i];
    ++n;
    num += d * d;
    den += r[i] * r[i];
    e.max_abs = std::max(e.max_abs, std::abs(d));
  }
  // A reference that is exactly zero everywhere (dQ, dK with a single key, say) has no scale of
  // its own: the error is then the RMS of x, in the units of the O(1) random inputs.
  e.rel =
      den > 0 ? std::sqrt(num / den) : std::sqrt(num / static_cast<double>(std::max<size_t>(n, 1)));
  return e;
}

inline HostTensor rounded(DType t, const HostTensor& x) {
  HostTensor y = x;
  for (double& v : y)
    if (std::isfinite(v)) v = round_to(t, v);
  return y;
}

// The budget for an output stored in `store`, given the reference and the plain low-precision
// computation of the same output.
inline double budget(DType store, const HostTensor& ref, const HostTensor& lowp) {
  const double forced = std::max(compare(lowp, ref).rel, compare(rounded(store, ref), ref).rel);
  return kBudgetFactor * forced + kBudgetFloor;
}

// Checks one output; returns a line for the log.
inline std::string expect_within(const char* what, DType store, const HostTensor& x,
                                 const HostTensor& ref, const HostTensor& lowp) {
  const ErrorStats e = compare(x, ref);
  const double b = budget(store, ref, lowp);
  EXPECT_TRUE(e.bad.empty()) << what << ": " << e.bad;
  EXPECT_LE(e.rel, b) << what << ": relative error " << e.rel << " over budget " << b;
  char line[160];
  std::snprintf(line, sizeof line, "%s rel %.2e (budget %.2e) max_abs %.2e%s", what, e.rel, b,
                e.max_abs, e.bad.empty() ? "" : " BAD");
  return line;
}

}  // namespace flashlab::gpu_test
