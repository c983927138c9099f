// plot_svg draws the cost lab and a bench report; a real SVG renderer (rsvg-convert, Debian's
// librsvg2-bin) must turn the result into a PNG that is not empty.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>

#include "labs/lab.h"
#include "plot/plot.h"
#include "report/json_doc.h"
#include "test_cli_helpers.h"

namespace flashlab {

namespace {

namespace fs = std::filesystem;

bool have_rsvg() {
  return std::system("command -v rsvg-convert > /dev/null 2>&1") == 0;
}

struct PngSize {
  uint32_t width = 0, height = 0;
  uintmax_t bytes = 0;
};

// Renders `svg` to PNG with rsvg-convert and reads the PNG's size from its IHDR chunk.
PngSize render_png(const std::string& svg, const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("flashlab_plot_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path in = dir / (name + ".svg"), out = dir / (name + ".png");
  std::ofstream(in) << svg;
  const std::string cmd = "rsvg-convert '" + in.string() + "' -o '" + out.string() + "'";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("rsvg-convert failed on " + name);
  PngSize s;
  std::ifstream f(out, std::ios::binary);
  unsigned char head[24] = {};
  f.read(reinterpret_cast<char*>(head), 24);
  const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (!f || !std::equal(sig, sig + 8, head)) throw std::runtime_error("not a PNG: " + name);
  auto be32 = [&](int o) {
    return uint32_t(head[o]) << 24 | uint32_t(head[o + 1]) << 16 | uint32_t(head[o + 2]) << 8 |
           head[o + 3];
  };
  s.width = be32(16), s.height = be32(20);
  s.bytes = fs::file_size(out);
  fs::remove_all(dir);
  return s;
}

json lab_json(const std::string& name, const std::string& lang) {
  LabOptions o;
  o.lang = lang;
  o.backend = "cpu";
  return to_json(find_lab(name)->run(o));
}

// A bench report shaped as `flashlab bench` writes it: two configurations, two versions, three N.
json bench_json() {
  Report r;
  r.command = "bench";
  Table t{"bench",
          "Throughput",
          {{"version", "version", "", ""},
           {"pass", "pass", "", ""},
           {"dtype", "dtype", "", ""},
           {"d", "d", "", ""},
           {"causal", "causal", "", ""},
           {"N", "N", "", ""},
           {"median_ms", "median", "ms", "{:.3f}"},
           {"tflops", "TFLOP/s", "TFLOP/s", "{:.1f}"},
           {"ok", "ok", "", ""}},
          {}};
  for (bool causal : {false, true})
    for (const char* v : {"tiled", "naive"})
      for (int64_t N : {1024, 4096, 16384}) {
        const double tf = (v[0] == 't' ? 300.0 : 40.0) * (causal ? 0.8 : 1.0) * std::log2(N) / 14;
        t.rows.push_back({v, "fwd", "bf16", 128, causal, N, 1.0, tf, v[0] == 't'});
      }
  r.tables.push_back(std::move(t));
  return to_json(r);
}

}  // namespace

TEST(Plot, CostLabRendersInEnglishAndChinese) {
  for (const std::string lang : {"en", "zh"}) {
    const std::string svg = plot_svg(lab_json("cost", lang));
    EXPECT_NE(svg.find("<svg"), std::string::npos);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
    EXPECT_GE(std::count(svg.begin(), svg.end(), '\n'), 50);
    // Four panels (IO, FLOPs, roofline, ratios), lines with markers, log ticks in bytes.
    EXPECT_NE(svg.find("MiB"), std::string::npos);
    EXPECT_NE(svg.find("<circle"), std::string::npos);
    EXPECT_NE(svg.find("stroke-width=\"2\""), std::string::npos);
    if (lang == "zh") {
      EXPECT_NE(svg.find("读写"), std::string::npos);
    }
    if (!have_rsvg()) GTEST_SKIP() << "rsvg-convert not installed (Debian package librsvg2-bin)";
    const PngSize png = render_png(svg, "cost_" + lang);
    EXPECT_GE(png.width, 800u);
    EXPECT_GE(png.height, 600u);
    EXPECT_GT(png.bytes, 20000u);  // a blank canvas of that size compresses to a few KiB
  }
}

TEST(Plot, BenchReportRendersOnePanelPerConfiguration) {
  const std::string svg = plot_svg(bench_json());
  EXPECT_NE(svg.find("fwd · bf16 · d=128 · non-causal"), std::string::npos);
  EXPECT_NE(svg.find("fwd · bf16 · d=128 · causal"), std::string::npos);
  EXPECT_NE(svg.find("(*)"), std::string::npos);      // naive's rows have ok = no
  EXPECT_NE(svg.find(">16384<"), std::string::npos);  // an x tick at each N
  if (!have_rsvg()) GTEST_SKIP() << "rsvg-convert not installed (Debian package librsvg2-bin)";
  const PngSize png = render_png(svg, "bench");
  EXPECT_GE(png.width, 800u);
  EXPECT_GT(png.bytes, 15000u);
}

// The decode lab: on the CPU its counted half (the splits, no bandwidth panel); a GPU report (the
// H200 run committed in docs/results) also the bandwidth against the read ceiling and what the
// splits buy, one line per batch.
TEST(Plot, DecodeLabDrawsTheSplitsAndWhereMeasuredTheBandwidth) {
  for (const std::string lang : {"en", "zh"}) {
    const std::string svg = plot_svg(lab_json("decode", lang));
    EXPECT_NE(svg.find(lang == "zh" ? "切分数 S" : "splits S"), std::string::npos);
    EXPECT_EQ(svg.find("TB/s"), std::string::npos) << "nothing measured on the CPU";
    EXPECT_NE(svg.find("B × Hkv = 64 × 8"), std::string::npos);
  }
  const json gpu = json::parse(
      testing::slurp(std::string(FLASHLAB_SOURCE_DIR) + "/docs/results/lab_decode_cuda.json"));
  const std::string svg = plot_svg(gpu);
  // The ceiling's line names the figure the report measured.
  const std::string ceiling = fmt::format(
      "read ceiling {:.2f} TB/s", gpu["figures"]["read_ceiling_tbps"]["value"].get<double>());
  EXPECT_NE(svg.find(ceiling), std::string::npos) << ceiling;
  EXPECT_NE(svg.find("what splitting buys"), std::string::npos);
  EXPECT_NE(svg.find(">262144<"), std::string::npos);  // an x tick at each cache length
  if (!have_rsvg()) GTEST_SKIP() << "rsvg-convert not installed (Debian package librsvg2-bin)";
  const PngSize png = render_png(svg, "decode");
  EXPECT_GE(png.width, 800u);
  EXPECT_GT(png.bytes, 15000u);
}

// The fp8 lab: the four rows' errors on both inputs (log scale) on the CPU; a report with the GPU
// half (here the CPU report given speed figures, as a GPU run fills them) also each row's error
// on outliers against its TFLOP/s.
TEST(Plot, Fp8LabDrawsTheErrorsAndWhereMeasuredTheSpeed) {
  for (const std::string lang : {"en", "zh"}) {
    const std::string svg = plot_svg(lab_json("fp8", lang));
    EXPECT_NE(svg.find(lang == "zh" ? "O 的相对误差" : "relative error of O"), std::string::npos);
    EXPECT_NE(svg.find(lang == "zh" ? ">fp8，分块缩放<" : ">fp8, block scales<"),
              std::string::npos);
    EXPECT_EQ(svg.find("TFLOP/s"), std::string::npos) << "nothing timed";
  }
  json doc = lab_json("fp8", "en");
  for (json& t : doc["tables"])
    if (t["id"] == "speed") {
      double tf = 500;
      for (json& row : t["rows"]) row["tflops"] = tf += 100;
    }
  const std::string svg = plot_svg(doc);
  EXPECT_NE(svg.find("error against speed"), std::string::npos);
  EXPECT_NE(svg.find(">TFLOP/s<"), std::string::npos);  // the x axis of that panel
  if (!have_rsvg()) GTEST_SKIP() << "rsvg-convert not installed (Debian package librsvg2-bin)";
  const PngSize png = render_png(svg, "fp8");
  EXPECT_GE(png.width, 800u);
  EXPECT_GT(png.bytes, 10000u);
}

TEST(Plot, EscapesTextAndRejectsReportsItCannotDraw) {
  json doc = bench_json();
  doc["tables"][0]["rows"][0]["version"] = "a<b&c";
  const std::string svg = plot_svg(doc);
  EXPECT_NE(svg.find("a&lt;b&amp;c"), std::string::npos);
  EXPECT_EQ(svg.find("a<b&c"), std::string::npos);

  EXPECT_THROW(plot_svg(json::array()), std::invalid_argument);
  EXPECT_THROW(plot_svg(lab_json("memory", "en")), std::invalid_argument);
  json no_rows = bench_json();
  no_rows["tables"][0]["rows"] = json::array();
  EXPECT_THROW(plot_svg(no_rows), std::invalid_argument);
  json no_column = lab_json("cost", "en");
  no_column["tables"][0]["columns"].erase(no_column["tables"][0]["columns"].begin() + 4);
  EXPECT_THROW(plot_svg(no_column), std::invalid_argument);
}

// The same through the command line, with reports a user may hand it.

using testing::CliResult;
using testing::quoted;
using testing::run_cli;
using testing::ScratchDir;

TEST(PlotCli, ExtremeNumbersFinishWithAWellFormedSvg) {
  ScratchDir dir;
  ASSERT_EQ(run_cli("bench --backend cpu -N 16,32 -d 64 --repeats 1 --warmup 0 --json " +
                    quoted(dir / "bench.json"))
                .status,
            0);
  const json bench = json::parse(testing::slurp(dir / "bench.json"));
  std::vector<std::string> svgs;
  int k = 0;
  // Each value beside its neighbour towards zero: a range one ulp wide, far from zero.
  for (double x : {-1e17, 1e17, 1.7e308, -1.7e308, 5e-324, 0.0, -0.0, 1e-300}) {
    json doc = bench;
    int i = 0;
    for (json& row : doc["tables"][0]["rows"]) row["tflops"] = i++ % 2 ? std::nextafter(x, 0.0) : x;
    const std::string stem = dir / std::to_string(k++);
    const std::string in = stem + ".json", out = stem + ".svg";
    std::ofstream(in) << doc.dump();
    const CliResult r = run_cli("plot " + quoted(in) + " -o " + quoted(out), 30, 1024);
    EXPECT_EQ(r.status, 0) << "tflops " << x << ": " << r.err;
    svgs.push_back(out);
  }
  json mixed = bench;  // every extreme in one panel, and on the log x axis
  double xs[] = {-1e17, 1.7e308, 5e-324, 3.0};
  for (size_t i = 0; i < mixed["tables"][0]["rows"].size(); ++i) {
    mixed["tables"][0]["rows"][i]["tflops"] = xs[i % 4];
    mixed["tables"][0]["rows"][i]["N"] = xs[(i + 1) % 4];
  }
  std::ofstream(dir / "mixed.json") << mixed.dump();
  const CliResult r =
      run_cli("plot " + quoted(dir / "mixed.json") + " -o " + quoted(dir / "mixed.svg"), 30, 1024);
  EXPECT_EQ(r.status, 0) << r.err;
  svgs.push_back(dir / "mixed.svg");
  bool ok = false;
  const std::string log = testing::check_xml(svgs, ok);
  EXPECT_TRUE(ok) << log;
}

TEST(PlotCli, MalformedReportsAreBadInput) {
  ScratchDir dir;
  ASSERT_EQ(run_cli("lab cost --json " + quoted(dir / "cost.json")).status, 0);
  const json cost = json::parse(testing::slurp(dir / "cost.json"));
  const auto mutate = [&](const std::string& name, const std::function<void(json&)>& f) {
    json doc = cost;
    f(doc);
    std::ofstream(dir / name) << doc.dump();
    const CliResult r = run_cli("plot " + quoted(dir / name) + " -o " + quoted(dir / "x.svg"));
    EXPECT_EQ(r.status, 2) << name << ": " << r.err;
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.find("json.exception"), std::string::npos) << "the library's words: " << r.err;
    EXPECT_FALSE(fs::exists(dir / "x.svg"));
  };
  mutate("schema_number.json", [](json& d) { d["schema"] = 5; });
  mutate("command_number.json", [](json& d) { d["command"] = 5; });
  mutate("tables_object.json", [](json& d) { d["tables"] = json::object(); });
  mutate("key_number.json", [](json& d) { d["tables"][0]["columns"][0]["key"] = 7; });
  mutate("title_null.json", [](json& d) { d["tables"][0]["title"] = nullptr; });
  mutate("row_array.json", [](json& d) { d["tables"][0]["rows"][0] = json::array({1, 2}); });
  mutate("cell_object.json", [](json& d) { d["tables"][0]["rows"][0]["N"] = json::object(); });
  mutate("gpu_string.json", [](json& d) { d["machine"]["gpu"] = "H200"; });
  mutate("tool_version_number.json", [](json& d) { d["tool"]["version"] = 1; });
}

// A report too large for the memory the process has is refused before it is read (parsing it
// ran out of memory inside the JSON library, which then aborted).
TEST(PlotCli, ReportTooLargeForMemoryIsRefused) {
  ScratchDir dir;
  ASSERT_EQ(run_cli("lab cost --json " + quoted(dir / "cost.json")).status, 0);
  json doc = json::parse(testing::slurp(dir / "cost.json"));
  const json rows = doc["tables"][0]["rows"];
  while (doc["tables"][0]["rows"].size() < 40000)
    for (const json& row : rows) doc["tables"][0]["rows"].push_back(row);
  std::ofstream(dir / "big.json") << doc.dump();
  const CliResult r =
      run_cli("plot " + quoted(dir / "big.json") + " -o " + quoted(dir / "big.svg"), 30, 64);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("reading a report takes about"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "big.svg"));
}

TEST(PlotCli, LabAllReportDrawsItsCostTable) {
  ScratchDir dir;
  ASSERT_EQ(run_cli("lab all --backend cpu --json " + quoted(dir / "labs.json")).status, 0);
  const CliResult r =
      run_cli("plot " + quoted(dir / "labs.json") + " -o " + quoted(dir / "labs.svg"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(testing::slurp(dir / "labs.svg").find("IO (2 bytes per element)"), std::string::npos);
}

}  // namespace flashlab
