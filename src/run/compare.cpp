#include "run/compare.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace flashlab {

namespace {

ErrorStats finish(double diff2, double ref2, ErrorStats e) {
  if (ref2 > 0)
    e.rel = std::sqrt(diff2) / std::sqrt(ref2);
  else
    e.rel = diff2 > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  return e;
}

}  // namespace

ErrorStats compare(const HostTensor& x, const HostTensor& ref) {
  ErrorStats e;
  if (x.size() != ref.size()) {
    e.finite = false;
    e.max_abs = e.rel = std::numeric_limits<double>::infinity();
    return e;
  }
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      e.finite = false;
      continue;
    }
    const double d = x[i] - ref[i];
    e.max_abs = std::max(e.max_abs, std::fabs(d));
    diff2 += d * d;
    ref2 += ref[i] * ref[i];
  }
  e.compared = static_cast<int64_t>(x.size());
  if (!e.finite) e.max_abs = std::numeric_limits<double>::quiet_NaN();
  return finish(e.finite ? diff2 : std::numeric_limits<double>::quiet_NaN(), ref2, e);
}

ErrorStats compare_lse(const HostTensor& x, const HostTensor& ref) {
  ErrorStats e;
  if (x.size() != ref.size()) {
    e.finite = false;
    e.max_abs = e.rel = std::numeric_limits<double>::infinity();
    return e;
  }
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(ref[i])) {
      if (!(std::isinf(x[i]) && x[i] < 0)) e.finite = false;
      continue;
    }
    if (!std::isfinite(x[i])) {
      e.finite = false;
      continue;
    }
    const double d = x[i] - ref[i];
    e.max_abs = std::max(e.max_abs, std::fabs(d));
    diff2 += d * d;
    ref2 += ref[i] * ref[i];
    ++e.compared;
  }
  if (!e.finite) e.max_abs = std::numeric_limits<double>::quiet_NaN();
  return finish(e.finite ? diff2 : std::numeric_limits<double>::quiet_NaN(), ref2, e);
}

bool bitwise_equal(const HostTensor& a, const HostTensor& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

}  // namespace flashlab
