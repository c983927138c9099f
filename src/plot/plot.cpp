// From a report document to a chart: pick the table the report is known by, read its columns by
// key, and let chart.cpp draw. Series names are the columns' own headers, so a report made with
// --lang zh is plotted in Chinese.
#include "plot/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

#include "plot/chart.h"
#include "plot/roofline.h"

namespace flashlab {

namespace {

using plot::Axis;
using plot::Chart;
using plot::Panel;
using plot::Scale;
using plot::Series;
using plot::TickStyle;

// A report's string as an error message quotes it: a NUL shown as \0, since the message travels
// as a C string (std::exception::what) and would end there.
std::string shown(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '\0' ? std::string("\\0") : std::string(1, c);
  return out;
}

[[noreturn]] void malformed(const std::string& where, const char* what) {
  throw std::invalid_argument("the report's " + shown(where) + " " + what +
                              " (the report does not follow docs/report.schema.json)");
}

void need_string(const json& obj, const std::string& where, const char* key) {
  if (!obj.contains(key) || !obj[key].is_string()) malformed(where + "." + key, "is not a string");
}

// The parts of a report the plotter reads must have the types the schema gives them; anything
// else is refused here, in these words, before any of it is read.
void check_shape(const json& doc) {
  if (!doc.is_object()) malformed("document", "is not a JSON object");
  need_string(doc, "document", "command");
  if (!doc.contains("tool") || !doc["tool"].is_object()) malformed("tool", "is not an object");
  need_string(doc["tool"], "tool", "version");
  need_string(doc["tool"], "tool", "git_commit");
  if (!doc.contains("machine") || !doc["machine"].is_object())
    malformed("machine", "is not an object");
  const json& m = doc["machine"];
  need_string(m, "machine", "cpu");
  if (m.contains("gpu") && !m["gpu"].is_null()) {
    if (!m["gpu"].is_object()) malformed("machine.gpu", "is neither null nor an object");
    need_string(m["gpu"], "machine.gpu", "name");
  }
  if (!doc.contains("tables") || !doc["tables"].is_array()) malformed("tables", "is not an array");
  for (size_t i = 0; i < doc["tables"].size(); ++i) {
    const json& t = doc["tables"][i];
    const std::string where = "tables[" + std::to_string(i) + "]";
    if (!t.is_object()) malformed(where, "is not an object");
    need_string(t, where, "id");
    need_string(t, where, "title");
    if (!t.contains("columns") || !t["columns"].is_array())
      malformed(where + ".columns", "is not an array");
    for (size_t c = 0; c < t["columns"].size(); ++c) {
      const json& col = t["columns"][c];
      const std::string cw = where + ".columns[" + std::to_string(c) + "]";
      if (!col.is_object()) malformed(cw, "is not an object");
      for (const char* key : {"key", "header", "unit"}) need_string(col, cw, key);
    }
    if (!t.contains("rows") || !t["rows"].is_array()) malformed(where + ".rows", "is not an array");
    for (size_t r = 0; r < t["rows"].size(); ++r) {
      const json& row = t["rows"][r];
      const std::string rw = where + ".rows[" + std::to_string(r) + "]";
      if (!row.is_object()) malformed(rw, "is not an object");
      for (const auto& cell : row.items())
        if (cell.value().is_structured()) malformed(rw + "." + cell.key(), "is not a single value");
    }
  }
}

// The table with this id, or, in a `lab all` report, with the id prefixed by its lab ("cost.cost").
const json* find_table(const json& doc, const std::string& id) {
  for (const json& t : doc["tables"]) {
    const std::string tid = t["id"];
    if (tid == id || (tid.size() > id.size() &&
                      tid.compare(tid.size() - id.size() - 1, std::string::npos, "." + id) == 0))
      return &t;
  }
  return nullptr;
}

// Index of a column by key, or -1.
int column_index(const json& table, const std::string& key) {
  const json& cols = table.at("columns");
  for (size_t i = 0; i < cols.size(); ++i)
    if (cols[i].value("key", "") == key) return static_cast<int>(i);
  return -1;
}

const json& column(const json& table, const std::string& key) {
  const int i = column_index(table, key);
  if (i < 0)
    throw std::invalid_argument("table '" + shown(table.value("id", "")) + "' has no column '" +
                                shown(key) + "'");
  return table["columns"][i];
}

// A cell by column key (rows are objects keyed by column).
json cell(const json&, const json& row, const std::string& key) {
  return row.contains(key) ? row[key] : json();
}

// A finite number, or NaN when the cell is null, text or "inf"/"nan".
double number(const json& v) {
  if (v.is_number()) return v.get<double>();
  return NAN;
}

std::string text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_null()) return "-";
  return v.dump();
}

bool has_cjk(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0xE3 && c <= 0xE9) return true;  // lead bytes of the CJK blocks in UTF-8
  return false;
}

// Seconds per unit of a time column.
double seconds_per(const std::string& unit) {
  if (unit == "s") return 1;
  if (unit == "ms") return 1e-3;
  if (unit == "µs" || unit == "us") return 1e-6;
  if (unit == "ns") return 1e-9;
  throw std::invalid_argument("unknown time unit '" + shown(unit) + "'");
}

Series column_series(const json& table, const std::string& xkey, const std::string& ykey,
                     double yscale = 1) {
  Series s{column(table, ykey).value("header", ykey), {}};
  for (const json& row : table.at("rows")) {
    const double x = number(cell(table, row, xkey)), y = number(cell(table, row, ykey));
    if (std::isfinite(x) && std::isfinite(y)) s.points.push_back({x, y * yscale});
  }
  return s;
}

std::string subtitle(const json& doc) {
  std::string s = "flashlab " + doc.value("command", std::string());
  if (doc.contains("tool") && doc["tool"].is_object())
    s += fmt::format(" · {} {}", doc["tool"].value("version", ""),
                     doc["tool"].value("git_commit", ""));
  if (doc.contains("machine") && doc["machine"].is_object()) {
    const json& m = doc["machine"];
    if (m.contains("gpu") && m["gpu"].is_object())
      s += " · " + m["gpu"].value("name", "");
    else
      s += " · " + m.value("cpu", "");
  }
  return s;
}

// Lab cost: IO, FLOPs and roofline time against N, standard vs FlashAttention.
Chart cost_chart(const json& doc, const json& t) {
  const bool zh = has_cjk(t.value("title", ""));
  const Axis x{zh ? "N（对数坐标）" : "N (log scale)", Scale::log, TickStyle::number, true};
  Chart c{t.value("title", "cost"), subtitle(doc), {}};

  Panel io{zh ? "读写（每个元素 2 字节）" : "IO (2 bytes per element)",
           x,
           Axis{zh ? "字节（对数坐标）" : "bytes (log scale)", Scale::log, TickStyle::bytes},
           {}};
  io.series = {column_series(t, "N", "io_standard"), column_series(t, "N", "io_fa")};
  Panel fl{zh ? "矩阵乘法 FLOPs" : "matmul FLOPs",
           x,
           Axis{zh ? "FLOPs（对数坐标）" : "FLOPs (log scale)", Scale::log},
           {}};
  fl.series = {column_series(t, "N", "flops_standard"), column_series(t, "N", "flops_fa")};
  c.panels = {io, fl};

  Panel rl{zh ? "roofline 时间" : "roofline time",
           x,
           Axis{zh ? "时间（对数坐标）" : "time (log scale)", Scale::log, TickStyle::seconds},
           {}};
  for (const char* key :
       {"roofline_standard", "roofline_fa", "gpu_roofline_standard", "gpu_roofline_fa"})
    if (column_index(t, key) >= 0)
      rl.series.push_back(
          column_series(t, "N", key, seconds_per(column(t, key).value("unit", "s"))));
  if (!rl.series.empty()) c.panels.push_back(rl);

  Panel ratio{zh ? "比值" : "ratios", x, Axis{zh ? "倍数" : "ratio", Scale::linear}, {}};
  for (const char* key : {"flops_ratio", "io_ratio", "speedup"})
    if (column_index(t, key) >= 0) ratio.series.push_back(column_series(t, "N", key));
  for (Series& s : ratio.series)  // "standard / FA" alone does not say it is the IO ratio
    if (s.name.find("IO") == std::string::npos && s.name.find("读写") == std::string::npos &&
        s.name.find("FLOP") == std::string::npos && s.name.find("/") != std::string::npos)
      s.name = (zh ? "读写：" : "IO: ") + s.name;
  if (!ratio.series.empty()) c.panels.push_back(ratio);
  return c;
}

// Bench: throughput against N, one panel per (pass, dtype, d, causal), one line per version.
Chart bench_chart(const json& doc, const json& t) {
  std::string ykey = "tflops";
  if (column_index(t, ykey) < 0) ykey = "gflops";
  const json& ycol = column(t, ykey);
  column(t, "N"), column(t, "version");
  const std::string unit = ycol.value("unit", "TFLOP/s");

  using Key = std::tuple<std::string, std::string, std::string, std::string>;
  std::vector<Key> order;
  std::map<Key, std::vector<std::string>> versions;      // in order of appearance
  std::map<std::pair<Key, std::string>, Series> series;  // (panel, version) -> line
  std::vector<std::string> all_versions;  // a version keeps its colour in every panel
  for (const json& row : t.at("rows")) {
    const Key k{text(cell(t, row, "pass")), text(cell(t, row, "dtype")), text(cell(t, row, "d")),
                text(cell(t, row, "causal"))};
    const std::string v = text(cell(t, row, "version"));
    if (!versions.count(k)) order.push_back(k);
    auto& vs = versions[k];
    if (std::find(vs.begin(), vs.end(), v) == vs.end()) vs.push_back(v);
    if (std::find(all_versions.begin(), all_versions.end(), v) == all_versions.end())
      all_versions.push_back(v);
    Series& s = series[{k, v}];
    if (s.name.empty()) s.name = v;
    s.style = static_cast<int>(std::find(all_versions.begin(), all_versions.end(), v) -
                               all_versions.begin());
    const json ok = cell(t, row, "ok");
    if (ok.is_boolean() && !ok.get<bool>() && s.name.find('*') == std::string::npos)
      s.name += " (*)";
    const double x = number(cell(t, row, "N")), y = number(cell(t, row, ykey));
    if (std::isfinite(x) && std::isfinite(y)) s.points.push_back({x, y});
  }
  if (order.empty()) throw std::invalid_argument("the bench table has no rows");

  Chart c{"flashlab bench: " + ycol.value("header", ykey) + " vs N", subtitle(doc), {}};
  for (const Key& k : order) {
    const auto& [pass, dtype, d, causal] = k;
    Panel p{fmt::format("{} · {} · d={} · {}", pass, dtype, d,
                        causal == "true" ? "causal" : "non-causal"),
            Axis{"N (log scale)", Scale::log, TickStyle::number, true},
            Axis{unit, Scale::linear},
            {}};
    for (const std::string& v : versions[k]) p.series.push_back(series[{k, v}]);
    c.panels.push_back(std::move(p));
  }
  bool flagged = false;
  for (const auto& [key, s] : series) flagged = flagged || s.name.find("(*)") != std::string::npos;
  if (flagged) c.subtitle += " · (*) failed its error check";
  return c;
}

}  // namespace

std::string plot_svg(const json& doc) {
  check_shape(doc);
  const std::string command = doc["command"];
  if (plot::is_io_report(doc)) return plot::render_svg(plot::io_chart(doc));
  if (const json* t = find_table(doc, "cost")) return plot::render_svg(cost_chart(doc, *t));
  if (const json* t = find_table(doc, "bench")) return plot::render_svg(bench_chart(doc, *t));
  throw std::invalid_argument("no figure for a '" + shown(command) +
                              "' report: plot draws the cost lab (`flashlab lab cost`), the io "
                              "lab (`flashlab lab io`) and `flashlab bench` reports");
}

}  // namespace flashlab
