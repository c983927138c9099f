// The same seed must give the same inputs on every machine and compiler.
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/rng.h"

namespace flashlab {

TEST(Rng, StreamsAreIndependentAndNormal) {
  const HostTensor a = random_normal(7, 1, 20000, DType::f64);
  const HostTensor b = random_normal(7, 2, 20000, DType::f64);
  double mean = 0, var = 0;
  for (double x : a) mean += x;
  mean /= a.size();
  for (double x : a) var += (x - mean) * (x - mean);
  var /= a.size();
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(var, 1.0, 0.03);
  EXPECT_NE(a[0], b[0]);
}

TEST(Dtype, HalfAndBf16RoundToNearestEven) {
  EXPECT_EQ(round_to(DType::f16, 1.0 + 1.0 / 4096), 1.0);          // below half an ulp
  EXPECT_EQ(round_to(DType::f16, 1.0 + 3.0 / 2048), 1.0 + 2.0 / 1024);  // tie -> even
  EXPECT_EQ(round_to(DType::f16, 65520.0), INFINITY);
  EXPECT_EQ(round_to(DType::f16, 5.9604644775390625e-08), 5.9604644775390625e-08);  // 2^-24
  EXPECT_EQ(round_to(DType::bf16, 1.0 + 1.0 / 256), 1.0);        // tie -> even
  EXPECT_EQ(round_to(DType::bf16, 1.0 + 3.0 / 256), 1.0 + 4.0 / 256);
  for (double x : {0.1, -3.7, 1234.5, 1e-3}) {
    EXPECT_EQ(half_bits_to_float(float_to_half_bits(static_cast<float>(round_to(DType::f16, x)))),
              static_cast<float>(round_to(DType::f16, x)));
  }
}

}  // namespace flashlab
