#include "gradcheck_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>

#include "core/packed.h"
#include "core/rng.h"
#include "reference/attention.h"
#include "util/error.h"

namespace flashlab::lab {

using reference::finite_difference;

namespace {

// Infinite when the sizes differ or an element is NaN (a gradient left unwritten stays NaN).
double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (a.size() != b.size()) return kInf;
  double m = 0;
  for (size_t e = 0; e < a.size(); ++e) {
    const double d = std::abs(a[e] - b[e]);
    if (std::isnan(d)) return kInf;
    m = std::max(m, d);
  }
  return m;
}

// Outputs start as NaN, so an element a version forgets to write fails the comparison.
Gradients poisoned(const Shape& s) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  Gradients g;
  g.dQ.assign(static_cast<size_t>(s.q_elems()), kNaN);
  g.dK.assign(static_cast<size_t>(s.kv_elems()), kNaN);
  g.dV.assign(static_cast<size_t>(s.kv_elems()), kNaN);
  return g;
}

const HostTensor& pick(const Gradients& g, char tensor) {
  return tensor == 'Q' ? g.dQ : tensor == 'K' ? g.dK : g.dV;
}

// The cases: one head; grouped heads with a window; a packed batch of grouped heads.
enum class Kind { one_head, grouped, packed };

GradcheckCase run_case(const GradcheckConfig& c, bool causal, Kind kind,
                       const std::vector<const VersionInfo*>& chosen) {
  const bool grouped = kind != Kind::one_head;
  Problem p;
  p.shape = Shape{1, grouped ? c.H : 1, c.N, c.N, c.d};
  if (grouped) p.shape.Hkv = c.Hkv;
  if (kind == Kind::grouped) {
    p.window_left = c.window_left;
    p.window_right = c.window_right;
  }
  if (kind == Kind::packed) set_packed(p.shape, c.seqlens, c.seqlens);
  p.causal = causal;
  p.dtype = DType::f64;
  const Inputs in = make_inputs(p, c.seed);
  CpuOptions opt;
  opt.Br = c.Br;
  opt.Bc = c.Bc;

  GradcheckCase out;
  out.causal = causal;
  if (kind == Kind::grouped)
    out.problem = std::to_string(c.H) + "/" + std::to_string(c.Hkv) + ", window (" +
                  std::to_string(c.window_left) + ", " + std::to_string(c.window_right) + ")";
  if (kind == Kind::packed)
    out.problem = fmt::format("{}/{}, packed {}", c.H, c.Hkv, fmt::join(c.seqlens, ","));
  const Forward ref = reference::forward(p, in, true);
  const Gradients standard = reference::backward(p, in, ref);

  // Elements for the finite differences: stream 5 (+1 when causal, 7 for the grouped case, 8 for
  // the packed one) of the seed, rows over every head of the tensor (a packed tensor's rows are
  // its tokens' heads).
  Rng rng(c.seed, kind == Kind::packed ? 8 : grouped ? 7 : causal ? 6 : 5);
  for (char t : {'Q', 'K', 'V'})
    for (int n = 0; n < c.per_tensor; ++n) {
      const int64_t heads = t == 'Q' ? p.shape.H : p.shape.kv_heads();
      const int64_t rows = heads * (t == 'Q' ? p.shape.total_q() : p.shape.total_k());
      FdPoint pt{t, rng.below(rows), rng.below(c.d), 0, 0};
      const int64_t index = pt.row * c.d + pt.col;
      pt.finite_difference = finite_difference(p, in, t, index, c.eps);
      pt.standard = pick(standard, t)[index];
      out.standard_vs_fd =
          std::max(out.standard_vs_fd, std::abs(pt.standard - pt.finite_difference));
      out.points.push_back(pt);
    }

  Counters counters;
  Forward tiled;
  cpu_forward(*find_version("tiled"), p, in, opt, tiled, counters);
  out.fwd_max_abs = max_abs_diff(tiled.O, ref.O);

  // Each CPU backward, fed by its own forward when it has one (naive needs its P), else by the
  // tiled forward's O and LSE.
  for (const VersionInfo* v : chosen) {
    if (p.axes() & ~v->axes) continue;  // a starter that does not take grouped heads or windows
    GradcheckVersion row{v->id, 0, 0, {}};
    Gradients g = poisoned(p.shape);
    try {
      Forward own;
      if (v->cpu_forward != nullptr) cpu_forward(*v, p, in, opt, own, counters);
      cpu_backward(*v, p, in, v->cpu_forward != nullptr ? own : tiled, opt, g, counters);
    } catch (const NotImplemented& e) {
      row.not_implemented = e.what();
      out.versions.push_back(row);
      continue;
    } catch (const UsageError&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      // One version's failure is its FAIL line; the others are still checked.
      row.not_implemented = std::string("error: ") + e.what();
      out.versions.push_back(row);
      continue;
    }
    row.max_vs_standard =
        std::max({max_abs_diff(g.dQ, standard.dQ), max_abs_diff(g.dK, standard.dK),
                  max_abs_diff(g.dV, standard.dV)});
    for (const FdPoint& pt : out.points) {
      const HostTensor& x = pick(g, pt.tensor);
      const size_t at = static_cast<size_t>(pt.row * c.d + pt.col);
      const double diff = at < x.size() ? std::abs(x[at] - pt.finite_difference) : NAN;
      row.max_vs_fd = std::isnan(diff) ? std::numeric_limits<double>::infinity()
                                       : std::max(row.max_vs_fd, diff);
    }
    out.versions.push_back(row);
  }
  return out;
}

}  // namespace

std::vector<const VersionInfo*> backward_versions() {
  std::vector<const VersionInfo*> out;
  for (const VersionInfo& v : versions())
    if (v.cpu_backward != nullptr && !v.exercise) out.push_back(&v);
  return out;
}

std::vector<GradcheckCase> run_gradcheck(const GradcheckConfig& config,
                                         const std::vector<const VersionInfo*>& chosen) {
  const std::vector<const VersionInfo*> vs = chosen.empty() ? backward_versions() : chosen;
  return {run_case(config, false, Kind::one_head, vs), run_case(config, true, Kind::one_head, vs),
          run_case(config, true, Kind::grouped, vs), run_case(config, true, Kind::packed, vs)};
}

}  // namespace flashlab::lab
