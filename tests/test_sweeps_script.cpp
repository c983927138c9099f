// scripts/compare_sweeps.py sets two compare_torch.py sweeps side by side, with PyTorch's own
// change between the two calls as the spread; its --self-test checks the arithmetic on made-up
// sweeps (a change inside the spread is not flagged, a 10 % loss at one shape is, by how much) and
// that bad input is refused with one line. Here: the self-test, and the committed sweeps read.
// scripts/compare_rounds.py sets two binaries timed in alternation in one call side by side: it
// must reproduce the comparisons the committed device scripts printed from their reports.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "test_cli_helpers.h"

namespace flashlab {
namespace {

using Ran = testing::ScriptResult;

Ran run_script(const std::string& args, const char* script = "compare_sweeps.py") {
  return testing::run_python_script(script, args);
}

TEST(SweepsScript, SelfTestPasses) {
  const Ran r = run_script("--self-test");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("self-test: 0 failure(s)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(SweepsScript, ReadsTheCommittedSweeps) {
  const Ran r = run_script(testing::result_file("compare_torch_bwd_hopper.json") + " " +
                           testing::result_file("compare_torch_bwd_hopper_008e89c.json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("hopper bwd (40 shapes):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hopper-deterministic bwd (40 shapes):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the spread: "), std::string::npos) << r.out;
}

TEST(SweepsScript, BadInputIsOneLine) {
  for (const std::string& args : {std::string("/nonexistent/a.json /nonexistent/b.json"),
                                  testing::quoted(std::string(FLASHLAB_SOURCE_DIR) + "/README.md") +
                                      " " + testing::result_file("compare_torch_bwd_hopper.json"),
                                  std::string("")}) {
    const Ran r = run_script(args);
    EXPECT_EQ(r.rc, 1) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("Traceback"), std::string::npos) << r.out;
    EXPECT_EQ(testing::count_lines(r.out), 1) << r.out;
    EXPECT_EQ(r.out.rfind("compare_sweeps.py: ", 0), 0u) << r.out;
  }
}

TEST(RoundsScript, ReproducesTheCommittedComparisons) {
  // steps/sweeps/call9: hopper's d = 64 forward, h against n; steps/tiled_causal/call6: tiled's
  // causal d = 128 forward, ec149c0 (o) against p. Their compare.txt printed these figures.
  Ran r = run_script(testing::result_file("steps/sweeps/call9") +
                         " --prefix d64_ --base h --new n --version hopper",
                     "compare_rounds.py");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("geometric mean over 20 shapes: n/h 0.990; lowest 0.968, highest 1.003"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("bf16 64 False 16384 fwd | 577.7 560.3 578.9 559.8 | 0.968 1.002"),
            std::string::npos)
      << r.out;
  r = run_script(testing::result_file("steps/tiled_causal/call6") +
                     " --prefix causal_ --base o --new p --version tiled",
                 "compare_rounds.py");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("geometric mean over 10 shapes: p/o 0.999; lowest 0.990, highest 1.009"),
            std::string::npos)
      << r.out;
}

TEST(RoundsScript, BadInputIsOneLine) {
  const std::string call9 = testing::result_file("steps/sweeps/call9");
  for (const std::string& args :
       {std::string("/nonexistent --prefix d64_ --base h --new n --version hopper"),
        call9 + " --prefix d64_ --base h --new n --version tiled",
        call9 + " --prefix d64_ --base h --new n --version hopper --rounds 0",
        testing::result_file("compare_torch_bwd_hopper.json") +
            " --prefix d64_ --base h --new n --version hopper"}) {
    const Ran r = run_script(args, "compare_rounds.py");
    EXPECT_EQ(r.rc, 1) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("Traceback"), std::string::npos) << r.out;
    EXPECT_EQ(testing::count_lines(r.out), 1) << r.out;
    EXPECT_EQ(r.out.rfind("compare_rounds.py: ", 0), 0u) << r.out;
  }
}

}  // namespace
}  // namespace flashlab
