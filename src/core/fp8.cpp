#include "core/fp8.h"

#include <array>
#include <cmath>
#include <limits>

namespace flashlab {

namespace {

// The magnitudes of codes 0x00 .. 0x7E, increasing with the code.
const std::array<double, 127>& magnitudes() {
  static const std::array<double, 127> m = [] {
    std::array<double, 127> t{};
    for (int c = 0; c < 127; ++c) {
      const int e = c >> 3, f = c & 7;
      t[c] = e == 0 ? std::ldexp(f / 8.0, -6) : std::ldexp(1.0 + f / 8.0, e - 7);
    }
    return t;
  }();
  return m;
}

}  // namespace

double e4m3_value(uint8_t code) {
  const int mag = code & 0x7F;
  if (mag == 0x7F) return std::numeric_limits<double>::quiet_NaN();
  const double v = magnitudes()[mag];
  return code & 0x80 ? -v : v;
}

uint8_t e4m3_code(double x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(x);
  const auto& m = magnitudes();
  if (a >= kE4m3Max) return sign | 0x7E;  // saturate (448 itself included)
  // The codes below and above a: m[lo] <= a < m[lo + 1].
  int lo = 0, hi = 126;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (m[mid] <= a ? lo : hi) = mid;
  }
  if (m[lo] == a) return sign | static_cast<uint8_t>(lo);
  const double below = a - m[lo], above = m[hi] - a;  // exact: neighbours of a binade
  int code = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | static_cast<uint8_t>(code);
}

}  // namespace flashlab
