// The chapter's exercises as starters (kernels/exercises/): each one compiles, runs, and stops at
// a step still to write with `not implemented: <what> (kernels/exercises/<folder>/cpu.cpp:LINE)`,
// LINE being a FLASHLAB_TODO line of that file; and each is solvable: its solution (kept under
// tests/exercise_solutions/, compiled into this binary as a version of its own) passes the error
// budget of `flashlab run` and the gradient check, and counts what its schedule moves. The tests of
// the solutions skip in the students' tree, which has none (tests/solutions.h).
#include <gtest/gtest.h>

#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "labs/01_gradcheck/gradcheck_run.h"
#include "labs/lab.h"
#include "run/registry.h"
#include "run/runner.h"
#include "solutions.h"
#include "test_cli_helpers.h"
#include "test_cpu_util.h"
#include "util/error.h"
#include "util/progress.h"

namespace flashlab {
namespace {

using testing::fwd_of;
using testing::make_problem;

struct Exercise {
  const char* id;
  const char* folder;    // the starter's
  const char* solution;  // its folder under tests/exercise_solutions/
};

const std::vector<Exercise>& exercises() {
  static const std::vector<Exercise> list = {
      {"ex1-ds", "kernels/exercises/ex1_ds", "ex1_ds"},
      {"ex2-fa2-bwd", "kernels/exercises/ex2_fa2_bwd", "ex2_fa2_bwd"},
      {"ex3-no-lse", "kernels/exercises/ex3_no_lse", "ex3_no_lse"}};
  return list;
}

// A solution as the registry would hold it, were it copied over its starter; empty (no entry)
// where this tree has no solution.
std::optional<VersionInfo> solved(const Exercise& e) {
  const VersionEntry* entry = testing::solution(e.solution);
  if (entry == nullptr) return std::nullopt;
  return VersionInfo{*entry, e.folder, true, nullptr, "a solution under test", "", {}};
}

// Every exercise's solution, or the first exercise whose solution this tree lacks.
struct Solved {
  std::vector<VersionInfo> versions;
  const char* missing = nullptr;
};

Solved solve_all() {
  Solved s;
  for (const Exercise& e : exercises()) {
    std::optional<VersionInfo> v = solved(e);
    if (!v) return {{}, e.solution};
    s.versions.push_back(*v);
  }
  return s;
}

std::string line_of(const std::string& file, int n) {
  std::istringstream in(testing::slurp(std::string(FLASHLAB_SOURCE_DIR) + "/" + file));
  std::string line;
  for (int i = 1; i <= n && std::getline(in, line); ++i) {
  }
  return line;
}

// The message names a FLASHLAB_TODO line of the starter's own cpu.cpp.
void expect_points_at_a_todo(const std::string& message, const Exercise& e) {
  const std::regex re(std::string("^not implemented: .+ \\((") + e.folder +
                      "/cpu\\.cpp):([0-9]+)\\)$");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(message, m, re)) << message;
  EXPECT_NE(line_of(m[1], std::stoi(m[2])).find("FLASHLAB_TODO"), std::string::npos)
      << message << " does not point at a FLASHLAB_TODO line";
}

TEST(Exercises, AreRegisteredAfterTheLadderAndLeftOutOfAll) {
  std::vector<std::string> ids;
  bool seen_exercise = false;
  for (const VersionInfo& v : versions()) {
    if (v.exercise) seen_exercise = true;
    EXPECT_TRUE(!seen_exercise || v.exercise) << v.id << " comes after an exercise";
    if (v.exercise) ids.push_back(v.id);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"ex1-ds", "ex2-fa2-bwd", "ex3-no-lse"}));
  const testing::CliResult r = testing::run_cli("list --table exercises");
  EXPECT_EQ(r.status, 0) << r.err;
  for (const std::string& id : ids) EXPECT_NE(r.out.find(id), std::string::npos) << r.out;
}

TEST(Exercises, StartersStopAtTheirFirstTodoWithFileAndLine) {
  const Problem p = make_problem(1, 2, 40, 33, 16, true, DType::f64);
  const Inputs in = make_inputs(p, 5);
  CpuOptions o;
  o.Br = 16, o.Bc = 8;
  Forward fwd;
  Counters c;
  fwd_of("tiled")(p, in, o, fwd, c);
  for (const Exercise& e : exercises()) {
    SCOPED_TRACE(e.id);
    const VersionInfo* v = find_version(e.id);
    ASSERT_TRUE(v && v->exercise && v->cpu_backward);
    EXPECT_EQ(std::string(v->folder), e.folder);
    Gradients g;
    try {
      v->cpu_backward(p, in, fwd, o, g, c);
      ADD_FAILURE() << e.id << " ran to the end as a starter";
    } catch (const NotImplemented& x) {
      expect_points_at_a_todo(x.what(), e);
    }
  }
}

TEST(Exercises, RunReportsNotImplementedAndExitsOne) {
  for (const Exercise& e : exercises()) {
    SCOPED_TRACE(e.id);
    const testing::CliResult r =
        testing::run_cli(std::string("run --versions ") + e.id + " -N 50 -d 8 --dtype fp64");
    EXPECT_EQ(r.status, 1) << r.out << r.err;
    const std::regex re(std::string("FAIL ") + e.id + ": (not implemented: .+\\))\\.");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, re)) << r.out;
    expect_points_at_a_todo(m[1], e);
  }
  // The same through gradcheck.
  const testing::CliResult g = testing::run_cli("gradcheck --versions ex1-ds");
  EXPECT_EQ(g.status, 1);
  EXPECT_NE(g.out.find("FAIL ex1-ds: not implemented: step 1"), std::string::npos) << g.out;
}

// The solved versions through the runner: fp64 and fp32, causal and not, ragged tiles, Nq != Nk.
TEST(Exercises, SolutionsPassTheirErrorBudget) {
  struct Shape_ {
    int64_t Nq, Nk, d;
    int Br, Bc;
  };
  const Solved solutions = solve_all();
  if (solutions.missing) GTEST_SKIP() << testing::no_solution(solutions.missing);
  for (const VersionInfo& v : solutions.versions) {
    for (DType t : {DType::f64, DType::f32})
      for (bool causal : {false, true})
        for (const Shape_ s : {Shape_{70, 45, 16, 16, 12}, Shape_{33, 90, 24, 8, 32}}) {
          RunConfig c;
          c.problem = make_problem(2, 2, s.Nq, s.Nk, s.d, causal, t);
          c.versions = {&v};
          c.seed = 11;
          c.cpu.Br = s.Br, c.cpu.Bc = s.Bc;
          c.repeats = 1, c.warmup = 0;
          Progress progress;
          const RunOutcome r = run_versions(c, progress);
          ASSERT_EQ(r.versions.size(), 1u);
          const VersionOutcome& o = r.versions[0];
          SCOPED_TRACE(std::string(v.id) + " " + to_string(t) + (causal ? " causal" : "") +
                       " Nq=" + std::to_string(s.Nq) + " Nk=" + std::to_string(s.Nk));
          EXPECT_TRUE(o.not_implemented.empty()) << o.not_implemented;
          EXPECT_EQ(o.errors.size(), 3u);  // dQ, dK, dV
          for (const std::string& f : o.failures) ADD_FAILURE() << f;
        }
  }
}

TEST(Exercises, SolutionsPassTheGradientCheck) {
  const Solved solutions = solve_all();
  if (solutions.missing) GTEST_SKIP() << testing::no_solution(solutions.missing);
  std::vector<const VersionInfo*> chosen;
  for (const VersionInfo& v : solutions.versions) chosen.push_back(&v);
  for (const lab::GradcheckCase& k : lab::run_gradcheck({}, chosen)) {
    // The solutions take neither grouped heads nor windows: the third case has no row for them.
    ASSERT_EQ(k.versions.size(), k.problem.empty() ? 3u : 0u);
    for (const lab::GradcheckVersion& v : k.versions) {
      SCOPED_TRACE(v.id + (k.causal ? std::string(" causal") : std::string()));
      EXPECT_TRUE(v.not_implemented.empty()) << v.not_implemented;
      EXPECT_LE(v.max_vs_standard, 1e-13);
      EXPECT_LE(v.max_vs_fd, 1e-7);
    }
  }
}

// The statistics pass of exercise 3, counted from first principles: for every Q block, Q_i read
// once; for every K block that any of its rows sees, K_j read and S = Q_i K_j^T computed; LSE_i
// written.
Counters statistics_pass(const Problem& p, int B) {
  const Shape& s = p.shape;
  Counters c;
  for (int64_t r0 = 0; r0 < s.Nq; r0 += B) {
    const int64_t rows = std::min<int64_t>(B, s.Nq - r0);
    c.elems_read += rows * s.d;
    c.elems_written += rows;
    for (int64_t c0 = 0; c0 < s.Nk; c0 += B) {
      const int64_t cols = std::min<int64_t>(B, s.Nk - c0);
      // The last row of the block sees the most keys: up to r0 + rows - 1 + (Nk - Nq).
      if (p.causal && c0 > r0 + rows - 1 + (s.Nk - s.Nq)) continue;
      c.elems_read += cols * s.d;
      c.matmul_flops += 2 * rows * cols * s.d;
    }
  }
  c.elems_read *= s.heads();
  c.elems_written *= s.heads();
  c.matmul_flops *= s.heads();
  return c;
}

// What the solved schedules move: ex2 walks atomic-dq's schedule, so its counters are atomic-dq's;
// ex3 is atomic-dq plus the statistics pass.
TEST(Exercises, SolvedSchedulesCountWhatTheirModelsCount) {
  const std::optional<VersionInfo> ex2 = solved(exercises()[1]), ex3 = solved(exercises()[2]);
  if (!ex2) GTEST_SKIP() << testing::no_solution(exercises()[1].solution);
  if (!ex3) GTEST_SKIP() << testing::no_solution(exercises()[2].solution);
  for (bool causal : {false, true})
    for (auto [N, B] : {std::pair<int64_t, int>{256, 64}, {300, 48}}) {
      const Problem p = make_problem(1, 3, N, N + 17, 32, causal, DType::f32);
      CpuOptions o;
      o.Br = B, o.Bc = B, o.dry_run = true;
      Forward f;
      Gradients g;
      Counters mine, theirs;
      ex2->cpu_backward(p, {}, f, o, g, mine);
      find_version("atomic-dq")->cpu_backward(p, {}, f, o, g, theirs);
      EXPECT_EQ(mine, theirs) << "ex2 vs atomic-dq, N=" << N << (causal ? " causal" : "");
      Counters mine3;
      ex3->cpu_backward(p, {}, f, o, g, mine3);
      const Counters stats = statistics_pass(p, B);
      EXPECT_EQ(mine3.matmul_flops, theirs.matmul_flops + stats.matmul_flops) << N;
      EXPECT_EQ(mine3.elems_read, theirs.elems_read + stats.elems_read) << N;
      EXPECT_EQ(mine3.elems_written, theirs.elems_written + stats.elems_written) << N;
      EXPECT_GT(stats.matmul_flops, 0);
    }
}

// The no-lse lab checks a student's count: a backward that rebuilds nothing (atomic-dq's own,
// passed off as one without LSE) fails with the first N where it is off; ex3 solved passes.
TEST(Exercises, TheNoLseLabFailsAWrongCount) {
  LabOptions o;
  o.versions = {find_version("atomic-dq")};
  const Report bad = find_lab("no-lse")->run(o);
  EXPECT_FALSE(bad.ok);
  bool named = false;
  for (const std::string& line : bad.observations)
    named = named || line.rfind("FAIL atomic-dq: at N = 512", 0) == 0;
  EXPECT_TRUE(named);
}

TEST(Exercises, TheNoLseLabPassesTheSolvedCount) {
  const std::optional<VersionInfo> ex3 = solved(exercises()[2]);
  if (!ex3) GTEST_SKIP() << testing::no_solution(exercises()[2].solution);
  LabOptions o;
  o.versions = {&*ex3};
  const Report good = find_lab("no-lse")->run(o);
  EXPECT_TRUE(good.ok);
  for (const std::string& line : good.observations) EXPECT_NE(line.rfind("FAIL", 0), 0u) << line;
}

}  // namespace
}  // namespace flashlab
