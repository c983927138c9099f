// The fp64 reference: checked against a direct formula, against finite differences, and on the
// masked-row cases; the lowp computation that sets error budgets.
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "reference/attention.h"
#include "test_cpu_util.h"

namespace flashlab {
namespace {

using testing::make_problem;
using testing::max_abs;
using testing::max_abs_error;

// O and LSE straight from the definition, one query row at a time.
void direct_forward(const Problem& p, const Inputs& in, HostTensor& O, HostTensor& LSE) {
  const Shape& s = p.shape;
  O.assign(s.q_elems(), 0.0);
  LSE.assign(s.lse_elems(), -INFINITY);
  for (int64_t h = 0; h < s.heads(); ++h)
    for (int64_t r = 0; r < s.Nq; ++r) {
      std::vector<double> w(s.Nk, 0.0);
      double m = -INFINITY;
      for (int64_t c = 0; c < s.Nk; ++c) {
        if (p.causal && c > r + s.Nk - s.Nq) continue;
        double dot = 0;
        for (int64_t k = 0; k < s.d; ++k)
          dot += in.Q[(h * s.Nq + r) * s.d + k] * in.K[(h * s.Nk + c) * s.d + k];
        w[c] = dot / std::sqrt(double(s.d));
        m = std::max(m, w[c]);
      }
      if (m == -INFINITY) continue;
      double l = 0;
      for (int64_t c = 0; c < s.Nk; ++c)
        l += (p.causal && c > r + s.Nk - s.Nq) ? (w[c] = 0) : (w[c] = std::exp(w[c] - m));
      for (int64_t c = 0; c < s.Nk; ++c)
        for (int64_t k = 0; k < s.d; ++k)
          O[(h * s.Nq + r) * s.d + k] += w[c] / l * in.V[(h * s.Nk + c) * s.d + k];
      LSE[h * s.Nq + r] = m + std::log(l);
    }
}

TEST(Reference, ForwardMatchesTheDefinition) {
  for (bool causal : {false, true})
    for (auto [Nq, Nk] : {std::pair{5, 7}, {7, 5}, {1, 1}, {9, 9}}) {
      const Problem p = make_problem(2, 1, Nq, Nk, 3, causal, DType::f64);
      const Inputs in = make_inputs(p, 11);
      HostTensor O, LSE;
      direct_forward(p, in, O, LSE);
      const Forward f = reference::forward(p, in, true);
      EXPECT_LE(max_abs_error(f.O, O), 1e-14) << Nq << "x" << Nk << " causal " << causal;
      EXPECT_LE(max_abs_error(f.LSE, LSE), 1e-14) << Nq << "x" << Nk << " causal " << causal;
    }
}

// Causal with Nq > Nk: query rows r < Nq - Nk see no key.
TEST(Reference, RowsThatSeeNoKeyAreZeroAndNothingIsNaN) {
  const Problem p = make_problem(1, 2, 9, 4, 8, true, DType::f64);
  const Inputs in = make_inputs(p, 3);
  const Forward f = reference::forward(p, in, true);
  const Gradients g = reference::backward(p, in, f);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t r = 0; r < 9; ++r) {
      const bool blind = r < 5;
      EXPECT_EQ(std::isinf(f.LSE[h * 9 + r]), blind);
      for (int64_t k = 0; k < 8; ++k) {
        if (!blind) continue;
        EXPECT_EQ(f.O[(h * 9 + r) * 8 + k], 0.0);
        EXPECT_EQ(g.dQ[(h * 9 + r) * 8 + k], 0.0);
      }
    }
  for (const HostTensor* t : {&f.O, &f.P, &g.dQ, &g.dK, &g.dV})
    for (double v : *t) EXPECT_TRUE(std::isfinite(v));
}

// Every gradient element of a small causal Nq != Nk problem against central differences.
TEST(Reference, BackwardMatchesFiniteDifferences) {
  for (bool causal : {false, true})
    for (auto [Nq, Nk] : {std::pair{6, 9}, {9, 6}}) {
      const Problem p = make_problem(1, 2, Nq, Nk, 4, causal, DType::f64);
      const Inputs in = make_inputs(p, 5);
      const Gradients g = reference::backward(p, in, reference::forward(p, in, true));
      double worst = 0;
      for (auto [which, grad] : {std::pair{'Q', &g.dQ}, {'K', &g.dK}, {'V', &g.dV}})
        for (int64_t e = 0; e < static_cast<int64_t>(grad->size()); ++e)
          worst = std::max(
              worst, std::abs(reference::finite_difference(p, in, which, e, 1e-6) - (*grad)[e]));
      EXPECT_LE(worst, 1e-8) << Nq << "x" << Nk << " causal " << causal;
    }
}

// The chapter's identity (16.1): D = rowsum(P * dP) = rowsum(O * dO).
TEST(Reference, RowsumOdOEqualsRowsumPdP) {
  for (bool causal : {false, true}) {
    const Problem p = make_problem(2, 2, 37, 23, 16, causal, DType::f64);
    const Inputs in = make_inputs(p, 8);
    const Forward f = reference::forward(p, in, true);
    const HostTensor a = reference::rowsum_o_do(p, in, f), b = reference::rowsum_p_dp(p, in, f);
    EXPECT_LE(max_abs_error(a, b), 1e-12 * max_abs(b)) << "causal " << causal;
  }
}

TEST(Reference, LowpInFp64IsTheReference) {
  const Problem p = make_problem(1, 2, 20, 13, 16, true, DType::f64);
  const Inputs in = make_inputs(p, 9);
  const Forward f = reference::forward(p, in, true), lf = reference::lowp_forward(p, in);
  EXPECT_EQ(max_abs_error(lf.O, f.O), 0.0);
  const Gradients g = reference::backward(p, in, f), lg = reference::lowp_backward(p, in, lf);
  EXPECT_EQ(max_abs_error(lg.dQ, g.dQ), 0.0);
}

// The lowp error is what the dtype forces: a few units of roundoff of the outputs' size, larger
// for fp16 than for fp32, and never zero (else the budget would be meaningless).
TEST(Reference, LowpErrorScalesWithTheDtype) {
  double previous = 0;
  for (DType t : {DType::f32, DType::bf16}) {
    const Problem p = make_problem(1, 2, 64, 48, 32, false, t);
    const Inputs in = make_inputs(p, 10);
    const Forward f = reference::forward(p, in, true), lf = reference::lowp_forward(p, in);
    const Gradients g = reference::backward(p, in, f), lg = reference::lowp_backward(p, in, lf);
    for (auto [x, ref] :
         {std::pair{&lf.O, &f.O}, {&lg.dQ, &g.dQ}, {&lg.dK, &g.dK}, {&lg.dV, &g.dV}}) {
      const double rel = max_abs_error(*x, *ref) / max_abs(*ref);
      EXPECT_GT(rel, 0.1 * unit_roundoff(t)) << to_string(t);
      EXPECT_LT(rel, 200 * unit_roundoff(t)) << to_string(t);
      if (x == &lf.O) {
        EXPECT_GT(rel, previous);
        previous = rel;
      }
    }
  }
}

}  // namespace
}  // namespace flashlab
