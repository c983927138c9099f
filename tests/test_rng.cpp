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
  const double expected[] = {0x1.7a05903f2fbfcp-2,  0x1.4d65df4d889e3p-2, -0x1.4b942bde5a1d3p+0,
                             -0x1.f38e67ea443eep-1, 0x1.69fd386ae3981p+0, 0x1.18c6041d60c4ap-2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a[i], expected[i]) << i;
}

TEST(Rng, MakeInputsForAnFp16ProblemArePinned) {
  Problem p;
  p.shape = Shape{1, 1, 2, 3, 4};
  p.dtype = DType::f16;
  const Inputs in = make_inputs(p, 42);
  ASSERT_EQ(in.Q.size(), 8u);
  ASSERT_EQ(in.K.size(), 12u);
  const double Q[] = {0x1.7ap-2, 0x1.4d8p-2, -0x1.4b8p+0, -0x1.f38p-1};
  const double K[] = {-0x1.554p+0, 0x1.1f4p-4, 0x1.1ecp-1, 0x1.2d4p-2};
  const double V[] = {0x1.944p-1, 0x1.06p+0, -0x1.2b8p-1, -0x1.13cp-5};
  const double dO[] = {-0x1.98cp-1, -0x1.084p-1, -0x1.2p-2, 0x1.8d8p-1};
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

}  // namespace flashlab
