// Turns the runtime (dtype, head dim) of a problem into template arguments: f.operator()<T, kD>(),
// T = __half or __nv_bfloat16, kD = 64 or 128. Any version whose kernels are instantiated for
// those four pairs uses it, forward or backward. The shape was validated by the version's check
// first (common/shape_check.h), so every other combination is unreachable.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/problem.h"

namespace flashlab::cuda {

template <class F>
void dispatch_dtype_head_dim(const Problem& p, F&& f) {
  const bool d64 = p.shape.d == 64;
  if (p.dtype == DType::f16) {
    if (d64)
      f.template operator()<__half, 64>();
    else
      f.template operator()<__half, 128>();
  } else {
    if (d64)
      f.template operator()<__nv_bfloat16, 64>();
    else
      f.template operator()<__nv_bfloat16, 128>();
  }
}

}  // namespace flashlab::cuda
