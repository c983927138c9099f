// The FP8 rung's three ids, in words: the rung (block scales and incoherent processing), then each
// remedy taken away in turn, as FA3's error table has them. Each id is one registry entry
// (cpu.cpp: FLASHLAB_VERSION and FLASHLAB_VARIANT) over the same twin; `flashlab lab fp8` puts
// them side by side against the fp64 reference, beside the bf16 rung.
#pragma once

#include <cstdint>

namespace flashlab::FLASHLAB_FOLDER {

// The seed of the Hadamard signs (common/cpu/fp8_quant.h: hadamard_signs): the twin and the
// kernel draw the same d signs from it, so their rotations are the same matrix.
inline constexpr uint64_t kSignSeed = 2024;

struct Fp8Variant {
  const char* id;
  bool block_scales;  // one scale per (head, block of rows); false: one per tensor
  bool incoherent;    // Q and K rotated by H D / sqrt(d) before they are quantized
  const char* what;
};

inline constexpr Fp8Variant kRung = {
    "hopper-fp8", true, true,
    "FA3's FP8 forward: Q, K, V and P in e4m3 with block scales, Q and K rotated by a Hadamard "
    "matrix with seeded signs (incoherent processing)"};
inline constexpr Fp8Variant kNoHadamard = {
    "hopper-fp8-no-hadamard", true, false,
    "hopper-fp8 without incoherent processing: e4m3 with block scales only"};
inline constexpr Fp8Variant kPerTensor = {
    "hopper-fp8-per-tensor", false, false,
    "hopper-fp8 with one scale per tensor and no incoherent processing: the plain FP8 forward"};

}  // namespace flashlab::FLASHLAB_FOLDER
