// scripts/gen_perf_table.py writes the README's speed tables from the committed results of
// scripts/compare_torch.py, so that no figure there is typed by hand. Here: each table between
// the README's markers is what the script prints from the committed JSON the README names, and a
// ratio just below 1.0 is never printed as 1.00 (a goal of 1.0x must not read as met).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "test_cli_helpers.h"

namespace flashlab {
namespace {

using Ran = testing::ScriptResult;

// The text between <!-- NAME-table:begin --> and <!-- NAME-table:end --> (perf's are
// <!-- perf-table:... --> too), without the newlines at either end; empty when absent.
std::string readme_section(const std::string& name) {
  const std::string text = testing::slurp(std::string(FLASHLAB_SOURCE_DIR) + "/README.md");
  const std::string begin = "<!-- " + name + "-table:begin -->";
  const std::string end = "<!-- " + name + "-table:end -->";
  const auto b = text.find(begin);
  const auto e = text.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) return "";
  std::string body = text.substr(b + begin.size(), e - b - begin.size());
  while (!body.empty() && body.front() == '\n') body.erase(body.begin());
  while (!body.empty() && body.back() == '\n') body.pop_back();
  return body;
}

std::string trimmed(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

TEST(PerfTableScript, TheReadmeTablesAreTheCommittedResults) {
  struct Table {
    std::string marker, args;
  };
  const Table tables[] = {
      {"hopper",
       testing::result_file("compare_torch_fwd_hopper_e006e3a.json") + " --section hopper"},
      {"hopper-bwd",
       testing::result_file("compare_torch_bwd_hopper_62aeebd.json") + " --section hopper-bwd"},
      {"gqa", testing::result_file("compare_torch_gqa_hopper.json") + " --section gqa"},
      {"d256", testing::result_file("compare_torch_d256.json") + " --section d256"},
      {"d256-fwd", testing::result_file("compare_torch_fwd_d256_bf16_bdf5451.json") + " " +
                       testing::result_file("compare_torch_fwd_d256_fp16_bdf5451.json") +
                       " --section d256"},
  };
  for (const Table& t : tables) {
    const Ran r =
        testing::run_python_script("gen_perf_table.py", t.args + " --versus cudnn --stdout");
    ASSERT_EQ(r.rc, 0) << t.marker << "\n" << r.out;
    const std::string want = readme_section(t.marker);
    ASSERT_FALSE(want.empty()) << "README.md has no " << t.marker << " table";
    EXPECT_EQ(trimmed(r.out), want) << t.marker;
  }
  const Ran r = testing::run_python_script(
      "gen_perf_table.py", testing::result_file("compare_torch_bf16.json") + " " +
                               testing::result_file("compare_torch_fp16.json") + " --stdout");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(trimmed(r.out), readme_section("perf"));
}

TEST(PerfTableScript, ARatioBelowOneIsNeverOnePointZeroZero) {
  testing::ScratchDir dir;
  // Four shapes of one sweep: ratios 0.9996, 0.996, 1.004 and 0.95 against cuDNN.
  std::string rows;
  const double ratio[] = {0.9996, 0.996, 1.004, 0.95};
  const int n[] = {1024, 2048, 4096, 8192};
  for (int i = 0; i < 4; ++i) {
    rows +=
        std::string(i ? "," : "") +
        R"({"version": "hopper", "pass": "fwd", "dtype": "bf16", "d": 128, "causal": false, "N": )" +
        std::to_string(n[i]) + R"(, "flashlab_tflops": 500.0, "vs_cudnn": )" +
        std::to_string(ratio[i]) + R"(, "flash_tflops": 400.0, "cudnn_tflops": 500.0})";
  }
  {
    std::ofstream f(dir / "sweep.json");
    f << R"({"gpu": "a GPU", "flashlab_commit": "0123456789ab", "torch_version": "2", )"
      << R"("created_utc": "2026-01-01T00:00:00Z", "comparison": [)" << rows << "]}";
  }
  const Ran r = testing::run_python_script(
      "gen_perf_table.py",
      testing::quoted(dir / "sweep.json") + " --section hopper --versus cudnn --stdout");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("| 1024 | 500 | 0.999 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 2048 | 500 | 0.996 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 4096 | 500 | 1.00 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 8192 | 500 | 0.95 |"), std::string::npos) << r.out;
  // The goals' header names the N the results cover, and the lowest ratio keeps its three digits.
  EXPECT_NE(r.out.find("goals over N = 1024 … 8192 (4 shapes)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lowest 0.95×"), std::string::npos) << r.out;
}

TEST(PerfTableScript, MarkerNamesTheSection) {
  testing::ScratchDir dir;
  {
    std::ofstream f(dir / "doc.md");
    f << "before\n<!-- d256-table:begin -->\nold d256\n<!-- d256-table:end -->\n"
      << "<!-- d256-fwd-table:begin -->\nold fwd\n<!-- d256-fwd-table:end -->\nafter\n";
  }
  const Ran r = testing::run_python_script(
      "gen_perf_table.py", testing::result_file("compare_torch_fwd_d256_bf16_bdf5451.json") +
                               " --section d256 --versus cudnn --marker d256-fwd --readme " +
                               testing::quoted(dir / "doc.md"));
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string doc = testing::slurp(dir.path() / "doc.md");
  EXPECT_NE(doc.find("old d256"), std::string::npos) << doc;  // the other table is left alone
  EXPECT_EQ(doc.find("old fwd"), std::string::npos) << doc;
  EXPECT_NE(doc.find("| bf16 | 256 | no | 16384 | 805 | 1.08 |"), std::string::npos) << doc;
  EXPECT_NE(doc.find("after\n"), std::string::npos) << doc;
}

}  // namespace
}  // namespace flashlab
