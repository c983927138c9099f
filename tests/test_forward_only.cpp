// A run whose versions are all forward-only (run/config.h, forward_only_reference): the fp64
// reference keeps no P and runs no backward, the budget has O and LSE only, and both are the
// figures a run with a backward version computes for the same problem, bit for bit (so a report
// checked again by `verify` gets the same budget either way). fp64 keeps the whole reference: its
// budget estimates the rounding floor from the gradients too. The memory check counts what the
// forward-only reference holds. (The dump of such a run, without reference gradients:
// test_split_kv.cpp, SplitKv.ARunOnAPagedCachePassesAndLeavesTheOthersOut.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run/budget.h"
#include "run/host_memory.h"
#include "run/registry.h"
#include "run/runner.h"
#include "test_cpu_util.h"
#include "util/progress.h"

namespace flashlab {
namespace {

RunConfig config_of(const Problem& p, std::vector<std::string> ids) {
  RunConfig c;
  c.problem = p;
  c.seed = 31;
  c.repeats = 1;
  c.warmup = 0;
  for (const std::string& id : ids) c.versions.push_back(find_version(id));
  return c;
}

std::vector<std::string> outputs_of(const ErrorBudget& b) {
  std::vector<std::string> names;
  for (const OutputBudget& o : b.outputs) names.push_back(o.output);
  return names;
}

TEST(ForwardOnly, TheReferenceAndBudgetAreTheForwardsAndTheSameFigures) {
  // Grouped heads, a paged cache, Nq != Nk, causal: decoding's problem, small.
  for (const DType t : {DType::bf16, DType::f16, DType::f32}) {
    const Problem p = testing::make_paged_problem(2, 8, 2, 3, 300, 32, 16, true, t);
    const RunConfig fwd = config_of(p, {"split-kv"});
    const RunConfig both = config_of(p, {"split-kv", "atomic-dq"});
    EXPECT_TRUE(forward_only_reference(fwd));
    EXPECT_FALSE(forward_only_reference(both));
    Progress progress;
    const RunOutcome a = prepare(fwd, progress), b = prepare(both, progress);
    EXPECT_TRUE(a.ref_grads.dQ.empty() && a.ref_grads.dK.empty() && a.ref_grads.dV.empty());
    EXPECT_TRUE(a.ref_fwd.P.empty());
    ASSERT_EQ(b.ref_grads.dK.size(), static_cast<size_t>(p.shape.kv_elems()));
    EXPECT_EQ(outputs_of(a.budget), (std::vector<std::string>{"O", "LSE"}));
    EXPECT_EQ(outputs_of(b.budget), (std::vector<std::string>{"O", "LSE", "dQ", "dK", "dV"}));
    EXPECT_TRUE(a.ref_fwd.O == b.ref_fwd.O);
    EXPECT_TRUE(a.ref_fwd.LSE == b.ref_fwd.LSE);
    for (const char* name : {"O", "LSE"}) {
      const OutputBudget &x = a.budget.of(name), &y = b.budget.of(name);
      EXPECT_EQ(x.lowp_rel, y.lowp_rel) << to_string(t) << " " << name;
      EXPECT_EQ(x.rounded_rel, y.rounded_rel) << name;
      EXPECT_EQ(x.budget_rel, y.budget_rel) << name;
    }
    EXPECT_THROW(a.budget.of("dQ"), std::logic_error);
  }
}

TEST(ForwardOnly, Fp64KeepsTheWholeReference) {
  const Problem p = testing::make_problem(1, 2, 40, 70, 16, false, DType::f64);
  const RunConfig c = config_of(p, {"tiled"});
  EXPECT_FALSE(forward_only_reference(c));
  Progress progress;
  const RunOutcome r = prepare(c, progress);
  EXPECT_EQ(outputs_of(r.budget), (std::vector<std::string>{"O", "LSE", "dQ", "dK", "dV"}));
  EXPECT_EQ(r.ref_grads.dQ.size(), static_cast<size_t>(p.shape.q_elems()));
}

TEST(ForwardOnly, TheRunSaysWhichReferenceItRan) {
  const Problem p = testing::make_problem(1, 2, 50, 90, 32, true, DType::bf16);
  RunConfig c = config_of(p, {"tiled"});
  Progress progress;
  const RunOutcome r = run_versions(c, progress);
  const Report rep = run_report(c, r);
  std::string notes;
  for (const std::string& o : rep.observations) notes += o + "\n";
  EXPECT_NE(notes.find("fp64 reference (the forward only: no version selected has a backward)"),
            std::string::npos)
      << notes;
  c.versions.push_back(find_version("recompute"));
  const Report both = run_report(c, run_versions(c, progress));
  notes.clear();
  for (const std::string& o : both.observations) notes += o + "\n";
  EXPECT_NE(notes.find("fp64 reference (forward + backward from stored P)"), std::string::npos)
      << notes;
}

// The memory check counts the forward-only reference: no P, no gradients, no backward's buffers.
TEST(ForwardOnly, TheMemoryCheckCountsTheForwardsReference) {
  const Problem p = testing::make_problem(2, 8, 512, 4096, 64, false, DType::bf16);
  RunConfig fwd = config_of(p, {"tiled"});
  fwd.backend = Backend::cuda;  // the versions' own buffers are the device's
  RunConfig both = config_of(p, {"tiled", "recompute"});
  both.backend = Backend::cuda;
  const double a = run_host_bytes(fwd), b = run_host_bytes(both);
  const Shape& s = p.shape;
  const double P = 8.0 * s.heads() * s.Nq * s.Nk;  // the reference's P, 128 MiB here
  EXPECT_LT(a, b - P) << "the forward-only reference keeps no P";
  EXPECT_GT(a, 8.0 * (2 * s.q_elems() + 2 * s.kv_elems())) << "the inputs at least";
}

}  // namespace
}  // namespace flashlab
