// flashlab plot REPORT.json -o FILE.svg: figures drawn from a saved report (src/plot/plot.h).
#include "plot/plot.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/common.h"
#include "report/json_doc.h"
#include "util/error.h"
#include "util/files.h"
#include "util/format.h"
#include "util/sysinfo.h"

namespace flashlab::cli {

namespace {

struct PlotArgs {
  std::string input;
  std::string output;
  OutputOptions out;
};

const std::vector<std::string> kTables = {"plot"};

// A parsed JSON document takes about ten times its text in memory (nlohmann::json's values and
// maps), and the text is read whole first: twelve times the file in all.
constexpr double kReadFactor = 12;

json read_report(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::is_regular_file(path, ec)
                        ? static_cast<double>(std::filesystem::file_size(path, ec))
                        : 0.0;
  const double avail = static_cast<double>(available_memory_bytes());
  if (!ec && kReadFactor * size > 0.9 * avail)
    throw UsageError(fmt::format(
        "cannot read '{}': it is {}, and reading a report takes about {} times its size ({}) but "
        "{} is available",
        path, format_bytes(size), kReadFactor, format_bytes(kReadFactor * size),
        format_bytes(avail)));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw UsageError("cannot read '" + path + "'");
  json doc = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw UsageError("'" + path + "' is not valid JSON");
  if (!doc.is_object() || !doc.contains("schema") || doc["schema"] != kReportSchema)
    throw UsageError("'" + path + "' is not a " + std::string(kReportSchema) + " report");
  return doc;
}

}  // namespace

void register_plot(CLI::App& app, Action& action) {
  static PlotArgs a;
  auto* sub = app.add_subcommand("plot", "draw a saved report (cost lab, bench) as an SVG");
  sub->add_option("report", a.input, "a report written with --json")
      ->required()
      ->type_name("REPORT");
  sub->add_option("-o,--output", a.output, "the SVG file to write ('-' for stdout)")
      ->required()
      ->type_name("FILE");
  add_output_options(sub, a.out, kTables);
  sub->footer(R"(Examples:
  flashlab lab cost --json cost.json && flashlab plot cost.json -o cost.svg
  flashlab bench --backend cuda --json bench.json && flashlab plot bench.json -o bench.svg)");
  sub->callback([&action] {
    action = [] {
      const OutputTarget svg_target = output_file("-o", a.output);
      const Outputs out = check_outputs(a.out, kTables, {svg_target}, {a.input});
      const json doc = read_report(a.input);
      std::string svg;
      try {
        svg = plot_svg(doc);
      } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("cannot plot '") + a.input + "': " + e.what());
      }
      Report r;
      r.command = "plot";
      r.config = {{"report", a.input}, {"output", a.output}};
      r.tables.push_back({"plot",
                          "Plot written",
                          {{"report", "report", "", ""},
                           {"command", "of command", "", ""},
                           {"output", "svg", "", ""},
                           {"bytes", "size", "B", "bytes"}},
                          {{a.input, doc["command"], a.output, static_cast<int64_t>(svg.size())}}});
      OutputSet files;
      files.add_file(svg_target, svg);
      return emit(r, out, files);
    };
  });
}

}  // namespace flashlab::cli
