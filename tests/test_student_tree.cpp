// scripts/student_tree, the tree a course hands out, on a small course repository made here: this
// tree's script, seeded random files (names and bytes) in a few folders, solutions under
// tests/exercise_solutions/, and what a working tree also holds: an ignored build folder, a new
// file git does not track, a tracked file deleted and one changed since the last commit, an
// executable, a symbolic link, a file tracked although .gitignore names it, a folder whose name
// starts like the left-out one.
//   - the copy holds exactly the files git would commit, as they are now, without
//     tests/exercise_solutions/, committed as the one commit of a repository of its own;
//   - DEST may be an empty folder, and git need not know who makes the commit;
//   - bad input (arguments, a DEST that exists, lies inside the tree or cannot be written, a source
//     that is not a git checkout) is one line on stderr, exit status 1, and nothing written;
//   - a copy that fails half-way leaves no DEST and nothing beside it.
// The coursework guide's test (test_coursework.cpp) runs the script on this very tree.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/rng.h"
#include "test_cli_helpers.h"

namespace flashlab {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::quoted;
using testing::ScratchDir;
using testing::slurp;

const std::string kScript = "scripts/student_tree";

CliResult sh(const std::string& command) {
  ScratchDir io;
  std::ofstream(io / "cmd.sh") << "set -e\n" << command << "\n";
  const std::string cmd = "bash " + quoted(io / "cmd.sh") + " </dev/null >" + quoted(io / "out") +
                          " 2>" + quoted(io / "err");
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(io.path() / "out"), slurp(io.path() / "err")};
}

void write(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

// Everything below `dir` (not .git/ when `skip_git`): a file's bytes, "-> target" for a link,
// "(folder)" for a folder, and "+x" after an executable's bytes.
std::map<std::string, std::string> tree_of(const fs::path& dir, bool skip_git) {
  std::map<std::string, std::string> t;
  if (!fs::exists(dir)) return t;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string rel = it->path().lexically_relative(dir).string();
    if (skip_git && rel == ".git") {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink())
      t[rel] = "-> " + fs::read_symlink(it->path()).string();
    else if (it->is_directory())
      t[rel] = "(folder)";
    else
      t[rel] =
          slurp(it->path()) +
          ((fs::status(it->path()).permissions() & fs::perms::owner_exec) != fs::perms::none ? "+x"
                                                                                             : "");
  }
  return t;
}

// What differs between two tree_of()s, by path ("" when nothing does).
std::string differences(const std::map<std::string, std::string>& got,
                        const std::map<std::string, std::string>& want) {
  std::string d;
  for (const auto& [path, what] : want) {
    const auto it = got.find(path);
    if (it == got.end())
      d += "missing: " + path + "\n";
    else if (it->second != what)
      d += "differs: " + path + "\n";
  }
  for (const auto& [path, what] : got)
    if (!want.count(path)) d += "not expected: " + path + "\n";
  return d;
}

// The course repository, at dir/course, and what its students' tree must hold.
struct Course {
  ScratchDir dir;
  fs::path root = dir.path() / "course";
  std::map<std::string, std::string> expected;  // as tree_of() gives it, without .git/
  int left_out = 0;                             // files under tests/exercise_solutions/

  Course() {
    Rng rng(20261202, 7);
    const char* folders[] = {"src/core",
                             "kernels/01_naive",
                             "docs",
                             "labs/01_gradcheck",
                             "tests",
                             "tests/exercise_solutions_notes",
                             "a folder with spaces"};
    const auto random_name = [&] {
      std::string s;
      for (int64_t n = 3 + rng.below(8); n > 0; --n) s += static_cast<char>('a' + rng.below(26));
      return s + (rng.below(2) ? ".cpp" : ".md");
    };
    const auto random_bytes = [&] {
      std::string s;
      for (int64_t n = rng.below(3000); n > 0; --n) s += static_cast<char>(rng.below(256));
      return s;
    };
    const auto add = [&](const std::string& rel, const std::string& bytes, bool kept) {
      write(root / rel, bytes);
      if (kept) expected[rel] = bytes;
      for (fs::path p = fs::path(rel).parent_path(); kept && !p.empty(); p = p.parent_path())
        expected[p.string()] = "(folder)";
      left_out += !kept;
    };
    for (int i = 0; i < 40; ++i)
      add(std::string(folders[rng.below(7)]) + "/" + random_name(), random_bytes(), true);
    for (const char* sub : {"ex1", "ex2"})
      for (int i = 0; i < 3; ++i)
        add(std::string("tests/exercise_solutions/") + sub + "/" + random_name(), random_bytes(),
            false);
    add("tests/exercise_solutions/README.md", random_bytes(), false);
    add(".gitignore", "/build/\n*.log\n", true);
    add("docs/kept despite .gitignore.log", random_bytes(), true);  // tracked with add -f
    add("docs/changed.md", "as committed\n", true);
    add("docs/gone.md", random_bytes(), true);
    add("scripts/run.sh", "#!/bin/sh\necho run\n", true);
    fs::create_directories(root / "scripts");
    fs::copy_file(fs::path(FLASHLAB_SOURCE_DIR) / kScript, root / kScript);
    fs::create_symlink("changed.md", root / "docs/link");
    expected[kScript] = slurp(root / kScript) + "+x";
    expected["scripts/run.sh"] += "+x";
    expected["docs/link"] = "-> changed.md";
    const CliResult r = sh("cd " + quoted(root.string()) +
                           " && chmod +x scripts/run.sh && git init -q && git add -A -f && "
                           "git -c user.name=course -c user.email=course@localhost commit -qm c");
    if (r.status != 0) throw std::runtime_error("git: " + r.err);
    // Since the commit: ignored, new, deleted and changed files.
    write(root / "build/cache.o", random_bytes());
    add("notes/a new file.txt", random_bytes(), true);
    fs::remove(root / "docs/gone.md");
    expected.erase("docs/gone.md");
    add("docs/changed.md", "changed since\n", true);
  }

  CliResult make(const std::string& dest, const std::string& env = "") const {
    return sh("cd " + quoted(dir.path().string()) + " && " + env + " " +
              quoted((root / kScript).string()) + " " + quoted(dest));
  }
};

TEST(StudentTree, CopiesWhatGitWouldCommitWithoutTheSolutions) {
  const Course course;
  const fs::path out = course.dir.path() / "out";
  fs::create_directories(out / "empty");
  const std::string before =
      sh("git -C " + quoted(course.root.string()) + " status --porcelain").out;
  int files = 0;
  for (const auto& [path, what] : course.expected) files += what != "(folder)";
  for (const std::string dest : {"out/students", "out/empty"}) {
    SCOPED_TRACE(dest);
    const CliResult r = course.make(dest, "umask 022 &&");
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_EQ(r.err, "");
    const fs::path tree = course.dir.path() / dest;
    EXPECT_EQ(differences(tree_of(tree, true), course.expected), "");
    EXPECT_FALSE(fs::exists(tree / "tests/exercise_solutions"));
    EXPECT_EQ(fs::status(tree).permissions(), fs::perms(0755));
    EXPECT_NE(r.out.find("wrote " + fs::canonical(tree).string() + ": " + std::to_string(files) +
                         " files"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("left out: tests/exercise_solutions (" + std::to_string(course.left_out) +
                         " files)"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("notes/a new file.txt"), std::string::npos) << r.out;
    // A repository of its own: one commit holding every file, nothing left to add.
    const std::string git = "git -C " + quoted(tree.string());
    EXPECT_EQ(sh(git + " rev-list --count HEAD").out, "1\n");
    EXPECT_EQ(sh(git + " status --porcelain --ignored").out, "");
    const CliResult listed = sh(git + " ls-files");
    EXPECT_EQ(testing::count_lines(listed.out), files) << listed.out;
  }
  // Nothing else beside them (no hidden folder left behind), and the course untouched.
  std::set<std::string> beside;
  for (const auto& e : fs::directory_iterator(out)) beside.insert(e.path().filename().string());
  EXPECT_EQ(beside, (std::set<std::string>{"empty", "students"}));
  EXPECT_EQ(sh("git -C " + quoted(course.root.string()) + " status --porcelain").out, before);
}

// Where git knows nobody (a fresh CI machine), the one commit is made by "flashlab course".
TEST(StudentTree, NeedsNoGitIdentity) {
  const Course course;
  const fs::path home = course.dir.path() / "home";
  fs::create_directories(home);
  const std::string nobody = "HOME=" + quoted(home.string()) +
                             " XDG_CONFIG_HOME=" + quoted(home.string()) + " GIT_CONFIG_NOSYSTEM=1";
  const CliResult r = course.make("students", nobody);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "");
  const fs::path tree = course.dir.path() / "students";
  EXPECT_EQ(sh("git -C " + quoted(tree.string()) + " log --format='%an <%ae>'").out,
            "flashlab course <course@localhost>\n");
  EXPECT_EQ(differences(tree_of(tree, true), course.expected), "");
}

// Each refusal: one line on stderr naming the reason, exit status 1, nothing on stdout, and
// nothing written anywhere in the scratch folder.
TEST(StudentTree, RefusesBadInputWithOneLineAndWritesNothing) {
  const Course course;
  const fs::path scratch = fs::canonical(course.dir.path());
  write(scratch / "full/a.txt", "taken\n");
  write(scratch / "a-file", "not a folder\n");
  fs::create_directory_symlink(course.root / "docs", scratch / "into-the-course");
  // The script alone, in a folder that is no git checkout.
  fs::create_directories(scratch / "plain/scripts");
  fs::copy_file(course.root / kScript, scratch / "plain" / kScript);
  struct Case {
    std::string args, says;
    std::string script = (fs::path("course") / kScript).string();
  };
  std::vector<Case> cases = {
      {"", "takes one argument"},
      {"one two", "takes one argument"},
      {"--bogus", "unknown option '--bogus'"},
      {"''", "DEST is empty"},
      {"full", "full exists and is not an empty folder"},
      {"a-file", "a-file exists and is not an empty folder"},
      {"course/build/students", "is inside the tree it would copy"},
      {"course", "is inside the tree it would copy"},
      {"into-the-course/students", "is inside the tree it would copy"},
      {"no/such/students", "the folder " + (scratch / "no/such").string() + " does not exist"},
      {"a-file/students", (scratch / "a-file").string() + " is not a folder"},
      {"students", "is not a git checkout", (fs::path("plain") / kScript).string()},
  };
  if (geteuid() != 0) {  // root writes anywhere
    fs::create_directories(scratch / "locked");
    fs::permissions(scratch / "locked", fs::perms(0555));
    cases.push_back({"locked/students", "locked is not writable"});
  }
  const std::map<std::string, std::string> before = tree_of(scratch, false);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.script + " " + c.args);
    const CliResult r = sh("cd " + quoted(scratch.string()) + " && " + c.script + " " + c.args);
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("scripts/student_tree: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(differences(tree_of(scratch, false), before), "");
  }
  const CliResult r = sh("cd " + quoted(scratch.string()) + " && plain/" + kScript + " x");
  EXPECT_NE(r.err.find("git clone"), std::string::npos) << r.err;  // what to do instead
}

// tar's extraction fails half-way (a full disk, say): the part written is removed.
TEST(StudentTree, AFailedCopyLeavesNothingBehind) {
  const Course course;
  const fs::path bin = course.dir.path() / "bin";
  const std::string real_tar = sh("command -v tar").out;
  ASSERT_FALSE(real_tar.empty());
  write(bin / "tar",
        "#!/bin/bash\n"
        "# Extracts one file, then fails; creates archives as tar does.\n"
        "if [ \"$1\" = -xf ]; then\n"
        "  while [ $# -gt 0 ] && [ \"$1\" != -C ]; do shift; done\n"
        "  echo half > \"$2/half-written\"\n"
        "  exit 2\n"
        "fi\n"
        "exec " +
            real_tar.substr(0, real_tar.size() - 1) + " \"$@\"\n");
  fs::permissions(bin / "tar", fs::perms(0755));
  fs::create_directories(course.dir.path() / "out");
  const CliResult r = course.make("out/students", "PATH=" + quoted(bin.string()) + ":\"$PATH\"");
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("scripts/student_tree: copying the files failed"), std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::is_empty(course.dir.path() / "out")) << "left behind in out/";
}

}  // namespace
}  // namespace flashlab
