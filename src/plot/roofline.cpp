#include "plot/roofline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace flashlab::plot {

namespace {

// The report's rows are objects keyed by column key.
const json* table(const json& doc, const char* id) {
  if (doc.contains("tables") && doc["tables"].is_array())
    for (const json& t : doc["tables"])
      if (t.value("id", "") == id) return &t;
  return nullptr;
}

double number(const json& row, const char* key) {
  return row.contains(key) && row[key].is_number() ? row[key].get<double>() : NAN;
}

std::string text(const json& row, const char* key) {
  if (!row.contains(key)) return {};
  return row[key].is_string() ? row[key].get<std::string>() : row[key].dump();
}

bool chinese(const json& t) {
  for (unsigned char c : t.value("title", std::string()))
    if (c >= 0xE3 && c <= 0xE9) return true;
  return false;
}

std::string si(double v, const char* unit) {
  return fmt::format("{:.3g} T{}", v * 1e-12, unit);
}

// The measured HBM bandwidth in B/s, or 0.
double bandwidth(const json& ceilings) {
  for (const json& r : ceilings["rows"])
    if (text(r, "key") == "hbm_copy" && std::isfinite(number(r, "value")))
      return number(r, "value") * 1e12;
  return 0;
}

// The roofs: every compute ceiling against the HBM bandwidth, over [x0, x1].
std::vector<Series> roofs(const json& ceilings, double x0, double x1) {
  const double bw = bandwidth(ceilings);
  std::vector<Series> out;
  if (bw <= 0) return out;
  int style = 5;  // dashed, in colours the versions' markers (styles 0-4) do not use
  for (const json& r : ceilings["rows"]) {
    const double c = number(r, "value") * 1e12;
    // The bandwidths (hbm_copy, hbm_read) are the roofs' slope, not roofs.
    if (text(r, "key").starts_with("hbm_") || !std::isfinite(c) || c <= 0) continue;
    Series s{fmt::format("{} {}", text(r, "name"), si(c, "FLOP/s")), {}, style++};
    const double ridge = c / bw;
    s.points = {{x0, std::min(c, bw * x0)}};
    if (ridge > x0 && ridge < x1) s.points.push_back({ridge, c});
    s.points.push_back({x1, std::min(c, bw * x1)});
    s.markers = false;
    out.push_back(std::move(s));
  }
  return out;
}

Panel roofline_panel(const json& ceilings, const json& points, double d, const std::string& N,
                     bool zh) {
  const double bw = bandwidth(ceilings);
  Panel p{fmt::format("roofline · d = {:g} · N = {}{}", d, N,
                      bw > 0 ? " · HBM " + si(bw, "B/s") : std::string()),
          Axis{zh ? "算术强度 FLOP/B（实测显存字节，对数坐标）"
                  : "FLOP per DRAM byte (measured, log scale)",
               Scale::log},
          Axis{zh ? "FLOP/s（对数坐标）" : "FLOP/s (log scale)", Scale::log},
          {}};
  std::vector<std::string> order;
  std::map<std::string, Series> by_version;
  double x0 = INFINITY, x1 = 0;
  for (const json& r : points["rows"]) {
    if (number(r, "d") != d) continue;
    const double x = number(r, "intensity"), y = number(r, "achieved");
    if (!(x > 0) || !(y > 0)) continue;
    const std::string v = text(r, "version");
    if (!by_version.count(v)) order.push_back(v);
    Series& s = by_version[v];
    s.name = v;
    s.line = false;
    s.points.push_back({x, y});
    x0 = std::min(x0, x), x1 = std::max(x1, x);
  }
  if (order.empty()) return p;
  x0 /= 2, x1 *= 2;
  for (Series& r : roofs(ceilings, x0, x1)) {
    x0 = std::min(x0, r.points.front().x), x1 = std::max(x1, r.points.back().x);
    p.series.push_back(std::move(r));
  }
  for (size_t i = 0; i < order.size(); ++i) {
    Series s = by_version[order[i]];
    s.style = static_cast<int>(i % 5);
    p.series.push_back(std::move(s));
  }
  return p;
}

Panel ratio_panel(const json& ratio, bool zh) {
  Panel p{zh ? "标准 / FA 的流量比" : "standard / FA traffic",
          Axis{zh ? "N（对数坐标）" : "N (log scale)", Scale::log, TickStyle::number, true},
          Axis{zh ? "倍数" : "ratio", Scale::linear},
          {}};
  const char* keys[] = {"ratio_model", "ratio_dram", "ratio_l2"};
  const char* en[] = {"counted", "DRAM", "L2"};
  const char* cn[] = {"讲义计数", "显存实测", "L2 实测"};
  int style = 0;
  for (double d : {128.0, 64.0})
    for (int k = 0; k < 3; ++k) {
      Series s{fmt::format("{}, d={:g}", zh ? cn[k] : en[k], d), {}, style++};
      for (const json& r : ratio["rows"])
        if (number(r, "d") == d && std::isfinite(number(r, keys[k])))
          s.points.push_back({number(r, "N"), number(r, keys[k])});
      if (!s.points.empty()) p.series.push_back(std::move(s));
    }
  return p;
}

}  // namespace

bool is_io_report(const json& doc) {
  return doc.is_object() && doc.value("command", "") == "lab io";
}

Chart io_chart(const json& doc) {
  const json* ratio = table(doc, "ratio");
  if (!ratio) throw std::invalid_argument("the io report has no 'ratio' table");
  const bool zh = chinese(*ratio);
  std::string where = "flashlab lab io";
  if (doc.contains("machine") && doc["machine"].is_object() && doc["machine"]["gpu"].is_object())
    where += " · " + doc["machine"]["gpu"].value("name", "");
  Chart c{zh ? "讲义留下的问题，实测：roofline 与标准 / FA 的流量比"
             : "The lecture's open question, measured: the roofline and standard / FA traffic",
          where,
          {}};
  const json *ceilings = table(doc, "ceilings"), *points = table(doc, "roofline");
  if (ceilings && points) {
    const std::string N =
        doc.contains("config") ? doc["config"].value("roofline_N", json()).dump() : "?";
    for (double d : {128.0, 64.0}) {
      Panel p = roofline_panel(*ceilings, *points, d, N, zh);
      if (!p.series.empty()) c.panels.push_back(std::move(p));
    }
  }
  c.panels.push_back(ratio_panel(*ratio, zh));
  return c;
}

}  // namespace flashlab::plot
