// The JSON document (flashlab.report/v1) and atomic file writing.
#include <gtest/gtest.h>

#include <cmath>

#include "build_info.h"
#include "report/json_doc.h"
#include "run/registry.h"
#include "test_cli_helpers.h"
#include "util/error.h"
#include "util/files.h"

namespace flashlab {

using testing::ScratchDir;

namespace {

Report sample() {
  Report r;
  r.command = "run";
  r.config = {{"seed", 7}, {"dtype", "fp32"}, {"limit", INFINITY}};
  r.tables.push_back(
      {"errors",
       "Errors",
       {{"version", "version", "", ""}, {"rel", "rel", "", "{:.2e}"}, {"ok", "ok", "", ""}},
       {{"tiled", 1e-7, true}, {"naive", NAN, false}, {"x", nullptr, nullptr}}});
  r.observations = {"one"};
  r.figures["t"] = figure(1.5, "ms");
  r.ok = false;
  return r;
}

}  // namespace

TEST(ReportJson, DocumentShape) {
  const json doc = to_json(sample());
  EXPECT_EQ(doc["schema"], "flashlab.report/v1");
  EXPECT_EQ(doc["command"], "run");
  EXPECT_EQ(doc["tool"]["name"], "flashlab");
  EXPECT_EQ(doc["tool"]["version"], FLASHLAB_TOOL_VERSION);
  EXPECT_EQ(doc["tool"]["git_commit"], std::string(built_commit()));
  EXPECT_TRUE(doc["machine"]["cores"].get<int>() >= 1);
  EXPECT_FALSE(doc["machine"]["cpu"].get<std::string>().empty());
  EXPECT_EQ(doc["config"]["seed"], 7);
  EXPECT_EQ(doc["config"]["limit"], "inf");
  const json& t = doc["tables"][0];
  EXPECT_EQ(t["columns"][1]["key"], "rel");
  EXPECT_EQ(t["rows"][0]["rel"], 1e-7);
  EXPECT_EQ(t["rows"][1]["rel"], "nan");  // JSON has no NaN
  EXPECT_TRUE(t["rows"][2]["rel"].is_null());
  EXPECT_EQ(doc["figures"]["t"]["unit"], "ms");
  EXPECT_EQ(doc["ok"], false);
}

TEST(ReportJson, RoundTripsThroughReportFromJson) {
  const Report back = report_from_json(to_json(sample()));
  ASSERT_EQ(back.tables.size(), 1u);
  EXPECT_EQ(back.tables[0].rows[0][0], "tiled");
  EXPECT_EQ(back.tables[0].rows[0][1], 1e-7);
  EXPECT_EQ(back.observations, std::vector<std::string>{"one"});
  EXPECT_FALSE(back.ok);
  EXPECT_THROW(report_from_json(json{{"schema", "other"}}), std::invalid_argument);
}

TEST(ReportJson, SampleValidatesAgainstTheSchema) {
  ScratchDir dir;
  write_file_atomic(dir / "r.json", to_json(sample()).dump(2));
  Report bad_cmd = sample();
  bad_cmd.command = "Not A Command";
  write_file_atomic(dir / "bad.json", to_json(bad_cmd).dump(2));
  bool ok = false;
  std::string log = testing::validate_reports({dir / "r.json"}, ok);
  EXPECT_TRUE(ok) << log;
  log = testing::validate_reports({dir / "bad.json"}, ok);
  EXPECT_FALSE(ok) << "the schema must reject an unknown command: " << log;
}

TEST(Files, AtomicWriteLeavesOnlyTheTarget) {
  ScratchDir dir;
  write_file_atomic(dir / "a.txt", "hello");
  write_file_atomic(dir / "a.txt", "replaced");
  EXPECT_EQ(testing::slurp(dir / "a.txt"), "replaced");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.txt"});
  EXPECT_THROW(write_file_atomic(dir / "missing/a.txt", "x"), std::runtime_error);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"a.txt"});
}

TEST(Files, OutputChecksCreateNothing) {
  ScratchDir dir;
  EXPECT_NO_THROW(output_file("--json", dir / "r.json"));
  EXPECT_NO_THROW(output_dir("--dump", dir / "new/deeper", nullptr));
  EXPECT_TRUE(dir.entries().empty());
  EXPECT_THROW(output_file("--json", dir / "no/such/dir/r.json"), UsageError);
  EXPECT_THROW(output_file("--json", dir.path().string()), UsageError);  // a directory
  write_file_atomic(dir / "f", "x");
  EXPECT_THROW(output_dir("--dump", dir / "f", nullptr), UsageError);  // a file, not a directory
}

}  // namespace flashlab
