// The error budget of a version: how far from the fp64 reference its outputs may be.
//
// For each output X (O, LSE, dQ, dK, dV):
//
//   budget_rel(X) = 4 * max( rel(lowp X),  rel(round(ref X)),  floor )
//   floor         = u_acc * sqrt(n)
//
// rel(lowp X)       the error of a straightforward computation in the storage dtype (fp32
//                   accumulation, P and dS rounded to the dtype, dS formed from the rounded P;
//                   reference::lowp_*). The FA backward kernels and their CPU twins form dS from
//                   the unrounded P, so they sit at or below this on dQ and dK.
// rel(round(ref X)) the error of storing the exact answer in the dtype (LSE: in fp32 unless fp64)
// floor             summation order alone moves results by about u_acc * sqrt(n) even where the
//                   dtype forces no error (fp64): u_acc is the unit roundoff of the accumulation
//                   (fp64 for fp64, fp32 otherwise), n the longest sum, max(Nq, Nk, d).
// rel(a) = ||a - ref||_2 / ||ref||_2. A version passes when every output it writes has
// rel <= budget_rel and holds no NaN or Inf.
#pragma once

#include <string>
#include <vector>

#include "core/problem.h"
#include "report/report.h"

namespace flashlab {

inline constexpr double kBudgetFactor = 4.0;
inline constexpr double kFloorUnits = 1.0;

struct OutputBudget {
  std::string output;      // "O", "LSE", "dQ", "dK", "dV"
  double lowp_rel = 0;     // rel error of the straightforward storage-dtype computation
  double rounded_rel = 0;  // rel error of the reference rounded to the dtype
  double floor_rel = 0;
  double budget_rel = 0;
};

struct ErrorBudget {
  std::vector<OutputBudget> outputs;  // O, LSE, dQ, dK, dV
  const OutputBudget& of(const std::string& output) const;
};

// Runs the storage-dtype computation once (skipped for fp64, where it is the reference itself).
ErrorBudget compute_budget(const Problem& p, const Inputs& in, const Forward& ref_fwd,
                           const Gradients& ref_grads);

// The definition above, for reports and the README.
std::string budget_definition();
json budget_json(const ErrorBudget& b);

}  // namespace flashlab
