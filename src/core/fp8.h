// FP8 e4m3 on the host, the format of Hopper's FP8 tensor-core products (and of the FP8 rung to
// come): 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits, no infinities.
//
//   code  s eeee mmm      value
//         e = 0           (-1)^s * m/8 * 2^-6          (subnormal: 2^-9 .. 7 * 2^-9, and +-0)
//         e = 1 .. 15     (-1)^s * (1 + m/8) * 2^(e-7) (normal: 2^-6 .. 448)
//   0x7F, 0xFF            NaN (e = 15, m = 7: the one pattern not a number; 448 = e 15, m 6)
//
// Rounding is to the nearest representable value, ties to the even code (mantissa LSB 0), and
// saturating: anything beyond 448 in magnitude becomes +-448, as the GPU's cvt.rn.satfinite does.
// NaN stays NaN (0x7F). Everything is computed from the 126 finite magnitudes in a table, so the
// rounding never goes through another float format's rounding.
#pragma once

#include <cstdint>

namespace flashlab {

inline constexpr double kE4m3Max = 448.0;

// The value of a code (NaN for 0x7F and 0xFF).
double e4m3_value(uint8_t code);

// The code nearest to x (ties to even), saturating to +-448; NaN -> 0x7F.
uint8_t e4m3_code(double x);

// x rounded to e4m3 and back.
inline double round_to_e4m3(double x) {
  return e4m3_value(e4m3_code(x));
}

}  // namespace flashlab
