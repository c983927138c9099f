// Running the built flashlab binary from a test: exit status, stdout, stderr; a scratch directory
// per test; schema validation with Debian's python3-jsonschema.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace flashlab::testing {

namespace fs = std::filesystem;

struct CliResult {
  int status = -1;
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh directory under the system temp dir, removed when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "flashlab-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  // Names of the entries in the directory (to prove nothing was left behind).
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename());
    return names;
  }

 private:
  fs::path path_;
};

// The binary under test: the one this build made, or FLASHLAB_TEST_BIN (to run the tests against
// another build of flashlab).
inline std::string flashlab_bin() {
  const char* env = std::getenv("FLASHLAB_TEST_BIN");
  return env && *env ? env : FLASHLAB_BIN;
}

// Exit status of a command killed by `timeout`.
inline constexpr int kTimedOut = 124;

// Runs `flashlab ARGS` through /bin/sh (ARGS is shell text), stdin from /dev/null; a run that takes
// longer than `limit_s` seconds is killed and reported with status kTimedOut. `data_limit_mib`,
// when set, caps the memory it may allocate (ulimit -d), so a runaway build cannot take the
// machine's.
inline CliResult run_cli(const std::string& args, int limit_s = 120, int data_limit_mib = 0) {
  ScratchDir io;
  const std::string limit =
      data_limit_mib > 0 ? "ulimit -d " + std::to_string(data_limit_mib * 1024) + " && " : "";
  const std::string cmd = limit + "timeout -k 5 " + std::to_string(limit_s) + " '" +
                          flashlab_bin() + "' " + args + " </dev/null >'" + (io / "out") + "' 2>'" +
                          (io / "err") + "'";
  const int rc = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = slurp(io.path() / "out");
  r.err = slurp(io.path() / "err");
  return r;
}

// What a Python script of scripts/ printed (stdout and stderr together) and its exit status.
struct ScriptResult {
  int rc = -1;
  std::string out;
};

// Runs `python3 scripts/SCRIPT ARGS` (ARGS is shell text), stdin from /dev/null, killed after
// `limit_s` seconds.
inline ScriptResult run_python_script(const std::string& script, const std::string& args,
                                      int limit_s = 60) {
  ScratchDir io;
  const std::string cmd = "timeout -k 5 " + std::to_string(limit_s) + " /usr/bin/python3 '" +
                          std::string(FLASHLAB_SOURCE_DIR) + "/scripts/" + script + "' " + args +
                          " </dev/null >'" + (io / "out") + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(io.path() / "out")};
}

// A copy, under `dir`, of what `flashlab verify` hashes in a tree: kernels/, src/, reference/,
// labs/ (and the top CMakeLists.txt). Returns the copy's root.
inline std::string copy_hashed_tree(const std::string& source, const fs::path& dir) {
  const fs::path root = dir / "tree";
  fs::create_directories(root);
  for (const char* d : {"kernels", "src", "reference", "labs"})
    fs::copy(fs::path(source) / d, root / d, fs::copy_options::recursive);
  fs::copy_file(fs::path(source) / "CMakeLists.txt", root / "CMakeLists.txt");
  return root.string();
}

// Shell single quotes around a path.
inline std::string quoted(const std::string& s) {
  std::string q(1, '\'');
  q.append(s).push_back('\'');
  return q;
}

// A committed result file, docs/results/NAME, quoted for a shell command line.
inline std::string result_file(const std::string& name) {
  return quoted(std::string(FLASHLAB_SOURCE_DIR) + "/docs/results/" + name);
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// A command line that must be refused, and a part of the one line that says why.
struct Refused {
  const char* args;
  const char* expected;
};

// Each case, with `suffix` appended, exits 2 with exactly one line on stderr that holds
// `expected`.
inline void expect_refused(const std::vector<Refused>& cases, const std::string& suffix) {
  for (const Refused& b : cases) {
    const CliResult r = run_cli(std::string(b.args) + suffix);
    SCOPED_TRACE(std::string("flashlab ") + b.args + "\nstderr: " + r.err);
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(count_lines(r.err), 1);
    EXPECT_NE(r.err.find(b.expected), std::string::npos);
  }
}

// Validates JSON files against docs/report.schema.json; returns the validator's output, and
// `ok` tells whether all were valid.
inline std::string validate_reports(const std::vector<std::string>& files, bool& ok) {
  ScratchDir io;
  std::string cmd =
      std::string("/usr/bin/python3 '") + FLASHLAB_SOURCE_DIR + "/scripts/validate_report.py'";
  for (const std::string& f : files) cmd += " '" + f + "'";
  cmd += " >'" + (io / "out") + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  ok = WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
  return slurp(io.path() / "out");
}

// Checks that every file parses as XML (an SVG a browser will draw); returns the parser's
// complaints, and `ok` tells whether all parsed.
inline std::string check_xml(const std::vector<std::string>& files, bool& ok) {
  ScratchDir io;
  std::string cmd =
      "/usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E\n"
      "bad = 0\n"
      "for f in sys.argv[1:]:\n"
      "  try: E.parse(f)\n"
      "  except Exception as e: bad += 1; print(f, e)\n"
      "sys.exit(1 if bad else 0)'";
  for (const std::string& f : files) {
    cmd += ' ';
    cmd += quoted(f);
  }
  cmd += " >'" + (io / "out") + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  ok = WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
  return slurp(io.path() / "out");
}

}  // namespace flashlab::testing
