// scripts/compare_sweeps.py sets two compare_torch.py sweeps side by side, with PyTorch's own
// change between the two calls as the spread; its --self-test checks the arithmetic on made-up
// sweeps (a change inside the spread is not flagged, a 10 % loss at one shape is, by how much) and
// that bad input is refused with one line. Here: the self-test, and the committed sweeps read.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "test_cli_helpers.h"

namespace flashlab {
namespace {

struct Ran {
  int rc;
  std::string out;
};

Ran run_script(const std::string& args) {
  testing::ScratchDir io;
  const std::string cmd = "timeout -k 5 60 /usr/bin/python3 " +
                          testing::quoted(std::string(FLASHLAB_SOURCE_DIR) +
                                          "/scripts/compare_sweeps.py") +
                          " " + args + " </dev/null >" + testing::quoted(io / "out") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, testing::slurp(io.path() / "out")};
}

std::string result(const char* name) {
  return testing::quoted(std::string(FLASHLAB_SOURCE_DIR) + "/docs/results/" + name);
}

TEST(SweepsScript, SelfTestPasses) {
  const Ran r = run_script("--self-test");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("self-test: 0 failure(s)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(SweepsScript, ReadsTheCommittedSweeps) {
  const Ran r = run_script(result("compare_torch_bwd_hopper.json") + " " +
                           result("compare_torch_bwd_hopper_008e89c.json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("hopper bwd (40 shapes):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hopper-deterministic bwd (40 shapes):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the spread: "), std::string::npos) << r.out;
}

TEST(SweepsScript, BadInputIsOneLine) {
  for (const std::string args : {std::string("/nonexistent/a.json /nonexistent/b.json"),
                                 testing::quoted(std::string(FLASHLAB_SOURCE_DIR) + "/README.md") +
                                     " " + result("compare_torch_bwd_hopper.json"),
                                 std::string("")}) {
    const Ran r = run_script(args);
    EXPECT_EQ(r.rc, 1) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("Traceback"), std::string::npos) << r.out;
    EXPECT_EQ(testing::count_lines(r.out), 1) << r.out;
    EXPECT_EQ(r.out.rfind("compare_sweeps.py: ", 0), 0u) << r.out;
  }
}

}  // namespace
}  // namespace flashlab
