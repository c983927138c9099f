// The error budget at its edges: every correct version meets it on valid fp64 problems of every
// shape and scale, and an all-zero output never does, at any dtype and any scale run accepts.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "reference/attention.h"
#include "run/budget.h"
#include "run/registry.h"
#include "run/runner.h"
#include "util/progress.h"

namespace flashlab {

namespace {

// Log-uniform in [lo, hi].
double log_uniform(std::mt19937_64& gen, double lo, double hi) {
  std::uniform_real_distribution<double> t(std::log(lo), std::log(hi));
  return std::exp(t(gen));
}

RunConfig config_of(const Problem& p, uint64_t seed) {
  RunConfig c;
  c.problem = p;
  c.seed = seed;
  c.repeats = 1;
  c.warmup = 0;
  c.cpu.threads = 1;  // one thread: the verdicts do not depend on it, and the test stays fast
  for (const VersionInfo& v : versions())
    if (!v.exercise && !v.fp8) c.versions.push_back(&v);  // the FP8 rung: --dtype fp8 only
  return c;
}

std::string describe(const Problem& p, uint64_t seed) {
  return fmt::format("{} Nq={} Nk={} d={} scale={:.4g} causal={} seed={}", to_string(p.dtype),
                     p.shape.Nq, p.shape.Nk, p.shape.d, p.softmax_scale(), p.causal, seed);
}

}  // namespace

TEST(BudgetEdges, EveryVersionPassesOn200SeededFp64Problems) {
  // Sizes uniform over Nq, Nk 1-300 and d 1-64, the corners first; scale log-uniform over 0.1-10;
  // causal or not.
  std::mt19937_64 gen(27);
  std::uniform_int_distribution<int64_t> rows(1, 300), dims(1, 64);
  int failed = 0, judged = 0;
  for (int n = 0; n < 200; ++n) {
    Problem p;
    p.dtype = DType::f64;
    p.shape = {1, 1, rows(gen), rows(gen), dims(gen)};
    p.causal = gen() % 2 == 1;
    p.scale = log_uniform(gen, 0.1, 10);
    if (n < 4) {  // the largest and the smallest problems, at both ends of the scale
      p.shape = n < 2 ? Shape{1, 1, 300, 300, 64} : Shape{1, 1, 1, 1, 1};
      p.scale = n % 2 == 0 ? 10 : 0.1;
      p.causal = n % 2 == 0;
    }
    const RunConfig c = config_of(p, gen() % 100000);
    Progress progress;
    const RunOutcome r = run_versions(c, progress);
    ASSERT_EQ(r.versions.size(), c.versions.size());
    for (const VersionOutcome& v : r.versions) {
      ++judged;
      if (v.ok()) continue;
      ++failed;
      std::string why;
      for (const std::string& f : v.failures) why += f + "; ";
      ADD_FAILURE() << v.version->id << " fails on " << describe(p, c.seed) << ": " << why;
    }
  }
  EXPECT_EQ(failed, 0) << "of " << judged << " version runs";
  EXPECT_GE(judged, 200 * 5);
}

// A zero output has rel = 1 wherever the exact answer is not zero: the ceiling keeps every budget
// below it, even where the dtype cannot resolve the answer (then nothing passes).
TEST(BudgetEdges, AZeroGradientFailsAtEveryDtypeAndScale) {
  std::mt19937_64 gen(2027);
  std::uniform_int_distribution<int64_t> rows(1, 96), dims(1, 64);
  const VersionInfo* bwd = find_version("recompute");
  const VersionInfo* fwd = find_version("tiled");
  ASSERT_TRUE(bwd && fwd);
  int zero_answers = 0, cases = 0;
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    // The ends of what run accepts (--scale in (0, 1e4]), the defaults, and random scales between.
    std::vector<double> scales = {1e4, 9999, 1000, 100, 10, 1, 0.1, 1e-3, 1e-10, 1e-40, 1e-300};
    for (int k = 0; k < 12; ++k) scales.push_back(log_uniform(gen, 1e-12, 1e4));
    for (double scale : scales) {
      Problem p;
      p.dtype = t;
      p.shape = {1, 2, rows(gen), rows(gen), dims(gen)};
      p.causal = gen() % 2 == 1;
      p.scale = scale;
      RunConfig c = config_of(p, gen() % 1000);
      Progress progress;
      const RunOutcome r = prepare(c, progress);
      for (const OutputBudget& o : r.budget.outputs) {
        EXPECT_LE(o.budget_rel, kBudgetCeiling) << o.output << " " << describe(p, c.seed);
        EXPECT_EQ(o.capped, o.budget_rel == kBudgetCeiling) << o.output;
      }
      // A backward that writes zeros, and a forward that writes a zero O (LSE right).
      VersionOutcome zero;
      zero.version = bwd;
      zero.has_bwd = true;
      zero.grads.dQ.assign(r.ref_grads.dQ.size(), 0.0);
      zero.grads.dK.assign(r.ref_grads.dK.size(), 0.0);
      zero.grads.dV.assign(r.ref_grads.dV.size(), 0.0);
      judge(zero, r);
      VersionOutcome zero_o;
      zero_o.version = fwd;
      zero_o.has_fwd = true;
      zero_o.fwd.O.assign(r.ref_fwd.O.size(), 0.0);
      zero_o.fwd.LSE = r.ref_fwd.LSE;
      judge(zero_o, r);
      const auto fails = [](const VersionOutcome& v, const std::string& output) {
        for (const std::string& f : v.failures)
          if (f.rfind(output + " ", 0) == 0) return true;
        return false;
      };
      const std::vector<std::pair<std::string, const HostTensor*>> outputs = {
          {"dQ", &r.ref_grads.dQ}, {"dK", &r.ref_grads.dK}, {"dV", &r.ref_grads.dV}};
      for (const auto& [name, ref] : outputs) {
        ++cases;
        if (norm2_of(*ref) > 0) {
          EXPECT_TRUE(fails(zero, name))
              << "a zero " << name << " passes on " << describe(p, c.seed);
        } else {
          // The exact answer is zero (one key per row: dS = 0): a zero output is right.
          ++zero_answers;
          EXPECT_FALSE(fails(zero, name)) << name << " " << describe(p, c.seed);
        }
      }
      ++cases;
      EXPECT_EQ(fails(zero_o, "O"), norm2_of(r.ref_fwd.O) > 0) << describe(p, c.seed);
    }
  }
  EXPECT_LT(zero_answers, cases / 10) << "too few cases where the answer is not zero";
}

// Where the true gradient underflows in the storage dtype, the budget is the ceiling and the
// failure says why.
TEST(BudgetEdges, AnAnswerBelowTheDtypeIsCappedAndSaysSo) {
  Problem p;
  p.dtype = DType::bf16;
  p.shape = {1, 2, 64, 64, 16};
  p.scale = 1e4;  // softmax is one-hot: dS, and so dQ and dK, are exponentially small
  RunConfig c = config_of(p, 0);
  Progress progress;
  const RunOutcome r = prepare(c, progress);
  EXPECT_TRUE(r.budget.of("dQ").capped);
  EXPECT_EQ(r.budget.of("dQ").budget_rel, kBudgetCeiling);
  EXPECT_FALSE(r.budget.of("dV").capped);
  VersionOutcome zero;
  zero.version = find_version("recompute");
  zero.has_bwd = true;
  zero.grads = r.ref_grads;
  zero.grads.dQ.assign(r.ref_grads.dQ.size(), 0.0);
  judge(zero, r);
  ASSERT_EQ(zero.failures.size(), 1u);
  EXPECT_NE(zero.failures[0].find("below what the dtype resolves"), std::string::npos)
      << zero.failures[0];
}

// Where every query row sees at most one key (a window of (0, 0), Nk = 1, packed sequences of
// length 1, a paged cache or grouped heads under such a window), P = 1 and D = dP, so
// dS = P (dP - D) cancels and the exact dQ and dK are zero. Every version passes there at every
// dtype (its D, formed from O, cancels dP to a rounding); an error is measured against the dQ and
// dK that dS = P dP alone gives: a backward that leaves D out has rel 1 and fails, and an error of
// 8 budgets of that size fails where a quarter of one passes. Where one row sees two keys the
// answer is not zero, and the plain relative error stands.
TEST(BudgetEdges, AnExactZeroGradientIsMeasuredAgainstTheTermsThatCancel) {
  struct Case {
    const char* name;
    Problem p;
    bool zero;  // the exact dQ and dK are zero
  };
  std::vector<Case> cases;
  {
    Case c{"window (0, 0)", {}, true};
    c.p.shape = {1, 2, 130, 130, 48};
    c.p.window_left = c.p.window_right = 0;
    cases.push_back(c);
    c = {"Nk = 1", {}, true};
    c.p.shape = {2, 3, 37, 1, 64};
    cases.push_back(c);
    c = {"packed, every length 1", {}, true};
    c.p.shape.H = 2;
    c.p.shape.d = 32;
    set_packed(c.p.shape, {1, 1, 1, 1}, {1, 1, 1, 1});
    cases.push_back(c);
    c = {"paged (16 keys a page), 4 query heads over 2, window (0, 0)", {}, true};
    c.p.shape = {2, 4, 40, 40, 32};
    c.p.shape.Hkv = 2;
    c.p.shape.page_size = 16;
    c.p.window_left = c.p.window_right = 0;
    cases.push_back(c);
    c = {"packed, lengths 1, 1, 2", {}, false};
    c.p.shape.H = 2;
    c.p.shape.d = 32;
    set_packed(c.p.shape, {1, 1, 2}, {1, 1, 2});
    cases.push_back(c);
  }
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    for (Case& k : cases) {
      k.p.dtype = t;
      RunConfig c = config_of(k.p, 11);
      if (k.p.shape.paged())  // a paged cache: the versions that take one
        std::erase_if(c.versions, [](const VersionInfo* v) { return !(v->axes & kPaged); });
      Progress progress;
      const RunOutcome r = run_versions(c, progress);
      const std::string where = describe(k.p, c.seed) + ", " + k.name;
      for (const VersionOutcome& v : r.versions) {
        std::string why;
        for (const std::string& f : v.failures) why += f + "; ";
        EXPECT_TRUE(v.ok()) << v.version->id << " fails on " << where << ": " << why;
      }
      const bool with_grads = !r.ref_grads.dQ.empty();
      if (!k.zero) {
        EXPECT_GT(norm2_of(r.ref_grads.dQ), 0.0) << where;
        EXPECT_EQ(r.budget.of("dQ").zero_size, 0.0) << where;
        EXPECT_EQ(r.budget.of("dK").zero_size, 0.0) << where;
        continue;
      }
      if (!with_grads) continue;  // a paged run of forward versions at fp16: no gradients
      ASSERT_EQ(norm2_of(r.ref_grads.dQ), 0.0) << where;
      ASSERT_EQ(norm2_of(r.ref_grads.dK), 0.0) << where;
      const Forward with_p = reference::forward(r.problem, r.inputs, /*keep_P=*/true);
      const Gradients terms = reference::cancelled_terms(r.problem, r.inputs, with_p);
      EXPECT_EQ(r.budget.of("dQ").zero_size, norm2_of(terms.dQ)) << where;
      EXPECT_EQ(r.budget.of("dK").zero_size, norm2_of(terms.dK)) << where;
      for (const char* name : {"dQ", "dK"}) {
        EXPECT_GT(r.budget.of(name).zero_size, 0.0) << name << " " << where;
        EXPECT_FALSE(r.budget.of(name).capped) << name << " " << where;
      }
      EXPECT_EQ(r.budget.of("dV").zero_size, 0.0) << where;
      // dS = P dP (D left out), and errors of 8 and 1/4 budgets along the cancelled terms.
      const auto judged = [&](double dq_step, double dk_step, bool exact_terms) {
        VersionOutcome v;
        v.version = find_version("recompute");
        v.has_bwd = true;
        v.grads = exact_terms ? terms : r.ref_grads;
        v.grads.dV = r.ref_grads.dV;
        for (size_t i = 0; i < v.grads.dQ.size(); ++i) v.grads.dQ[i] += dq_step * terms.dQ[i];
        for (size_t i = 0; i < v.grads.dK.size(); ++i) v.grads.dK[i] += dk_step * terms.dK[i];
        judge(v, r);
        return v;
      };
      const double bq = r.budget.of("dQ").budget_rel, bk = r.budget.of("dK").budget_rel;
      const VersionOutcome no_d = judged(0, 0, true);
      EXPECT_NEAR(no_d.errors.at("dQ").rel, 1.0, 1e-12) << where;
      EXPECT_NEAR(no_d.errors.at("dK").rel, 1.0, 1e-12) << where;
      EXPECT_EQ(no_d.failures.size(), 2u) << where;
      const VersionOutcome far = judged(8 * bq, 8 * bk, false);
      EXPECT_EQ(far.failures.size(), 2u) << where;
      EXPECT_NEAR(far.errors.at("dQ").rel, 8 * bq, 1e-6 * bq) << where;
      const VersionOutcome near = judged(bq / 4, bk / 4, false);
      EXPECT_TRUE(near.ok()) << where;
    }
  }
}

}  // namespace flashlab
