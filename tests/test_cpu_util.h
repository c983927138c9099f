// Helpers shared by the CPU-twin tests: problems, poisoned outputs, error measures.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "core/packed.h"
#include "core/problem.h"
#include "reference/attention.h"
#include "run/registry.h"

namespace flashlab::testing {

// The CPU twin of a registered version (the test fails to build its case when the id is unknown).
inline CpuForwardFn fwd_of(const char* id) {
  const VersionInfo* v = find_version(id);
  return v ? v->cpu_forward : nullptr;
}
inline CpuBackwardFn bwd_of(const char* id) {
  const VersionInfo* v = find_version(id);
  return v ? v->cpu_backward : nullptr;
}

inline Problem make_problem(int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t d, bool causal,
                            DType dtype) {
  Problem p;
  p.shape = Shape{B, H, Nq, Nk, d};
  p.causal = causal;
  p.dtype = dtype;
  return p;
}

// The same with Hkv K/V heads and K, V in pages of `page` keys (0: a contiguous cache).
inline Problem make_paged_problem(int64_t B, int64_t H, int64_t Hkv, int64_t Nq, int64_t Nk,
                                  int64_t d, int64_t page, bool causal, DType dtype) {
  Problem p = make_problem(B, H, Nq, Nk, d, causal, dtype);
  p.shape.Hkv = Hkv;
  p.shape.page_size = page;
  return p;
}

// Outputs start as NaN of the right size, so an element a twin forgets to write shows up.
inline void poison(HostTensor& x, int64_t n) {
  x.assign(static_cast<size_t>(n), std::numeric_limits<double>::quiet_NaN());
}
inline void poison(Forward& f, const Problem& p, bool with_P) {
  poison(f.O, p.shape.q_elems());
  poison(f.LSE, p.shape.lse_elems());
  if (with_P) poison(f.P, p.shape.heads() * p.shape.Nq * p.shape.Nk);
}
inline void poison(Gradients& g, const Problem& p) {
  poison(g.dQ, p.shape.q_elems());
  poison(g.dK, p.shape.kv_elems());
  poison(g.dV, p.shape.kv_elems());
}

// max |x - ref|, where -inf must meet -inf exactly; a size mismatch, NaN or a wrong infinity
// gives +inf.
inline double max_abs_error(const HostTensor& x, const HostTensor& ref) {
  if (x.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double m = 0;
  for (size_t e = 0; e < x.size(); ++e) {
    if (std::isinf(ref[e]) || std::isinf(x[e])) {
      if (x[e] != ref[e]) return std::numeric_limits<double>::infinity();
      continue;
    }
    const double diff = std::abs(x[e] - ref[e]);
    if (!(diff <= m)) m = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff;
  }
  return m;
}

// max |ref| over the finite elements (at least a tiny floor, so relative errors stay defined).
inline double max_abs(const HostTensor& ref) {
  double m = 1e-300;
  for (double v : ref)
    if (std::isfinite(v)) m = std::max(m, std::abs(v));
  return m;
}

inline bool bitwise_equal(const HostTensor& a, const HostTensor& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](double x, double y) {
           return std::memcmp(&x, &y, sizeof x) == 0;
         });
}

// The allowed error of one output tensor of a CPU twin: fp64 to 1e-12 of its size; otherwise
// kLowpFactor times the error of the plain computation in the storage dtype (reference::lowp_*),
// plus a floor of kFloorUlps * d units of roundoff of its size.
inline constexpr double kLowpFactor = 10.0;
inline constexpr double kFloorUlps = 2.0;
inline constexpr double kFp64Relative = 1e-12;

inline double budget(const Problem& p, const HostTensor& ref, const HostTensor& lowp) {
  const double size = std::max(max_abs(ref), 1.0);
  if (p.dtype == DType::f64) return kFp64Relative * size;
  return kLowpFactor * max_abs_error(lowp, ref) +
         kFloorUlps * p.shape.d * unit_roundoff(p.dtype) * size;
}

inline void expect_close(const char* what, const Problem& p, const HostTensor& x,
                         const HostTensor& ref, const HostTensor& lowp) {
  const double err = max_abs_error(x, ref), allowed = budget(p, ref, lowp);
  EXPECT_LE(err, allowed) << what << ": error " << err << " > budget " << allowed;
}

// Every twin of the ladder that takes p's axes, through flashlab::cpu_forward / cpu_backward (a
// packed batch sequence by sequence), against the reference within budget(); its dry run counts
// what its real run counted, and the deterministic twins repeat bit for bit.
inline void check_twins(const Problem& p, const Inputs& in, const CpuOptions& opt) {
  const Forward ref = reference::forward(p, in, true);
  const Gradients ref_g = reference::backward(p, in, ref);
  const Forward lowp = reference::lowp_forward(p, in);
  const Gradients lowp_g = reference::lowp_backward(p, in, lowp);
  CpuOptions dry_opt = opt;
  dry_opt.dry_run = true;
  Forward tiled;
  Counters ignored;
  cpu_forward(*find_version("tiled"), p, in, opt, tiled, ignored);
  for (const VersionInfo& v : versions()) {
    if ((p.axes() & ~v.axes) != 0 || v.exercise) continue;  // refused by the runner
    if (v.fp8 != (p.dtype == DType::fp8)) continue;         // so are these (run/validate.h)
    SCOPED_TRACE(v.id);
    Forward own;
    if (v.cpu_forward) {
      poison(own, p, false);
      Counters counted, dry;
      cpu_forward(v, p, in, opt, own, counted);
      expect_close("O", p, own.O, ref.O, lowp.O);
      expect_close("LSE", p, own.LSE, ref.LSE, lowp.LSE);
      Forward empty;
      cpu_forward(v, p, Inputs{}, dry_opt, empty, dry);
      EXPECT_EQ(counted, dry);
    }
    if (v.cpu_backward) {
      const Forward& f = v.cpu_forward ? own : tiled;
      Gradients g, again;
      poison(g, p);
      Counters counted, dry;
      cpu_backward(v, p, in, f, opt, g, counted);
      expect_close("dQ", p, g.dQ, ref_g.dQ, lowp_g.dQ);
      expect_close("dK", p, g.dK, ref_g.dK, lowp_g.dK);
      expect_close("dV", p, g.dV, ref_g.dV, lowp_g.dV);
      Gradients empty;
      cpu_backward(v, p, Inputs{}, Forward{}, dry_opt, empty, dry);
      EXPECT_EQ(counted, dry);
      if (v.deterministic) {
        poison(again, p);
        cpu_backward(v, p, in, f, opt, again, ignored);
        EXPECT_TRUE(bitwise_equal(g.dQ, again.dQ) && bitwise_equal(g.dK, again.dK) &&
                    bitwise_equal(g.dV, again.dV))
            << "deterministic, but two runs differ";
      }
    }
  }
}

}  // namespace flashlab::testing
