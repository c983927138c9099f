// `flashlab verify` against forged hand-ins: each case is a report (or a tree) changed the way a
// student might to pass, and verify must fail it with exit 1 and a line naming what is wrong:
// a report whose own checks failed; an edited file of src/ or an edited .inc; a budget, an error
// or a config edited in the JSON; a tree that is not the one the binary was built from; a lab
// report with edited counts. An untouched report passes, so each failure is the forgery's.
// Which figure is edited, and by how much, comes from a fixed seed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "test_cli_helpers.h"
#include "util/sha256.h"

namespace flashlab {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::CliResult;
using testing::quoted;
using testing::run_cli;
using testing::ScratchDir;
using testing::slurp;

const std::string kSource = FLASHLAB_SOURCE_DIR;

class ForgedHandins : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir;
    // atomic-dq races (compared within a tolerance), deterministic-dq does not (exactly).
    CliResult r = run_cli(
        "run --versions tiled,atomic-dq,deterministic-dq --dtype fp64 -N 48 "
        "--Nk 40 -d 16 --causal --repeats 1 --json " +
        quoted(*dir_ / "run.json"));
    ASSERT_EQ(r.status, 0) << r.err;
    r = run_cli("run --versions atomic-dq --dtype fp16 -N 64 -d 16 --repeats 1 --json " +
                quoted(*dir_ / "fp16.json"));
    ASSERT_EQ(r.status, 0) << r.err;
    r = run_cli("lab no-lse --json " + quoted(*dir_ / "nolse.json"));
    ASSERT_EQ(r.status, 0) << r.err;
    r = run_cli("lab memory --json " + quoted(*dir_ / "memory.json"));
    ASSERT_EQ(r.status, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static json report(const std::string& name) { return json::parse(slurp(*dir_ / name)); }
  static std::string write(const json& doc, const std::string& name) {
    const std::string path = *dir_ / name;
    std::ofstream(path) << doc.dump(1);
    return path;
  }
  // Against this tree unless `args` names another.
  static CliResult verify(const std::string& path, const std::string& args = "") {
    const std::string root =
        args.find("--root") == std::string::npos ? " --root " + quoted(kSource) : "";
    return run_cli("verify " + quoted(path) + " " + args + root, 120);
  }
  static ScratchDir* dir_;
};

ScratchDir* ForgedHandins::dir_ = nullptr;

void expect_caught(const CliResult& r, const std::string& line, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(r.status, 1) << r.err << r.out;
  EXPECT_NE(r.out.find(line), std::string::npos) << "expected '" << line << "' in\n" << r.out;
}

json& errors_rows(json& doc) {
  for (json& t : doc["tables"])
    if (t["id"] == "errors") return t["rows"];
  throw std::runtime_error("no errors table");
}

TEST_F(ForgedHandins, UntouchedReportsPass) {
  for (const char* name : {"run.json", "fp16.json", "nolse.json", "memory.json"}) {
    const CliResult r = verify(*dir_ / name, "--rerun --root " + quoted(kSource));
    EXPECT_EQ(r.status, 0) << name << "\n" << r.out << r.err;
  }
}

TEST_F(ForgedHandins, AReportWhoseOwnChecksFailedFails) {
  // The ex1 starter as handed out: not implemented, so the run's ok is false.
  const std::string path = *dir_ / "ex1.json";
  const CliResult run = run_cli(
      "run --versions ex1-ds --dtype fp64 -N 32 -d 8 --repeats 1 "
      "--json " +
      quoted(path));
  ASSERT_EQ(run.status, 1) << run.err;
  expect_caught(verify(path), "FAIL report: its own checks failed", "ex1 starter");
  // And a passing report whose ok was set to false.
  json doc = report("run.json");
  doc["ok"] = false;
  expect_caught(verify(write(doc, "okfalse.json")), "FAIL report", "ok false");
}

TEST_F(ForgedHandins, EditedSourcesOutsideTheVersionFoldersAreNamed) {
  ScratchDir tree;
  const std::string root = testing::copy_hashed_tree(kSource, tree.path());
  const std::string report_path = *dir_ / "run.json";
  EXPECT_EQ(verify(report_path, "--root " + quoted(root)).status, 0);
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"src/run/budget.cpp", "((harness))"},
      {"reference/attention.cpp", "((harness))"},
      {"labs/06_no_lse/no_lse.cpp", "((harness))"},
      {"kernels/common/sm90/wgmma_ops.inc", "((shared))"},
  };
  for (const auto& [file, who] : edits) {
    ASSERT_TRUE(fs::exists(root + "/" + file)) << file;
    const std::string before = slurp(root + "/" + file);
    std::ofstream(root + "/" + file, std::ios::app) << "// edited\n";
    expect_caught(verify(report_path, "--root " + quoted(root)),
                  "MISMATCH " + file + " " + who + ": differs", file);
    std::ofstream(root + "/" + file, std::ios::trunc) << before;
  }
  // A new .inc included by a version's cpu.cpp, and a new file of src/.
  std::ofstream(root + "/kernels/04_atomic_dq/scale.inc") << "// new\n";
  expect_caught(verify(report_path, "--root " + quoted(root)),
                "MISMATCH kernels/04_atomic_dq/scale.inc (atomic-dq): not in the report", ".inc");
  fs::remove(root + "/kernels/04_atomic_dq/scale.inc");
  std::ofstream(root + "/src/run/extra.h") << "// new\n";
  expect_caught(verify(report_path, "--root " + quoted(root)),
                "MISMATCH src/run/extra.h ((harness)): not in the report", "new src file");
}

TEST_F(ForgedHandins, EditedBudgetsAreCaught) {
  // Every budget set to 1.0, consistently: only recomputing the budget catches it.
  json doc = report("run.json");
  for (json& row : errors_rows(doc)) row["budget_rel"] = 1.0;
  for (auto& [name, o] : doc["config"]["error_budget"]["outputs"].items()) o["budget_rel"] = 1.0;
  expect_caught(verify(write(doc, "budget1.json"), "--rerun"), "recomputed", "budgets 1.0");
  // One row judged against another budget than the report's own.
  doc = report("run.json");
  errors_rows(doc)[3]["budget_rel"] = 0.5;
  expect_caught(verify(write(doc, "budgetrow.json")), "FAIL budget:", "row budget");
  // The budget factor.
  doc = report("run.json");
  doc["config"]["error_budget"]["factor"] = 4e20;
  expect_caught(verify(write(doc, "factor.json")), "FAIL budget: the report's budget factor",
                "factor");
  // A verdict that does not follow from the figures.
  doc = report("run.json");
  errors_rows(doc)[0]["rel"] = 0.9;
  expect_caught(verify(write(doc, "verdict.json")), "FAIL verdict:", "verdict");
}

TEST_F(ForgedHandins, EditedErrorsAreCaughtByTheRerun) {
  std::mt19937_64 rng(2611);
  for (const char* name : {"run.json", "fp16.json"}) {
    const json base = report(name);
    const json& rows = const_cast<json&>(base)["tables"][0]["rows"];
    for (int k = 0; k < 4; ++k) {
      json doc = base;
      json& row = errors_rows(doc)[rng() % rows.size()];
      const double rel = row["rel"].get<double>();
      // Smaller (what a forger wants), or 1e-17 outright.
      const double forged = k == 0 ? 1e-17 : rel * (0.1 + 0.5 * (rng() % 1000) / 1000.0);
      row["rel"] = forged;
      const std::string label =
          row["version"].get<std::string>() + " " + row["output"].get<std::string>();
      if (rel == 0 && forged <= 1e-17) continue;  // nothing a forger gains
      expect_caught(verify(write(doc, "err.json"), "--rerun"), "MISMATCH rerun " + label,
                    std::string(name) + " " + label + " rel " + std::to_string(forged));
    }
  }
}

TEST_F(ForgedHandins, EditedConfigsAreCaughtByTheRerun) {
  const std::vector<std::pair<std::string, json>> edits = {
      {"/config/seed", 7}, {"/config/Nq", 47}, {"/config/causal", false}, {"/config/d", 8}};
  for (const auto& [pointer, value] : edits) {
    json doc = report("run.json");
    doc[json::json_pointer(pointer)] = value;
    expect_caught(verify(write(doc, "cfg.json"), "--rerun"), "MISMATCH rerun", pointer);
  }
}

TEST_F(ForgedHandins, ATreeThatIsNotTheBinarysIsRefusedByTheRerun) {
  // Another tree with other code in a version, and the report's hash edited to match it: the
  // hashes agree, but --rerun would run this binary's code, not that tree's.
  ScratchDir tree;
  const std::string root = testing::copy_hashed_tree(kSource, tree.path());
  const std::string file = "kernels/05_deterministic_dq/cpu.cpp";
  std::ofstream(root + "/" + file, std::ios::app) << "// a different answer\n";
  json doc = report("run.json");
  doc["sources"]["versions"]["deterministic-dq"]["files"][file] =
      sha256_file(root + "/" + file).value();
  const std::string path = write(doc, "othertree.json");
  EXPECT_EQ(verify(path, "--root " + quoted(root)).status, 0);  // the hashes alone agree
  const CliResult r = verify(path, "--rerun --root " + quoted(root));
  expect_caught(r, "MISMATCH tree: --rerun runs this flashlab's code", "other tree");
  EXPECT_NE(r.out.find(file), std::string::npos) << r.out;
}

TEST_F(ForgedHandins, ALabReportWithEditedCountsIsCaught) {
  std::mt19937_64 rng(2612);
  const json base = report("nolse.json");
  for (const char* column : {"flops_no_lse", "io_no_lse", "extra_flops"}) {
    json doc = base;
    json& rows = doc["tables"][0]["rows"];
    const size_t i = rng() % rows.size();
    rows[i][column] = rows[i][column].get<double>() * 0.5;
    expect_caught(verify(write(doc, "lab.json"), "--rerun"),
                  "MISMATCH rerun no_lse row " + std::to_string(i) + " " + column, column);
  }
}

}  // namespace
}  // namespace flashlab
