// How far an output is from the fp64 reference, and whether two runs gave the same bits.
#pragma once

#include <cstdint>

#include "core/problem.h"

namespace flashlab {

struct ErrorStats {
  double max_abs = 0;  // max |x - ref|
  double rel = 0;      // ||x - ref||_2 / ||ref||_2 (0 when both are zero, inf when only ref is)
  bool finite = true;  // false when x holds NaN or Inf where it should not (or has the wrong size)
  int64_t compared = 0;
};

// Element-wise comparison of a whole tensor. Any NaN or Inf in x makes it not finite.
ErrorStats compare(const HostTensor& x, const HostTensor& ref);

// LSE: only rows whose reference is finite are compared; on rows that see no key (reference -inf)
// x must be -inf too, never NaN.
ErrorStats compare_lse(const HostTensor& x, const HostTensor& ref);

// Same size and the same bits in every element (NaN payloads included).
bool bitwise_equal(const HostTensor& a, const HostTensor& b);

}  // namespace flashlab
