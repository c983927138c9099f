// Signals and concurrency: a run stopped by SIGINT or SIGTERM at a random moment of its dump
// leaves a whole dump or none and exits 128 + the signal; two `new` at once never leave half a
// folder, and no id is registered twice.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "run/registry.h"
#include "test_cli_helpers.h"

namespace flashlab {

using json = nlohmann::json;
using testing::CliResult;
using testing::quoted;
using testing::run_cli;
using testing::ScratchDir;
using testing::slurp;
namespace fs = std::filesystem;

namespace {

// Starts flashlab directly (no shell, so no signal is ignored as in a background job), with
// stdout and stderr into files; returns its pid.
pid_t spawn(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
  const pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "r", stdin);
    freopen(out.c_str(), "w", stdout);
    freopen(err.c_str(), "w", stderr);
    std::vector<char*> argv;
    const std::string bin = testing::flashlab_bin();
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for the child; its exit status (-signal when a signal killed it).
int wait_status(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

bool exited(pid_t pid, int& status) {
  int st = 0;
  if (waitpid(pid, &st, WNOHANG) != pid) return false;
  status = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
  return true;
}

// A dump whose directory holds exactly the files its index lists, each a whole .npy: its size is
// the header's length plus the shape's elements.
void expect_whole_dump(const std::string& dir) {
  std::set<std::string> present, listed = {"index.json"};
  for (const auto& e : fs::directory_iterator(dir)) present.insert(e.path().filename());
  const json index = json::parse(slurp(dir + "/index.json"));
  for (const json& f : index["files"]) {
    const std::string name = f["file"];
    listed.insert(name);
    const std::string bytes = slurp(dir + "/" + name);
    ASSERT_GT(bytes.size(), 10u) << name;
    const size_t header =
        10 + static_cast<unsigned char>(bytes[8]) + 256 * static_cast<unsigned char>(bytes[9]);
    size_t elems = 1;
    for (const json& n : f["shape"]) elems *= n.get<size_t>();
    const size_t item = f["descr"] == "<f8" ? 8 : f["descr"] == "<f4" ? 4 : 2;
    EXPECT_EQ(bytes.size(), header + elems * item) << name << " is cut short";
  }
  EXPECT_EQ(present, listed) << dir;
}

}  // namespace

TEST(CliSignals, AStoppedDumpLeavesAWholeOutputOrNone) {
  ScratchDir dir;
  std::mt19937_64 gen(130143);
  // fp64 tensors of 2 MiB each, about 20 MiB in all, from little arithmetic: staging them takes a
  // good part of the run.
  const std::vector<std::string> base = {
      "run",     "-B",   "8",          "-H",    "16",        "-N", "32",       "-d", "64",
      "--dtype", "fp64", "--versions", "tiled", "--repeats", "1",  "--warmup", "0"};
  int stopped = 0, finished = 0;
  for (int n = 0; n < 20; ++n) {
    SCOPED_TRACE("round " + std::to_string(n));
    std::string name = "r";
    name += std::to_string(n);
    const std::string round = dir / name;
    fs::create_directory(round);
    const std::string dump = round + "/dump";
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--dump", dump, "--json", round + "/r.json"});
    const int sig = n % 2 == 0 ? SIGINT : SIGTERM;
    const pid_t pid = spawn(args, dir / "out", dir / "err");
    // Wait for the staging to begin (the hidden temporary beside the dump appears), then stop
    // the run a random moment later: while it writes, renames, or after.
    int status = 0;
    bool done = false;
    const auto t0 = std::chrono::steady_clock::now();
    const auto staging = [&] {
      for (const auto& e : fs::directory_iterator(round))
        if (e.path().filename().string().rfind(".dump.tmp-", 0) == 0) return true;
      return false;
    };
    while (!(done = exited(pid, status)) && !staging() &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (!done) {
      std::this_thread::sleep_for(std::chrono::microseconds(gen() % 40000));
      kill(pid, sig);
      status = wait_status(pid);
    }
    const std::string err = slurp(dir / "err");
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(round)) left.push_back(e.path().filename());
    if (status == 0) {
      ++finished;
      std::sort(left.begin(), left.end());
      EXPECT_EQ(left, (std::vector<std::string>{"dump", "r.json"}));
      expect_whole_dump(dump);
      EXPECT_EQ(json::parse(slurp(round + "/r.json"))["command"], "run");
    } else {
      ++stopped;
      EXPECT_EQ(status, 128 + sig) << err;
      EXPECT_EQ(testing::count_lines(err), 1) << err;
      EXPECT_NE(err.find(sig == SIGINT ? "SIGINT" : "SIGTERM"), std::string::npos) << err;
      // Nothing half written: no temporary, and each output whole or absent.
      for (const std::string& name : left) EXPECT_TRUE(name == "dump" || name == "r.json") << name;
      if (fs::exists(dump)) {
        expect_whole_dump(dump);
      }
      if (fs::exists(round + "/r.json")) {
        EXPECT_EQ(json::parse(slurp(round + "/r.json"))["command"], "run");
      }
    }
  }
  EXPECT_GE(stopped, 10) << "most rounds should be stopped mid-dump (" << finished << " finished)";
}

TEST(CliSignals, HangupAndQuitAlsoCleanUp) {
  ScratchDir dir;
  for (int sig : {SIGHUP, SIGQUIT}) {
    std::string name = "d";
    name += std::to_string(sig);
    const std::string dump = dir / name;
    const pid_t pid = spawn({"run", "-B", "4", "-H", "8", "-N", "512", "-d", "64", "--dtype",
                             "fp64", "--versions", "tiled", "--dump", dump},
                            dir / "out", dir / "err");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, sig);
    EXPECT_EQ(wait_status(pid), 128 + sig) << slurp(dir / "err");
    for (const auto& e : fs::directory_iterator(dir.path()))
      EXPECT_EQ(e.path().filename().string().find(".d"), std::string::npos) << e.path();
  }
}

namespace {

std::string copy_tree(const ScratchDir& dir) {
  const std::string root = dir / "tree";
  fs::create_directories(root);
  fs::copy(std::string(FLASHLAB_SOURCE_DIR) + "/kernels", root + "/kernels",
           fs::copy_options::recursive);
  fs::copy_file(std::string(FLASHLAB_SOURCE_DIR) + "/CMakeLists.txt", root + "/CMakeLists.txt");
  return root;
}

std::set<std::string> files_below(const fs::path& dir) {
  std::set<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files.insert(fs::relative(e.path(), dir).generic_string());
  return files;
}

}  // namespace

TEST(CliConcurrency, TwoNewAtOnceGiveOneWholeFolder) {
  ScratchDir dir;
  const std::string root = copy_tree(dir);
  const std::string hopper = find_version("hopper")->folder;
  const std::set<std::string> expected = files_below(root + "/" + hopper);
  for (int n = 0; n < 20; ++n) {
    SCOPED_TRACE("round " + std::to_string(n));
    const pid_t a =
        spawn({"new", "zz", "--from", "hopper", "--root", root}, dir / "a.out", dir / "a.err");
    const pid_t b =
        spawn({"new", "zz", "--from", "hopper", "--root", root}, dir / "b.out", dir / "b.err");
    const int sa = wait_status(a), sb = wait_status(b);
    const std::string ea = slurp(dir / "a.err"), eb = slurp(dir / "b.err");
    // One creates the folder; the other is refused with one line, and says nothing on stdout.
    EXPECT_EQ(std::min(sa, sb), 0) << ea << eb;
    EXPECT_EQ(std::max(sa, sb), 2) << ea << eb;
    const std::string& refused = sa == 0 ? eb : ea;
    EXPECT_EQ(testing::count_lines(refused), 1) << refused;
    EXPECT_NE(refused.find("exists already"), std::string::npos) << refused;
    EXPECT_TRUE(slurp(dir / (sa == 0 ? "b.out" : "a.out")).empty());
    std::vector<std::string> made;
    for (const auto& e : fs::directory_iterator(root + "/kernels")) {
      const std::string name = e.path().filename();
      EXPECT_NE(name.front(), '.') << "a temporary was left: " << name;
      if (name.find("_zz") != std::string::npos) made.push_back(name);
    }
    ASSERT_EQ(made.size(), 1u);
    const fs::path folder = fs::path(root) / "kernels" / made[0];
    EXPECT_EQ(files_below(folder), expected) << "a partial folder";
    // Every entry of the folder renamed: no id of the original is left to register twice.
    const std::string cpu = slurp(folder / "cpu.cpp");
    EXPECT_NE(cpu.find(".id = \"zz\""), std::string::npos);
    EXPECT_NE(cpu.find(".id = \"zz-deterministic\""), std::string::npos);
    EXPECT_EQ(cpu.find(".id = \"hopper"), std::string::npos);
    fs::remove_all(folder);
  }
}

TEST(CliConcurrency, DuplicateIdsAreRefused) {
  ScratchDir dir;
  const std::string root = copy_tree(dir);
  ASSERT_EQ(run_cli("new zz --from hopper --root " + quoted(root)).status, 0);
  // The variant's id is taken in the tree, though no build has registered it yet.
  CliResult r = run_cli("new zz-deterministic --root " + quoted(root));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("'zz-deterministic' exists already"), std::string::npos) << r.err;
  // A name whose variant would be too long for an id.
  r = run_cli("new " + std::string(30, 'y') + " --from hopper --root " + quoted(root));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not a valid id"), std::string::npos) << r.err;
  // The registry refuses an id twice, naming both folders.
  std::vector<VersionInfo> list(versions().begin(), versions().end());
  EXPECT_EQ(duplicate_ids(list), "");
  list.push_back(list.front());
  list.back().folder = "kernels/07_copy";
  const std::string why = duplicate_ids(list);
  EXPECT_NE(why.find(std::string("'") + list.front().id + "' twice"), std::string::npos) << why;
  EXPECT_NE(why.find("kernels/07_copy"), std::string::npos) << why;
  EXPECT_NE(why.find(list.front().folder), std::string::npos) << why;
}

}  // namespace flashlab
