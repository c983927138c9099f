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
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/problem.h"
#include "cuda/runner.h"
#include "run/compare.h"

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
  Norm2 num, den;  // scaled: sums of squares of tiny or huge values would under- or overflow
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
    num.add(d);
    den.add(r[i]);
    e.max_abs = std::max(e.max_abs, std::abs(d));
  }
  // A reference that is exactly zero everywhere (dQ, dK with a single key, say) has no scale of
  // its own: the error is then the RMS of x, in the units of the O(1) random inputs.
  e.rel = den.value() > 0 ? num.ratio(den)
                          : num.value() / std::sqrt(static_cast<double>(std::max<size_t>(n, 1)));
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

// One point of a GPU test matrix, and its name in the test list
// ("bf16_d128_causal_B1H2_Nq17_Nk1000", "..._B1H8Hkv2_..._w64_0" with grouped heads, a window).
struct Case {
  DType dtype;
  int64_t d;
  bool causal;
  int64_t B, H, Nq, Nk;
  int64_t Hkv = 0;                              // 0: H
  int64_t window_left = -1, window_right = -1;  // -1: no bound
};

inline std::string case_name(const Case& c) {
  std::string name = to_string(c.dtype) + "_d" + std::to_string(c.d) +
                     (c.causal ? "_causal" : "_full") + "_B" + std::to_string(c.B) + "H" +
                     std::to_string(c.H);
  if (c.Hkv > 0 && c.Hkv != c.H) name += "Hkv" + std::to_string(c.Hkv);
  name += "_Nq" + std::to_string(c.Nq) + "_Nk" + std::to_string(c.Nk);
  if (c.window_left >= 0 || c.window_right >= 0)
    name += "_w" + (c.window_left >= 0 ? std::to_string(c.window_left) : std::string("inf")) + "_" +
            (c.window_right >= 0 ? std::to_string(c.window_right) : std::string("inf"));
  return name;
}

inline Problem problem_of(const Case& c) {
  Problem p;
  p.shape = {c.B, c.H, c.Nq, c.Nk, c.d};
  p.shape.Hkv = c.Hkv;
  p.causal = c.causal;
  p.dtype = c.dtype;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  return p;
}

// (Nq, Nk, B, H) of one shape of a matrix, and optionally its K/V heads and window.
struct MatrixShape {
  int64_t Nq, Nk, B, H;
  int64_t Hkv = 0;
  int64_t window_left = -1, window_right = -1;
};

// Every shape for fp16 and bf16, d = 64 and 128, without and with the causal mask.
inline std::vector<Case> case_matrix(std::initializer_list<MatrixShape> shapes) {
  std::vector<Case> cases;
  for (DType t : {DType::f16, DType::bf16})
    for (int64_t d : {64, 128})
      for (bool causal : {false, true})
        for (const MatrixShape& s : shapes)
          cases.push_back({t, d, causal, s.B, s.H, s.Nq, s.Nk, s.Hkv, s.window_left,
                           s.window_right});
  return cases;
}

// One untimed run: no warm-up, no repeats, no L2 flush, no bitwise repeats.
inline cuda::RunOptions once() {
  cuda::RunOptions o;
  o.warmup = 0;
  o.repeats = 0;
  o.flush_l2 = false;
  o.bitwise_repeats = 0;
  return o;
}

// The forward a backward kernel is given: the fp64 reference's, O rounded to the dtype as a
// kernel would store it, LSE kept as fp64 here (the runner uploads it as fp32).
inline Forward reference_forward_for(const Problem& p, const Forward& ref) {
  Forward f;
  f.O = ref.O;
  round_all(p.dtype, f.O);
  f.LSE = ref.LSE;
  return f;
}

}  // namespace flashlab::gpu_test
