// The error budget of a version: how far from the fp64 reference its outputs may be.
//
// For each output X (O, LSE, dQ, dK, dV):
//
//   budget_rel(X) = min( ceiling,  4 * max( rel(lowp X),  rel(round(ref X)),  floor(X) ) )
//
// rel(lowp X)       the error of a straightforward computation in the storage dtype (fp32
//                   accumulation, P and dS rounded to the dtype, dS formed from the rounded P;
//                   reference::lowp_*). The FA backward kernels and their CPU twins form dS from
//                   the unrounded P, so they sit at or below this on dQ and dK. fp64 has none: the
//                   straightforward computation is the reference itself.
// rel(round(ref X)) the error of storing the exact answer in the dtype (LSE: in fp32 unless fp64)
// floor(X)          what rounding in the accumulation type alone moves X by, even where the dtype
//                   forces no error (fp64):
//                     fp64: an estimate of the rounding error of a correct computation for this
//                           very problem (rounding_floor below): it grows with |S| (an error in S
//                           is an error in the exponent of P) and with cancellation in the sums
//                           that form X (dS rows sum to zero, so dQ and dK can be far smaller than
//                           their terms);
//                     other dtypes: u_acc * sqrt(max(Nq, Nk, d)), u_acc the unit roundoff of fp32;
//                           the straightforward computation measures the rest;
//                     fp8: the larger of that and the expected error that rounding Q and K to
//                           e4m3 (u = 2^-4 relative per element) makes in the scores, spread over
//                           d as incoherent processing spreads them, carried to O and LSE
//                           (e4m3_score_floor): the plain FP8 forward's error is one draw of those
//                           roundings, and on one row it can be small by chance.
// ceiling           0.5: a zero output (rel = 1) always fails. Where the dtype cannot resolve the
//                   exact answer (true values that underflow in it, or that rounding swamps), the
//                   output fails: nothing it holds can be told from zero.
// rel(a) = ||a - ref||_2 / ||ref||_2. Where every query row sees at most one key (a window of
// (0, 0), Nk = 1), P = 1 and D = dP, so dS = P * (dP - D) cancels and the exact dQ and dK are
// zero: no relative error exists, and a correct kernel's D, formed as rowsum(O * dO), cancels dP
// only to a rounding. There rel(a) = ||a||_2 / ||t||_2 with t the dQ or dK of dS = P * dP alone,
// the size of the two halves that cancel (reference::cancelled_terms), and the budget is the
// floor's, since the straightforward computation cancels exactly: a kernel that leaves D out has
// rel 1.
// A version passes when every output it writes has rel <= budget_rel and holds no NaN or Inf.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/problem.h"
#include "report/report.h"

namespace flashlab {

inline constexpr double kBudgetFactor = 4.0;
inline constexpr double kFloorUnits = 1.0;
inline constexpr double kBudgetCeiling = 0.5;

struct OutputBudget {
  std::string output;      // "O", "LSE", "dQ", "dK", "dV"
  double lowp_rel = 0;     // rel error of the straightforward storage-dtype computation
  double rounded_rel = 0;  // rel error of the reference rounded to the dtype
  double floor_rel = 0;
  double budget_rel = 0;
  bool capped = false;  // the ceiling set the budget: the dtype cannot resolve this output
  // dQ and dK where the exact answer is zero everywhere (every query row sees at most one key):
  // the norm of the terms that cancelled (reference::cancelled_terms), which rel divides by
  // instead of ||ref||; 0 elsewhere.
  double zero_size = 0;
};

struct ErrorBudget {
  std::vector<OutputBudget> outputs;  // O, LSE, dQ, dK, dV
  const OutputBudget& of(const std::string& output) const;
};

// Runs the storage-dtype computation once (skipped for fp64, where it is the reference itself).
// with_grads false (a forward-only run, not fp64: run/config.h, forward_only_reference): O and
// LSE only, ref_grads unread, and the storage-dtype forward keeps no P.
// zero: dQ's and dK's zero_size (zero_sizes below; {0, 0} where no answer is zero).
ErrorBudget compute_budget(const Problem& p, const Inputs& in, const Forward& ref_fwd,
                           const Gradients& ref_grads, bool with_grads = true,
                           std::array<double, 2> zero = {0.0, 0.0});

// dQ's and dK's zero_size: the norms of reference::cancelled_terms where the reference's dQ or dK
// is zero everywhere, 0 elsewhere. ref_fwd must still hold P; the extra reference pass (a second
// backward beside the first's gradients, which run/host_memory.cpp counts) runs only there.
std::array<double, 2> zero_sizes(const Problem& p, const Inputs& in, const Forward& ref_fwd,
                                 const Gradients& ref_grads);

// The fp64 rounding floor of each output (O, LSE, dQ, dK, dV, in that order) for unit roundoff u:
// ||e(X)||_2 / ||ref X||_2, with e(X) a first-order estimate of each element's rounding error
// (budget.cpp says how it is formed). One pass over every (query, key) pair, like the reference.
std::vector<double> rounding_floor(const Problem& p, const Inputs& in, const Forward& ref_fwd,
                                   const Gradients& ref_grads, double u);

// fp8's floor of O and LSE (in that order): the expected error that rounding Q and K to e4m3
// (u = 2^-4 relative, per element) makes in the scores, carried to LSE and O (budget.cpp derives
// it). One pass over every (query, key) pair, like the reference.
std::vector<double> e4m3_score_floor(const Problem& p, const Inputs& in, const Forward& ref_fwd);

// The definition above, for reports and the README.
std::string budget_definition();
json budget_json(const ErrorBudget& b);

}  // namespace flashlab
