// e4m3 on the host (core/fp8.h): every one of the 256 codes, every midpoint between neighbouring
// codes (ties to the even code), saturation, NaN, the subnormals, and the rounding error bound on
// seeded random values. The values are checked against the format's definition written out here
// again, bit by bit; tests/gpu/test_fp8_cuda.cpp holds the same rounding to CUDA's own converter.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/fp8.h"
#include "core/rng.h"

namespace flashlab {
namespace {

// The definition: sign, 4 exponent bits (bias 7), 3 mantissa bits; e = 15, m = 7 is NaN.
double by_definition(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -mag : mag;
}

TEST(Fp8, EveryCodeHasItsValueAndComesBack) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const double v = e4m3_value(static_cast<uint8_t>(c)), want = by_definition(c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(v)) << c;
      ++nans;
      continue;
    }
    EXPECT_EQ(v, want) << c;
    EXPECT_EQ(std::signbit(v), c >= 128) << c;  // 0x80 is -0
    EXPECT_EQ(e4m3_code(v), c) << c;
  }
  EXPECT_EQ(nans, 2);  // 0x7F and 0xFF
  EXPECT_EQ(e4m3_value(0x7E), 448.0);
  EXPECT_EQ(e4m3_value(0x01), std::ldexp(1.0, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3_value(0x08), std::ldexp(1.0, -6));  // the smallest normal
}

// Between two neighbouring codes: the midpoint goes to the even code, anything off it to the
// nearer one; the same for negative values.
TEST(Fp8, MidpointsGoToTheEvenCode) {
  for (int c = 0; c < 126; ++c) {
    const double a = by_definition(c), b = by_definition(c + 1), mid = (a + b) / 2;
    const int even = c % 2 == 0 ? c : c + 1;
    EXPECT_EQ(e4m3_code(mid), even) << c;
    EXPECT_EQ(e4m3_code(-mid), 0x80 | even) << c;
    EXPECT_EQ(e4m3_code(std::nextafter(mid, 0.0)), c) << c;
    EXPECT_EQ(e4m3_code(std::nextafter(mid, 1e9)), c + 1) << c;
  }
}

TEST(Fp8, SaturatesAndKeepsNaN) {
  for (double x : {448.0, 449.0, 464.0, 480.0, 1e6, 1e300, std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(e4m3_code(x), 0x7E) << x;
    EXPECT_EQ(e4m3_code(-x), 0xFE) << x;
  }
  EXPECT_EQ(e4m3_code(std::numeric_limits<double>::quiet_NaN()), 0x7F);
  EXPECT_TRUE(std::isnan(round_to_e4m3(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_EQ(e4m3_code(0.0), 0x00);
  EXPECT_EQ(e4m3_code(-0.0), 0x80);
  EXPECT_EQ(e4m3_code(std::ldexp(1.0, -10)), 0x00);  // half the smallest subnormal: ties to 0
  EXPECT_EQ(e4m3_code(std::ldexp(1.0, -30)), 0x00);
  EXPECT_EQ(e4m3_code(std::ldexp(1.5, -10)), 0x01);
}

// Seeded normal values at several scales: the error is at most half the spacing of the binade
// (2^(e-4) for a value in [2^e, 2^(e+1)), 2^-10 among the subnormals), and rounding is monotone.
TEST(Fp8, RoundingErrorIsAtMostHalfASpacing) {
  Rng rng(2026, 7);
  double last_x = -1e9, last_r = -1e9;
  for (int i = 0; i < 200000; ++i) {
    const double x = rng.normal() * std::ldexp(1.0, static_cast<int>(rng.below(24)) - 12);
    const double r = round_to_e4m3(x);
    if (std::fabs(x) >= kE4m3Max) {
      EXPECT_EQ(std::fabs(r), kE4m3Max);
      continue;
    }
    const int e = std::max(-6, static_cast<int>(std::floor(std::log2(std::fabs(x)))));
    EXPECT_LE(std::fabs(r - x), std::ldexp(1.0, e - 4)) << x;
    if (x >= last_x) {
      EXPECT_GE(r, last_r) << x;
    }
    last_x = x;
    last_r = r;
  }
}

}  // namespace
}  // namespace flashlab
