// The memory check counts what a run really holds: for every version and dtype at several shapes
// its estimate (the run report's host_memory_estimate, the figure the check compares with the
// memory available) is at least the peak resident memory of the run and at most twice it. Each
// run is a child process of its own, measured by wait4's rusage, so peaks do not mix. And shapes
// that do not fit are refused before anything is allocated.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "run/config.h"
#include "run/host_memory.h"
#include "run/registry.h"
#include "test_cli_helpers.h"

extern char** environ;

namespace flashlab {

using json = nlohmann::json;
using testing::ScratchDir;

namespace {

struct Case {
  std::string version, dtype, shape, report;
  double estimate = 0, peak = 0;
};

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> words;
  std::istringstream in(s);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Starts `flashlab ARGS` with stdout on /dev/null and stderr into `err`; returns its pid.
pid_t spawn(const std::vector<std::string>& args, const std::string& err = "/dev/null") {
  const std::string bin = testing::flashlab_bin();
  std::vector<char*> argv{const_cast<char*>(bin.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // One thread unless --threads says otherwise: two runs at a time share the machine's cores with
  // the other tests, and this test measures memory, not speed (the estimate counts the threads a
  // run really has).
  std::vector<char*> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("OMP_NUM_THREADS=", 0) != 0) env.push_back(*e);
  static char one_thread[] = "OMP_NUM_THREADS=1";
  env.push_back(one_thread);
  env.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("posix_spawn failed");
  return pid;
}

// Waits for `pid` at most `limit_s` seconds (then kills it); its exit status and its peak resident
// memory in bytes (-1 and 0 when it was killed).
std::pair<int, double> wait_for(pid_t pid, int limit_s) {
  for (int i = 0; i < limit_s * 10; ++i) {
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, WNOHANG, &ru) == pid)
      return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ru.ru_maxrss * 1024.0};
    usleep(100000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return {-1, 0};
}

}  // namespace

TEST(Memory, EstimateHoldsThePeakOfEveryVersionAndDtype) {
  ScratchDir dir;
  // Where the reference's Nq x Nk matrices dominate; where deterministic-dq's dQ splits do (Bc = 4:
  // 768 splits); where each thread's tiles do (2048 x 2048 tiles, two threads).
  const std::vector<std::string> shapes = {
      "-B 1 -H 2 -N 768 -d 64",
      "-B 1 -H 2 --Nq 192 --Nk 3072 -d 64 --bc 4",
      "-B 1 -H 1 -N 64 -d 64 --br 2048 --bc 2048 --threads 2",
  };
  std::vector<Case> cases;
  for (const std::string& shape : shapes)
    for (const char* v : {"naive", "tiled", "recompute", "atomic-dq", "deterministic-dq"})
      for (const char* t : {"fp64", "fp32", "fp16", "bf16"})
        cases.push_back({v, t, shape, dir / (std::to_string(cases.size()) + ".json")});
  // Decoding: from a paged cache, where the pool and its gathered copies dominate; and with the
  // group's 128 packed rows in two row blocks over 16 splits, each with its partials.
  for (const char* shape : {"-B 2 -H 8 --heads-kv 2 --Nq 1 --Nk 20000 -d 64 --page-size 16",
                            "-B 1 -H 8 --heads-kv 1 --Nq 16 --Nk 8192 -d 128 --causal"})
    for (const char* t : {"fp64", "fp32", "fp16", "bf16"})
      cases.push_back({"split-kv", t, shape, dir / (std::to_string(cases.size()) + ".json")});

  // Two runs at a time (each its own process; wait4 gives each one's own peak).
  std::map<pid_t, size_t> running;
  size_t next = 0;
  while (next < cases.size() || !running.empty()) {
    while (next < cases.size() && running.size() < 2) {
      const Case& c = cases[next];
      std::vector<std::string> args = {"run",   "--versions", c.version, "--dtype",
                                       c.dtype, "--repeats",  "1",       "--warmup",
                                       "0",     "--json",     c.report};
      for (const std::string& w : split_words(c.shape)) args.push_back(w);
      running[spawn(args)] = next++;
    }
    int status = 0;
    struct rusage ru;
    const pid_t pid = wait4(-1, &status, 0, &ru);
    ASSERT_GT(pid, 0);
    Case& c = cases[running.at(pid)];
    running.erase(pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << c.version << " " << c.dtype << " " << c.shape << ": status " << status;
    c.peak = static_cast<double>(ru.ru_maxrss) * 1024;
    const json doc = json::parse(testing::slurp(c.report));
    c.estimate = doc["figures"]["host_memory_estimate"]["value"].get<double>();
  }
  std::printf("%-55s %-17s %-5s %12s %12s %6s\n", "shape", "version", "dtype", "peak [MiB]",
              "estimate", "ratio");
  for (const Case& c : cases) {
    std::printf("%-55s %-17s %-5s %12.1f %12.1f %6.2f\n", c.shape.c_str(), c.version.c_str(),
                c.dtype.c_str(), c.peak / (1 << 20), c.estimate / (1 << 20), c.estimate / c.peak);
    EXPECT_GE(c.estimate, c.peak) << c.version << " " << c.dtype << " " << c.shape;
    EXPECT_LE(c.estimate, 2 * c.peak) << c.version << " " << c.dtype << " " << c.shape;
  }
}

// The two shapes that used to end in std::bad_alloc after the work had started: refused with one
// line, and the refused run never grows past a few MiB.
TEST(Memory, ShapesThatDoNotFitAreRefusedBeforeAnyAllocation) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // deterministic-dq's 896 dQ splits (57344 / 64) of 7.3M floats were not counted.
      {"bench --backend cpu -N 57344 --versions deterministic-dq --causal no",
       "the bench point N=57344 d=64 (inputs, outputs, the versions' own buffers) needs about"},
      // 16384 fp64 splits of 262144 doubles: 32 GiB, counted at 4 bytes an element before.
      {"run --versions deterministic-dq --dtype fp64 -H 1 --Nq 1024 --Nk 16384 -d 256 --bc 1",
       "this run (inputs, the fp64 reference with its Nq x Nk matrices, outputs, the versions' "
       "own buffers) needs about"},
  };
  ScratchDir dir;
  // The children may not map more than 16 GiB, less than either shape needs, on any machine.
  struct rlimit old, cap = {16ull << 30, 16ull << 30};
  getrlimit(RLIMIT_AS, &old);
  for (const auto& [args, expected] : cases) {
    setrlimit(RLIMIT_AS, &cap);
    const pid_t pid = spawn(split_words(args), dir / "err");
    setrlimit(RLIMIT_AS, &old);
    const auto [status, peak] = wait_for(pid, 60);
    const std::string err = testing::slurp(dir / "err");
    SCOPED_TRACE(args + "\nstderr: " + err);
    EXPECT_EQ(status, 2);
    EXPECT_EQ(testing::count_lines(err), 1);
    EXPECT_EQ(err.rfind("flashlab: error: " + expected, 0), 0u);
    EXPECT_LT(peak, 32.0 * (1 << 20)) << "peak resident memory of the refused run";
  }
}

// Only a version whose forward keeps P (naive) is charged its N x N matrices: a fwd+bwd version
// that keeps none (hopper) fits a long-sequence bench point on a machine of ordinary memory.
TEST(Memory, OnlyAStoredPIsChargedItsNxNMatrices) {
  RunConfig c;
  c.backend = Backend::cuda;
  c.problem.shape = {1, 16, 65536, 65536, 128};
  c.problem.causal = true;
  c.problem.dtype = DType::bf16;
  const double nxn = 8.0 * c.problem.shape.heads() * 65536.0 * 65536.0;
  for (const char* id : {"hopper", "hopper-deterministic", "atomic-dq"}) {
    c.versions = {find_version(id)};
    ASSERT_NE(c.versions[0], nullptr) << id;
    EXPECT_LT(bench_point_host_bytes(c), nxn / 16) << id;
  }
  c.versions = {find_version("naive")};
  EXPECT_GT(bench_point_host_bytes(c), nxn);
}

// Under a data limit every thread's whole stack counts: 64 threads of 8 MiB do not fit in 256 MiB
// (libgomp used to abort with "Thread creation failed" after the work had started).
TEST(Memory, ThreadStacksCountUnderAMemoryLimit) {
  ScratchDir dir;
  struct rlimit old, cap = {256ull << 20, 256ull << 20};
  getrlimit(RLIMIT_DATA, &old);
  setrlimit(RLIMIT_DATA, &cap);
  const pid_t pid =
      spawn(split_words("run -N 64 -d 8 --threads 64 --repeats 1 --warmup 0"), dir / "err");
  setrlimit(RLIMIT_DATA, &old);
  const auto [status, peak] = wait_for(pid, 60);
  const std::string err = testing::slurp(dir / "err");
  EXPECT_EQ(status, 2) << err;
  EXPECT_EQ(testing::count_lines(err), 1) << err;
  EXPECT_NE(err.find("for the stacks of its 64 threads"), std::string::npos) << err;
}

}  // namespace flashlab
