#include "run/sample_check.h"

#include <algorithm>

#include "core/paged.h"

namespace flashlab {

std::vector<CheckSlice> sample_slices(const Shape& s) {
  const int64_t n = s.kv_head_count();
  std::vector<CheckSlice> out;
  for (int64_t k : {int64_t{0}, n / 2, n - 1}) {
    const CheckSlice c{k / s.kv_heads(), k % s.kv_heads()};
    if (std::none_of(out.begin(), out.end(),
                     [&](const CheckSlice& o) { return o.b == c.b && o.kv_head == c.kv_head; }))
      out.push_back(c);
  }
  return out;
}

Problem sliced_problem(const Problem& p, const std::vector<CheckSlice>& slices) {
  Problem q = p;
  q.shape = Shape{static_cast<int64_t>(slices.size()), p.shape.group(), p.shape.Nq, p.shape.Nk,
                  p.shape.d};
  q.shape.Hkv = 1;
  return q;
}

Inputs sliced_inputs(const Problem& p, const Inputs& in, const std::vector<CheckSlice>& slices) {
  const Shape& s = p.shape;
  const int64_t g = s.group(), d = s.d, Nq = s.Nq, Nk = s.Nk;
  const size_t n = slices.size();
  Inputs out;
  out.Q.resize(n * g * Nq * d);
  out.dO.resize(in.dO.empty() ? 0 : out.Q.size());
  out.K.resize(n * Nk * d);
  out.V.resize(out.K.size());
  for (size_t i = 0; i < n; ++i) {
    const CheckSlice& c = slices[i];
    for (int64_t h = 0; h < g; ++h) {
      const int64_t from = ((c.b * s.H + c.kv_head * g + h) * Nq) * d;
      const int64_t to = ((static_cast<int64_t>(i) * g + h) * Nq) * d;
      std::copy_n(&in.Q[from], Nq * d, &out.Q[to]);
      if (!out.dO.empty()) std::copy_n(&in.dO[from], Nq * d, &out.dO[to]);
    }
    for (int64_t j = 0; j < Nk; ++j) {
      const int64_t from = s.paged() ? paged_row(s, in.block_table, c.b, c.kv_head, j)
                                     : ((c.b * s.kv_heads() + c.kv_head) * Nk + j) * d;
      const int64_t to = (static_cast<int64_t>(i) * Nk + j) * d;
      std::copy_n(&in.K[from], d, &out.K[to]);
      std::copy_n(&in.V[from], d, &out.V[to]);
    }
  }
  return out;
}

Forward sliced_forward(const Problem& p, const Forward& f, const std::vector<CheckSlice>& slices) {
  const Shape& s = p.shape;
  const int64_t g = s.group(), d = s.d, Nq = s.Nq;
  Forward out;
  if (f.O.empty()) return out;
  out.O.resize(slices.size() * g * Nq * d);
  out.LSE.resize(slices.size() * g * Nq);
  for (size_t i = 0; i < slices.size(); ++i)
    for (int64_t h = 0; h < g; ++h) {
      const int64_t head = slices[i].b * s.H + slices[i].kv_head * g + h;
      const int64_t to = static_cast<int64_t>(i) * g + h;
      std::copy_n(&f.O[head * Nq * d], Nq * d, &out.O[to * Nq * d]);
      std::copy_n(&f.LSE[head * Nq], Nq, &out.LSE[to * Nq]);
    }
  return out;
}

std::string slices_text(const std::vector<CheckSlice>& slices) {
  std::string t;
  for (const CheckSlice& c : slices)
    t += (t.empty() ? "" : ", ") + std::string("(b ") + std::to_string(c.b) + ", K/V head " +
         std::to_string(c.kv_head) + ")";
  return t;
}

}  // namespace flashlab
