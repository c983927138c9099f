#include "reference/gradcheck.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "cpu_versions.h"
#include "reference/attention.h"
#include "registry.h"

namespace flashlab::reference {

namespace {

double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  double m = 0;
  for (size_t e = 0; e < a.size(); ++e) m = std::max(m, std::abs(a[e] - b[e]));
  return m;
}

const HostTensor& pick(const Gradients& g, char tensor) {
  return tensor == 'Q' ? g.dQ : tensor == 'K' ? g.dK : g.dV;
}

GradcheckCase run_case(const GradcheckConfig& c, bool causal) {
  Problem p;
  p.shape = Shape{1, 1, c.N, c.N, c.d};
  p.causal = causal;
  p.dtype = DType::f64;
  const Inputs in = make_inputs(p, c.seed);
  CpuOptions opt;
  opt.Br = c.Br;
  opt.Bc = c.Bc;

  GradcheckCase out;
  out.causal = causal;
  const Forward ref = forward(p, in, true);
  const Gradients standard = backward(p, in, ref);

  // Elements for the finite differences: stream 5 (+1 when causal) of the seed.
  Rng rng(c.seed, causal ? 6 : 5);
  for (char t : {'Q', 'K', 'V'})
    for (int n = 0; n < c.per_tensor; ++n) {
      FdPoint pt{t, rng.below(c.N), rng.below(c.d), 0, 0};
      const int64_t index = pt.row * c.d + pt.col;
      pt.finite_difference = finite_difference(p, in, t, index, c.eps);
      pt.standard = pick(standard, t)[index];
      out.standard_vs_fd =
          std::max(out.standard_vs_fd, std::abs(pt.standard - pt.finite_difference));
      out.points.push_back(pt);
    }

  Counters counters;
  Forward tiled;
  cpu::tiled_forward(p, in, opt, tiled, counters);
  out.fwd_max_abs = max_abs_diff(tiled.O, ref.O);

  // Every CPU backward, fed by its own forward when it has one (naive needs its P), else by the
  // tiled forward's O and LSE.
  for (const VersionInfo& v : versions()) {
    if (v.cpu_backward == nullptr) continue;
    Forward own;
    if (v.cpu_forward != nullptr) v.cpu_forward(p, in, opt, own, counters);
    Gradients g;
    v.cpu_backward(p, in, v.cpu_forward != nullptr ? own : tiled, opt, g, counters);
    GradcheckVersion row{v.id, 0, 0};
    row.max_vs_standard =
        std::max({max_abs_diff(g.dQ, standard.dQ), max_abs_diff(g.dK, standard.dK),
                  max_abs_diff(g.dV, standard.dV)});
    for (const FdPoint& pt : out.points)
      row.max_vs_fd = std::max(row.max_vs_fd, std::abs(pick(g, pt.tensor)[pt.row * c.d + pt.col] -
                                                       pt.finite_difference));
    out.versions.push_back(row);
  }
  return out;
}

}  // namespace

std::vector<GradcheckCase> gradcheck(const GradcheckConfig& config) {
  return {run_case(config, false), run_case(config, true)};
}

}  // namespace flashlab::reference
