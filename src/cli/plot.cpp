// flashlab plot REPORT.json -o FILE.svg: figures drawn from a saved report (src/plot/plot.h).
#include "plot/plot.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

// The report's text. A FIFO or device is read as it comes, up to what memory allows: opening
// does not wait for a writer (a FIFO with none reads as empty), and /dev/zero is cut off.
std::string read_text(const std::string& path) {
  const double avail = static_cast<double>(available_memory_bytes());
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw UsageError("cannot read '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    close(fd);
    throw UsageError("cannot read '" + path + "': it is a directory");
  }
  const double size = S_ISREG(st.st_mode) ? static_cast<double>(st.st_size) : 0.0;
  if (kReadFactor * size > 0.9 * avail) {
    close(fd);
    throw UsageError(fmt::format(
        "cannot read '{}': it is {}, and reading a report takes about {} times its size ({}) but "
        "{} is available",
        path, format_bytes(size), kReadFactor, format_bytes(kReadFactor * size),
        format_bytes(avail)));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const double most = 0.9 * avail / kReadFactor;
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      throw UsageError("cannot read '" + path + "': " + std::strerror(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (static_cast<double>(text.size()) > most) {
      close(fd);
      throw UsageError(fmt::format(
          "cannot read '{}': it goes on past {}, more than a report can take in the {} available",
          path, format_bytes(most), format_bytes(avail)));
    }
  }
  close(fd);
  return text;
}

json read_report(const std::string& path) {
  const std::string text = read_text(path);
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
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
  flashlab bench --backend cuda --json bench.json && flashlab plot bench.json -o bench.svg
  flashlab lab fp8 --backend cuda --json fp8.json && flashlab plot fp8.json -o fp8.svg)");
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
