#include "run/compare.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace flashlab {

namespace {

// One pass for both comparisons. `skip(i)` says an element is not compared (LSE rows that see no
// key); it also decides whether such an element is acceptable. `compared` counts the elements that
// were not skipped, finite or not.
template <class Skip>
ErrorStats measure(const HostTensor& x, const HostTensor& ref, Skip skip) {
  ErrorStats e;
  if (x.size() != ref.size()) {
    e.finite = false;
    e.max_abs = e.rel = std::numeric_limits<double>::infinity();
    return e;
  }
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    bool acceptable = true;
    if (skip(i, acceptable)) {
      e.finite = e.finite && acceptable;
      continue;
    }
    ++e.compared;
    if (!std::isfinite(x[i])) {
      e.finite = false;
      continue;
    }
    const double d = x[i] - ref[i];
    e.max_abs = std::max(e.max_abs, std::fabs(d));
    diff2 += d * d;
    ref2 += ref[i] * ref[i];
  }
  if (!e.finite) {
    e.max_abs = e.rel = std::numeric_limits<double>::quiet_NaN();
  } else if (ref2 > 0) {
    e.rel = std::sqrt(diff2) / std::sqrt(ref2);
  } else {
    e.rel = diff2 > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  }
  return e;
}

}  // namespace

ErrorStats compare(const HostTensor& x, const HostTensor& ref) {
  return measure(x, ref, [](size_t, bool&) { return false; });
}

ErrorStats compare_lse(const HostTensor& x, const HostTensor& ref) {
  return measure(x, ref, [&](size_t i, bool& acceptable) {
    if (std::isfinite(ref[i])) return false;
    acceptable = std::isinf(x[i]) && x[i] < 0;
    return true;
  });
}

bool bitwise_equal(const HostTensor& a, const HostTensor& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

}  // namespace flashlab
