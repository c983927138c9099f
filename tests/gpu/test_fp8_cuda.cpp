// core/fp8.h against CUDA's own e4m3 converter (cuda_fp8.h, __nv_cvt_double_to_fp8 with
// saturation, a host function: no device needed): every code's value, every midpoint between
// neighbouring codes and a point just off it on each side, and seeded random values at many
// scales. The kernels of the FP8 rung will round with the hardware; the CPU twin with core/fp8.h.
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/fp8.h"
#include "core/rng.h"

namespace flashlab {
namespace {

uint8_t cuda_code(double x) {
  return static_cast<uint8_t>(__nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

TEST(Fp8Cuda, RoundsAsCudasConverter) {
  int compared = 0;
  for (int c = 0; c < 256; ++c) {
    const double v = e4m3_value(static_cast<uint8_t>(c));
    if (std::isnan(v)) continue;
    EXPECT_EQ(e4m3_code(v), cuda_code(v)) << c;
    ++compared;
    if ((c & 0x7F) >= 126) continue;
    const double mid = (v + e4m3_value(static_cast<uint8_t>(c + 1))) / 2;
    for (double x : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 2 * mid)}) {
      EXPECT_EQ(e4m3_code(x), cuda_code(x)) << c << " " << x;
      ++compared;
    }
  }
  Rng rng(2026, 8);
  for (int i = 0; i < 200000; ++i) {
    const double x = rng.normal() * std::ldexp(1.0, static_cast<int>(rng.below(30)) - 14);
    ASSERT_EQ(e4m3_code(x), cuda_code(x)) << x;
    ++compared;
  }
  for (double x : {448.0, 449.0, 480.0, 1e30, -1e30})
    EXPECT_EQ(e4m3_code(x), cuda_code(x)) << x;
  EXPECT_GT(compared, 200000);
}

}  // namespace
}  // namespace flashlab
