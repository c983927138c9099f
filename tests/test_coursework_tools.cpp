// The pieces behind the coursework: the registry built from the version folders (with their
// source hashes and CUDA availability), SHA-256, the JSON Schema checker built into `verify`, the
// "sources" every report records, and `flashlab verify` / `flashlab new` on good and bad input.
// (The whole flow, from a fresh copy of the tree, is test_coursework.cpp.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "report/json_doc.h"
#include "report/schema_check.h"
#include "run/registry.h"
#include "test_cli_helpers.h"
#include "util/sha256.h"

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

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Padding at the block edges: 55 bytes fit one block, 56 and 64 need a second.
  EXPECT_EQ(sha256_hex(std::string(55, 'a')),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(56, 'a')),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256_hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_FALSE(sha256_file("/nonexistent/file").has_value());
}

// The generated list: folder order, every folder's sources hashed as they are in this tree.
TEST(Registry, FoldersAreTheVersionsWithTheirSourceHashes) {
  std::vector<std::string> ladder;
  for (const VersionInfo& v : versions())
    if (!v.exercise) ladder.push_back(v.id);
  ASSERT_GE(ladder.size(), 5u);
  EXPECT_EQ(
      std::vector<std::string>(ladder.begin(), ladder.begin() + 5),
      (std::vector<std::string>{"naive", "tiled", "recompute", "atomic-dq", "deterministic-dq"}));
  for (const VersionInfo& v : versions()) {
    SCOPED_TRACE(v.id);
    const std::string folder = v.folder;
    EXPECT_TRUE(fs::is_directory(kSource + "/" + folder));
    EXPECT_EQ(folder.rfind(v.exercise ? "kernels/exercises/" : "kernels/", 0), 0u);
    std::set<std::string> hashed;
    for (const SourceHash& h : v.sources) {
      hashed.insert(h.path);
      EXPECT_EQ(std::string(h.path).rfind(folder + "/", 0), 0u) << h.path;
      EXPECT_EQ(sha256_file(kSource + "/" + h.path).value_or("?"), h.sha256)
          << h.path << " changed since the build (rebuild)";
    }
    for (const auto& e : fs::directory_iterator(kSource + "/" + folder)) {
      if (e.path().extension() != ".cpp" && e.path().extension() != ".cu") continue;
      EXPECT_TRUE(hashed.count(folder + "/" + e.path().filename().string())) << e.path();
    }
  }
  ASSERT_FALSE(shared_sources().empty());
  for (const SourceHash& h : shared_sources())
    EXPECT_EQ(std::string(h.path).rfind("kernels/common/", 0), 0u) << h.path;
}

TEST(Registry, CudaAvailabilityFollowsTheBuildsTargets) {
  const auto launch = [](const cuda::DeviceTensors&) {};
  const cuda::Version side{.forward = launch};
  const VersionInfo* base = find_version("atomic-dq");
  ASSERT_NE(base, nullptr);
  VersionInfo v = *base;
  v.cuda = &side;
  v.cuda_targets = "sm_90a";
  EXPECT_EQ(cuda_unavailable_on(v, 8, 0), "needs an sm_90a GPU; this one is sm_80");
  EXPECT_EQ(cuda_unavailable_on(v, 9, 0), "");
  EXPECT_NE(cuda_unavailable_on(v, 10, 0), "");
  v.cuda_targets = "sm_80 sm_90a";
  EXPECT_EQ(cuda_unavailable_on(v, 8, 6), "");  // sm_80 code runs on every 8.x
  EXPECT_EQ(cuda_unavailable_on(v, 10, 0),
            "this build has code for sm_80 sm_90a; this GPU is sm_100");
  v.cuda_targets = "sm_80 compute_80";
  EXPECT_EQ(cuda_unavailable_on(v, 12, 0), "");  // PTX compiles for later GPUs
  const cuda::Version picky{.forward = launch,
                            .unavailable = [](int, int) { return std::string("needs a friend"); }};
  v.cuda = &picky;
  EXPECT_EQ(cuda_unavailable_on(v, 8, 0), "needs a friend");
  // An entry with no pass declares a kernel still to come: its own sentence (or a plain one) on
  // every GPU and on a machine without one, before the device is looked at.
  const cuda::Version to_come{.unavailable = [](int, int) { return std::string("not yet"); }};
  v.cuda = &to_come;
  for (const auto& [cc_major, cc_minor] : {std::pair{8, 0}, {9, 0}, {12, 0}})
    EXPECT_EQ(cuda_unavailable_on(v, cc_major, cc_minor), "not yet");
  EXPECT_EQ(cuda_unavailable(v), "not yet");
  const cuda::Version bare{};
  v.cuda = &bare;
  EXPECT_EQ(cuda_unavailable_on(v, 9, 0), "its CUDA side has no kernel yet");
  v.cuda = nullptr;
  v.cuda_absent = "this build has no sm_90a code";
  EXPECT_EQ(cuda_unavailable(v), "this build has no sm_90a code");
}

TEST(SchemaCheck, KnowsEveryKeywordOfTheReportSchema) {
  EXPECT_EQ(unsupported_schema_keywords(report_schema()), std::vector<std::string>{});
  // The schema built into the binary is docs/report.schema.json as it is now.
  EXPECT_EQ(report_schema(), json::parse(slurp(kSource + "/docs/report.schema.json")))
      << "reconfigure: the built-in schema is older than docs/report.schema.json";
}

// The bounds of a number: minimum, maximum and exclusiveMinimum, each at and past its edge.
TEST(SchemaCheck, ChecksTheBoundsOfANumber) {
  const json schema = json::parse(R"({"type": "number", "exclusiveMinimum": 0, "maximum": 1})");
  EXPECT_TRUE(schema_errors(schema, json(1.0)).empty());
  EXPECT_TRUE(schema_errors(schema, json(0.25)).empty());
  EXPECT_EQ(schema_errors(schema, json(1.5)).size(), 1u);
  EXPECT_EQ(schema_errors(schema, json(0.0)).size(), 1u);
  const json at_least = json::parse(R"({"type": "integer", "minimum": 2})");
  EXPECT_TRUE(schema_errors(at_least, json(2)).empty());
  EXPECT_EQ(schema_errors(at_least, json(1)).size(), 1u);
}

TEST(SchemaCheck, AgreesWithJsonschemaOnGoodAndBrokenReports) {
  Report r;
  r.command = "run";
  r.config = {{"seed", 3}};
  r.tables.push_back({"t", "T", {{"k", "k", "", ""}}, {{1.5}, {"x"}}});
  r.version_ids = {"tiled"};
  const json good = to_json(r);
  std::vector<std::pair<std::string, json>> docs = {{"good", good}};
  json d = good;
  d.erase("machine");
  docs.push_back({"no machine", d});
  d = good;
  d["command"] = "Run";
  docs.push_back({"bad command", d});
  d = good;
  d["tables"][0]["rows"][0]["k"] = json::array();
  docs.push_back({"array cell", d});
  d = good;
  d["sources"]["versions"]["tiled"]["files"]["kernels/02_tiled/cpu.cpp"] = "not-a-hash";
  docs.push_back({"bad hash", d});
  d = good;
  d["extra"] = 1;
  docs.push_back({"unknown key", d});
  d = good;
  d["machine"]["gpu"] = 3;
  docs.push_back({"gpu neither null nor object", d});
  d = good;
  d["config"]["seed"] = -1;
  docs.push_back({"negative seed", d});

  ScratchDir dir;
  for (const auto& [name, doc] : docs) {
    SCOPED_TRACE(name);
    const std::string path = dir / "doc.json";
    std::ofstream(path) << doc.dump(2);
    bool python_ok = false;
    const std::string log = testing::validate_reports({path}, python_ok);
    const std::vector<std::string> errors = schema_errors(report_schema(), doc);
    EXPECT_EQ(errors.empty(), python_ok) << log << (errors.empty() ? "" : errors.front());
    EXPECT_EQ(python_ok, name == "good") << log;
  }
}

TEST(Reports, RecordTheSourcesOfTheVersionsTheyRan) {
  ScratchDir dir;
  const CliResult r =
      run_cli("run --versions atomic-dq -N 32 -d 8 --repeats 1 --json " + quoted(dir / "r.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  const json doc = json::parse(slurp(dir / "r.json"));
  ASSERT_TRUE(doc.contains("sources"));
  const json& vs = doc["sources"]["versions"];
  EXPECT_EQ(vs.size(), 2u) << vs.dump();  // atomic-dq, and tiled, whose forward feeds it
  for (const char* id : {"atomic-dq", "tiled"}) {
    const VersionInfo* v = find_version(id);
    ASSERT_TRUE(vs.contains(id));
    EXPECT_EQ(vs[id]["folder"], v->folder);
    EXPECT_EQ(vs[id]["files"].size(), v->sources.size());
    for (const SourceHash& h : v->sources) EXPECT_EQ(vs[id]["files"][h.path], h.sha256);
  }
  EXPECT_EQ(doc["sources"]["shared"]["folder"], "kernels/common");
  const CliResult l = run_cli("list --json " + quoted(dir / "l.json"));
  ASSERT_EQ(l.status, 0);
  EXPECT_FALSE(json::parse(slurp(dir / "l.json")).contains("sources"));
}

// A copy of what verify hashes in the tree, in a scratch directory.
std::string copy_kernels(const ScratchDir& dir) {
  return testing::copy_hashed_tree(kSource, dir.path());
}

TEST(Verify, MatchesAnUntouchedReportAndNamesAChangedLine) {
  ScratchDir dir;
  const std::string root = copy_kernels(dir), report = dir / "r.json";
  ASSERT_EQ(run_cli("run --versions tiled,deterministic-dq --dtype fp64 -N 40 --Nk 29 -d 8 "
                    "--causal --repeats 1 --json " +
                    quoted(report))
                .status,
            0);
  CliResult v = run_cli("verify " + quoted(report) + " --root " + quoted(root));
  EXPECT_EQ(v.status, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("source files recorded in the report match this tree"), std::string::npos);
  v = run_cli("verify " + quoted(report) + " --root " + quoted(root) + " --rerun");
  EXPECT_EQ(v.status, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("exact (CPU fp64)"), std::string::npos) << v.out;
  EXPECT_EQ(v.out.find("differs"), std::string::npos) << v.out;

  std::ofstream(root + "/kernels/05_deterministic_dq/cpu.cpp", std::ios::app) << "// edited\n";
  v = run_cli("verify " + quoted(report) + " --root " + quoted(root));
  EXPECT_EQ(v.status, 1) << v.out;
  EXPECT_NE(v.out.find("MISMATCH kernels/05_deterministic_dq/cpu.cpp (deterministic-dq): differs"),
            std::string::npos)
      << v.out;
  std::ofstream(root + "/kernels/02_tiled/extra.h") << "// new\n";
  v = run_cli("verify " + quoted(report) + " --root " + quoted(root));
  EXPECT_NE(v.out.find("kernels/02_tiled/extra.h (tiled): not in the report"), std::string::npos)
      << v.out;

  // A recorded error that the rerun does not reproduce.
  json doc = json::parse(slurp(report));
  for (json& t : doc["tables"])
    if (t["id"] == "errors") t["rows"][0]["rel"] = t["rows"][0]["rel"].get<double>() * 1.0000001;
  std::ofstream(dir / "tampered.json") << doc.dump(2);
  v = run_cli("verify " + quoted(dir / "tampered.json") + " --rerun --root " + quoted(kSource));
  EXPECT_EQ(v.status, 1) << v.out;
  EXPECT_NE(v.out.find("MISMATCH rerun tiled"), std::string::npos) << v.out;
}

TEST(Verify, BadInputIsOneLineAndExitTwo) {
  ScratchDir dir;
  std::ofstream(dir / "not.json") << "{\"schema\": ";
  fs::create_directories(dir / "empty");
  std::ofstream(dir / "other.json") << R"({"schema": "flashlab.report/v1", "command": "run"})";
  ASSERT_EQ(run_cli("list --json " + quoted(dir / "list.json")).status, 0);
  ASSERT_EQ(run_cli("lab causal --json " + quoted(dir / "causal.json")).status, 0);
  json all = json::parse(slurp(dir / "causal.json"));
  all["command"] = "lab all";  // (a merged report: its labs are rerun one by one)
  std::ofstream(dir / "all.json") << all.dump();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"verify " + quoted(dir / "missing.json"), "no such file"},
      {"verify " + quoted(dir / "empty"), "no *.json hand-ins in the folder"},
      {"verify " + quoted(dir / "not.json"), "is not JSON"},
      {"verify " + quoted(dir / "other.json"), "is not a flashlab.report/v1 report"},
      {"verify " + quoted(dir / "list.json"), "records no sources"},
      {"verify " + quoted(dir / "all.json") + " --rerun",
       "--rerun repeats run, gradcheck and single-lab reports"},
      {"verify " + quoted(dir / "causal.json") + " --root " + quoted(dir.path().string()),
       "no flashlab tree"},
  };
  for (const auto& [args, expected] : cases) {
    const CliResult r = run_cli(args);
    SCOPED_TRACE(args);
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(NewVersion, WritesOneFolderAndNothingElse) {
  ScratchDir dir;
  const std::string root = copy_kernels(dir);
  const auto listing = [&] {
    std::set<std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(root))
      files.insert(fs::relative(e.path(), root).string());
    return files;
  };
  const std::set<std::string> before = listing();
  const CliResult bad[] = {run_cli("new Bad --root " + quoted(root)),
                           run_cli("new atomic-dq --root " + quoted(root)),
                           run_cli("new x --from nope --root " + quoted(root)),
                           run_cli("new x --root " + quoted(dir.path().string()))};
  for (const CliResult& r : bad) {
    EXPECT_EQ(r.status, 2) << r.out << r.err;
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  }
  EXPECT_EQ(listing(), before) << "bad input wrote something";

  const CliResult r = run_cli("new my-rung --from atomic-dq --root " + quoted(root));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("run --versions my-rung"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gradcheck --versions my-rung"), std::string::npos) << r.out;
  std::set<std::string> added;
  for (const std::string& f : listing())
    if (!before.count(f)) added.insert(f);
  std::string folder;
  for (const auto& e : fs::directory_iterator(root + "/kernels"))
    if (e.path().filename().string().find("_my_rung") != std::string::npos)
      folder = "kernels/" + e.path().filename().string();
  ASSERT_FALSE(folder.empty());
  std::set<std::string> expected = {folder};
  for (const SourceHash& h : find_version("atomic-dq")->sources)
    expected.insert(folder + "/" + fs::path(h.path).filename().string());
  expected.insert(folder + "/README.md");
  EXPECT_EQ(added, expected);
  const std::string cpu = slurp(root + "/" + folder + "/cpu.cpp");
  EXPECT_NE(cpu.find(".id = \"my-rung\""), std::string::npos);
  EXPECT_EQ(cpu.find(".id = \"atomic-dq\""), std::string::npos);
  EXPECT_EQ(slurp(root + "/" + folder + "/README.md").rfind("# ", 0), 0u);
  // The same name again is refused: its folder exists.
  EXPECT_EQ(run_cli("new my-rung --root " + quoted(root)).status, 2);
}

}  // namespace
}  // namespace flashlab
