#include "core/dtype.h"

#include <bit>
#include <cmath>
#include <limits>

namespace flashlab {

uint16_t float_to_half_bits(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // subnormal or zero in fp16
    // Scale so the fp16 subnormal step 2^-24 becomes 1, then round to nearest even.
    const float a = std::bit_cast<float>(abs);
    const float scaled = a * 16777216.0f;  // 2^24
    const uint32_t q = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias exponent, round mantissa from 23 to 10 bits, nearest even.
  uint32_t mant = abs & 0x007fffffu;
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent
  return static_cast<uint16_t>(sign | h);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;  // 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  }
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t float_to_bf16_bits(float x) {
  uint32_t f = std::bit_cast<uint32_t>(x);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40u);  // nan
  const uint32_t lsb = (f >> 16) & 1u;
  f += 0x7fffu + lsb;
  return static_cast<uint16_t>(f >> 16);
}

float bf16_bits_to_float(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

double round_to(DType t, double x) {
  switch (t) {
    case DType::f64: return x;
    case DType::f32: return static_cast<double>(static_cast<float>(x));
    case DType::f16: return half_bits_to_float(float_to_half_bits(static_cast<float>(x)));
    case DType::bf16:
    case DType::fp8:  // stored in bf16; the e4m3 rounding is the version's own
      return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(x)));
  }
  return x;
}

void round_all(DType t, HostTensor& xs) {
  if (t == DType::f64) return;
  for (double& x : xs) x = round_to(t, x);
}

std::string to_string(DType t) {
  switch (t) {
    case DType::f64: return "fp64";
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::fp8: return "fp8";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType& out) {
  if (s == "fp64" || s == "f64" || s == "float64") out = DType::f64;
  else if (s == "fp32" || s == "f32" || s == "float32") out = DType::f32;
  else if (s == "fp16" || s == "f16" || s == "float16" || s == "half") out = DType::f16;
  else if (s == "bf16" || s == "bfloat16") out = DType::bf16;
  else if (s == "fp8" || s == "e4m3") out = DType::fp8;
  else return false;
  return true;
}

int dtype_bytes(DType t) {
  switch (t) {
    case DType::f64: return 8;
    case DType::f32: return 4;
    case DType::f16:
    case DType::bf16:
    case DType::fp8: return 2;  // inputs and O in bf16 (the e4m3 copies are the version's workspace)
  }
  return 0;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::f64: return std::ldexp(1.0, -53);
    case DType::f32: return std::ldexp(1.0, -24);
    case DType::f16: return std::ldexp(1.0, -11);
    case DType::bf16: return std::ldexp(1.0, -8);
    case DType::fp8: return std::ldexp(1.0, -4);
  }
  return 0.0;
}

const char* axis_name(unsigned axes) {
  if (axes & kGroupedHeads) return "grouped K/V heads (--heads-kv)";
  if (axes & kWindow) return "a sliding window (--window)";
  if (axes & kPacked) return "a packed batch (--seqlens)";
  if (axes & kPaged) return "a paged K/V cache (--page-size)";
  return "dense multi-head attention";
}

}  // namespace flashlab
