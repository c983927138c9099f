// Every command's --json output validates against docs/report.schema.json, and `run` reports
// what it promises (errors, budget, timing, bitwise repeat; --dump as .npy).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/rng.h"
#include "run/registry.h"
#include "test_cli_helpers.h"
#include "util/npy.h"

namespace flashlab {

using json = nlohmann::json;
using testing::CliResult;
using testing::run_cli;
using testing::ScratchDir;
using testing::slurp;

namespace {

const char* kSmallRun =
    "run --backend cpu -B 1 -H 2 -N 40 -d 16 --br 16 --bc 12 --repeats 1 "
    "--warmup 1 --versions all";

json load(const std::string& path) {
  return json::parse(slurp(path));
}

const json* find_table(const json& doc, const std::string& id) {
  for (const json& t : doc["tables"])
    if (t["id"] == id) return &t;
  return nullptr;
}

}  // namespace

TEST(CliJson, EveryCommandValidatesAgainstTheSchema) {
  ScratchDir dir;
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"list", "list"},
      {"run", kSmallRun},
      {"run_causal_ragged",
       "run --backend cpu --Nq 17 --Nk 30 -d 8 --causal --dtype bf16 "
       "--repeats 1 --warmup 0"},
      {"gradcheck", "gradcheck"},
      {"lab_list", "lab list"},
      {"lab_all", "lab all --backend cpu"},
      {"lab_all_zh", "lab all --backend cpu --lang zh"},
      {"bench", "bench --backend cpu -N 32,48 -d 16 --repeats 1 --warmup 0"},
  };
  std::vector<std::string> files;
  for (const auto& [name, args] : commands) {
    const std::string path = dir / (name + ".json");
    const CliResult r = run_cli(args + " --json '" + path + "'");
    EXPECT_EQ(r.status, 0) << args << "\n" << r.err << r.out;
    EXPECT_TRUE(r.err.empty()) << args << ": stderr is not a terminal, so no progress: " << r.err;
    EXPECT_FALSE(r.out.empty()) << args << ": the table still prints";
    files.push_back(path);
  }
  // plot draws a saved bench report.
  const std::string svg = dir / "bench.svg";
  const CliResult p = run_cli("plot '" + (dir / "bench.json") + "' -o '" + svg + "' --json '" +
                              (dir / "plot.json") + "'");
  EXPECT_EQ(p.status, 0) << p.err;
  EXPECT_NE(slurp(svg).find("<svg"), std::string::npos);
  files.push_back(dir / "plot.json");
  bool ok = false;
  const std::string log = testing::validate_reports(files, ok);
  EXPECT_TRUE(ok) << log;
}

TEST(CliJson, JsonToStdoutIsPureJson) {
  const CliResult r = run_cli("list --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const json doc = json::parse(r.out);  // throws if anything but JSON was printed
  EXPECT_EQ(doc["schema"], "flashlab.report/v1");
  const json* versions = find_table(doc, "versions");
  ASSERT_NE(versions, nullptr);
  size_t ladder = 0;  // the versions table lists the ladder; the exercises have their own
  for (const VersionInfo& v : flashlab::versions()) ladder += !v.exercise;
  EXPECT_EQ((*versions)["rows"].size(), ladder);
  EXPECT_EQ((*versions)["rows"][0]["id"], "naive");
}

TEST(CliJson, RunReportsErrorsBudgetAndTiming) {
  ScratchDir dir;
  const CliResult r =
      run_cli(std::string(kSmallRun) + " --seed 5 --json '" + (dir / "r.json") + "'");
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const json doc = load(dir / "r.json");
  EXPECT_EQ(doc["config"]["seed"], 5);
  EXPECT_EQ(doc["config"]["Nq"], 40);
  EXPECT_EQ(doc["config"]["error_budget"]["factor"], 4.0);
  EXPECT_TRUE(doc["ok"].get<bool>());
  const json* errors = find_table(doc, "errors");
  ASSERT_NE(errors, nullptr);
  // O and LSE for every forward, dQ dK dV for every backward; a timing row per pass.
  size_t error_rows = 0, timing_rows = 0;
  for (const VersionInfo& v : flashlab::versions()) {
    if (v.exercise || v.fp8) continue;  // "all" is the ladder; the FP8 rung's at --dtype fp8 only
    error_rows += v.pass == Pass::fwd ? 2 : v.pass == Pass::bwd ? 3 : 5;
    timing_rows += v.pass == Pass::both ? 2 : 1;
  }
  EXPECT_EQ((*errors)["rows"].size(), error_rows);
  for (const json& row : (*errors)["rows"]) {
    EXPECT_TRUE(row["ok"].get<bool>()) << row.dump();
    EXPECT_LE(row["rel"].get<double>(), row["budget_rel"].get<double>());
  }
  const json* timing = find_table(doc, "timing");
  ASSERT_NE(timing, nullptr);
  EXPECT_EQ((*timing)["rows"].size(), timing_rows);
  for (const json& row : (*timing)["rows"]) {
    EXPECT_GT(row["median_ms"].get<double>(), 0.0);
    EXPECT_GT(row["gflops"].get<double>(), 0.0);
    EXPECT_TRUE(row["bitwise_repeat"].is_boolean());
    EXPECT_TRUE(row["peak_device_bytes"].is_null());  // cpu
  }
  EXPECT_NE(r.out.find("GFLOP/s"), std::string::npos);
}

// bench --passes: only the passes asked for get rows, a version with none of them is left out,
// and the report says which passes it timed.
TEST(CliJson, BenchTimesThePassesAskedFor) {
  ScratchDir dir;
  const std::string base =
      "bench --backend cpu -N 32 -d 16 --repeats 1 --warmup 0 --causal no "
      "--versions tiled,hopper,atomic-dq";
  const std::map<std::string, std::pair<std::string, std::set<std::string>>> cases = {
      {"fwd", {"fwd", {"tiled", "hopper"}}},
      {"bwd", {"bwd", {"hopper", "atomic-dq"}}},
      {"both", {"fwd,bwd", {"tiled", "hopper", "atomic-dq"}}},
  };
  for (const auto& [name, c] : cases) {
    const auto& [passes, versions] = c;
    const std::string path = dir / (name + ".json");
    const CliResult r = run_cli(base + " --passes " + passes + " --json '" + path + "'");
    ASSERT_EQ(r.status, 0) << r.err << r.out;
    const json doc = load(path);
    std::set<std::string> asked, seen_passes, seen_versions;
    for (const json& p : doc["config"]["passes"]) asked.insert(p.get<std::string>());
    const json* bench = find_table(doc, "bench");
    ASSERT_NE(bench, nullptr);
    for (const json& row : (*bench)["rows"]) {
      seen_passes.insert(row["pass"].get<std::string>());
      seen_versions.insert(row["version"].get<std::string>());
      EXPECT_GT(row["median_ms"].get<double>(), 0.0) << row.dump();
    }
    EXPECT_EQ(seen_passes, asked) << passes;
    EXPECT_EQ(seen_versions, versions) << passes;
    // hopper has both passes: one row per pass asked for.
    size_t hopper_rows = 0;
    for (const json& row : (*bench)["rows"]) hopper_rows += row["version"] == "hopper";
    EXPECT_EQ(hopper_rows, asked.size()) << passes;
  }
}

// A point asked for twice is timed once: one row per version, pass and point.
TEST(CliJson, BenchRunsARepeatedPointOnce) {
  ScratchDir dir;
  const std::string path = dir / "b.json";
  const CliResult r = run_cli(
      "bench --backend cpu -N 32,24,32 -d 16,16 --dtype fp32,fp32 --repeats 1 --warmup 0 "
      "--causal no,no --versions tiled --json '" +
      path + "'");
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const json doc = load(path);
  EXPECT_EQ(doc["config"]["N"], json({32, 24}));
  EXPECT_EQ(doc["config"]["causal"], json({false}));
  EXPECT_EQ(doc["config"]["d"], json({16}));
  EXPECT_EQ(doc["config"]["dtype"], json({"fp32"}));
  const json* bench = find_table(doc, "bench");
  ASSERT_NE(bench, nullptr);
  ASSERT_EQ((*bench)["rows"].size(), 2u);
  EXPECT_EQ((*bench)["rows"][0]["N"], 32);
  EXPECT_EQ((*bench)["rows"][1]["N"], 24);
}

TEST(CliJson, FormatsMarkdownAndCsv) {
  CliResult r = run_cli("list --format markdown --table versions");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.out.rfind("**Versions", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("| naive "), std::string::npos) << r.out;
  r = run_cli("list --format csv");
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("# versions: "), std::string::npos);
  EXPECT_NE(r.out.find("id,pass,deterministic,workspace,takes,code,idea\n"), std::string::npos)
      << r.out;
}

TEST(CliJson, DumpWritesNpyInputsAndOutputs) {
  ScratchDir dir;
  const std::string dump = dir / "dump";
  const CliResult r = run_cli(
      "run --backend cpu -B 1 -H 2 --Nq 9 --Nk 13 -d 8 --dtype fp16 "
      "--seed 3 --repeats 1 --warmup 0 --versions tiled,atomic-dq --dump '" +
      dump + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const json index = load(dump + "/index.json");
  EXPECT_EQ(index["schema"], "flashlab.dump/v1");
  // 4 inputs + 5 reference + tiled O, LSE + atomic-dq dQ, dK, dV.
  EXPECT_EQ(index["files"].size(), 4u + 5u + 2u + 3u);
  Problem p;
  p.shape = {1, 2, 9, 13, 8};
  p.dtype = DType::f16;
  const Inputs in = make_inputs(p, 3);
  const NpyArray q = parse_npy(slurp(dump + "/Q.npy"));
  EXPECT_EQ(q.descr, "<f2");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{1, 2, 9, 8}));
  EXPECT_EQ(q.values, in.Q);
  const NpyArray k = parse_npy(slurp(dump + "/K.npy"));
  EXPECT_EQ(k.shape, (std::vector<int64_t>{1, 2, 13, 8}));
  EXPECT_EQ(k.values, in.K);
  const NpyArray lse = parse_npy(slurp(dump + "/tiled.LSE.npy"));
  EXPECT_EQ(lse.descr, "<f4");
  EXPECT_EQ(lse.shape, (std::vector<int64_t>{1, 2, 9}));
  const NpyArray ref = parse_npy(slurp(dump + "/reference.dQ.npy"));
  EXPECT_EQ(ref.descr, "<f8");
  const NpyArray dq = parse_npy(slurp(dump + "/atomic-dq.dQ.npy"));
  EXPECT_EQ(dq.descr, "<f2");
  ASSERT_EQ(dq.values.size(), ref.values.size());
  for (size_t i = 0; i < dq.values.size(); ++i) EXPECT_NEAR(dq.values[i], ref.values[i], 0.05);
}

// Leading zeros are decimal (CLI11 alone would read 0100 as octal 64 and refuse 08).
TEST(CliJson, LeadingZerosAreDecimal) {
  ScratchDir dir;
  const CliResult r = run_cli(
      "run -B 01 -H 1 -N 0100 -d 08 --seed 010 --repeats 1 --warmup 0 --versions tiled --json '" +
      (dir / "r.json") + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const json config = load(dir / "r.json")["config"];
  EXPECT_EQ(config["Nq"], 100);
  EXPECT_EQ(config["d"], 8);
  EXPECT_EQ(config["seed"], 10);
}

}  // namespace flashlab
