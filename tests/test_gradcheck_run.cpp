// Acceptance 3: the lecture's demo 1 (N = 48, d = 16, blocks 16 x 12, fp64, causal and not), and
// grouped heads (4 over 2) with a window (6, 3), and a packed batch of those heads: finite
// differences reach every query head's dQ and the sums over a group in dK, dV, in every sequence.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "labs/01_gradcheck/gradcheck_run.h"

namespace flashlab {
namespace {

TEST(Gradcheck, Demo1Bounds) {
  const std::vector<lab::GradcheckCase> cases = lab::run_gradcheck();
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_FALSE(cases[0].causal);
  EXPECT_TRUE(cases[1].causal);
  EXPECT_TRUE(cases[2].causal);  // grouped heads with a window, under the causal mask
  EXPECT_EQ(cases[2].problem, "4/2, window (6, 3)");
  EXPECT_TRUE(cases[3].causal);  // a packed batch of grouped heads, one sequence of length 0
  EXPECT_EQ(cases[3].problem, "4/2, packed 1,17,0,30");
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
    EXPECT_EQ(
        ids, (std::set<std::string>{"naive", "recompute", "atomic-dq", "deterministic-dq", "hopper",
                                    "hopper-deterministic", "ring", "ring-contiguous"}));
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

// The packed case's elements lie in more than one sequence: rows are token * heads + head, and
// sequence 3 (30 tokens) starts at token 18.
TEST(Gradcheck, PackedCaseReachesMoreThanOneSequence) {
  const lab::GradcheckCase c = lab::run_gradcheck()[3];
  bool early = false, late = false;
  for (const lab::FdPoint& p : c.points) {
    const int64_t token = p.row / (p.tensor == 'Q' ? 4 : 2);
    early = early || token < 18;
    late = late || token >= 18;
  }
  EXPECT_TRUE(early && late);
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
