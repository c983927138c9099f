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

Problem sequence_problem(const Problem& p, int64_t b) {
  Problem one = p;
  one.shape.B = 1;
  one.shape.Nq = p.shape.len_q(b);
  one.shape.Nk = p.shape.len_k(b);
  one.shape.lens_q.clear();
  one.shape.lens_k.clear();
  return one;
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

int64_t p_start(const Shape& s, int64_t b) {
  int64_t n = 0;
  for (int64_t i = 0; i < b; ++i) n += s.H * s.len_q(i) * s.len_k(i);
  return n;
}

Inputs sequence_inputs(const Problem& p, const Inputs& in, int64_t b) {
  const Shape& s = p.shape;
  const int64_t lq = s.len_q(b), lk = s.len_k(b), hkv = s.kv_heads();
  Inputs one;
  one.Q = gather_rows(in.Q, s.q_start(b), lq, s.H, s.d);
  one.K = gather_rows(in.K, s.k_start(b), lk, hkv, s.d);
  one.V = gather_rows(in.V, s.k_start(b), lk, hkv, s.d);
  one.dO = gather_rows(in.dO, s.q_start(b), lq, s.H, s.d);
  return one;
}

void forward_by_sequence(const Problem& p, const Inputs& in, Forward& out, const ForwardFn& fn) {
  check_packed(p, "a packed forward");
  const Shape& s = p.shape;
  const int64_t tq = s.total_q();
  out.O.assign(static_cast<size_t>(s.q_elems()), kNaN);
  out.LSE.assign(static_cast<size_t>(s.lse_elems()), kNaN);
  out.P.clear();
  for (int64_t b = 0; b < s.B; ++b) {
    const int64_t lq = s.len_q(b), lk = s.len_k(b), q0 = s.q_start(b);
    if (lq == 0) continue;
    if (lk == 0) {  // no key to see: O = 0, LSE = -inf (P, when kept, has no element here)
      scatter_rows(HostTensor(s.H * lq * s.d, 0.0), q0, lq, s.H, s.d, out.O);
      scatter_lse(HostTensor(s.H * lq, -std::numeric_limits<double>::infinity()), tq, q0, lq, s.H,
                  out.LSE);
      continue;
    }
    const Problem one = sequence_problem(p, b);
    Forward f;
    f.O.assign(static_cast<size_t>(one.shape.q_elems()), kNaN);
    f.LSE.assign(static_cast<size_t>(one.shape.lse_elems()), kNaN);
    fn(one, sequence_inputs(p, in, b), f);
    if (f.O.size() != static_cast<size_t>(one.shape.q_elems()) ||
        f.LSE.size() != static_cast<size_t>(one.shape.lse_elems()))
      throw std::runtime_error("a sequence's forward wrote O or LSE of the wrong size");
    scatter_rows(f.O, q0, lq, s.H, s.d, out.O);
    scatter_lse(f.LSE, tq, q0, lq, s.H, out.LSE);
    if (!f.P.empty()) {
      if (out.P.empty()) out.P.assign(static_cast<size_t>(p_start(s, s.B)), 0.0);
      std::copy(f.P.begin(), f.P.end(), out.P.begin() + p_start(s, b));
    }
  }
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
  for (int64_t b = 0; b < s.B; ++b) {
    const int64_t lq = s.len_q(b), lk = s.len_k(b), q0 = s.q_start(b), k0 = s.k_start(b);
    if (lq == 0 || lk == 0) {  // nothing reads anything: every gradient of the sequence is 0
      scatter_rows(HostTensor(s.H * lq * s.d, 0.0), q0, lq, s.H, s.d, out.dQ);
      scatter_rows(HostTensor(hkv * lk * s.d, 0.0), k0, lk, hkv, s.d, out.dK);
      scatter_rows(HostTensor(hkv * lk * s.d, 0.0), k0, lk, hkv, s.d, out.dV);
      continue;
    }
    const Problem one = sequence_problem(p, b);
    Forward f;
    f.O = gather_rows(fwd.O, q0, lq, s.H, s.d);
    f.LSE = gather_lse(fwd.LSE, tq, q0, lq, s.H);
    if (!fwd.P.empty())
      f.P.assign(fwd.P.begin() + p_start(s, b), fwd.P.begin() + p_start(s, b + 1));
    Gradients g;
    g.dQ.assign(static_cast<size_t>(one.shape.q_elems()), kNaN);
    g.dK.assign(static_cast<size_t>(one.shape.kv_elems()), kNaN);
    g.dV.assign(static_cast<size_t>(one.shape.kv_elems()), kNaN);
    fn(one, sequence_inputs(p, in, b), f, g);
    if (g.dQ.size() != static_cast<size_t>(one.shape.q_elems()) ||
        g.dK.size() != static_cast<size_t>(one.shape.kv_elems()) ||
        g.dV.size() != static_cast<size_t>(one.shape.kv_elems()))
      throw std::runtime_error("a sequence's backward wrote gradients of the wrong size");
    scatter_rows(g.dQ, q0, lq, s.H, s.d, out.dQ);
    scatter_rows(g.dK, k0, lk, hkv, s.d, out.dK);
    scatter_rows(g.dV, k0, lk, hkv, s.d, out.dV);
  }
}

void cpu_forward(const VersionEntry& v, const Problem& p, const Inputs& in, const CpuOptions& o,
                 Forward& out, Counters& c) {
  if (!v.cpu_forward) throw std::invalid_argument(std::string(v.id) + " has no forward");
  if (!p.shape.packed()) return v.cpu_forward(p, in, o, out, c);
  if (o.dry_run) {  // the schedule of every sequence, counted; nothing to gather or write
    for (int64_t b = 0; b < p.shape.B; ++b) {
      const Problem one = sequence_problem(p, b);
      if (one.shape.Nq < 1 || one.shape.Nk < 1) continue;
      Forward none;
      v.cpu_forward(one, Inputs{}, o, none, c);
    }
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
    for (int64_t b = 0; b < p.shape.B; ++b) {
      const Problem one = sequence_problem(p, b);
      if (one.shape.Nq < 1 || one.shape.Nk < 1) continue;
      Gradients none;
      v.cpu_backward(one, Inputs{}, Forward{}, o, none, c);
    }
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
  for (int64_t b = 0; b < p.shape.B; ++b) {
    const Problem one = sequence_problem(p, b);
    if (one.shape.Nq > 0 && one.shape.Nk > 0) sum += v.workspace_bytes(one, o);
  }
  return sum;
}

}  // namespace flashlab
