// The shape check of the tensor-core versions (tiled, recompute, atomic-dq, deterministic-dq,
// hopper): one function, told the version's name and the limits of its kernels, so that each
// rejects a problem in the same words and states only what is its own. Run before anything is
// allocated; empty when the problem is supported, else one sentence saying why not (`flashlab run
// --backend cuda` turns it into an error with exit status 2).
//
// Each of them stores fp16 or bf16 and needs B, H, Nq, Nk >= 1 and B*H <= 65535; what differs from
// one to another is a ShapeLimits. naive and the starters check what their plain kernels need
// themselves.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/problem.h"

namespace flashlab::cuda {

struct ShapeLimits {
  // The head dims the kernels are instantiated for, in increasing order; 0 ends the list.
  std::array<int, 4> head_dims{};
  // Nq and Nk at most this (row indices are 32-bit); 0: no such limit.
  int64_t max_rows = 0;
  // Nq*d and Nk*d below this (element offsets inside one head are 32-bit); 0: no such limit.
  int64_t max_head_elems = 0;
  // A positive softmax scale (a forward that takes its running maximum over the raw scores, then
  // scales it, needs one).
  bool positive_scale = false;
};

namespace shape_check_detail {

inline bool has_head_dim(const ShapeLimits& l, int64_t d) {
  for (int x : l.head_dims)
    if (x != 0 && x == d) return true;
  return false;
}

// 2^30 rather than 1073741824.
inline std::string power_text(int64_t v) {
  int k = 0;
  while (k < 62 && (int64_t{1} << k) < v) ++k;
  return (int64_t{1} << k) == v ? "2^" + std::to_string(k) : std::to_string(v);
}

// "64 and 128", "64, 96 and 128".
inline std::string head_dim_list(const ShapeLimits& l) {
  int n = 0;
  while (n < static_cast<int>(l.head_dims.size()) && l.head_dims[n] != 0) ++n;
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += i == n - 1 ? " and " : ", ";
    out += std::to_string(l.head_dims[i]);
  }
  return out;
}

}  // namespace shape_check_detail

inline std::string shape_check(const Problem& p, std::string_view version, const ShapeLimits& l) {
  const Shape& s = p.shape;
  const std::string who = std::string(version) + " on CUDA";
  if (p.dtype != DType::f16 && p.dtype != DType::bf16)
    return who + " stores fp16 or bf16, not " + to_string(p.dtype);
  if (!shape_check_detail::has_head_dim(l, s.d))
    return who + " is built for head dims " + shape_check_detail::head_dim_list(l) +
           "; d = " + std::to_string(s.d) + " is not one of them";
  if (s.B < 1 || s.H < 1 || s.Nq < 1 || s.Nk < 1) return "B, H, Nq and Nk must be at least 1";
  if (s.heads() > 65535) return who + " handles at most 65535 heads (B*H)";
  if (l.max_rows > 0 && (s.Nq > l.max_rows || s.Nk > l.max_rows))
    return who + " needs Nq, Nk <= " + shape_check_detail::power_text(l.max_rows);
  if (l.positive_scale && !(p.softmax_scale() > 0.0))
    return who + " needs a positive softmax scale";
  if (l.max_head_elems > 0 && (s.Nq * s.d >= l.max_head_elems || s.Nk * s.d >= l.max_head_elems))
    return who + " needs Nq*d and Nk*d below " + shape_check_detail::power_text(l.max_head_elems);
  return {};
}

}  // namespace flashlab::cuda
