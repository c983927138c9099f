// Turns the runtime (dtype, head dim) of a problem into template arguments: f.operator()<T, kD>(),
// T = __half or __nv_bfloat16, kD one of the head dims the version's kernels are instantiated for
// (64 and 128; dispatch_dtype_head_dims<64, 128, 256> names others). The shape was
// validated by the version's check first (common/shape_check.h), so every other combination is
// unreachable.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "core/problem.h"

namespace flashlab::cuda {

template <int... kDims, class F>
void dispatch_dtype_head_dims(const Problem& p, F&& f) {
  static_assert(sizeof...(kDims) > 0, "at least one head dim");
  const auto for_dtype = [&]<class T>() {
    const bool matched = ((p.shape.d == kDims && (f.template operator()<T, kDims>(), true)) || ...);
    if (!matched)  // refused by the version's check before any launch: a mistake if it happens
      throw std::logic_error("no kernel instantiated for head dim " + std::to_string(p.shape.d));
  };
  if (p.dtype == DType::f16)
    for_dtype.template operator()<__half>();
  else
    for_dtype.template operator()<__nv_bfloat16>();
}

template <class F>
void dispatch_dtype_head_dim(const Problem& p, F&& f) {
  dispatch_dtype_head_dims<64, 128>(p, f);
}

}  // namespace flashlab::cuda
