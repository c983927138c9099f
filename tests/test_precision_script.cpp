// scripts/precision_fa2.py runs on a GPU beside PyTorch; what it can do without either is
// checked here through its --self-test: the .npy reader, the error and ratio math, the summary and
// markdown, and a real CPU dump of this build read back, whose errors must equal the ones the
// runner reports.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "test_cli_helpers.h"

namespace flashlab {

TEST(PrecisionScript, SelfTestPasses) {
  testing::ScratchDir io;
  const std::string cmd = "timeout -k 5 120 /usr/bin/python3 '" + std::string(FLASHLAB_SOURCE_DIR) +
                          "/scripts/precision_fa2.py' --self-test --flashlab " +
                          testing::quoted(testing::flashlab_bin()) + " </dev/null >'" +
                          (io / "out") + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string out = testing::slurp(io.path() / "out");
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << out;
  EXPECT_NE(out.find("self-test: 0 failure(s)"), std::string::npos) << out;
  // The dump check ran (it is skipped only when no binary is given).
  EXPECT_EQ(out.find("skip  the dump check"), std::string::npos) << out;
  EXPECT_NE(out.find("the dump holds the fp64 reference dQ"), std::string::npos) << out;
}

}  // namespace flashlab
