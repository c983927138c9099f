// plot_svg draws the cost lab and a bench report; a real SVG renderer (rsvg-convert, Debian's
// librsvg2-bin) must turn the result into a PNG that is not empty.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "labs/lab.h"
#include "plot/plot.h"
#include "report/json_doc.h"

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

}  // namespace flashlab
