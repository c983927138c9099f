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

// Lab decode: against the cache length, one line per batch (B x Hkv): the bandwidth reached, with
// the read ceiling as a bound (a GPU report), the splits the rule chose, and what the splits buy.
Chart decode_chart(const json& doc, const json& t) {
  const bool zh = has_cjk(t.value("title", ""));
  const Axis x{zh ? "缓存的键数（对数坐标）" : "cache, keys (log scale)", Scale::log,
               TickStyle::number, true};
  std::vector<std::string> batches;
  for (const json& row : t.at("rows")) {
    const std::string b = text(cell(t, row, "B_x_Hkv"));
    if (std::find(batches.begin(), batches.end(), b) == batches.end()) batches.push_back(b);
  }
  if (batches.empty()) throw std::invalid_argument("the decode table has no rows");
  const auto series_of = [&](const std::string& key) {
    std::vector<Series> out;
    for (size_t i = 0; i < batches.size(); ++i) {
      Series s{"B × Hkv = " + batches[i], {}, static_cast<int>(i)};
      for (const json& row : t.at("rows")) {
        if (text(cell(t, row, "B_x_Hkv")) != batches[i]) continue;
        const double xv = number(cell(t, row, "cache")), yv = number(cell(t, row, key));
        if (std::isfinite(xv) && std::isfinite(yv)) s.points.push_back({xv, yv});
      }
      if (!s.points.empty()) out.push_back(std::move(s));
    }
    return out;
  };
  Chart c{t.value("title", "decode"), subtitle(doc), {}};
  Panel bw{zh ? "带宽（K + V 字节 / 时间）" : "bandwidth (K + V bytes / time)", x,
           Axis{"TB/s", Scale::linear}, series_of("tbps")};
  if (!bw.series.empty()) {
    double lo = INFINITY, hi = 0;
    for (const Series& s : bw.series)
      for (const plot::Point& p : s.points) lo = std::min(lo, p.x), hi = std::max(hi, p.x);
    if (doc.contains("figures") && doc["figures"].contains("read_ceiling_tbps")) {
      const double ceiling = number(doc["figures"]["read_ceiling_tbps"].value("value", json()));
      if (std::isfinite(ceiling)) {
        Series roof{(zh ? "读带宽上限 " : "read ceiling ") + fmt::format("{:.2f} TB/s", ceiling),
                    {{lo, ceiling}, {hi, ceiling}},
                    static_cast<int>(batches.size())};
        roof.markers = false;
        bw.series.push_back(std::move(roof));
      }
    }
    c.panels.push_back(std::move(bw));
  }
  c.panels.push_back(
      Panel{zh ? "切分数 S" : "splits S", x, Axis{"S", Scale::log}, series_of("splits")});
  Panel gain{zh ? "切分带来的加速（S = 1 的时间 / S 段的时间）"
                : "what splitting buys (time at S = 1 / at S)",
             x, Axis{zh ? "倍数" : "ratio", Scale::linear}, series_of("speedup")};
  if (!gain.series.empty()) c.panels.push_back(std::move(gain));
  return c;
}

// Lab fp8: FA3's error table as a chart, one line per row (its legend the row's name): the
// relative error of O on normal and on outlier inputs (log scale), and where the GPU half was
// measured, each row's error on outliers against its TFLOP/s at the speed shape: what accuracy
// each way of running FP8 keeps, and what speed it buys.
Chart fp8_chart(const json& doc, const json& errors) {
  const bool zh = has_cjk(errors.value("title", ""));
  const json* speed = find_table(doc, "speed");
  Panel err{zh ? "O 的相对误差（对数坐标）" : "relative error of O (log scale)",
            Axis{zh ? "输入：1 正态，2 离群值" : "inputs: 1 normal, 2 outliers", Scale::linear,
                 TickStyle::number, true},
            Axis{zh ? "相对误差" : "rel error", Scale::log},
            {}};
  Panel trade{zh ? "离群值输入：误差与速度" : "outlier inputs: error against speed",
              Axis{"TFLOP/s", Scale::linear},
              Axis{zh ? "相对误差" : "rel error", Scale::log},
              {}};
  int i = 0;
  for (const json& row : errors.at("rows")) {
    const std::string name = text(cell(errors, row, "row"));
    Series s{name, {}, i};
    for (const auto& [x, key] : {std::pair{1.0, "rel_normal"}, {2.0, "rel_outliers"}}) {
      const double y = number(cell(errors, row, key));
      if (std::isfinite(y) && y > 0) s.points.push_back({x, y});
    }
    const double tf = speed && static_cast<size_t>(i) < speed->at("rows").size()
                          ? number(cell(*speed, speed->at("rows")[i], "tflops"))
                          : NAN;
    const double y = number(cell(errors, row, "rel_outliers"));
    if (std::isfinite(tf) && std::isfinite(y) && y > 0) {
      Series p{name, {{tf, y}}, i};
      p.line = false;
      trade.series.push_back(std::move(p));
    }
    if (!s.points.empty()) err.series.push_back(std::move(s));
    ++i;
  }
  if (err.series.empty()) throw std::invalid_argument("the fp8 lab's errors table has no rows");
  Chart c{
      zh ? "FP8：e4m3 的误差与补救，以及速度" : "FP8: what e4m3 costs, what the remedies buy back",
      subtitle(doc),
      {std::move(err)}};
  if (!trade.series.empty()) c.panels.push_back(std::move(trade));
  return c;
}

}  // namespace

std::string plot_svg(const json& doc) {
  check_shape(doc);
  const std::string command = doc["command"];
  if (plot::is_io_report(doc)) return plot::render_svg(plot::io_chart(doc));
  if (const json* t = find_table(doc, "cost")) return plot::render_svg(cost_chart(doc, *t));
  if (const json* t = find_table(doc, "bench")) return plot::render_svg(bench_chart(doc, *t));
  if (const json* t = find_table(doc, "decode")) return plot::render_svg(decode_chart(doc, *t));
  if (const json* t = find_table(doc, "errors"); t && column_index(*t, "rel_outliers") >= 0)
    return plot::render_svg(fp8_chart(doc, *t));
  throw std::invalid_argument("no figure for a '" + shown(command) +
                              "' report: plot draws the cost lab (`flashlab lab cost`), the io "
                              "lab (`flashlab lab io`), the decode lab (`flashlab lab decode`), "
                              "the fp8 lab (`flashlab lab fp8`) and `flashlab bench` reports");
}

}  // namespace flashlab
