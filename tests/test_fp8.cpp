// e4m3 on the host (core/fp8.h): every one of the 256 codes, every midpoint between neighbouring
// codes (ties to the even code), saturation, NaN, the subnormals, and the rounding error bound on
// seeded random values. The values are checked against the format's definition written out here
// again, bit by bit; tests/gpu/test_fp8_cuda.cpp holds the same rounding to CUDA's own converter.
// Then the FP8 forward's host steps (kernels/common/cpu/fp8_quant.h): the Hadamard rotation keeps
// Q K^T and spreads an outlier; block scales map each block's largest value to 448.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/cpu/fp8_quant.h"
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

// ---- incoherent processing and block scales (kernels/common/cpu/fp8_quant.h) -----------------

namespace flashlab {
namespace {

// H D / sqrt(d) is orthogonal: a dot product of two rotated rows is the dot product of the rows
// (Q K^T unchanged), norms are kept, and an outlier is spread over every column.
TEST(Fp8Quant, TheRotationKeepsDotProductsAndSpreadsAnOutlier) {
  const int64_t d = 128;
  const std::vector<double> signs = cpu::hadamard_signs(11, d);
  int plus = 0;
  for (double s : signs) plus += s > 0;
  EXPECT_GT(plus, 40);
  EXPECT_LT(plus, 88);
  std::vector<double> q = random_normal(3, 1, 4 * d, DType::f64);
  std::vector<double> k = random_normal(3, 2, 4 * d, DType::f64);
  std::vector<double> q0 = q, k0 = k;
  cpu::rotate_rows(q, d, signs);
  cpu::rotate_rows(k, d, signs);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double a = 0, b = 0;
      for (int64_t c = 0; c < d; ++c) {
        a += q0[i * d + c] * k0[j * d + c];
        b += q[i * d + c] * k[j * d + c];
      }
      EXPECT_NEAR(a, b, 1e-12 * (1 + std::fabs(a))) << i << " " << j;
    }
  std::vector<double> spike(d, 0.0);
  spike[37] = 100.0;
  cpu::rotate_rows(spike, d, signs);
  for (double v : spike) EXPECT_NEAR(std::fabs(v), 100.0 / std::sqrt(128.0), 1e-12);
  EXPECT_THROW(cpu::fwht(spike.data(), 96), std::invalid_argument);
}

// Block scales: the block's largest magnitude lands on 448 exactly, and every element is within
// half an e4m3 spacing (at most 2^-4 of its binade) of itself, times the scale.
TEST(Fp8Quant, BlockScalesMapEachBlocksLargestValueTo448) {
  const int64_t rows = 200, d = 64, block = 64;
  std::vector<double> x = random_normal(5, 3, rows * d, DType::f64);
  x[70 * d + 5] = 50.0;  // an outlier in the second block
  const std::vector<double> orig = x;
  const std::vector<double> scales = cpu::quantize_blocks(x, rows, d, block);
  ASSERT_EQ(scales.size(), 4u);  // 64, 64, 64 and 8 rows
  EXPECT_DOUBLE_EQ(scales[1], 50.0 / 448.0);
  EXPECT_LT(scales[0], scales[1] / 5);  // the outlier raises only its own block's scale
  for (int64_t i = 0; i < rows * d; ++i) {
    const double s = scales[static_cast<size_t>(i / (block * d))], v = orig[i] / s;
    const int e = std::max(-6, static_cast<int>(std::floor(std::log2(std::fabs(v)))));
    EXPECT_LE(std::fabs(x[i] - orig[i]), std::ldexp(1.0, e - 4) * s * (1 + 1e-12)) << i;
  }
  EXPECT_EQ(x[70 * d + 5], 50.0);
}

}  // namespace
}  // namespace flashlab
