// What the GPU tests share: skipping without a device, the error measure, the error budget, and
// the loop that holds every CUDA version of the registry to a case's expected outputs.
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
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/problem.h"
#include "cuda/runner.h"
#include "run/compare.h"
#include "run/registry.h"

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

// Every shape for fp16 and bf16, d = 64 and 128 (or the head dims given), without and with the
// causal mask.
inline std::vector<Case> case_matrix(std::initializer_list<MatrixShape> shapes,
                                     std::initializer_list<int64_t> dims = {64, 128}) {
  std::vector<Case> cases;
  for (DType t : {DType::f16, DType::bf16})
    for (int64_t d : dims)
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

// What every CUDA version must match on one case: the fp64 reference's outputs, and those of the
// plain low-precision computation, which set the budget (expect_within).
struct Expected {
  Forward ref, low;
  Gradients gref, glow;
};

// What one matrix's loop says and asks that another's does not.
struct VersionLoop {
  const char* matrix;         // named when a version rejects one of its shapes: "test matrix"
  const char* no_feed;        // the failure when no tiled forward can feed a backward-only version
  unsigned feed_axes;         // the axes (core/problem.h) that tiled forward must take to feed one
  int deterministic_repeats;  // extra runs a deterministic version must repeat bit for bit
  bool log_repeatable;        // the log says whether they did
  // A refusal that names this (e.g. "head dim") leaves the version out with a line instead of
  // failing: for a matrix of shapes only some versions take. Null: every refusal fails.
  const char* may_refuse = nullptr;
};

// Every CUDA version of the registry with a pass, on problem p with inputs in (the case `name`):
// each of its outputs within the budget, and a deterministic version bitwise repeatable. A version
// not on this GPU, or that does not take one of p's axes, says so on stdout and is left out; one
// whose check() rejects p fails, unless the refusal names loop.may_refuse. A backward-only version gets O and LSE from the CUDA `tiled`
// forward of the same inputs (as the CLI does). `tested` counts the versions that ran, and `ran`
// (when given) lists their ids, so that a matrix can require a version to run, not be left out.
inline void check_every_version(const Problem& p, const Inputs& in, const Expected& e,
                                const std::string& name, const VersionLoop& loop, int& tested,
                                std::vector<std::string>* ran = nullptr) {
  const cuda::RunOptions opt = once();
  std::optional<Forward> tiled_fwd;  // O and LSE for the backward-only versions
  auto forward_for_backward = [&]() -> const Forward* {
    if (!tiled_fwd) {
      const VersionInfo* t = find_version("tiled");
      if (!t || !t->cuda || !t->cuda->forward || (t->cuda->axes & loop.feed_axes) != loop.feed_axes)
        return nullptr;
      tiled_fwd = cuda::run(*t->cuda, p, in, nullptr, opt).fwd;
    }
    return &*tiled_fwd;
  };

  tested = 0;
  for (const VersionInfo& v : versions()) {
    if (v.exercise) continue;  // the starters: tests/gpu/test_gpu_exercises.cpp
    if (v.fp8) continue;       // --dtype fp8 only: tests/gpu/test_gpu_hopper_fp8.cpp
    if (!v.cuda || (!v.cuda->forward && !v.cuda->backward)) continue;
    if (const std::string why = cuda_unavailable(v); !why.empty()) {
      std::cout << "[" << v.id << "] not on this GPU: " << why << "\n";
      continue;
    }
    SCOPED_TRACE(std::string("version ") + v.id + ", case " + name);
    if (const unsigned missing = p.axes() & ~v.cuda->axes) {
      std::cout << "[" << v.id << "] " << name << ": does not take " << axis_name(missing)
                << " on cuda yet\n";
      continue;
    }
    if (v.cuda->check) {
      const std::string why = v.cuda->check(p);
      if (!why.empty() && loop.may_refuse && why.find(loop.may_refuse) != std::string::npos) {
        std::cout << "[" << v.id << "] " << name << ": " << why << "\n";
        continue;
      }
      EXPECT_TRUE(why.empty()) << v.id << " rejects a shape of the " << loop.matrix << ": " << why;
      if (!why.empty()) continue;
    }
    // A backward that takes fewer problems than its forward: the forward is tested alone.
    const std::string bwd_refused = cuda::backward_refusal(*v.cuda, p);
    if (!bwd_refused.empty()) {
      std::cout << "[" << v.id << "] " << name << ": " << bwd_refused << "\n";
      EXPECT_TRUE(loop.may_refuse && bwd_refused.find(loop.may_refuse) != std::string::npos)
          << v.id << "'s backward rejects a shape of the " << loop.matrix << ": " << bwd_refused;
    }
    const bool fwd = v.cuda->forward != nullptr,
               bwd = v.cuda->backward != nullptr && bwd_refused.empty();
    const Forward* fwd_in = (bwd && !fwd) ? forward_for_backward() : nullptr;
    if (bwd && !fwd) {
      ASSERT_NE(fwd_in, nullptr) << loop.no_feed << v.id;
    }
    cuda::RunOptions o = opt;
    o.bitwise_repeats = v.deterministic ? loop.deterministic_repeats : 0;
    const cuda::RunResult r = cuda::run(*v.cuda, p, in, fwd_in, o);
    std::string log = std::string("[") + v.id + "] " + name;
    if (fwd) {
      log += "\n    " + expect_within("O  ", p.dtype, r.fwd.O, e.ref.O, e.low.O);
      log += "\n    " + expect_within("LSE", DType::f32, r.fwd.LSE, e.ref.LSE, e.low.LSE);
    }
    if (bwd) {
      log += "\n    " + expect_within("dQ ", p.dtype, r.grads.dQ, e.gref.dQ, e.glow.dQ);
      log += "\n    " + expect_within("dK ", p.dtype, r.grads.dK, e.gref.dK, e.glow.dK);
      log += "\n    " + expect_within("dV ", p.dtype, r.grads.dV, e.gref.dV, e.glow.dV);
    }
    if (v.deterministic) {
      EXPECT_TRUE(r.bitwise_repeatable) << v.id << " promised bitwise repeats";
      if (loop.log_repeatable)
        log += r.bitwise_repeatable ? "\n    bitwise repeatable" : "\n    NOT bitwise repeatable";
    }
    std::cout << log << "\n";
    ++tested;
    // A version whose backward was refused ran its forward alone: the list says so, so that a
    // matrix that requires the version requires both passes.
    if (ran) ran->push_back(bwd_refused.empty() ? std::string(v.id) : v.id + std::string(" (forward alone)"));
  }
}

// Fails unless every id of `required` is in `ran` (check_every_version's list): a version that a
// matrix must cover was not left out by a refusal, a missing axis or a missing build, and ran
// both its passes where it has two.
inline void expect_ran(const std::vector<std::string>& ran,
                       std::initializer_list<const char*> required, const std::string& name) {
  for (const char* id : required)
    EXPECT_NE(std::find(ran.begin(), ran.end(), id), ran.end())
        << id << " was not tested on " << name << " (refused or left out)";
}

}  // namespace flashlab::gpu_test
