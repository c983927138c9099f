#include "io_model.h"

#include <stdexcept>

#include "core/packed.h"
#include "labs/common/lab_util.h"

namespace flashlab::lab::io_model {

Problem problem(int64_t N, int64_t d) {
  Problem p = make_problem(1, N, d, false, DType::bf16);
  p.shape.B = std::max<int64_t>(1, kTokens / N);
  p.shape.H = std::max<int64_t>(1, kHidden / d);
  return p;
}

PassModel model_pass(const VersionInfo& v, bool backward, const Problem& p) {
  const CpuOptions o = blocks(kBlock, kBlock);
  PassModel m;
  Forward fwd;
  Gradients g;
  if (backward) {
    if (!v.cpu_backward) throw std::invalid_argument(std::string(v.id) + " has no backward");
    cpu_backward(v, p, Inputs{}, fwd, o, g, m.total);
  } else {
    if (!v.cpu_forward) throw std::invalid_argument(std::string(v.id) + " has no forward");
    cpu_forward(v, p, Inputs{}, o, fwd, m.total);
  }
  if (v.kernel_counts) m.kernels = v.kernel_counts(p, o, backward, m.total);
  return m;
}

double model_bytes(const Counters& c) {
  return static_cast<double>(c.io()) * kModelBytesPerElement;
}

double floor_bytes(bool backward, const Problem& p) {
  const Shape& s = p.shape;
  const double q = static_cast<double>(s.q_elems()), kv = static_cast<double>(s.kv_elems());
  const double lse = static_cast<double>(s.lse_elems());
  const double fwd = 2 * (q + 2 * kv) + 2 * q + 4 * lse;  // Q, K, V in; O, LSE out
  // Q, K, V, O, dO, LSE in; dQ, dK, dV out.
  const double bwd = 2 * (q + 2 * kv + 2 * q) + 4 * lse + 2 * (q + 2 * kv);
  return backward ? bwd : fwd;
}

}  // namespace flashlab::lab::io_model
