// One failing version is one FAIL line, never an abort: `run`, `gradcheck` and the labs that take
// a student's version go on with the rest of the work and still write their JSON, and a starter
// that says `not implemented` is reported as such. What a check says follows its verdict:
// gradcheck does not call the backward formulas right above an unfinished or wrong version, and
// bwd-ratio does not time a backward whose gradients are wrong as if it were right.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "labs/lab.h"
#include "run/runner.h"
#include "run/validate.h"
#include "solutions.h"
#include "test_cli_helpers.h"
#include "test_cpu_util.h"
#include "util/progress.h"

namespace flashlab {
namespace {

using json = nlohmann::json;
using testing::CliResult;
using testing::quoted;
using testing::run_cli;
using testing::ScratchDir;
using testing::slurp;

int fail_lines(const json& doc, const std::string& id) {
  int n = 0;
  for (const json& o : doc["observations"]) n += o.get<std::string>().rfind("FAIL " + id, 0) == 0;
  return n;
}

TEST(Isolation, AStarterInARunIsOneFailLineAndTheOthersAreReported) {
  ScratchDir dir;
  const CliResult r = run_cli(
      "run --versions tiled,ex1-ds,deterministic-dq --dtype fp64 -N 40 "
      "-d 8 --repeats 1 --json " +
      quoted(dir / "r.json"));
  EXPECT_EQ(r.status, 1) << r.err;
  const json doc = json::parse(slurp(dir / "r.json"));
  EXPECT_FALSE(doc["ok"].get<bool>());
  EXPECT_EQ(fail_lines(doc, "ex1-ds"), 1) << doc["observations"].dump(1);
  EXPECT_EQ(fail_lines(doc, "tiled"), 0);
  int rows = 0;
  for (const json& row : doc["tables"][0]["rows"]) {
    rows += row["version"] != "ex1-ds";
    if (row["version"] != "ex1-ds") {
      EXPECT_TRUE(row["ok"].get<bool>()) << row.dump();
    }
  }
  EXPECT_EQ(rows, 2 + 3);  // tiled's O and LSE, deterministic-dq's dQ, dK, dV
  bool says = false;
  for (const json& o : doc["observations"])
    says = says || o.get<std::string>().find("not implemented") != std::string::npos;
  EXPECT_TRUE(says);
}

TEST(Isolation, AVersionThatThrowsIsItsOwnFailure) {
  // A student's version may throw from a check of its own (exercise 1's D check does, when its
  // tolerance does not fit the dtype); whatever a version throws, the run goes on.
  struct Throws {
    static void bwd(const Problem&, const Inputs&, const Forward&, const CpuOptions&, Gradients&,
                    Counters&) {
      throw std::runtime_error("a check of its own failed");
    }
  };
  VersionInfo thrower = *find_version("ex1-ds");
  thrower.cpu_backward = &Throws::bwd;
  RunConfig c;
  c.problem = testing::make_problem(1, 1, 32, 32, 8, false, DType::f64);
  c.versions = {&thrower, find_version("deterministic-dq")};
  c.repeats = 1;
  c.warmup = 0;
  Progress quiet;
  const RunOutcome out = run_versions(c, quiet);
  ASSERT_EQ(out.versions.size(), 2u);
  EXPECT_FALSE(out.versions[0].ok());
  EXPECT_EQ(out.versions[0].not_implemented, "error: a check of its own failed");
  EXPECT_TRUE(out.versions[1].ok());
  const Report rep = run_report(c, out);
  EXPECT_FALSE(rep.ok);
}

TEST(Isolation, GradchecksWordsFollowItsVerdict) {
  ScratchDir dir;
  const std::string right = "the backward formulas themselves are right";
  CliResult r = run_cli("gradcheck --versions atomic-dq --json " + quoted(dir / "good.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(right), std::string::npos) << r.out;
  r = run_cli("gradcheck --versions ex1-ds,atomic-dq --json " + quoted(dir / "g.json"));
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.out.find(right), std::string::npos) << r.out;
  const json doc = json::parse(slurp(dir / "g.json"));
  EXPECT_EQ(fail_lines(doc, "ex1-ds"), 1) << doc["observations"].dump(1);
  bool atomic_checked = false;
  for (const json& row : doc["tables"][0]["rows"])
    atomic_checked = atomic_checked || (row["version"] == "atomic-dq" && row["within_bounds"]);
  EXPECT_TRUE(atomic_checked);
}

TEST(Isolation, ALabThatTakesAStarterFailsWithItsJson) {
  ScratchDir dir;
  for (const char* lab : {"bwd-ratio --versions ex2-fa2-bwd", "no-lse --versions ex3-no-lse",
                          "gradcheck --versions ex1-ds"}) {
    SCOPED_TRACE(lab);
    const CliResult r = run_cli(std::string("lab ") + lab + " --json " + quoted(dir / "l.json"));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(r.err.empty()) << r.err;
    const json doc = json::parse(slurp(dir / "l.json"));
    EXPECT_FALSE(doc["ok"].get<bool>());
    bool named = false;
    for (const json& o : doc["observations"])
      named = named || (o.get<std::string>().rfind("FAIL", 0) == 0 &&
                        o.get<std::string>().find("not implemented") != std::string::npos);
    EXPECT_TRUE(named) << doc["observations"].dump(1);
  }
}

TEST(Isolation, ExerciseOnesDCheckFitsHalfPrecision) {
  // The solution of exercise 1 passes in fp16 and bf16 too: its D check allows for O's rounding.
  const VersionEntry* ex1 = testing::solution("ex1_ds");
  if (ex1 == nullptr) GTEST_SKIP() << testing::no_solution("ex1_ds");
  const VersionInfo solved{
      *ex1, "kernels/exercises/ex1_ds", true, nullptr, "a solution under test", "", {}};
  for (const DType dt : {DType::f16, DType::bf16, DType::f32, DType::f64})
    for (const bool causal : {false, true}) {
      RunConfig c;
      c.problem = testing::make_problem(1, 2, 96, 80, 32, causal, dt);
      c.versions = {&solved};
      c.repeats = 1;
      c.warmup = 0;
      c.seed = 26;
      Progress quiet;
      const RunOutcome out = run_versions(c, quiet);
      SCOPED_TRACE(to_string(dt));
      EXPECT_EQ(out.versions.front().not_implemented, "");
      EXPECT_TRUE(out.versions.front().ok());
    }
}

// atomic-dq's backward with dQ halved: a wrong answer that runs.
void halved_dq(const Problem& p, const Inputs& in, const Forward& f, const CpuOptions& o,
               Gradients& g, Counters& c) {
  find_version("atomic-dq")->cpu_backward(p, in, f, o, g, c);
  for (double& x : g.dQ) x *= 0.5;
}

TEST(Isolation, BwdRatioChecksTheStudentsBackwardFirst) {
  const LabInfo* lab = find_lab("bwd-ratio");
  ASSERT_NE(lab, nullptr);
  VersionInfo wrong = *find_version("atomic-dq");
  wrong.cpu_backward = &halved_dq;
  for (const bool is_wrong : {false, true}) {
    LabOptions o;
    o.backend = "cpu";
    o.versions = {is_wrong ? &wrong : find_version("atomic-dq")};
    const Report r = lab->run(o);
    EXPECT_EQ(r.ok, !is_wrong);
    bool failed = false;
    for (const std::string& line : r.observations)
      failed = failed || (line.rfind("FAIL atomic-dq: its gradients are wrong", 0) == 0 &&
                          line.find("dQ rel error") != std::string::npos);
    EXPECT_EQ(failed, is_wrong);
    EXPECT_FALSE(r.tables.empty());  // the times are still shown
  }
}

}  // namespace
}  // namespace flashlab
