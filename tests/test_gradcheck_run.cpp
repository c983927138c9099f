// Acceptance 3: the lecture's demo 1 (N = 48, d = 16, blocks 16 x 12, fp64, causal and not), and
// grouped heads (4 over 2) with a window (6, 3): finite differences reach every query head's dQ
// and the sums over a group in dK, dV.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "labs/01_gradcheck/gradcheck_run.h"

namespace flashlab {
namespace {

TEST(Gradcheck, Demo1Bounds) {
  const std::vector<lab::GradcheckCase> cases = lab::run_gradcheck();
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_FALSE(cases[0].causal);
  EXPECT_TRUE(cases[1].causal);
  EXPECT_TRUE(cases[2].causal);  // grouped heads with a window, under the causal mask
  EXPECT_EQ(cases[2].problem, "4/2, window (6, 3)");
  for (const lab::GradcheckCase& c : cases) {
    SCOPED_TRACE(std::string(c.causal ? "causal" : "full") + " " + c.problem);
    EXPECT_LE(c.fwd_max_abs, 1e-14);
    EXPECT_EQ(c.points.size(), 18u);
    EXPECT_LE(c.standard_vs_fd, 1e-7);
    std::set<std::string> ids;
    for (const lab::GradcheckVersion& v : c.versions) {
      ids.insert(v.id);
      EXPECT_LE(v.max_vs_standard, 1e-13) << v.id;
      EXPECT_LE(v.max_vs_fd, 1e-7) << v.id;
    }
    EXPECT_EQ(ids, (std::set<std::string>{"naive", "recompute", "atomic-dq", "deterministic-dq",
                                          "hopper", "hopper-deterministic"}));
  }
}

// Other sizes and a ragged tiling still pass the same bounds (N not a multiple of Br or Bc).
// The grouped case checks elements of every head, not only the first: its finite-difference rows
// span H * N rows of Q and Hkv * N of K and V.
TEST(Gradcheck, GroupedCaseReachesEveryHead) {
  const lab::GradcheckCase c = lab::run_gradcheck()[2];
  int64_t q_max = 0, kv_max = 0;
  for (const lab::FdPoint& p : c.points) (p.tensor == 'Q' ? q_max : kv_max) =
      std::max(p.tensor == 'Q' ? q_max : kv_max, p.row);
  EXPECT_GE(q_max, 48);   // past the first head's rows
  EXPECT_LT(q_max, 4 * 48);
  EXPECT_LT(kv_max, 2 * 48);
}

TEST(Gradcheck, RaggedTilesAndAnotherSeed) {
  lab::GradcheckConfig config;
  config.N = 29;
  config.d = 8;
  config.Br = 7;
  config.Bc = 5;
  config.seed = 17;
  for (const lab::GradcheckCase& c : lab::run_gradcheck(config)) {
    EXPECT_LE(c.fwd_max_abs, 1e-14);
    EXPECT_LE(c.standard_vs_fd, 1e-7);
    for (const lab::GradcheckVersion& v : c.versions) {
      EXPECT_LE(v.max_vs_standard, 1e-13) << v.id;
      EXPECT_LE(v.max_vs_fd, 1e-7) << v.id;
    }
  }
}

}  // namespace
}  // namespace flashlab
