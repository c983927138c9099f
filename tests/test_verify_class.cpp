// `flashlab verify FOLDER`: a class of 30 hand-ins (some passing, some with each defect verify
// catches, one that is no report at all) graded in one run, under 10 s on the CPU: one row per
// student and version with the right verdict and what is wrong, the JSON valid against the
// report schema, and a --require policy that fails the hand-ins that lack what it asks.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "test_cli_helpers.h"

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

json& errors_rows(json& doc) {
  for (json& t : doc["tables"])
    if (t["id"] == "errors") return t["rows"];
  throw std::runtime_error("no errors table");
}

TEST(VerifyClass, GradesAFolderOfThirtyHandinsWithOneRowPerStudentAndVersion) {
  ScratchDir dir;
  const std::string base = dir / "base";
  fs::create_directories(base);
  ASSERT_EQ(run_cli("run --versions atomic-dq,deterministic-dq --dtype fp64 -N 40 -d 16 "
                    "--repeats 1 --json " +
                    quoted(base + "/run.json"))
                .status,
            0);
  ASSERT_EQ(run_cli("run --versions tiled --dtype fp64 -N 64 -d 8 --causal --repeats 1 --json " +
                    quoted(base + "/tiled.json"))
                .status,
            0);
  ASSERT_EQ(run_cli("lab no-lse --json " + quoted(base + "/nolse.json")).status, 0);
  ASSERT_EQ(run_cli("run --versions ex1-ds --dtype fp64 -N 32 -d 8 --repeats 1 --json " +
                    quoted(base + "/ex1.json"))
                .status,
            1);
  const json run = json::parse(slurp(base + "/run.json"));
  const json tiled = json::parse(slurp(base + "/tiled.json"));
  const json nolse = json::parse(slurp(base + "/nolse.json"));
  const json ex1 = json::parse(slurp(base + "/ex1.json"));

  // Each student's hand-in, and whether it should pass. Defects follow the seed.
  const std::string folder = dir / "class";
  std::map<std::string, bool> expected;
  std::mt19937_64 rng(2621);
  const auto hand_in = [&](const std::string& student, const json& doc, bool passes) {
    fs::create_directories(folder + "/" + student);
    std::ofstream(folder + "/" + student + "/handin.json") << doc.dump(1);
    expected[student + "/handin"] = passes;
  };
  for (int i = 0; i < 12; ++i)
    hand_in("pass" + std::to_string(i), i % 3 == 0 ? tiled : i % 3 == 1 ? run : nolse, true);
  hand_in("starter", ex1, false);
  for (int i = 0; i < 17; ++i) {
    json doc = run;
    std::string name;
    switch (i % 8) {
      case 0:
        doc["ok"] = false, name = "okfalse";
        break;
      case 1:
        doc["config"]["error_budget"]["factor"] = 1e20, name = "factor";
        break;
      case 2:
        errors_rows(doc)[rng() % 6]["ok"] = false, name = "verdict";
        break;
      case 3:  // smaller errors: only the rerun sees it
        for (json& row : errors_rows(doc)) row["rel"] = row["rel"].get<double>() * 0.25;
        name = "errors";
        break;
      case 4:
        doc["config"]["seed"] = 1 + rng() % 1000, name = "config";
        break;
      case 5: {
        doc = nolse;
        json& rows = doc["tables"][0]["rows"];
        rows[rng() % rows.size()]["flops_no_lse"] = 1.0;
        name = "labcounts";
        break;
      }
      case 6:
        doc["sources"]["shared"]["files"].begin().value() = std::string(64, '0');
        name = "hash";
        break;
      case 7:
        doc["sources"].erase("harness"), name = "harness";
        break;
    }
    hand_in(name + std::to_string(i), doc, false);
  }
  // One that is no report at all.
  fs::create_directories(folder + "/broken");
  std::ofstream(folder + "/broken/handin.json") << std::string(100000, '[');
  expected["broken/handin"] = false;
  ASSERT_EQ(expected.size(), 31u);  // 30 reports, and the broken one

  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_cli("verify " + quoted(folder) + " --rerun --root " + quoted(kSource) +
                              " --json " + quoted(dir / "class.json"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 1) << r.err << r.out;
  EXPECT_LT(seconds, 10.0) << r.out;
  bool valid = false;
  const std::string log = testing::validate_reports({dir / "class.json"}, valid);
  EXPECT_TRUE(valid) << log;

  const json doc = json::parse(slurp(dir / "class.json"));
  ASSERT_EQ(doc["tables"][0]["id"], "class");
  std::map<std::string, std::set<std::string>> status;  // student -> statuses of its rows
  for (const json& row : doc["tables"][0]["rows"]) {
    status[row["student"]].insert(row["status"].get<std::string>());
    if (row["status"] != "PASS") {
      EXPECT_FALSE(row["what"].get<std::string>().empty()) << row.dump();
    }
  }
  for (const auto& [student, passes] : expected) {
    SCOPED_TRACE(student);
    ASSERT_TRUE(status.count(student));
    if (passes)
      EXPECT_EQ(status[student], std::set<std::string>{"PASS"});
    else
      EXPECT_FALSE(status[student].count("PASS"));
  }
  // A run report has a row per version; the refused one says why.
  int run_rows = 0;
  for (const json& row : doc["tables"][0]["rows"]) {
    if (row["student"] == "pass1/handin") ++run_rows;
    if (row["student"] == "broken/handin") {
      EXPECT_EQ(row["status"], "REFUSED");
      EXPECT_NE(row["what"].get<std::string>().find("levels deep"), std::string::npos);
    }
    if (row["student"].get<std::string>().rfind("factor", 0) == 0) {
      EXPECT_NE(row["what"].get<std::string>().find("budget factor"), std::string::npos);
    }
    if (row["student"].get<std::string>().rfind("errors", 0) == 0) {
      EXPECT_NE(row["what"].get<std::string>().find("MISMATCH rerun"), std::string::npos);
    }
  }
  EXPECT_EQ(run_rows, 2);
  EXPECT_NE(r.out.find("31 hand-in(s): 12 pass, 18 fail, 1 refused."), std::string::npos) << r.out;

  // The policy: deterministic-dq required, in fp64. Only the passing run reports hold it.
  const CliResult p =
      run_cli("verify " + quoted(folder + "/pass1") + " " + quoted(folder + "/pass0") + " " +
              quoted(folder + "/pass2") + " --root " + quoted(kSource) +
              " --require versions=deterministic-dq --require dtype=fp64");
  EXPECT_EQ(p.status, 1) << p.out << p.err;
  EXPECT_NE(p.out.find("3 hand-in(s): 1 pass, 2 fail"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("REQUIRE versions: no deterministic-dq"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("REQUIRE dtype: \"none\", not fp64"), std::string::npos) << p.out;
  // A policy it cannot read is bad input.
  const CliResult bad = run_cli("verify " + quoted(folder) + " --require speed=fast");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--require: unknown key 'speed'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace flashlab
