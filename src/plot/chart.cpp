// Hand-written SVG for plot::Chart. Picture of one panel (pixels):
//
//          title
//     +--------------------+  ^
//  y  |  lines + markers   |  | plot_h
//     +--------------------+  v
//     <----- plot_w ------->
//          x label
//     [legend, two entries a row]
//
// Log axes map log(v) linearly; ticks sit on powers of 10 (2 for bytes), or on the data's own x
// values when there are few of them (N = 512, 1024, ...).
#include "plot/chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "util/format.h"

namespace flashlab::plot {

namespace {

constexpr double kPlotW = 400, kPlotH = 260;
constexpr double kLeft = 78, kRight = 24, kTop = 36, kBelow = 58, kLegendRow = 20;
constexpr double kPanelW = kLeft + kPlotW + kRight;
constexpr const char* kFont = "DejaVu Sans, Noto Sans CJK SC, WenQuanYi Micro Hei, sans-serif";
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#17becf"};

// The code point of the UTF-8 sequence at s[i] and its length; -1 when the bytes there are not
// one (a stray continuation byte, a sequence cut short, an overlong form, a surrogate).
int32_t decode_utf8(const std::string& s, size_t i, size_t& len) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  int32_t cp;
  int32_t min;
  if (b0 < 0x80) {
    len = 1;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    len = 1;
    return -1;
  }
  if (i + len > s.size()) {
    len = 1;
    return -1;
  }
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) {
      len = 1;
      return -1;
    }
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    len = 1;
    return -1;
  }
  return cp;
}

// XML 1.0 allows tab, newline, carriage return, U+0020-U+D7FF, U+E000-U+FFFD and
// U+10000-U+10FFFF: no other control character, and neither U+FFFE nor U+FFFF.
bool xml_char(int32_t cp) {
  return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
         (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

// Text for SVG: markup characters escaped, and what XML 1.0 does not allow (control characters,
// U+FFFE, U+FFFF, bytes that are not UTF-8) shown as U+FFFD.
std::string esc(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    const int32_t cp = decode_utf8(s, i, len);
    switch (cp) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        if (cp < 0 || !xml_char(cp))
          out += "\xEF\xBF\xBD";  // U+FFFD: what the SVG cannot hold
        else
          out.append(s, i, len);
    }
    i += len;
  }
  return out;
}

// Rough width of one character in pixels at 12 px: CJK characters (3- and 4-byte UTF-8) are
// square, others about 0.6 em.
double char_width(int utf8_len) {
  return utf8_len >= 3 ? 12.0 : 7.0;
}

double text_width(const std::string& s) {
  double w = 0;
  for (size_t i = 0; i < s.size();) {
    const int len = utf8_length(static_cast<unsigned char>(s[i]));
    w += char_width(len);
    i += len;
  }
  return w;
}

// A legend entry cut to fit half a panel's width, on a UTF-8 boundary.
std::string s_trunc(const std::string& s) {
  constexpr double kMax = kPlotW / 2 - 36;
  if (text_width(s) <= kMax) return s;
  std::string out;
  double w = 0;
  for (size_t i = 0; i < s.size();) {
    const int len = utf8_length(static_cast<unsigned char>(s[i]));
    if (w + char_width(len) > kMax - 12) break;
    out += s.substr(i, len);
    w += char_width(len);
    i += len;
  }
  return out + "…";
}

std::string trim_zero(std::string s) {  // "16.0 MiB" -> "16 MiB"
  const size_t p = s.find(".0 ");
  if (p != std::string::npos) s.erase(p, 2);
  return s;
}

std::string tick_label(double v, TickStyle style) {
  if (style == TickStyle::bytes) return trim_zero(format_bytes(v));
  if (style == TickStyle::seconds) {
    if (v >= 1) return fmt::format("{:g} s", v);
    if (v >= 1e-3) return fmt::format("{:g} ms", v * 1e3);
    if (v >= 1e-6) return fmt::format("{:g} µs", v * 1e6);
    return fmt::format("{:g} ns", v * 1e9);
  }
  static const char* si[] = {"", " k", " M", " G", " T", " P", " E"};
  const double a = std::fabs(v);
  if (a < 1e4 || (a < 1e6 && v == std::floor(v))) return fmt::format("{:g}", v);  // N = 16384
  int k = 0;
  while (a >= std::pow(1000.0, k + 1) && k < 6) ++k;
  return fmt::format("{:g}{}", v / std::pow(1000.0, k), si[k]);
}

// Data range of one axis, and the map from a value to [0, 1]. A log axis keeps the logarithms of
// its ends. Every figure is kept finite for any finite data, from denormals to 1.8e308: sums and
// differences of the ends are taken in halves so they cannot overflow.
struct Range {
  double lo, hi;  // linear: values; log: natural logarithms of the values
  Scale scale;
  double t(double v) const {
    const double x = scale == Scale::log ? std::log(v) : v;
    return (x / 2 - lo / 2) / (hi / 2 - lo / 2);
  }
  bool holds(double v) const {
    const double x = scale == Scale::log ? std::log(v) : v;
    return x >= lo && x <= hi;
  }
};

Range axis_range(const std::vector<double>& vs, Scale scale) {
  double lo = *std::min_element(vs.begin(), vs.end());
  double hi = *std::max_element(vs.begin(), vs.end());
  if (scale == Scale::log) {
    lo = std::log(lo), hi = std::log(hi);
    if (hi == lo) lo -= std::log(2.0), hi += std::log(2.0);
    const double pad = 0.06 * (hi - lo);
    return {lo - pad, hi + pad, scale};
  }
  lo = std::min(lo, 0.0);  // throughput and ratios read best from zero
  hi = std::max(hi, 0.0);
  if (hi == lo) hi = 1;
  const double pad = 0.16 * (hi / 2 - lo / 2);  // 8% of the range
  const double big = std::numeric_limits<double>::max();
  return {lo < 0 ? std::max(lo - pad, -big) : lo, std::min(hi + pad, big), scale};
}

// Ticks at 1, 2, 2.5 or 5 times a power of ten, about five of them.
std::vector<double> linear_ticks(const Range& r) {
  const double raw = (r.hi / 2 - r.lo / 2) / 2.5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  const double k0 = std::ceil(r.lo / step), k1 = std::floor(r.hi / step);
  if (!(step > 0) || !std::isfinite(step) || !(k1 - k0 <= 20)) return {r.lo, r.hi};
  std::vector<double> ts;
  for (double k = k0; k <= k1; ++k) ts.push_back(k == 0 ? 0.0 : k * step);
  return ts;
}

std::vector<double> log_ticks(const Range& r, TickStyle style) {
  const double base = style == TickStyle::bytes ? 2.0 : 10.0;
  const int k0 = static_cast<int>(std::ceil(r.lo / std::log(base) - 1e-9));
  const int k1 = static_cast<int>(std::floor(r.hi / std::log(base) + 1e-9));
  std::vector<double> ts;
  const int count = k1 - k0 + 1;
  if (base == 10.0 && count < 3) {  // less than three decades: add 2x and 5x
    for (int k = k0 - 1; k <= k1; ++k)
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, k);
        if (v > 0 && r.holds(v)) ts.push_back(v);
      }
    return ts;
  }
  int step = std::max(1, (count + 6) / 7);
  if (base == 2.0 && step > 1) step = step <= 2 ? 2 : ((step + 1) / 2) * 2;  // 1, 4, 16 ... KiB
  for (int k = k0; k <= k1; ++k) {
    const double v = std::pow(base, k);
    if ((k - k0) % step == 0 && v > 0 && std::isfinite(v)) ts.push_back(v);
  }
  return ts;
}

std::vector<double> ticks_for(const Axis& a, const Range& r, const std::vector<double>& data) {
  if (a.ticks_at_data) {
    std::vector<double> d = data;
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    if (d.size() <= 10) return d;
    std::vector<double> thin;
    const size_t stride = (d.size() + 9) / 10;
    for (size_t i = 0; i < d.size(); i += stride) thin.push_back(d[i]);
    return thin;
  }
  return a.scale == Scale::log ? log_ticks(r, a.ticks) : linear_ticks(r);
}

void marker(std::string& out, int kind, double x, double y, const char* color) {
  switch (kind % 4) {
    case 0:
      out += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="4" fill="{}"/>)", x, y, color);
      break;
    case 1:
      out += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="8" height="8" fill="{}"/>)", x - 4,
                         y - 4, color);
      break;
    case 2:
      out += fmt::format(R"(<path d="M{:.1f},{:.1f} l5,9 h-10 z" fill="{}"/>)", x, y - 5.5, color);
      break;
    default:
      out += fmt::format(R"(<path d="M{:.1f},{:.1f} l5,5 l-5,5 l-5,-5 z" fill="{}"/>)", x, y - 5,
                         color);
  }
  out += "\n";
}

int legend_rows(const Panel& p) {
  return static_cast<int>((p.series.size() + 1) / 2);
}
double panel_height(const Panel& p) {
  return kTop + kPlotH + kBelow + legend_rows(p) * kLegendRow;
}

void draw_panel(std::string& out, const Panel& p, double ox, double oy) {
  std::vector<double> xs, ys;
  for (const Series& s : p.series)
    for (const Point& pt : s.points) {
      if (p.x.scale == Scale::log && pt.x <= 0) continue;
      if (p.y.scale == Scale::log && pt.y <= 0) continue;
      xs.push_back(pt.x), ys.push_back(pt.y);
    }
  const double x0 = ox + kLeft, y0 = oy + kTop;  // top-left corner of the plot area
  out += fmt::format(
      R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" font-size="14" font-weight="bold">{}</text>)"
      "\n",
      x0 + kPlotW / 2, oy + 22, esc(p.title));
  out += fmt::format(
      R"(<rect x="{:.1f}" y="{:.1f}" width="{}" height="{}" fill="white" stroke="#444"/>)"
      "\n",
      x0, y0, kPlotW, kPlotH);
  if (xs.empty()) {
    out += fmt::format(
        R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" font-size="12">no data</text>)"
        "\n",
        x0 + kPlotW / 2, y0 + kPlotH / 2);
    return;
  }
  const Range rx = axis_range(xs, p.x.scale), ry = axis_range(ys, p.y.scale);
  auto px = [&](double v) { return x0 + rx.t(v) * kPlotW; };
  auto py = [&](double v) { return y0 + (1 - ry.t(v)) * kPlotH; };

  for (double v : ticks_for(p.x, rx, xs)) {
    const double x = px(v);
    out += fmt::format(
        R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#ddd"/>)"
        R"(<line x1="{0:.1f}" y1="{2:.1f}" x2="{0:.1f}" y2="{3:.1f}" stroke="#444"/>)"
        R"(<text x="{0:.1f}" y="{4:.1f}" text-anchor="middle" font-size="11">{5}</text>)"
        "\n",
        x, y0, y0 + kPlotH, y0 + kPlotH + 5, y0 + kPlotH + 18, esc(tick_label(v, p.x.ticks)));
  }
  for (double v : ticks_for(p.y, ry, ys)) {
    const double y = py(v);
    out +=
        fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" stroke="#ddd"/>)"
                    R"(<line x1="{3:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{1:.1f}" stroke="#444"/>)"
                    R"(<text x="{4:.1f}" y="{5:.1f}" text-anchor="end" font-size="11">{6}</text>)"
                    "\n",
                    x0, y, x0 + kPlotW, x0 - 5, x0 - 8, y + 4, esc(tick_label(v, p.y.ticks)));
  }
  out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" font-size="12">{}</text>)"
                     "\n",
                     x0 + kPlotW / 2, y0 + kPlotH + 38, esc(p.x.label));
  out += fmt::format(
      R"svg(<text transform="translate({:.1f},{:.1f}) rotate(-90)" text-anchor="middle" font-size="12">{}</text>)svg"
      "\n",
      ox + 16, y0 + kPlotH / 2, esc(p.y.label));

  // Lines and markers, clipped to the plot area by construction (the ranges hold every point).
  for (size_t k = 0; k < p.series.size(); ++k) {
    const Series& s = p.series[k];
    const size_t i = s.style >= 0 ? static_cast<size_t>(s.style) : k;
    const char* color = kColors[i % 8];
    std::string path;
    for (const Point& pt : s.points) {
      if ((p.x.scale == Scale::log && pt.x <= 0) || (p.y.scale == Scale::log && pt.y <= 0))
        continue;
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", px(pt.x), py(pt.y));
    }
    if (s.line)
      out += fmt::format(R"(<path d="{}" fill="none" stroke="{}" stroke-width="2"{}/>)"
                         "\n",
                         path, color, i % 8 >= 4 ? R"( stroke-dasharray="6,3")" : "");
    for (const Point& pt : s.points) {
      if (!s.markers || (p.x.scale == Scale::log && pt.x <= 0) ||
          (p.y.scale == Scale::log && pt.y <= 0))
        continue;
      marker(out, static_cast<int>(i), px(pt.x), py(pt.y), color);
    }
  }
  // Legend under the x label, two entries a row.
  const double ly = y0 + kPlotH + kBelow;
  for (size_t k = 0; k < p.series.size(); ++k) {
    const double lx = x0 + (k % 2) * (kPlotW / 2);
    const double yy = ly + (k / 2) * kLegendRow;
    const size_t i = p.series[k].style >= 0 ? static_cast<size_t>(p.series[k].style) : k;
    const char* color = kColors[i % 8];
    if (p.series[k].line)
      out += fmt::format(
          R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="2"{}/>)",
          lx, yy - 4, lx + 24, yy - 4, color, i % 8 >= 4 ? R"( stroke-dasharray="6,3")" : "");
    if (p.series[k].markers) marker(out, static_cast<int>(i), lx + 12, yy - 4, color);
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="12">{}</text>)"
                       "\n",
                       lx + 30, yy, esc(s_trunc(p.series[k].name)));
  }
}

}  // namespace

std::string render_svg(const Chart& c) {
  if (c.panels.empty()) throw std::invalid_argument("plot: nothing to draw");
  const int cols = c.panels.size() == 1 ? 1 : 2;
  const double head = c.subtitle.empty() ? 44 : 64;
  // Row heights follow the tallest panel of the row (legends differ).
  std::vector<double> row_h;
  for (size_t i = 0; i < c.panels.size(); ++i) {
    if (i % cols == 0) row_h.push_back(0);
    row_h.back() = std::max(row_h.back(), panel_height(c.panels[i]));
  }
  double height = head + 10;
  for (double h : row_h) height += h;
  const double width = cols * kPanelW + 20;
  // The title shrinks to fit the width (text_width measures at 12 px).
  const double title_px = std::clamp(12.0 * (width - 40) / (text_width(c.title) * 1.1), 9.0, 17.0);

  std::string out;
  out += fmt::format(
      R"(<?xml version="1.0" encoding="UTF-8"?>)"
      "\n"
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0:.0f}" height="{1:.0f}" viewBox="0 0 {0:.0f} {1:.0f}" font-family="{2}">)"
      "\n"
      R"(<rect width="100%" height="100%" fill="white"/>)"
      "\n",
      width, height, kFont);
  out += fmt::format(
      R"(<text x="{:.1f}" y="28" text-anchor="middle" font-size="{:.1f}" font-weight="bold">{}</text>)"
      "\n",
      width / 2, title_px, esc(c.title));
  if (!c.subtitle.empty())
    out += fmt::format(
        R"(<text x="{:.1f}" y="50" text-anchor="middle" font-size="12" fill="#555">{}</text>)"
        "\n",
        width / 2, esc(c.subtitle));
  double oy = head;
  for (size_t i = 0; i < c.panels.size(); ++i) {
    if (i > 0 && i % cols == 0) oy += row_h[i / cols - 1];
    draw_panel(out, c.panels[i], 10 + (i % cols) * kPanelW, oy);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace flashlab::plot
