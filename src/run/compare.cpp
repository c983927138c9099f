#include "run/compare.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace flashlab {

void Norm2::add(double v) {
  const double a = std::fabs(v);
  if (a == 0 || std::isnan(a)) return;
  if (scale_ < a) {
    ssq_ = 1 + ssq_ * (scale_ / a) * (scale_ / a);
    scale_ = a;
  } else {
    ssq_ += (a / scale_) * (a / scale_);
  }
}

double Norm2::value() const {
  return scale_ * std::sqrt(ssq_);
}

double Norm2::ratio(const Norm2& other) const {
  return (scale_ / other.scale_) * std::sqrt(ssq_ / other.ssq_);
}

double norm2_of(const HostTensor& x) {
  Norm2 n;
  for (double v : x) n.add(v);
  return n.value();
}

namespace {

// One pass for both comparisons. `skip(i)` says an element is not compared (LSE rows that see no
// key); it also decides whether such an element is acceptable. `compared` counts the elements that
// were not skipped, finite or not.
template <class Skip>
ErrorStats measure(const HostTensor& x, const HostTensor& ref, Skip skip, double size_if_zero = 0) {
  ErrorStats e;
  if (x.size() != ref.size()) {
    e.finite = false;
    e.max_abs = e.rel = std::numeric_limits<double>::infinity();
    return e;
  }
  Norm2 diff, norm_ref;
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
    diff.add(d);
    norm_ref.add(ref[i]);
  }
  if (!e.finite) {
    e.max_abs = e.rel = std::numeric_limits<double>::quiet_NaN();
  } else if (norm_ref.value() > 0) {
    e.rel = diff.ratio(norm_ref);
  } else if (size_if_zero > 0) {
    e.rel = diff.value() / size_if_zero;
  } else {
    e.rel = diff.value() > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  }
  return e;
}

}  // namespace

ErrorStats compare(const HostTensor& x, const HostTensor& ref, double size_if_zero) {
  const auto never = [](size_t, bool&) { return false; };
  return measure(x, ref, never, size_if_zero);
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
