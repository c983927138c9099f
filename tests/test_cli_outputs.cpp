// Where outputs land: through symlinks and device paths as a user expects, under names that are
// not UTF-8, never two outputs on one file, and a dump that holds exactly its index.
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

const char* kTinyRun = "run -B 1 -H 1 -N 8 -d 4 --repeats 1 --warmup 0";

bool is_symlink(const std::string& p) {
  struct stat st;
  return lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// The names in a dump directory, and the names its index.json lists (index.json itself added).
void expect_complete_dump(const std::string& dir) {
  std::set<std::string> present, listed = {"index.json"};
  for (const auto& e : fs::directory_iterator(dir)) present.insert(e.path().filename());
  const json index = json::parse(slurp(dir + "/index.json"));
  EXPECT_EQ(index["schema"], "flashlab.dump/v1");
  for (const json& f : index["files"]) listed.insert(f["file"].get<std::string>());
  EXPECT_EQ(present, listed) << dir;
}

}  // namespace

TEST(CliOutputs, JsonThroughASymlinkWritesItsTarget) {
  ScratchDir dir;
  fs::create_directory(dir / "real");
  fs::create_symlink(dir / "real/r.json", dir / "link.json");  // dangling: the target is made
  CliResult r = run_cli("list --json " + quoted(dir / "link.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(is_symlink(dir / "link.json")) << "the link was replaced by a file";
  EXPECT_EQ(json::parse(slurp(dir / "real/r.json"))["command"], "list");
  // Again, now that the target exists: it is replaced whole, and nothing else is left behind.
  r = run_cli("gradcheck --json " + quoted(dir / "link.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(is_symlink(dir / "link.json"));
  EXPECT_EQ(json::parse(slurp(dir / "real/r.json"))["command"], "gradcheck");
  EXPECT_EQ(dir.entries().size(), 2u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "real"), fs::directory_iterator()), 1);
}

TEST(CliOutputs, DevicePathsAreWrittenInPlace) {
  ScratchDir dir;
  // stdout by name: the JSON goes to stdout, and the tables do not (as with --json -).
  CliResult r = run_cli("list --json /proc/self/fd/1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["command"], "list");
  fs::create_symlink("/dev/stdout", dir / "out");
  r = run_cli("list --json " + quoted(dir / "out"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["command"], "list");
  EXPECT_TRUE(is_symlink(dir / "out"));
  // A link to /dev/null: written (and lost) in place; the link and the device stay what they were.
  fs::create_symlink("/dev/null", dir / "null");
  r = run_cli("list --json " + quoted(dir / "null"));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(is_symlink(dir / "null"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_EQ(dir.entries().size(), 2u);
  // The SVG of plot to stdout.
  ASSERT_EQ(run_cli("lab cost --json " + quoted(dir / "cost.json")).status, 0);
  r = run_cli("plot " + quoted(dir / "cost.json") + " -o -");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<?xml", 0), 0u) << r.out.substr(0, 200);
}

TEST(CliOutputs, PathsThatAreNotUtf8) {
  ScratchDir dir;
  const std::string dump = dir / "d\xff", report = dir / "r\xfe.json";
  CliResult r = run_cli(std::string(kTinyRun) + " --versions tiled,recompute --dump " +
                        quoted(dump) + " --json " + quoted(report));
  ASSERT_EQ(r.status, 0) << r.err;
  expect_complete_dump(dump);
  const json doc = json::parse(slurp(report));
  EXPECT_EQ(doc["config"]["dump"], dir / "d\xEF\xBF\xBD") << "the bad byte is shown as U+FFFD";
  const std::string svg = dir / "p\xff.svg";
  ASSERT_EQ(run_cli("lab cost --json " + quoted(dir / "cost.json")).status, 0);
  r = run_cli("plot " + quoted(dir / "cost.json") + " -o " + quoted(svg) + " --json " +
              quoted(dir / "p.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(slurp(svg).find("<svg"), std::string::npos);
  EXPECT_EQ(json::parse(slurp(dir / "p.json"))["command"], "plot");
}

TEST(CliOutputs, DumpHoldsExactlyItsIndexAndReplacesAnEarlierOne) {
  ScratchDir dir;
  const std::string dump = dir / "dump";
  ASSERT_EQ(run_cli(std::string(kTinyRun) + " --versions all --dump " + quoted(dump)).status, 0);
  expect_complete_dump(dump);
  const CliResult r = run_cli(std::string(kTinyRun) + " --versions tiled --dump " + quoted(dump));
  ASSERT_EQ(r.status, 0) << r.err;
  expect_complete_dump(dump);
  EXPECT_FALSE(fs::exists(dump + "/naive.P.npy") || fs::exists(dump + "/naive.O.npy"));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"dump"}) << "a temporary was left behind";
}

TEST(CliOutputs, ConflictsAreRefusedBeforeTheWork) {
  ScratchDir dir;
  // A directory that holds someone else's files is not a dump to replace.
  fs::create_directory(dir / "mine");
  std::ofstream(dir / "mine/notes.txt") << "keep";
  CliResult r = run_cli(std::string(kTinyRun) + " --dump " + quoted(dir / "mine"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("choose a new or empty directory"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(dir / "mine/notes.txt"), "keep");
  // The report inside the dump directory.
  fs::create_directory(dir / "d");
  r = run_cli(std::string(kTinyRun) + " --dump " + quoted(dir / "d") + " --json " +
              quoted(dir / "d/r.json"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("lies inside"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(dir / "d"));
  // Two names, one file: a link and its target.
  fs::create_symlink(dir / "t.json", dir / "l.json");
  r = run_cli("plot " + quoted(dir / "t.json") + " -o " + quoted(dir / "l.json") + " --json " +
              quoted(dir / "t.json"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("are the same output"), std::string::npos) << r.err;
  // plot over its own input.
  ASSERT_EQ(run_cli("lab cost --json " + quoted(dir / "cost.json")).status, 0);
  const std::string before = slurp(dir / "cost.json");
  r = run_cli("plot " + quoted(dir / "cost.json") + " -o " + quoted(dir / "cost.json"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("would overwrite the input"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(dir / "cost.json"), before);
}

TEST(CliOutputs, OneTableOfLabAllByItsPrefixedId) {
  const CliResult r = run_cli("lab all --backend cpu --table cost.cost --format csv");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("# cost: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("# kept"), std::string::npos) << "only the table asked for";
}

}  // namespace flashlab
