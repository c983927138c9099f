// The runner's judgement, without running any kernel: a version whose outputs are off by more
// than the budget, or hold NaN, fails; its time is still reported but flagged.
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "reference/attention.h"
#include "run/budget.h"
#include "run/compare.h"
#include "run/runner.h"
#include "test_cli_helpers.h"

namespace flashlab {

namespace {

RunOutcome reference_outcome(const Problem& p) {
  RunOutcome r;
  r.inputs = make_inputs(p, 1);
  r.ref_fwd = reference::forward(p, r.inputs, true);
  r.ref_grads = reference::backward(p, r.inputs, r.ref_fwd);
  r.budget = compute_budget(p, r.inputs, r.ref_fwd, r.ref_grads);
  return r;
}

VersionOutcome copy_of_reference(const RunOutcome& r, const char* id) {
  VersionOutcome v;
  v.version = find_version(id);
  v.has_fwd = v.version->cpu_forward != nullptr;
  v.has_bwd = v.version->cpu_backward != nullptr;
  v.fwd.O = r.ref_fwd.O;
  v.fwd.LSE = r.ref_fwd.LSE;
  v.grads = r.ref_grads;
  v.bitwise_repeat = true;
  v.fwd_time = v.bwd_time = summarize({1.0, 2.0, 3.0});
  return v;
}

}  // namespace

TEST(Compare, MaxAbsRelAndNonFinite) {
  const ErrorStats e = compare({1.0, 2.0, 2.0}, {1.0, 2.0, 0.0});
  EXPECT_EQ(e.max_abs, 2.0);
  EXPECT_DOUBLE_EQ(e.rel, 2.0 / std::sqrt(5.0));
  EXPECT_TRUE(e.finite);
  EXPECT_FALSE(compare({1.0, NAN}, {1.0, 1.0}).finite);
  EXPECT_FALSE(compare({1.0, INFINITY}, {1.0, 1.0}).finite);
  EXPECT_FALSE(compare({1.0}, {1.0, 1.0}).finite);  // wrong size
  // LSE: rows whose reference is -inf are skipped, but must be -inf.
  const ErrorStats l = compare_lse({-INFINITY, 3.0}, {-INFINITY, 3.0});
  EXPECT_TRUE(l.finite);
  EXPECT_EQ(l.compared, 1);
  EXPECT_FALSE(compare_lse({NAN, 3.0}, {-INFINITY, 3.0}).finite);
  EXPECT_TRUE(bitwise_equal({0.1, -0.0}, {0.1, -0.0}));
  EXPECT_FALSE(bitwise_equal({0.0}, {-0.0}));
}

// Norms are accumulated scaled: the squares of 1e-300 underflow to 0 and those of 1e200 overflow,
// yet the relative error of such tensors is an ordinary number.
TEST(Compare, RelativeErrorOfTinyAndHugeValues) {
  for (double unit : {1e-300, 1e-160, 1.0, 1e150, 1e300}) {
    const ErrorStats e = compare({1.0 * unit, 2.0 * unit, 2.0 * unit}, {unit, 2 * unit, 0.0});
    EXPECT_NEAR(e.rel, 2.0 / std::sqrt(5.0), 1e-15) << unit;
    const ErrorStats zeros = compare({0.0, 0.0}, {3 * unit, 4 * unit});
    EXPECT_NEAR(zeros.rel, 1.0, 1e-15) << unit;
  }
  Norm2 n;
  for (double v : {3e-310, -4e-310}) n.add(v);
  EXPECT_NEAR(n.value() / 5e-310, 1.0, 1e-10);
}

// Through the command line: with a scale of 1e-300, dQ and dK (both scaled) underflow to 0 in fp32
// while the reference's do not, and the report must say so (rel 1), not rel 0.
TEST(Compare, UnderflowedGradientsAreReportedAsWrong) {
  testing::ScratchDir dir;
  const testing::CliResult r = testing::run_cli(
      "run -N 8 -d 4 --scale 1e-300 --versions tiled,recompute --repeats 1 --warmup 0 --json " +
      testing::quoted(dir / "r.json"));
  ASSERT_LE(r.status, 1) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(testing::slurp(dir / "r.json"));
  int rows = 0;
  for (const auto& row : doc["tables"][0]["rows"])
    if (row["version"] == "recompute" && row["output"] != "dV") {
      ++rows;
      EXPECT_NEAR(row["rel"].get<double>(), 1.0, 1e-12) << row.dump();
    }
  EXPECT_EQ(rows, 2);
}

TEST(Budget, DefinitionHolds) {
  Problem p;
  p.shape = {1, 2, 33, 47, 16};
  p.causal = true;
  p.dtype = DType::f16;
  const RunOutcome r = reference_outcome(p);
  for (const OutputBudget& o : r.budget.outputs) {
    EXPECT_GT(o.rounded_rel, 0.0) << o.output;
    EXPECT_DOUBLE_EQ(o.budget_rel,
                     kBudgetFactor * std::max({o.lowp_rel, o.rounded_rel, o.floor_rel}))
        << o.output;
    EXPECT_LT(o.budget_rel, 0.05) << o.output;  // a budget that tight still catches bugs
  }
  p.dtype = DType::f64;
  const RunOutcome r64 = reference_outcome(p);
  for (const OutputBudget& o : r64.budget.outputs) {
    EXPECT_EQ(o.lowp_rel, 0.0);
    EXPECT_LT(o.budget_rel, 1e-13);
  }
}

TEST(Runner, VersionOverBudgetFailsAndIsFlagged) {
  Problem p;
  p.shape = {1, 1, 20, 20, 8};
  p.dtype = DType::f32;
  RunOutcome r = reference_outcome(p);
  VersionOutcome good = copy_of_reference(r, "recompute");
  judge(good, r);
  EXPECT_TRUE(good.ok());
  VersionOutcome bad = copy_of_reference(r, "atomic-dq");
  bad.grads.dQ[3] += 1e-2;  // one element off
  judge(bad, r);
  EXPECT_FALSE(bad.ok());
  VersionOutcome nan = copy_of_reference(r, "tiled");
  nan.fwd.O.back() = NAN;  // an element never written
  judge(nan, r);
  EXPECT_FALSE(nan.ok());
  VersionOutcome flaky = copy_of_reference(r, "deterministic-dq");
  flaky.bitwise_repeat = false;  // promised deterministic
  judge(flaky, r);
  EXPECT_FALSE(flaky.ok());

  r.versions = {good, bad, nan, flaky};
  RunConfig c;
  c.problem = p;
  c.versions = {good.version, bad.version, nan.version, flaky.version};
  const Report rep = run_report(c, r);
  EXPECT_FALSE(rep.ok);
  const Table& timing = rep.tables[1];
  ASSERT_EQ(timing.id, "timing");
  ASSERT_EQ(timing.rows.size(), 4u);
  const size_t ok_col = timing.columns.size() - 1;
  EXPECT_EQ(timing.rows[0][ok_col], true);
  EXPECT_EQ(timing.rows[1][ok_col], false);
  EXPECT_EQ(timing.rows[1][2], 2.0);  // the time is still shown
  bool mentioned = false;
  for (const std::string& o : rep.observations) mentioned |= o.find("FAIL atomic-dq") == 0;
  EXPECT_TRUE(mentioned);
}

}  // namespace flashlab
