#include "io_model.h"

#include <stdexcept>

#include "common/cpu_bwd.h"
#include "lab_util.h"

namespace flashlab::lab::io_model {

namespace {

Counters minus(Counters a, const Counters& b) {
  a.matmul_flops -= b.matmul_flops;
  a.elems_read -= b.elems_read;
  a.elems_written -= b.elems_written;
  a.atomic_adds -= b.atomic_adds;
  a.tiles_computed -= b.tiles_computed;
  a.tiles_skipped -= b.tiles_skipped;
  return a;
}

Counters preprocess_counts(const Problem& p, const CpuOptions& o) {
  Counters c;
  cpu::preprocess_D<float>(p, Inputs{}, Forward{}, o, c);
  return c;
}

Counters outer_k_without_dq(const Problem& p, const CpuOptions& o) {
  Counters c;
  Gradients g;
  cpu::NoDQ<float> none;
  cpu::outer_k_pass(p, Inputs{}, HostTensor{}, std::vector<float>{}, o, g, c, none);
  return c;
}

// The convert pass of the twins: atomic-dq reads the one accumulator; deterministic-dq reads, for
// each Q block, the split of every K block that visited it. Both write dQ once.
Counters convert_counts(const Problem& p, bool per_k_block_splits) {
  const Shape& s = p.shape;
  Counters c;
  c.elems_written = s.q_elems();
  if (!per_k_block_splits) {
    c.elems_read = s.q_elems();
    return c;
  }
  const cpu::Blocks qb{s.Nq, kBlock}, kb{s.Nk, kBlock};
  for (int64_t i = 0; i < qb.count(); ++i)
    for (int64_t j = 0; j < kb.count(); ++j)
      if (cpu::tile_mask(p, qb.begin(i), qb.size(i), kb.begin(j), kb.size(j)) !=
          cpu::TileMask::full)
        c.elems_read += s.heads() * qb.size(i) * s.d;
  return c;
}

}  // namespace

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
    v.cpu_backward(p, Inputs{}, fwd, o, g, m.total);
  } else {
    if (!v.cpu_forward) throw std::invalid_argument(std::string(v.id) + " has no forward");
    v.cpu_forward(p, Inputs{}, o, fwd, m.total);
  }
  const std::string id = v.id;
  if (!backward) {
    if (id == "tiled") m.kernels = {{"fwd_kernel", m.total}};
    return m;
  }
  if (id != "recompute" && id != "atomic-dq" && id != "deterministic-dq") return m;
  const Counters pre = preprocess_counts(p, o);
  if (id == "recompute") {
    const Counters outer_k = outer_k_without_dq(p, o);
    m.kernels = {{"preprocess_kernel", pre},
                 {"outer_k_kernel", outer_k},
                 {"dq_outer_q_kernel", minus(minus(m.total, pre), outer_k)}};
    return m;
  }
  const Counters convert = convert_counts(p, id == "deterministic-dq");
  m.kernels = {{"preprocess_kernel", pre},
               {"outer_k_kernel", minus(minus(m.total, pre), convert)},
               {"convert_dq_kernel", convert}};
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
