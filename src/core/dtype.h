// Storage dtypes on the host: rounding doubles to fp16 / bf16 (round to nearest even) and the
// 16-bit patterns the CUDA kernels read. Inputs are rounded once here; everything downstream
// (reference, CPU twins, kernels) sees the same values.
#pragma once

#include <cstdint>

#include "core/problem.h"

namespace flashlab {

uint16_t float_to_half_bits(float x);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float x);
float bf16_bits_to_float(uint16_t h);

// The value nearest to x that the dtype can hold (fp64: x itself).
double round_to(DType t, double x);
void round_all(DType t, HostTensor& xs);

}  // namespace flashlab
