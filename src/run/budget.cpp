#include "run/budget.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/dtype.h"
#include "reference/attention.h"
#include "run/compare.h"

namespace flashlab {

namespace {

HostTensor rounded(DType t, HostTensor x) {
  round_all(t, x);
  return x;
}

}  // namespace

const OutputBudget& ErrorBudget::of(const std::string& output) const {
  for (const OutputBudget& o : outputs)
    if (o.output == output) return o;
  throw std::logic_error("no error budget for output " + output);
}

ErrorBudget compute_budget(const Problem& p, const Inputs& in, const Forward& ref_fwd,
                           const Gradients& ref_grads) {
  const Shape& s = p.shape;
  const double u_acc = unit_roundoff(p.dtype == DType::f64 ? DType::f64 : DType::f32);
  const double n = static_cast<double>(std::max({s.Nq, s.Nk, s.d}));
  const double floor = kFloorUnits * u_acc * std::sqrt(n);
  const DType lse_type = p.dtype == DType::f64 ? DType::f64 : DType::f32;

  ErrorBudget b;
  const auto add = [&](const char* name, double lowp_rel, double rounded_rel) {
    OutputBudget o{name, lowp_rel, rounded_rel, floor, 0.0};
    o.budget_rel = kBudgetFactor * std::max({lowp_rel, rounded_rel, floor});
    b.outputs.push_back(o);
  };
  // fp64: the straightforward computation is the reference, and rounding changes nothing.
  if (p.dtype == DType::f64) {
    for (const char* name : {"O", "LSE", "dQ", "dK", "dV"}) add(name, 0.0, 0.0);
    return b;
  }
  Forward lf = reference::lowp_forward(p, in);
  Gradients lg = reference::lowp_backward(p, in, lf);
  add("O", compare(lf.O, ref_fwd.O).rel, compare(rounded(p.dtype, ref_fwd.O), ref_fwd.O).rel);
  add("LSE", compare_lse(lf.LSE, ref_fwd.LSE).rel,
      compare_lse(rounded(lse_type, ref_fwd.LSE), ref_fwd.LSE).rel);
  add("dQ", compare(lg.dQ, ref_grads.dQ).rel,
      compare(rounded(p.dtype, ref_grads.dQ), ref_grads.dQ).rel);
  add("dK", compare(lg.dK, ref_grads.dK).rel,
      compare(rounded(p.dtype, ref_grads.dK), ref_grads.dK).rel);
  add("dV", compare(lg.dV, ref_grads.dV).rel,
      compare(rounded(p.dtype, ref_grads.dV), ref_grads.dV).rel);
  return b;
}

std::string budget_definition() {
  return "budget_rel = 4 * max(rel error of a straightforward storage-dtype computation (fp32 "
         "accumulation, P and dS rounded to the dtype), rel error of the fp64 reference rounded to "
         "the dtype, u_acc * sqrt(max(Nq, Nk, d))), where rel(x) = ||x - ref||_2 / ||ref||_2 "
         "and u_acc is the unit roundoff of the accumulation (fp64 for fp64, else fp32); NaN or "
         "Inf always fails";
}

json budget_json(const ErrorBudget& b) {
  json per = json::object();
  for (const OutputBudget& o : b.outputs)
    per[o.output] = {{"lowp_rel", o.lowp_rel},
                     {"rounded_rel", o.rounded_rel},
                     {"floor_rel", o.floor_rel},
                     {"budget_rel", o.budget_rel}};
  return {{"factor", kBudgetFactor},
          {"floor_units", kFloorUnits},
          {"definition", budget_definition()},
          {"outputs", per}};
}

}  // namespace flashlab
