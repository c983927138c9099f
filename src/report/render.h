// A Report as people read it: an aligned terminal table, markdown, or CSV. Every cell is formatted
// from the Report's typed values by its Column.format, so the same data gives the same text in
// each style.
//
// Column.format: ""        auto (integers as is, other numbers with 4 significant digits)
//                "{...}"   an fmt format for the number, e.g. "{:.3f}", "{:.2e}"
//                "bytes"   binary units: 268435456 -> "256.0 MiB"
//                "count"   thousands separated: 65536 -> "65,536"
// Booleans print as yes/no, null (not measured) as "-".
#pragma once

#include <string>

#include "report/report.h"

namespace flashlab {

enum class TextFormat { table, markdown, csv };

bool parse_text_format(const std::string& s, TextFormat& out);

// One cell as text, by the column's format.
std::string format_cell(const Column& c, const json& v);

// The column heading with its unit: "median [ms]" (the unit is left out for "bytes" cells, which
// carry their own).
std::string column_heading(const Column& c);

std::string render_table(const Table& t, TextFormat f);
// All tables, then the observations (a bullet list; in CSV as "# " lines).
// only_table: when not empty, just that table (by id) and no observations.
std::string render_report(const Report& r, TextFormat f, const std::string& only_table = "");

}  // namespace flashlab
