// The two host-side steps of an FP8 forward before its products (FA3's third idea), written once
// for the CPU twin of the FP8 rung:
//
//   incoherent processing   x <- H D x / sqrt(d) for every row of Q and K: D a diagonal of seeded
//                           random signs, H the d x d Walsh-Hadamard matrix. (HD/sqrt d) is
//                           orthogonal, so Q K^T is unchanged, while an outlier in one column is
//                           spread over all d of them: its row's largest entry drops by up to sqrt d,
//                           and so does the scale its block needs.
//   block quantization      for each block of rows, scale = amax / 448 (448: e4m3's largest value),
//                           code = e4m3(x / scale), x ~ e4m3_value(code) * scale.
//
//   fast transform (d = 8):      stride 4         stride 2         stride 1
//     x0 x1 x2 x3 x4 x5 x6 x7 -> (x0+x4, x1+x5, .., x0-x4, ..) -> ... three butterflies: d log2 d adds
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/fp8.h"
#include "core/rng.h"

namespace flashlab::cpu {

// In place, orthonormal: the unnormalised Walsh-Hadamard butterflies, then 1 / sqrt(n).
inline void fwht(double* x, int64_t n) {
  if (n < 1 || (n & (n - 1)) != 0)
    throw std::invalid_argument("the Walsh-Hadamard transform needs a power-of-two length");
  for (int64_t h = n / 2; h >= 1; h /= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const double a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
  const double s = 1.0 / std::sqrt(static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

// d random signs from the seed's own stream: the same D for Q and K, so their products agree.
inline std::vector<double> hadamard_signs(uint64_t seed, int64_t d) {
  Rng rng(seed, /*stream=*/9);
  std::vector<double> s(static_cast<size_t>(d));
  for (double& v : s) v = rng.below(2) ? 1.0 : -1.0;
  return s;
}

// Every row of x ([rows, d]): x <- H D x / sqrt(d).
inline void rotate_rows(std::vector<double>& x, int64_t d, const std::vector<double>& signs) {
  for (size_t r = 0; r + static_cast<size_t>(d) <= x.size(); r += static_cast<size_t>(d)) {
    for (int64_t c = 0; c < d; ++c) x[r + c] *= signs[static_cast<size_t>(c)];
    fwht(&x[r], d);
  }
}

// One block's scale: its largest magnitude maps to 448; a block of zeros gets 1.
inline double block_scale(const double* x, int64_t n) {
  double amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax > 0 ? amax / kE4m3Max : 1.0;
}

// Rows [0, rows) of x ([rows, d]) in blocks of block_rows: each block scaled, rounded to e4m3 and
// scaled back (what the products of an FP8 kernel see, times the block's scale). Returns the
// scales, one per block.
inline std::vector<double> quantize_blocks(std::vector<double>& x, int64_t rows, int64_t d,
                                           int64_t block_rows) {
  std::vector<double> scales;
  for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
    const int64_t n = std::min(block_rows, rows - r0) * d;
    double* b = &x[static_cast<size_t>(r0 * d)];
    const double s = block_scale(b, n);
    for (int64_t i = 0; i < n; ++i) b[i] = e4m3_value(e4m3_code(b[i] / s)) * s;
    scales.push_back(s);
  }
  return scales;
}

}  // namespace flashlab::cpu
