// docs/COURSEWORK.md is run, not just read: every command of its `sh` blocks runs, in order, in a
// students' tree made from this one by scripts/student_tree (its files as a clone would have them,
// without tests/exercise_solutions/, under git of its own), from the first `cmake --preset cpu` to
// `flashlab verify`. Hidden lines `<!-- coursework-test: run CMD -->` stand in for the student:
// they copy in the solutions, read from this tree's tests/exercise_solutions/ through
// $FLASHLAB_SOLUTIONS (set for every step), or a wrong answer made from one by a sed script kept
// beside it, and change a line of a source; `<!-- coursework-test: expect TEXT -->` requires TEXT
// in the output of the command before it; `# exit N` ends a command that must exit with status N.
// So the guide proves, each time the tests run:
//   - the students' tree has no tests/exercise_solutions/, configures, and builds flashlab;
//   - a new version from `flashlab new myrung --from atomic-dq` is built and passes, with no other
//     file of the tree changed (`git status` shows the new folder alone);
//   - each starter says `not implemented` and exits 1; a wrong answer to each exercise (its
//     solution with one term dropped) makes run, gradcheck and the lab that takes it fail (exit 1,
//     a FAIL or OUT OF BOUNDS line); its solution passes all three;
//   - exercise 2's step 7 written as a plain += instead of an atomic add (its solution with that
//     one line changed) makes run and gradcheck fail: the CPU twin's workers lose updates as
//     racing thread blocks do;
//   - `lab all` with an unfinished rung in the tree runs every lab, the rung one FAIL line (exit 1);
//   - verify: all match on the untouched report, a changed line is named (exit 1), bad input
//     exits 2; and a hand-in made in the students' tree matches the full tree (this one) with the
//     student's exercise folders copied in, as a grader checks it.
// In a students' tree, which has no solutions to copy in, the guide's test skips.
// docs/COURSEWORK.zh.md must hold the same commands, in the same order.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_cli_helpers.h"

namespace flashlab {
namespace {

using testing::quoted;
using testing::ScratchDir;
using testing::slurp;
namespace fs = std::filesystem;
using json = nlohmann::json;

struct Step {
  enum Kind { command, hidden, expect } kind;
  std::string text;
  int exit_status = 0;
  bool operator==(const Step&) const = default;
};

std::vector<Step> steps_of(const std::string& doc_path) {
  std::istringstream in(slurp(doc_path));
  std::vector<Step> steps;
  static const std::regex directive("^<!-- coursework-test: (run|expect) (.+) -->$");
  static const std::regex exit_note("^(.*?)\\s+# exit ([0-9]+)$");
  bool in_sh = false;
  for (std::string line; std::getline(in, line);) {
    if (!in_sh && line == "```sh") {
      in_sh = true;
      continue;
    }
    if (in_sh && line == "```") {
      in_sh = false;
      continue;
    }
    std::smatch m;
    if (in_sh) {
      if (line.empty() || line[0] == '#') continue;
      Step s{Step::command, line, 0};
      if (std::regex_match(line, m, exit_note)) s = {Step::command, m[1], std::stoi(m[2])};
      steps.push_back(s);
    } else if (std::regex_match(line, m, directive)) {
      steps.push_back({m[1] == "run" ? Step::hidden : Step::expect, m[2], 0});
    }
  }
  return steps;
}

// Runs `command` in `dir`, after the shell lines `env` (exports).
int run_in(const std::string& dir, const std::string& command, std::string& output,
           const std::string& env = "") {
  ScratchDir io;
  {
    std::ofstream script(io / "step.sh");
    script << "set -o pipefail\n" << env << "cd " << quoted(dir) << "\n" << command << "\n";
  }
  const std::string cmd =
      "bash " + quoted(io / "step.sh") + " </dev/null >" + quoted(io / "out") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  output = slurp(io.path() / "out");
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Shell text that writes the students' tree at `root` (scripts/student_tree: this tree's tracked
// and new files, as a clone would have them, without the solutions, committed under git of its
// own, so `git status` shows what a step adds) and leaves the shell in `root`.
std::string student_tree(const std::string& root) {
  return quoted(std::string(FLASHLAB_SOURCE_DIR) + "/scripts/student_tree") + " " + quoted(root) +
         " >/dev/null && cd " + quoted(root);
}

const fs::path kSolutions = fs::path(FLASHLAB_SOURCE_DIR) / "tests/exercise_solutions";

// Where a test writes a tree it builds: a folder of `tmp` as deep as this tree's root, so that the
// copy's build folder is as deep as this one's. scripts/test sets CCACHE_BASEDIR=/, which makes the
// cache write every path relative to the build folder, the system headers' too
// (../../../../usr/include/...): only from a build folder of the same depth do those name the
// same files, and only then do the copy's compiles hit what this tree's build put in the cache
// (from a deeper one every compile missed, and the two tests that build a copy took 13 minutes
// each). The root is `tmp` itself at equal depth (so nothing else may be written into `tmp`), or
// nested folders below it; where `tmp` is already deeper than this tree, tmp/flashlab, built
// without the cache's help.
std::string tree_root(const ScratchDir& tmp) {
  const auto depth = [](const fs::path& p) {
    int n = 0;
    for (const fs::path& part : fs::canonical(p).relative_path()) n += !part.empty();
    return n;
  };
  const int want = depth(FLASHLAB_SOURCE_DIR), have = depth(tmp.path());
  if (want == have) return tmp.path().string();
  fs::path root = tmp.path();
  for (int level = have + 1; level < want; ++level) root /= "d";
  return (root / "flashlab").string();
}

TEST(Coursework, ChineseGuideHasTheSameCommands) {
  const std::string dir = std::string(FLASHLAB_SOURCE_DIR) + "/docs/";
  const std::vector<Step> en = steps_of(dir + "COURSEWORK.md"),
                          zh = steps_of(dir + "COURSEWORK.zh.md");
  ASSERT_GT(en.size(), 20u);
  ASSERT_EQ(en.size(), zh.size());
  for (size_t i = 0; i < en.size(); ++i) EXPECT_EQ(en[i].text, zh[i].text) << "step " << i;
  EXPECT_TRUE(en == zh);
}

TEST(Coursework, TheGuideRunsInAStudentsTree) {
  if (!fs::is_directory(kSolutions))
    GTEST_SKIP() << "tests/exercise_solutions/ is not in this tree (the students' tree leaves the "
                    "solutions out): the guide's exercises have no answers to copy in";
  ScratchDir tmp;
  const std::string root = tree_root(tmp);
  std::string out;
  ASSERT_EQ(run_in(tmp.path().string(), student_tree(root), out), 0) << out;
  ASSERT_TRUE(fs::is_regular_file(root + "/CMakeLists.txt"));
  ASSERT_FALSE(fs::exists(root + "/tests/exercise_solutions")) << "the students' tree has them";
  const std::string env = "export FLASHLAB_SOLUTIONS=" + quoted(kSolutions.string()) + "\n";

  std::string last_command, last_output;
  for (const Step& s : steps_of(std::string(FLASHLAB_SOURCE_DIR) + "/docs/COURSEWORK.md")) {
    if (s.kind == Step::expect) {
      EXPECT_NE(last_output.find(s.text), std::string::npos)
          << "`" << last_command << "` should print '" << s.text << "':\n"
          << last_output;
      continue;
    }
    const int rc = run_in(root, s.text, last_output, env);
    last_command = s.text;
    EXPECT_EQ(rc, s.exit_status) << "`" << s.text << "`:\n" << last_output;
    if (s.text == "git status --short") {  // the new folder, and nothing else
      static const std::regex only_new_folder("^\\?\\? kernels/[0-9][0-9]_myrung/\n$");
      EXPECT_TRUE(std::regex_match(last_output, only_new_folder)) << last_output;
    }
    if (::testing::Test::HasFatalFailure()) return;
  }

  // The grader's side: a hand-in made in the students' tree matches the full tree (this one's
  // hashed folders) once the student's exercise folders are copied in, as §6 grades it.
  ScratchDir grader;  // not in tmp: the students' tree may be tmp itself (tree_root)
  const std::string full = testing::copy_hashed_tree(FLASHLAB_SOURCE_DIR, grader.path() / "grader");
  fs::copy(root + "/kernels/exercises", full + "/kernels/exercises",
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  ASSERT_EQ(run_in(root, "build/cpu/flashlab verify nolse.json --root " + quoted(full), out), 0)
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("All [0-9]+ source files recorded in the report "
                                                "match this tree")))
      << out;
}

// One folder is one lab: a lab added as labs/NN_name/ in a students' tree, with nothing
// else edited, is built, listed by `lab list`, run by `lab all` in its place, and named in the help.
TEST(Coursework, ANewLabIsOneFolder) {
  ScratchDir tmp;
  const std::string root = tree_root(tmp);
  std::string out;
  ASSERT_EQ(run_in(tmp.path().string(), student_tree(root), out), 0) << out;
  const std::string folder = root + "/labs/99_probe";
  fs::create_directories(folder);
  std::ofstream(folder + "/probe.cpp") << R"(// A lab that counts the tiled forward's FLOPs on one small head.
#include "labs/lab.h"

namespace flashlab::lab {

Report probe(const LabOptions&) {
  Problem p;
  p.shape = Shape{1, 1, 96, 80, 16};
  CpuOptions o;
  o.dry_run = true;
  Forward f;
  Counters c;
  find_version("tiled")->cpu_forward(p, Inputs{}, o, f, c);
  Report r;
  r.command = "lab probe";
  Table t{"flops", "Probe", {{"flops", "flops", "FLOP", "count"}}, {}};
  t.rows.push_back({c.matmul_flops});
  r.tables.push_back(t);
  r.observations.push_back("the probe counted " + std::to_string(c.matmul_flops) + " FLOPs");
  return r;
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "probe",
    .title_en = "A probe lab",
    .title_zh = "探针实验",
    .run = flashlab::lab::probe,
    .tables = {"flops"},
});
)";
  ASSERT_EQ(run_in(root, "git status --short", out), 0);
  EXPECT_EQ(out, "?? labs/99_probe/\n");
  ASSERT_EQ(run_in(root,
                   "cmake --preset cpu -DFLASHLAB_TESTS=OFF >/dev/null && "
                   "cmake --build --preset cpu --target flashlab",
                   out),
            0)
      << out;
  ASSERT_EQ(run_in(root, "build/cpu/flashlab lab list", out), 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\\bprobe +A probe lab +labs/99_probe\\b"))) << out;
  ASSERT_EQ(run_in(root, "build/cpu/flashlab lab all --json all.json >/dev/null", out), 0) << out;
  const json all = json::parse(testing::slurp(root + "/all.json"));
  ASSERT_FALSE(all["tables"].empty());
  EXPECT_EQ(all["tables"].back()["id"], "probe.flops");  // last, as its folder is
  EXPECT_EQ(all["tables"].back()["rows"][0]["flops"], 2 * 2 * 96 * 80 * 16);
  bool said = false;
  for (const json& o : all["observations"])
    said = said || o == "[probe] the probe counted 491520 FLOPs";
  EXPECT_TRUE(said) << all["observations"].dump();
  ASSERT_EQ(run_in(root, "build/cpu/flashlab lab --help", out), 0) << out;
  EXPECT_NE(out.find("probe"), std::string::npos) << out;
}

// Every file of a folder is hashed, whatever its kind: in a students' tree a student's rung with
// an .inc of its own is built and run; then that .inc and kernels/common/sm90/wgmma_ops.inc are
// edited, and `flashlab verify` names each of them as differing (and a file added since as one the
// report does not know).
TEST(Coursework, VerifyNamesAnEditedIncludeOfAnyKind) {
  ScratchDir tmp;
  const std::string root = tree_root(tmp);
  std::string out;
  ASSERT_EQ(run_in(tmp.path().string(), student_tree(root), out), 0) << out;
  ASSERT_EQ(run_in(root, quoted(FLASHLAB_BIN) + " new incy --from atomic-dq", out), 0) << out;
  std::string folder;
  for (const auto& e : fs::directory_iterator(root + "/kernels"))
    if (e.path().filename().string().ends_with("_incy")) folder = e.path().string();
  ASSERT_FALSE(folder.empty()) << out;
  std::ofstream(folder + "/constants.inc") << "// The rung's own constants.\n";
  std::ofstream(folder + "/cpu.cpp", std::ios::app) << "#include \"constants.inc\"\n";
  ASSERT_EQ(run_in(root,
                   "cmake --preset cpu -DFLASHLAB_TESTS=OFF >/dev/null && "
                   "cmake --build --preset cpu --target flashlab",
                   out),
            0)
      << out;
  ASSERT_EQ(run_in(root,
                   "build/cpu/flashlab run --versions incy -N 40 -d 8 --repeats 1 --json r.json "
                   ">/dev/null && build/cpu/flashlab verify r.json",
                   out),
            0)
      << out;
  std::ofstream(folder + "/constants.inc", std::ios::app) << "// edited\n";
  std::ofstream(root + "/kernels/common/sm90/wgmma_ops.inc", std::ios::app) << "// edited\n";
  std::ofstream(root + "/kernels/common/sm90/extra.inc") << "// new\n";
  ASSERT_EQ(run_in(root, "build/cpu/flashlab verify r.json", out), 1) << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex("MISMATCH kernels/[0-9]+_incy/constants.inc \\(incy\\): differs")))
      << out;
  EXPECT_NE(out.find("MISMATCH kernels/common/sm90/wgmma_ops.inc ((shared)): differs"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("MISMATCH kernels/common/sm90/extra.inc ((shared)): not in the report"),
            std::string::npos)
      << out;
}

// A folder's own build needs (kernels/<folder>/version.cmake): a rung that asks for sm_90a alone is
// compiled for sm_90a when the build has compute_90a, and left out, with the reason, when it has
// not; its CPU twin is registered either way. Configures only (no CUDA compile), and only where
// nvcc is.
TEST(Coursework, AFolderCanAskForItsOwnCudaArchitectures) {
  if (std::system("command -v nvcc >/dev/null 2>&1 || test -x /usr/local/cuda/bin/nvcc") != 0)
    GTEST_SKIP() << "no nvcc: the CUDA configuration cannot be checked here";
  ScratchDir tmp;
  const std::string root = tree_root(tmp);
  std::string out;
  const std::string copy =
      student_tree(root) + " && " + quoted(FLASHLAB_BIN) + " new hopperish --from atomic-dq" +
      " && echo 'set(VERSION_CUDA_ARCHS 90a)' >> \"$(echo kernels/*_hopperish)/version.cmake\"";
  ASSERT_EQ(run_in(tmp.path().string(), copy, out), 0) << out;
  const auto configure = [&](const std::string& gencode) {
    std::string log;
    const int rc = run_in(root,
                          "cmake -S . -B build/arch -G Ninja -DFLASHLAB_CUDA=ON "
                          "-DFLASHLAB_TESTS=OFF '-DFLASHLAB_CUDA_GENCODE=" +
                              gencode + "'",
                          log);
    EXPECT_EQ(rc, 0) << log;
    return log;
  };
  std::string log = configure("-gencode=arch=compute_80,code=sm_80");
  EXPECT_TRUE(
      std::regex_search(log, std::regex("_hopperish \\(CPU only: this build has no sm_90a code")))
      << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("04_atomic_dq \\(CUDA: sm_80\\)"))) << log;
  log = configure("-gencode=arch=compute_80,code=sm_80;-gencode=arch=compute_90a,code=sm_90a");
  EXPECT_TRUE(std::regex_search(log, std::regex("_hopperish \\(CUDA: sm_90a\\)"))) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("04_atomic_dq \\(CUDA: sm_80 sm_90a\\)"))) << log;
  // The folder's .cu files get its own -gencode alone (build.ninja: one paragraph per object).
  const std::string ninja = slurp(root + "/build/arch/build.ninja");
  int objects = 0;
  for (size_t at = ninja.find("\nbuild "); at != std::string::npos;
       at = ninja.find("\nbuild ", at + 1)) {
    const std::string para = ninja.substr(at, ninja.find("\n\n", at) - at);
    if (para.find("hopperish_cuda.dir") == std::string::npos ||
        para.find(".cu.o:") == std::string::npos)
      continue;
    ++objects;
    EXPECT_NE(para.find("-gencode=arch=compute_90a,code=sm_90a"), std::string::npos) << para;
    EXPECT_EQ(para.find("compute_80"), std::string::npos) << para;
  }
  EXPECT_GT(objects, 0) << "no CUDA object of the folder in build.ninja";
}

}  // namespace
}  // namespace flashlab
