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
  EXPECT_EQ(round_to(DType::f16, 1.0 + 1.0 / 4096), 1.0);               // below half an ulp
  EXPECT_EQ(round_to(DType::f16, 1.0 + 3.0 / 2048), 1.0 + 2.0 / 1024);  // tie -> even
  EXPECT_EQ(round_to(DType::f16, 65520.0), INFINITY);
  EXPECT_EQ(round_to(DType::f16, 5.9604644775390625e-08), 5.9604644775390625e-08);  // 2^-24
  EXPECT_EQ(round_to(DType::bf16, 1.0 + 1.0 / 256), 1.0);                           // tie -> even
  EXPECT_EQ(round_to(DType::bf16, 1.0 + 3.0 / 256), 1.0 + 4.0 / 256);
  for (double x : {0.1, -3.7, 1234.5, 1e-3}) {
    EXPECT_EQ(half_bits_to_float(float_to_half_bits(static_cast<float>(round_to(DType::f16, x)))),
              static_cast<float>(round_to(DType::f16, x)));
  }
}

// The first values of seeded tensors, pinned bit for bit. Any change to the generator, the
// stream derivation or the rounding shows up here -- and would change every published figure.
TEST(Rng, FirstValuesArePinned) {
  const HostTensor a = random_normal(42, 1, 6, DType::f64);
  const double expected[] = {-0x1.0977952d51676p+1, -0x1.0696603fe0302p-2, -0x1.5785f76d382e6p-2,
                             -0x1.b4ba8ddb92b26p-1, 0x1.23d4fa5541a04p-2,  0x1.c8fec3547d426p-2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a[i], expected[i]) << i;
}

TEST(Rng, MakeInputsForAnFp16ProblemArePinned) {
  Problem p;
  p.shape = Shape{1, 1, 2, 3, 4};
  p.dtype = DType::f16;
  const Inputs in = make_inputs(p, 42);
  ASSERT_EQ(in.Q.size(), 8u);
  ASSERT_EQ(in.K.size(), 12u);
  const double Q[] = {-0x1.098p+1, -0x1.068p-2, -0x1.578p-2, -0x1.b4cp-1};
  const double K[] = {-0x1.138p+0, -0x1.e8p-1, -0x1.c68p-2, 0x1.708p+0};
  const double V[] = {0x1.e8cp-4, -0x1.0dcp+0, -0x1.efp-7, -0x1.c3cp-2};
  const double dO[] = {-0x1.bc8p-2, 0x1.0ecp-1, -0x1.1ecp-1, 0x1.3bp-3};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(in.Q[i], Q[i]) << i;
    EXPECT_EQ(in.K[i], K[i]) << i;
    EXPECT_EQ(in.V[i], V[i]) << i;
    EXPECT_EQ(in.dO[i], dO[i]) << i;
  }
  // Q is stream 1 of the same seed, rounded to fp16.
  const HostTensor q64 = random_normal(42, 1, 8, DType::f64);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(in.Q[i], round_to(DType::f16, q64[i]));
}

// Large tensors are filled in parallel; the values must not depend on the thread count.
TEST(Rng, ValuesDoNotDependOnThreads) {
  const int64_t n = (1 << 17) + 3;
  const HostTensor many = random_normal(9, 3, n, DType::f32);
  HostTensor one;
#pragma omp parallel num_threads(1)
  { one = random_normal(9, 3, n, DType::f32); }
  ASSERT_EQ(many.size(), one.size());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(many[i], one[i]) << i;
  // Prefix property: a shorter tensor is the start of a longer one.
  const HostTensor prefix = random_normal(9, 3, 1001, DType::f32);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(prefix[i], many[i]) << i;
}

}  // namespace flashlab
