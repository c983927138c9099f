// How far an output is from the fp64 reference, and whether two runs gave the same bits.
#pragma once

#include <cstdint>

#include "core/problem.h"

namespace flashlab {

// The 2-norm of a sequence, accumulated scaled (as LAPACK's dlassq does): no square underflows or
// overflows, so vectors of 1e-300s or 1e+300s get their true norm, not 0 or inf.
class Norm2 {
 public:
  void add(double v);
  double value() const;
  // value() / other.value() without forming either, so the ratio of two tiny (or huge) norms is
  // right even when each alone would not fit in a double.
  double ratio(const Norm2& other) const;

 private:
  double scale_ = 0, ssq_ = 1;  // the norm is scale_ * sqrt(ssq_)
};

// ||x||_2 (Norm2 over every element).
double norm2_of(const HostTensor& x);

struct ErrorStats {
  double max_abs = 0;  // max |x - ref|
  double rel = 0;      // ||x - ref||_2 / ||ref||_2 (0 when both are zero; where only ref is,
                       // ||x||_2 / size_if_zero, or inf without one)
  bool finite = true;  // false when x holds NaN or Inf where it should not (or has the wrong size)
  int64_t compared = 0;
};

// Element-wise comparison of a whole tensor. Any NaN or Inf in x makes it not finite.
// size_if_zero > 0: where the reference is zero everywhere, rel divides by it instead (the norm
// of the terms that cancelled to that zero: reference::cancelled_terms).
ErrorStats compare(const HostTensor& x, const HostTensor& ref, double size_if_zero = 0);

// LSE: only rows whose reference is finite are compared; on rows that see no key (reference -inf)
// x must be -inf too, never NaN.
ErrorStats compare_lse(const HostTensor& x, const HostTensor& ref);

// Same size and the same bits in every element (NaN payloads included).
bool bitwise_equal(const HostTensor& a, const HostTensor& b);

}  // namespace flashlab
