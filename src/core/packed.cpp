#include "core/packed.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace flashlab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void check_packed(const Problem& p, const char* who) {
  const Shape& s = p.shape;
  if (!s.packed() || static_cast<int64_t>(s.lens_q.size()) != s.B ||
      static_cast<int64_t>(s.lens_k.size()) != s.B)
    throw std::invalid_argument(std::string(who) +
                                ": a packed problem has B lengths of queries and of keys");
}

}  // namespace

Problem one_sequence_settings(const Problem& p) {
  check_packed(p, "a walk over a packed batch");
  Problem one = p;  // once per walk: every setting, whatever the problem gains
  one.shape.B = 1;
  one.shape.lens_q.clear();
  one.shape.lens_k.clear();
  return one;
}

Sequence sequence_at(const Problem& p, int64_t b) {
  if (b < 0 || b >= p.shape.B) throw std::invalid_argument("sequence_at: no such sequence");
  Sequence at;
  for_each_sequence(p, [&](const Sequence& q) {
    if (q.b == b) at = q;
  });
  return at;
}

std::vector<int32_t> cu_seqlens(const std::vector<int64_t>& lens) {
  std::vector<int32_t> cu;
  cu.reserve(lens.size() + 1);
  int64_t t = 0;
  cu.push_back(0);
  for (const int64_t len : lens) {
    t += len;
    if (t > std::numeric_limits<int32_t>::max())
      throw std::invalid_argument("cu_seqlens: 2^31 tokens or more");
    cu.push_back(static_cast<int32_t>(t));
  }
  return cu;
}

HostTensor gather_rows(const HostTensor& packed, int64_t start, int64_t len, int64_t heads,
                       int64_t d) {
  if (packed.empty()) return {};  // a dry run walks the schedule without tensors
  HostTensor dense(static_cast<size_t>(heads * len * d));
  for (int64_t r = 0; r < len; ++r)
    for (int64_t h = 0; h < heads; ++h)
      std::copy_n(packed.begin() + ((start + r) * heads + h) * d, d,
                  dense.begin() + (h * len + r) * d);
  return dense;
}

void scatter_rows(const HostTensor& dense, int64_t start, int64_t len, int64_t heads, int64_t d,
                  HostTensor& packed) {
  for (int64_t r = 0; r < len; ++r)
    for (int64_t h = 0; h < heads; ++h)
      std::copy_n(dense.begin() + (h * len + r) * d, d,
                  packed.begin() + ((start + r) * heads + h) * d);
}

HostTensor gather_lse(const HostTensor& packed, int64_t total, int64_t start, int64_t len,
                      int64_t heads) {
  if (packed.empty()) return {};
  HostTensor dense(static_cast<size_t>(heads * len));
  for (int64_t h = 0; h < heads; ++h)
    std::copy_n(packed.begin() + h * total + start, len, dense.begin() + h * len);
  return dense;
}

void scatter_lse(const HostTensor& dense, int64_t total, int64_t start, int64_t len, int64_t heads,
                 HostTensor& packed) {
  for (int64_t h = 0; h < heads; ++h)
    std::copy_n(dense.begin() + h * len, len, packed.begin() + h * total + start);
}

int64_t packed_p_elems(const Shape& s) {
  int64_t n = 0;
  for (int64_t b = 0; b < s.B; ++b) n += s.H * s.len_q(b) * s.len_k(b);
  return n;
}

Inputs sequence_inputs(const Problem& p, const Inputs& in, const Sequence& q) {
  const Shape& s = p.shape;
  const int64_t lq = q.len_q(), lk = q.len_k(), hkv = s.kv_heads();
  Inputs one;
  one.Q = gather_rows(in.Q, q.q0, lq, s.H, s.d);
  one.K = gather_rows(in.K, q.k0, lk, hkv, s.d);
  one.V = gather_rows(in.V, q.k0, lk, hkv, s.d);
  one.dO = gather_rows(in.dO, q.q0, lq, s.H, s.d);
  return one;
}

void forward_by_sequence(const Problem& p, const Inputs& in, Forward& out, const ForwardFn& fn) {
  check_packed(p, "a packed forward");
  const Shape& s = p.shape;
  const int64_t tq = s.total_q();
  out.O.assign(static_cast<size_t>(s.q_elems()), kNaN);
  out.LSE.assign(static_cast<size_t>(s.lse_elems()), kNaN);
  out.P.clear();
  for_each_sequence(p, [&](const Sequence& q) {
    const int64_t lq = q.len_q(), lk = q.len_k(), q0 = q.q0;
    if (lq == 0) return;
    if (lk == 0) {  // no key to see: O = 0, LSE = -inf (P, when kept, has no element here)
      scatter_rows(HostTensor(s.H * lq * s.d, 0.0), q0, lq, s.H, s.d, out.O);
      scatter_lse(HostTensor(s.H * lq, -std::numeric_limits<double>::infinity()), tq, q0, lq, s.H,
                  out.LSE);
      return;
    }
    const Problem& one = q.problem;
    Forward f;
    f.O.assign(static_cast<size_t>(one.shape.q_elems()), kNaN);
    f.LSE.assign(static_cast<size_t>(one.shape.lse_elems()), kNaN);
    fn(one, sequence_inputs(p, in, q), f);
    if (f.O.size() != static_cast<size_t>(one.shape.q_elems()) ||
        f.LSE.size() != static_cast<size_t>(one.shape.lse_elems()))
      throw std::runtime_error("a sequence's forward wrote O or LSE of the wrong size");
    scatter_rows(f.O, q0, lq, s.H, s.d, out.O);
    scatter_lse(f.LSE, tq, q0, lq, s.H, out.LSE);
    if (!f.P.empty()) {
      if (out.P.empty()) out.P.assign(static_cast<size_t>(packed_p_elems(s)), 0.0);
      std::copy(f.P.begin(), f.P.end(), out.P.begin() + q.p0);
    }
  });
}

void backward_by_sequence(const Problem& p, const Inputs& in, const Forward& fwd, Gradients& out,
                          const BackwardFn& fn) {
  check_packed(p, "a packed backward");
  const Shape& s = p.shape;
  const int64_t tq = s.total_q(), hkv = s.kv_heads();
  if ((!fwd.O.empty() && fwd.O.size() != static_cast<size_t>(s.q_elems())) ||
      (!fwd.LSE.empty() && fwd.LSE.size() != static_cast<size_t>(s.lse_elems())))
    throw std::invalid_argument("a packed backward: O and LSE do not match the problem's shape");
  out.dQ.assign(static_cast<size_t>(s.q_elems()), kNaN);
  out.dK.assign(static_cast<size_t>(s.kv_elems()), kNaN);
  out.dV.assign(static_cast<size_t>(s.kv_elems()), kNaN);
  for_each_sequence(p, [&](const Sequence& q) {
    const int64_t lq = q.len_q(), lk = q.len_k(), q0 = q.q0, k0 = q.k0;
    if (lq == 0 || lk == 0) {  // nothing reads anything: every gradient of the sequence is 0
      scatter_rows(HostTensor(s.H * lq * s.d, 0.0), q0, lq, s.H, s.d, out.dQ);
      scatter_rows(HostTensor(hkv * lk * s.d, 0.0), k0, lk, hkv, s.d, out.dK);
      scatter_rows(HostTensor(hkv * lk * s.d, 0.0), k0, lk, hkv, s.d, out.dV);
      return;
    }
    const Problem& one = q.problem;
    Forward f;
    f.O = gather_rows(fwd.O, q0, lq, s.H, s.d);
    f.LSE = gather_lse(fwd.LSE, tq, q0, lq, s.H);
    if (!fwd.P.empty()) f.P.assign(fwd.P.begin() + q.p0, fwd.P.begin() + q.p0 + s.H * lq * lk);
    Gradients g;
    g.dQ.assign(static_cast<size_t>(one.shape.q_elems()), kNaN);
    g.dK.assign(static_cast<size_t>(one.shape.kv_elems()), kNaN);
    g.dV.assign(static_cast<size_t>(one.shape.kv_elems()), kNaN);
    fn(one, sequence_inputs(p, in, q), f, g);
    if (g.dQ.size() != static_cast<size_t>(one.shape.q_elems()) ||
        g.dK.size() != static_cast<size_t>(one.shape.kv_elems()) ||
        g.dV.size() != static_cast<size_t>(one.shape.kv_elems()))
      throw std::runtime_error("a sequence's backward wrote gradients of the wrong size");
    scatter_rows(g.dQ, q0, lq, s.H, s.d, out.dQ);
    scatter_rows(g.dK, k0, lk, hkv, s.d, out.dK);
    scatter_rows(g.dV, k0, lk, hkv, s.d, out.dV);
  });
}

void cpu_forward(const VersionEntry& v, const Problem& p, const Inputs& in, const CpuOptions& o,
                 Forward& out, Counters& c) {
  if (!v.cpu_forward) throw std::invalid_argument(std::string(v.id) + " has no forward");
  if (!p.shape.packed()) return v.cpu_forward(p, in, o, out, c);
  if (o.dry_run) {  // the schedule of every sequence, counted; nothing to gather or write
    for_each_sequence(p, [&](const Sequence& q) {
      if (q.empty()) return;
      Forward none;
      v.cpu_forward(q.problem, Inputs{}, o, none, c);
    });
    return;
  }
  forward_by_sequence(p, in, out, [&](const Problem& one, const Inputs& in1, Forward& f) {
    v.cpu_forward(one, in1, o, f, c);
  });
}

void cpu_backward(const VersionEntry& v, const Problem& p, const Inputs& in, const Forward& fwd,
                  const CpuOptions& o, Gradients& out, Counters& c) {
  if (!v.cpu_backward) throw std::invalid_argument(std::string(v.id) + " has no backward");
  if (!p.shape.packed()) return v.cpu_backward(p, in, fwd, o, out, c);
  if (o.dry_run) {
    for_each_sequence(p, [&](const Sequence& q) {
      if (q.empty()) return;
      Gradients none;
      v.cpu_backward(q.problem, Inputs{}, Forward{}, o, none, c);
    });
    return;
  }
  backward_by_sequence(p, in, fwd, out,
                       [&](const Problem& one, const Inputs& in1, const Forward& f, Gradients& g) {
                         v.cpu_backward(one, in1, f, o, g, c);
                       });
}

int64_t workspace_bytes(const VersionEntry& v, const Problem& p, const CpuOptions& o) {
  if (!p.shape.packed()) return v.workspace_bytes(p, o);
  int64_t sum = 0;
  for_each_sequence(p, [&](const Sequence& q) {
    if (!q.empty()) sum += v.workspace_bytes(q.problem, o);
  });
  return sum;
}

}  // namespace flashlab
