// `flashlab verify` against hostile hand-ins: a grader reads whatever file a student names, so no
// input may crash it, hang it or make it allocate without bound. Each case below starts from a
// real report and breaks one thing (a string 100,000+ characters long, a value nested 10^5 or
// 10^6 deep, a field missing or of the wrong type, an integer out of range, huge repeats, a path
// that names a directory), or is no report at all (a device, a FIFO, a file too large). Every one
// must end, under a memory cap and a time limit, with exit 2 and one line on stderr naming the
// problem, or exit 1 with the report's table where the report is well-formed but wrong.
// Variations (lengths, fillers, which field) come from a fixed seed, so a failure repeats.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "test_cli_helpers.h"

namespace flashlab {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::CliResult;
using testing::quoted;
using testing::run_cli;
using testing::ScratchDir;
using testing::slurp;

const std::string kSource = FLASHLAB_SOURCE_DIR;
// A grader's verify of one small report takes well under a second; these bound a runaway.
constexpr int kLimitS = 30;
constexpr int kMemoryMiB = 1024;

// One run report and one gradcheck report, written once for all the cases.
class HostileHandins : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir;
    const CliResult r = run_cli(
        "run --versions tiled,atomic-dq --dtype fp64 -N 32 -d 8 "
        "--repeats 1 --json " +
        quoted(*dir_ / "run.json"));
    ASSERT_EQ(r.status, 0) << r.err;
    const CliResult g = run_cli("gradcheck --json " + quoted(*dir_ / "gc.json"));
    ASSERT_EQ(g.status, 0) << g.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static json run_report() { return json::parse(slurp(*dir_ / "run.json")); }
  static json gradcheck_report() { return json::parse(slurp(*dir_ / "gc.json")); }

  // Writes `text` as a hand-in and verifies it (with --rerun when asked) against this tree.
  static CliResult verify_text(const std::string& text, bool rerun, const std::string& name) {
    const std::string path = *dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return verify_path(path, rerun);
  }
  static CliResult verify_path(const std::string& path, bool rerun) {
    return run_cli(
        "verify " + quoted(path) + " --root " + quoted(kSource) + (rerun ? " --rerun" : ""),
        kLimitS, kMemoryMiB);
  }

  static ScratchDir* dir_;
};

ScratchDir* HostileHandins::dir_ = nullptr;

// Exit 2, one line on stderr naming `expected` (empty: any), nothing on stdout.
void expect_refused(const CliResult& r, const std::string& expected, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(r.status, 2) << r.err.substr(0, 400) << r.out.substr(0, 400);
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err.substr(0, 400);
  EXPECT_LT(r.err.size(), 1000u) << "an error line quotes the hostile value whole";
  EXPECT_NE(r.err.find("flashlab: error: "), std::string::npos) << r.err.substr(0, 400);
  if (!expected.empty()) {
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err.substr(0, 400);
  }
  EXPECT_TRUE(r.out.empty()) << r.out.substr(0, 400);
}

std::string filler(std::mt19937_64& rng, size_t n) {
  static const std::string chars = "aZ9_-.x";
  std::string s(n, chars[rng() % chars.size()]);
  for (int i = 0; i < 16; ++i) s[rng() % n] = chars[rng() % chars.size()];
  return s;
}

// `depth` nested arrays (or objects), as text: [[[ ... ]]] or {"a":{"a": ... }}.
std::string nested(size_t depth, bool objects) {
  std::string s;
  s.reserve(depth * (objects ? 6 : 2));
  for (size_t i = 0; i < depth; ++i) s += objects ? "{\"a\":" : "[";
  s += "1";
  for (size_t i = 0; i < depth; ++i) s += objects ? "}" : "]";
  return s;
}

// The report's text with the JSON value at `pointer` replaced by raw `text`.
std::string with_raw(json doc, const std::string& pointer, const std::string& text) {
  doc[json::json_pointer(pointer)] = "@@RAW@@";
  std::string s = doc.dump();
  const size_t at = s.find("\"@@RAW@@\"");
  return s.replace(at, 9, text);
}

TEST_F(HostileHandins, LongStringsAreRefusedNotMatched) {
  std::mt19937_64 rng(2601);
  // Strings the schema matches against a pattern, and strings it only types.
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"/command", "lab "},      {"/tool/version", "1.0."}, {"/sources/shared/folder", "kernels/"},
      {"/created_utc", "2026-"}, {"/machine/cpu", ""},      {"/config/backend", ""},
      {"/config/dtype", ""},
  };
  for (int round = 0; round < 2; ++round)
    for (const auto& [pointer, prefix] : fields) {
      const size_t n = 100000 + rng() % 100000;
      json doc = run_report();
      doc[json::json_pointer(pointer)] = prefix + filler(rng, n);
      for (const bool rerun : {false, true}) {
        const CliResult r = verify_text(doc.dump(), rerun, "long.json");
        expect_refused(r, "", pointer + " of " + std::to_string(n) + " characters");
      }
    }
  // A GPU whose compute capability is 100,000 digits long (the schema's pattern matches it).
  json doc = run_report();
  doc["machine"]["gpu"] = {{"name", "x"},
                           {"compute_capability", "9." + std::string(100000, '0')},
                           {"driver_version", 1}};
  expect_refused(verify_text(doc.dump(), false, "cc.json"), "/machine/gpu", "gpu");
  // A key 100,000 characters long.
  doc = run_report();
  doc["config"][filler(rng, 100000)] = 1;
  const CliResult r = verify_text(doc.dump(), true, "key.json");
  EXPECT_NE(r.status, 139);
  EXPECT_LT(r.err.size(), 1000u);
}

TEST_F(HostileHandins, DeepNestingIsRefusedBeforeItIsParsed) {
  std::mt19937_64 rng(2602);
  const std::vector<std::string> where = {"/figures/deep", "/config/backend",
                                          "/tables/0/rows/0/rel", "/sources/versions/tiled"};
  for (const size_t depth : {size_t{100000}, size_t{1000000}})
    for (const bool objects : {false, true}) {
      const std::string pointer = where[rng() % where.size()];
      const std::string text = with_raw(run_report(), pointer, nested(depth, objects));
      const CliResult r = verify_text(text, rng() % 2 == 0, "deep.json");
      // Nested objects a million deep are 6 MB: refused by their size before their depth.
      const bool too_large = depth * (objects ? 6 : 2) > (size_t{4} << 20);
      expect_refused(r, too_large ? "bytes" : "levels deep",
                     pointer + " nested " + std::to_string(depth));
    }
  // Unbalanced: a million opening brackets and nothing else.
  expect_refused(verify_text(std::string(1000000, '['), false, "open.json"), "levels deep",
                 "unbalanced");
  // Deep but within the bound: still one clean line (the schema says the value has a wrong type).
  const std::string text = with_raw(run_report(), "/config/backend", nested(30, false));
  expect_refused(verify_text(text, true, "thirty.json"), "", "30 deep");
}

TEST_F(HostileHandins, MissingAndMistypedFieldsAreNamed) {
  struct Case {
    std::string pointer;
    json value;        // null: remove the field
    std::string says;  // part of the line
  };
  const std::vector<Case> run_cases = {
      {"/config/backend", 7, "config.backend"},
      {"/config/causal", "yes", "config.causal"},
      {"/config/scale", "big", "config.scale"},
      {"/config/Nq", "64", "config.Nq"},
      {"/config/Nq", int64_t{1} << 40, "config.Nq must be in"},
      {"/config/threads", int64_t{1} << 40, "config.threads must be in"},
      {"/config/d", 1e9, "config.d"},
      {"/config/seed", json::parse("18446744073709551615"), "config.seed"},
      {"/config/versions", "tiled", "config.versions"},
      {"/config/versions/0", 7, "config.versions"},
      {"/config/versions/0", "nosuch", "unknown version"},
      {"/config/dtype", "fp4", "dtype"},
      {"/config/inputs", "spiky", "config.inputs"},
      {"/config/br", 0, "config.br"},
      {"/config/Nk", nullptr, "config.Nk is missing"},
      {"/tables/0/rows/0/rel", nullptr, "rel is missing"},
      {"/tables/0/rows/1/max_abs", nullptr, "max_abs is missing"},
      {"/tables/0/rows/2/version", nullptr, "version is missing"},
      {"/tables/0/rows/0/ok", "true", "ok"},
      {"/tables/0/rows/0/rel", "small", "rel"},
      {"/tables/0/rows", json::object(), ""},
  };
  const auto apply = [](json doc, const Case& c) {
    const json::json_pointer p(c.pointer);
    if (c.value.is_null())
      doc[p.parent_pointer()].erase(p.back());
    else
      doc[p] = c.value;
    return doc;
  };
  for (const Case& c : run_cases) {
    const CliResult r = verify_text(apply(run_report(), c).dump(), true, "typed.json");
    expect_refused(r, c.says, c.pointer + " = " + c.value.dump());
  }
  const std::vector<Case> gradcheck_cases = {
      {"/tables/0/rows/1/fwd_O", nullptr, "fwd_O is missing"},
      {"/tables/0/rows/2/vs_fd", nullptr, "vs_fd is missing"},
      {"/tables/0/rows/0/causal", 1, "causal"},
      {"/tables/0/rows/0/vs_fd", json::array(), ""},
      {"/config/seed", -1, ""},
  };
  for (const Case& c : gradcheck_cases) {
    const CliResult r = verify_text(apply(gradcheck_report(), c).dump(), true, "gtyped.json");
    expect_refused(r, c.says, "gradcheck " + c.pointer);
  }
}

TEST_F(HostileHandins, RerunIgnoresTheReportsRepeats) {
  json doc = run_report();
  doc["config"]["Nq"] = doc["config"]["Nk"] = 1024;
  doc["config"]["repeats"] = 10000;
  doc["config"]["warmup"] = 10000;
  const CliResult r = verify_text(doc.dump(), true, "repeats.json");
  // Well-formed but its errors are not those of N = 1024: exit 1, and quickly.
  EXPECT_EQ(r.status, 1) << r.err << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find("MISMATCH rerun"), std::string::npos) << r.out.substr(0, 2000);
}

TEST_F(HostileHandins, ASourcePathThatIsADirectoryIsAMismatch) {
  json doc = run_report();
  doc["sources"]["versions"]["tiled"]["files"]["kernels/02_tiled"] = std::string(64, 'a');
  const CliResult r = verify_text(doc.dump(), false, "dir.json");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.out.find("MISMATCH kernels/02_tiled (tiled): missing from the tree"),
            std::string::npos)
      << r.out;
}

TEST_F(HostileHandins, DevicesFifosAndHugeFilesAreNotRead) {
  for (const char* dev : {"/dev/urandom", "/dev/zero", "/dev/null"})
    expect_refused(verify_path(dev, false), "character device", dev);
  const std::string fifo = *dir_ / "pipe.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_refused(verify_path(fifo, false), "a FIFO", "fifo");
  // Valid JSON, but 5 MB of it: refused by its size, before it is parsed.
  json doc = run_report();
  doc["observations"].push_back(std::string(5 << 20, 'x'));
  expect_refused(verify_text(doc.dump(), false, "huge.json"), "bytes", "5 MB");
  expect_refused(verify_text("", false, "empty.json"), "is not JSON", "empty");
  expect_refused(verify_text("{\"schema\": \"\xff\xfe\"}", false, "utf8.json"), "is not JSON",
                 "not UTF-8");
}

TEST_F(HostileHandins, RandomByteFlipsNeverCrash) {
  // Bytes of a real report overwritten at random: whatever the result, verify ends with 0, 1 or 2
  // and, when it refuses, one line.
  std::mt19937_64 rng(2603);
  const std::string good = slurp(*dir_ / "run.json");
  static const std::string junk = "{}[]\",:0-e.9ntf\\ ";
  for (int i = 0; i < 24; ++i) {
    std::string text = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) text[rng() % text.size()] = junk[rng() % junk.size()];
    const CliResult r = verify_text(text, i % 3 == 0, "flip.json");
    SCOPED_TRACE(i);
    EXPECT_TRUE(r.status == 0 || r.status == 1 || r.status == 2) << r.status << r.err;
    if (r.status == 2) {
      EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    }
  }
}

}  // namespace
}  // namespace flashlab
