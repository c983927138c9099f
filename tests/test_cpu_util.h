// Helpers shared by the CPU-twin tests: problems, poisoned outputs, error measures.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/problem.h"
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

}  // namespace flashlab::testing
