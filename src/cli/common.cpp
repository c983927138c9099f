#include "cli/common.h"

#include <iostream>

#include "registry.h"
#include "report/json_doc.h"
#include "util/error.h"
#include "util/files.h"

namespace flashlab::cli {

void add_output_options(CLI::App* sub, OutputOptions& o) {
  sub->add_option("--json", o.json, "also write the report as JSON to FILE ('-' for stdout)")
      ->type_name("FILE");
  sub->add_option("--format", o.format, "how tables print: table, markdown or csv")
      ->type_name("FMT")
      ->capture_default_str();
  sub->add_option("--table", o.table, "print only the table with this id")->type_name("ID");
}

TextFormat check_output_options(const OutputOptions& o) {
  TextFormat f;
  if (!parse_text_format(o.format, f))
    throw UsageError("unknown --format '" + o.format + "' (known: table, markdown, csv)");
  if (!o.json.empty() && o.json != "-") check_output_file(o.json);
  return f;
}

std::string version_ids_help() {
  std::string s = "comma-separated version ids (";
  for (const VersionInfo& v : versions()) s.append(v.id).append(", ");
  s.resize(s.size() - 2);
  s.append(") or all");
  return s;
}

namespace {

void check_table(const Report& r, const std::string& id) {
  if (id.empty()) return;
  std::string ids;
  for (const Table& t : r.tables) {
    if (t.id == id) return;
    ids += (ids.empty() ? "" : ", ") + t.id;
  }
  throw UsageError("no table '" + id + "' in this report (tables: " + ids + ")");
}

void write_json(const Report& r, const OutputOptions& o) {
  const std::string text = to_json(r).dump(2) + "\n";
  if (o.json == "-")
    std::cout << text << std::flush;
  else if (!o.json.empty())
    write_file_atomic(o.json, text);
}

}  // namespace

int emit(const Report& r, const OutputOptions& o) {
  const TextFormat f = check_output_options(o);
  check_table(r, o.table);
  write_json(r, o);
  if (o.json != "-") std::cout << render_report(r, f, o.table) << std::flush;
  return r.ok ? 0 : kExitFailed;
}

int emit_sections(const std::vector<std::pair<std::string, Report>>& sections, const Report& merged,
                  const OutputOptions& o) {
  const TextFormat f = check_output_options(o);
  check_table(merged, o.table);
  write_json(merged, o);
  if (o.json != "-") {
    bool first = true;
    for (const auto& [heading, r] : sections) {
      if (!o.table.empty()) {
        bool has = false;
        for (const Table& t : r.tables) has = has || t.id == o.table;
        if (!has) continue;
      }
      if (!first) std::cout << "\n";
      first = false;
      if (f == TextFormat::markdown)
        std::cout << "### " << heading << "\n\n";
      else if (f == TextFormat::csv)
        std::cout << "# == " << heading << " ==\n";
      else
        std::cout << "== " << heading << " ==\n\n";
      std::cout << render_report(r, f, o.table);
    }
    std::cout << std::flush;
  }
  return merged.ok ? 0 : kExitFailed;
}

}  // namespace flashlab::cli
