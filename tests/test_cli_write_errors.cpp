// Outputs under write errors and odd places: nothing is put in place until every output (files,
// streams, devices) is written; every write to stdout is checked; odd targets are refused before
// the work; text from a report never breaks the SVG or the error line.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <set>

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

const char* kTinyRun = "run -B 1 -H 1 -N 8 -d 4 --repeats 1 --warmup 0 --versions tiled";

// Shell single quotes around any text (quotes inside it included).
std::string sh(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// flashlab through bash with `tail` as shell text after the command (redirections, pipes); the
// exit status of flashlab itself and its stderr.
CliResult run_shell(const std::string& args, const std::string& tail, const std::string& cwd = "") {
  ScratchDir io;
  const std::string cmd = "/bin/bash -c " +
                          sh((cwd.empty() ? "" : "cd " + quoted(cwd) + " && ") + "'" +
                             testing::flashlab_bin() + "' " + args + " 2>" + quoted(io / "err") +
                             " " + tail + "; echo ${PIPESTATUS[0]} >" + quoted(io / "status")) +
                          " </dev/null";
  std::system(cmd.c_str());
  CliResult r;
  r.status = std::stoi("0" + slurp(io.path() / "status"));
  r.err = slurp(io.path() / "err");
  return r;
}

void expect_one_line(const CliResult& r, const std::string& part) {
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("flashlab: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
}

std::string cost_report(const ScratchDir& dir) {
  const std::string path = dir / "cost.json";
  EXPECT_EQ(run_cli("lab cost --json " + quoted(path)).status, 0);
  return path;
}

}  // namespace

// Item 5: a stream or device that fails leaves the staged files unplaced.
TEST(CliWriteErrors, AFailingStreamOrDeviceLeavesNoFileInPlace) {
  ScratchDir dir;
  CliResult r =
      run_cli(std::string(kTinyRun) + " --dump " + quoted(dir / "D") + " --json /dev/full");
  EXPECT_EQ(r.status, 3);
  expect_one_line(r, "/dev/full");
  EXPECT_TRUE(dir.entries().empty()) << "the dump was put in place";
  const std::string cost = cost_report(dir);
  r = run_cli("plot " + quoted(cost) + " -o " + quoted(dir / "p.svg") + " --json /dev/full");
  EXPECT_EQ(r.status, 3);
  expect_one_line(r, "/dev/full");
  EXPECT_FALSE(fs::exists(dir / "p.svg"));
  // The tables on a full stdout: the JSON file is not put in place either.
  r = run_shell(std::string(kTinyRun) + " --json " + quoted(dir / "r.json"), ">/dev/full");
  EXPECT_EQ(r.status, 3);
  expect_one_line(r, "cannot write to stdout");
  EXPECT_FALSE(fs::exists(dir / "r.json"));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"cost.json"});
}

// Item 6: every write to stdout is checked.
TEST(CliWriteErrors, StdoutThatCannotBeWrittenIsAnError) {
  ScratchDir dir;
  for (const std::string& args :
       {std::string(kTinyRun), std::string("list"), std::string("list --json -"),
        std::string("gradcheck"), std::string("run --help")}) {
    SCOPED_TRACE(args);
    CliResult r = run_shell(args, ">/dev/full");
    EXPECT_EQ(r.status, 3);
    expect_one_line(r, "cannot write to stdout");
    r = run_shell(args, ">&-");
    EXPECT_EQ(r.status, 3);
    expect_one_line(r, "cannot write to stdout");
  }
  // new: refused before the folder is created, since nothing could say it was.
  fs::create_directories(dir / "tree/kernels");
  fs::copy(std::string(FLASHLAB_SOURCE_DIR) + "/kernels/template", dir / "tree/kernels/template",
           fs::copy_options::recursive);
  std::ofstream(dir / "tree/CMakeLists.txt") << "\n";
  const CliResult r = run_shell("new x --root " + quoted(dir / "tree"), ">&-");
  EXPECT_EQ(r.status, 3);
  expect_one_line(r, "cannot write to stdout");
  EXPECT_FALSE(fs::exists(dir / "tree/kernels/07_x"));
  std::vector<std::string> made;
  for (const auto& e : fs::directory_iterator(dir / "tree/kernels"))
    made.push_back(e.path().filename().string());
  EXPECT_EQ(made, std::vector<std::string>{"template"});
  EXPECT_NE(r.err.find("nothing was created"), std::string::npos) << r.err;
}

TEST(CliWriteErrors, AClosedPipeIsAnErrorNotASilentDeath) {
  // `true` has gone before flashlab writes (it reads nothing); so has `head` after its 10 bytes
  // once the output is more than the pipe holds.
  for (const std::string& reader :
       {std::string("| true"), std::string("| head -c 10 >/dev/null")}) {
    SCOPED_TRACE(reader);
    const CliResult r = run_shell("gradcheck --json -", reader);
    if (reader.find("head") != std::string::npos && r.status == 0) continue;  // all fit the pipe
    EXPECT_EQ(r.status, 3) << "141 is death by SIGPIPE";
    expect_one_line(r, "Broken pipe");
  }
}

// Item 7: report strings that XML cannot hold, and a NUL in the error line.
TEST(CliWriteErrors, ReportStringsNeverBreakTheSvgOrTheErrorLine) {
  ScratchDir dir;
  json doc = json::parse(slurp(cost_report(dir)));
  for (json& t : doc["tables"]) t["title"] = "bad \xEF\xBF\xBE and \xEF\xBF\xBF, \x01 and \xff end";
  std::ofstream(dir / "odd.json") << doc.dump(-1, ' ', false, json::error_handler_t::ignore);
  CliResult r = run_cli("plot " + quoted(dir / "odd.json") + " -o " + quoted(dir / "odd.svg"));
  ASSERT_EQ(r.status, 0) << r.err;
  bool ok = false;
  EXPECT_TRUE((testing::check_xml({dir / "odd.svg"}, ok), ok))
      << testing::check_xml({dir / "odd.svg"}, ok);
  EXPECT_EQ(slurp(dir / "odd.svg").find("\xEF\xBF\xBE"), std::string::npos);
  // A NUL inside a string the error line quotes.
  doc["command"] = std::string("lab co\0st", 9);  // and no table to draw: the line names it
  for (json& t : doc["tables"]) t["id"] = "other";
  std::ofstream(dir / "nul.json") << doc.dump(-1, ' ', false, json::error_handler_t::replace);
  r = run_cli("plot " + quoted(dir / "nul.json") + " -o " + quoted(dir / "nul.svg"));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.find('\0'), std::string::npos);
  EXPECT_NE(r.err.find("co\\0st"), std::string::npos) << r.err;
}

TEST(CliWriteErrors, PlotReadsNoEndlessOrWriterlessInput) {
  ScratchDir dir;
  CliResult r = run_cli("plot /dev/zero -o " + quoted(dir / "p.svg"), 60, 2048);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  r = run_cli("plot " + quoted(dir / "fifo") + " -o " + quoted(dir / "p.svg"), 20);
  EXPECT_EQ(r.status, 2) << "a FIFO without a writer must not hang (124: timed out)";
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "p.svg"));
}

TEST(CliWriteErrors, OddTargetsAreRefusedBeforeTheWork) {
  ScratchDir dir;
  // /dev/tty with no controlling terminal (setsid): refused up front, not after the work.
  CliResult r;
  {
    ScratchDir io;
    const std::string cmd = "setsid -w '" + testing::flashlab_bin() + "' " + kTinyRun +
                            " --json /dev/tty </dev/null >/dev/null 2>" + quoted(io / "err") +
                            "; echo $? >" + quoted(io / "status");
    std::system(cmd.c_str());
    r.status = std::stoi(slurp(io.path() / "status"));
    r.err = slurp(io.path() / "err");
  }
  EXPECT_EQ(r.status, 2);
  expect_one_line(r, "--json '/dev/tty'");
  // --dump . in an empty directory would pull the directory away from under the shell.
  fs::create_directory(dir / "here");
  r = run_shell(std::string(kTinyRun) + " --dump .", "", dir / "here");
  EXPECT_EQ(r.status, 2);
  expect_one_line(r, "working directory");
  r = run_shell(std::string(kTinyRun) + " --dump ..", "", dir / "here");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(fs::is_directory(dir / "here") && fs::is_empty(dir / "here"));
  // `new` takes --json and --format like every command.
  fs::create_directories(dir / "tree/kernels");
  fs::copy(std::string(FLASHLAB_SOURCE_DIR) + "/kernels/template", dir / "tree/kernels/template",
           fs::copy_options::recursive);
  std::ofstream(dir / "tree/CMakeLists.txt") << "\n";
  r = run_cli("new x --root " + quoted(dir / "tree") + " --json - --format csv");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["command"], "new");
  r = run_cli("new y --root " + quoted(dir / "tree") + " --format csv");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("# files: Created kernels/"), std::string::npos) << r.out;
  bool valid = false;
  r = run_cli("new z --root " + quoted(dir / "tree") + " --json " + quoted(dir / "new.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE((testing::validate_reports({dir / "new.json"}, valid), valid));
}

TEST(CliWriteErrors, WorkingDirectoriesTooDeepToNameOrDeleted) {
  ScratchDir dir, io;
  const std::string bin = quoted(testing::flashlab_bin());
  // Deeper than PATH_MAX (24 levels of 200 bytes): relative outputs are written relative to it.
  const std::string step(200, 'x');
  std::string cmd = "cd " + quoted(dir.path()) + " && for i in $(seq 24); do mkdir " + step +
                    " && cd " + step + " || exit; done && " + bin + " " + kTinyRun +
                    " --json x.json --dump d >/dev/null 2>" + quoted(io / "err") + "; echo $? >" +
                    quoted(io / "status") +
                    "; test -s x.json && test -s d/index.json && echo yes >" +
                    quoted(io / "found") + "; cd " + quoted(dir.path()) + " && rm -rf " + step;
  std::system(("/bin/bash -c " + sh(cmd)).c_str());
  EXPECT_EQ(slurp(io.path() / "status"), "0\n") << slurp(io.path() / "err");
  EXPECT_EQ(slurp(io.path() / "found"), "yes\n");
  // A deleted working directory: a relative output is refused before the work, with one line;
  // an absolute one is written.
  cmd = "mkdir " + quoted(dir / "gone") + " && cd " + quoted(dir / "gone") +
        " && rmdir \"$PWD\" && " + bin + " list --json x.json >/dev/null 2>" + quoted(io / "err2") +
        "; echo $? >" + quoted(io / "status2") + "; " + bin + " list --json " +
        quoted(dir / "abs.json") + " >/dev/null; echo $? >>" + quoted(io / "status2");
  std::system(("/bin/bash -c " + sh(cmd)).c_str());
  EXPECT_EQ(slurp(io.path() / "status2"), "2\n0\n") << slurp(io.path() / "err2");
  EXPECT_EQ(testing::count_lines(slurp(io.path() / "err2")), 1) << slurp(io.path() / "err2");
  EXPECT_EQ(json::parse(slurp(dir / "abs.json"))["command"], "list");
}

// Mount points, in a mount namespace of the test's own (skipped where it may not make one): a
// directory mounted over is refused as --dump before the work, a directory inside it is written;
// a file mounted over is refused as --json before the work, and nothing under either changes; one
// new file named through the mount and directly is one output, refused.
TEST(CliWriteErrors, MountPointsAreRefusedBeforeTheWork) {
  if (std::system("unshare -m true >/dev/null 2>&1") != 0 ||
      std::system("unshare -m sh -c 'mount --bind / /mnt' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no mount namespace here (needs CAP_SYS_ADMIN)";
  ScratchDir dir, io;
  fs::create_directories(dir / "A");
  fs::create_directories(dir / "B");
  std::ofstream(dir / "a.json") << "{}";
  std::ofstream(dir / "b.json") << "";
  const std::string bin = quoted(testing::flashlab_bin()) + " " + kTinyRun;
  const std::string in_ns =
      "mount --bind " + quoted(dir / "A") + " " + quoted(dir / "B") + " && mount --bind " +
      quoted(dir / "a.json") + " " + quoted(dir / "b.json") + " && " + bin + " --dump " +
      quoted(dir / "B") + " >/dev/null 2>" + quoted(io / "err1") + "; echo $? >" +
      quoted(io / "st1") + "; " + bin + " --dump " + quoted(dir / "B/D") + " >/dev/null 2>" +
      quoted(io / "err2") + "; echo $? >" + quoted(io / "st2") + "; " + bin + " --json " +
      quoted(dir / "b.json") + " >/dev/null 2>" + quoted(io / "err3") + "; echo $? >" +
      quoted(io / "st3") + "; " + bin + " --json " + quoted(dir / "r.json") +
      " >/dev/null 2>&1; " + quoted(testing::flashlab_bin()) + " plot " + quoted(dir / "r.json") +
      " -o " + quoted(dir / "A/p.svg") + " --json " + quoted(dir / "B/p.svg") + " >/dev/null 2>" +
      quoted(io / "err4") + "; echo $? >" + quoted(io / "st4");
  ASSERT_EQ(std::system(("unshare -m /bin/bash -c " + sh(in_ns)).c_str()), 0);
  EXPECT_EQ(slurp(io.path() / "st1"), "2\n") << slurp(io.path() / "err1");
  EXPECT_NE(slurp(io.path() / "err1").find("it is a mount point"), std::string::npos);
  EXPECT_EQ(slurp(io.path() / "st2"), "0\n") << slurp(io.path() / "err2");
  EXPECT_TRUE(fs::exists(dir / "A/D/index.json"));  // written through the mount, into A
  EXPECT_EQ(slurp(io.path() / "st3"), "2\n") << slurp(io.path() / "err3");
  EXPECT_NE(slurp(io.path() / "err3").find("it is a mount point"), std::string::npos);
  EXPECT_EQ(slurp(dir / "a.json"), "{}");
  // One new file by two names, through the mount: the same output, refused before the work.
  EXPECT_EQ(slurp(io.path() / "st4"), "2\n") << slurp(io.path() / "err4");
  EXPECT_NE(slurp(io.path() / "err4").find("are the same output"), std::string::npos)
      << slurp(io.path() / "err4");
  EXPECT_FALSE(fs::exists(dir / "A/p.svg"));
}

// Two runs at once over an earlier dump: each sees a whole earlier dump, never someone's files.
TEST(CliWriteErrors, ConcurrentDumpsOverAnEarlierOne) {
  ScratchDir dir;
  const std::string dump = dir / "D";
  ASSERT_EQ(run_cli(std::string(kTinyRun) + " --dump " + quoted(dump)).status, 0);
  for (int n = 0; n < 10; ++n) {
    ScratchDir io;
    const std::string one = quoted(testing::flashlab_bin()) + " " + kTinyRun + " --dump " +
                            quoted(dump) + " >/dev/null 2>>" + quoted(io / "err");
    const std::string cmd = "(" + one + "; echo $? >>" + quoted(io / "st") + ") & (" + one +
                            "; echo $? >>" + quoted(io / "st") + ") & wait";
    std::system(("/bin/bash -c " + sh(cmd)).c_str());
    EXPECT_EQ(slurp(io.path() / "st"), "0\n0\n") << slurp(io.path() / "err");
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"D"});
}

}  // namespace flashlab
