#include "report/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "util/format.h"

namespace flashlab {

namespace {

bool is_integer_value(const json& v) {
  return v.is_number_integer() || v.is_number_unsigned();
}

std::string auto_number(const json& v) {
  if (is_integer_value(v)) return v.dump();
  const double x = v.get<double>();
  if (!std::isfinite(x)) return fmt::format("{}", x);
  if (x == std::floor(x) && std::fabs(x) < 1e15) return fmt::format("{:.0f}", x);
  return fmt::format("{:.4g}", x);
}

// CSV keeps full precision: it is for programs.
std::string csv_value(const json& v) {
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (is_integer_value(v)) return v.dump();
  if (v.is_number()) {
    const double x = v.get<double>();
    return std::isfinite(x) ? fmt::format("{}", x) : fmt::format("{}", x);
  }
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\n") != std::string::npos) {
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  }
  return s;
}

std::string md_escape(std::string s) {
  std::string out;
  for (char ch : s) {  // '|' ends a cell; '*' would start emphasis ("2*B*H" -> 2BH in italics)
    if (ch == '|' || ch == '*') out += '\\';
    out += ch;
  }
  return out;
}

std::string pad(const std::string& s, size_t width, bool right) {
  const size_t w = display_width(s);
  const std::string fill(width > w ? width - w : 0, ' ');
  return right ? fill + s : s + fill;
}

bool numeric_column(const Table& t, size_t c) {
  bool any = false;
  for (const auto& row : t.rows) {
    if (c >= row.size() || row[c].is_null()) continue;
    if (!row[c].is_number()) return false;
    any = true;
  }
  return any;
}

}  // namespace

bool parse_text_format(const std::string& s, TextFormat& out) {
  if (s == "table")
    out = TextFormat::table;
  else if (s == "markdown" || s == "md")
    out = TextFormat::markdown;
  else if (s == "csv")
    out = TextFormat::csv;
  else
    return false;
  return true;
}

std::string format_cell(const Column& c, const json& v) {
  if (v.is_null()) return "-";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_number()) return v.dump();
  const double x = v.get<double>();
  if (c.format == "bytes") return format_bytes(x);
  if (c.format == "count") return format_thousands(x);
  if (!c.format.empty() && c.format.front() == '{') {
    if (!std::isfinite(x)) return fmt::format("{}", x);
    if (is_integer_value(v)) {
      try {
        return fmt::format(fmt::runtime(c.format), v.get<int64_t>());
      } catch (const fmt::format_error&) {  // "{:.3f}" asks for a float: fall through
      }
    }
    return fmt::format(fmt::runtime(c.format), x);
  }
  return auto_number(v);
}

// Units in brackets after the heading, except where the cell already says it (bytes, "+3.1%") or
// the heading does (a ratio "A / B" is dimensionless; the JSON still carries the unit).
std::string column_heading(const Column& c) {
  if (c.unit.empty() || c.format == "bytes" || c.unit == c.header || c.unit == "ratio" ||
      c.unit == "%")
    return c.header;
  return c.header + " [" + c.unit + "]";
}

std::string render_table(const Table& t, TextFormat f) {
  const size_t nc = t.columns.size();
  std::vector<std::vector<std::string>> cells;
  for (const auto& row : t.rows) {
    std::vector<std::string> line;
    for (size_t c = 0; c < nc; ++c) {
      const json v = c < row.size() ? row[c] : json();
      line.push_back(f == TextFormat::csv ? csv_value(v) : format_cell(t.columns[c], v));
    }
    cells.push_back(std::move(line));
  }
  std::string out;
  if (f == TextFormat::csv) {
    for (size_t c = 0; c < nc; ++c) out.append(c ? "," : "").append(t.columns[c].key);
    out += "\n";
    for (const auto& line : cells) {
      for (size_t c = 0; c < nc; ++c) out.append(c ? "," : "").append(line[c]);
      out += "\n";
    }
    return out;
  }
  std::vector<bool> right(nc);
  std::vector<size_t> width(nc);
  std::vector<std::string> heads(nc);
  for (size_t c = 0; c < nc; ++c) {
    right[c] = numeric_column(t, c);
    heads[c] = column_heading(t.columns[c]);
    if (f == TextFormat::markdown) heads[c] = md_escape(heads[c]);
    width[c] = std::max<size_t>(display_width(heads[c]), 3);
    for (auto& line : cells) {
      if (f == TextFormat::markdown) line[c] = md_escape(line[c]);
      width[c] = std::max(width[c], display_width(line[c]));
    }
  }
  if (f == TextFormat::markdown) {
    if (!t.title.empty()) out += "**" + md_escape(t.title) + "**\n\n";
    out += "|";
    for (size_t c = 0; c < nc; ++c)
      out.append(" ").append(pad(heads[c], width[c], right[c])).append(" |");
    out += "\n|";
    for (size_t c = 0; c < nc; ++c)
      out +=
          right[c] ? std::string(width[c] + 1, '-') + ":|" : std::string(width[c] + 2, '-') + "|";
    out += "\n";
    for (const auto& line : cells) {
      out += "|";
      for (size_t c = 0; c < nc; ++c)
        out.append(" ").append(pad(line[c], width[c], right[c])).append(" |");
      out += "\n";
    }
    return out;
  }
  if (!t.title.empty()) out += t.title + "\n";
  std::string rule;
  for (size_t c = 0; c < nc; ++c) {
    out.append(c ? "  " : "").append(pad(heads[c], width[c], right[c]));
    rule.append(c ? "  " : "").append(width[c], '-');
  }
  // No trailing spaces: a left-aligned last column is not padded.
  const auto trim = [](std::string s) {
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
  };
  out = trim(out) + "\n" + rule + "\n";
  for (const auto& line : cells) {
    std::string l;
    for (size_t c = 0; c < nc; ++c)
      l.append(c ? "  " : "").append(pad(line[c], width[c], right[c]));
    out += trim(l) + "\n";
  }
  return out;
}

std::string render_report(const Report& r, TextFormat f, const std::string& only_table) {
  std::string out;
  bool first = true;
  for (const Table& t : r.tables) {
    if (!only_table.empty() && t.id != only_table) continue;
    if (!first) out += "\n";
    first = false;
    if (f == TextFormat::csv) out += "# " + t.id + (t.title.empty() ? "" : ": " + t.title) + "\n";
    out += render_table(t, f);
  }
  if (!only_table.empty() || r.observations.empty()) return out;
  out += "\n";
  for (const std::string& o : r.observations) {
    if (f == TextFormat::csv)
      out += "# " + o + "\n";
    else
      out += "- " + o + "\n";
  }
  return out;
}

}  // namespace flashlab
