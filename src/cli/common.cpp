#include "cli/common.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "report/json_doc.h"
#include "run/registry.h"
#include "run/validate.h"
#include "util/error.h"

namespace flashlab::cli {

std::string one_of(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i)
    s += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return s;
}

void add_output_options(CLI::App* sub, OutputOptions& o,
                        const std::vector<std::string>& table_ids) {
  sub->add_option("--json", o.json, "also write the report as JSON to FILE ('-' for stdout)")
      ->type_name("FILE");
  sub->add_option("--format", o.format, "how tables print: table, markdown or csv")
      ->type_name("FMT")
      ->capture_default_str();
  sub->add_option("--table", o.table, "print only the table with this id: " + one_of(table_ids))
      ->type_name("ID");
}

Outputs check_outputs(const OutputOptions& o, const std::vector<std::string>& table_ids,
                      const std::vector<OutputTarget>& others,
                      const std::vector<std::string>& inputs) {
  Outputs out;
  if (!parse_text_format(o.format, out.format))
    throw UsageError("unknown --format '" + o.format + "' (known: table, markdown, csv)");
  if (!o.table.empty() &&
      std::find(table_ids.begin(), table_ids.end(), o.table) == table_ids.end()) {
    std::string ids;
    for (const std::string& id : table_ids) ids += (ids.empty() ? "" : ", ") + id;
    throw UsageError("no table '" + o.table + "' in this report (tables: " + ids + ")");
  }
  out.table = o.table;
  std::vector<OutputTarget> all = others;
  if (!o.json.empty()) {
    out.json = output_file("--json", o.json);
    all.push_back(out.json);
  }
  check_distinct(all, inputs);
  for (const OutputTarget& t : all) out.text_to_stdout = out.text_to_stdout && !t.to_stdout();
  return out;
}

std::string json_text(const Report& r) {
  return to_json(r).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {

// alias -> the option it stands for
std::map<const CLI::Option*, const CLI::Option*>& aliases() {
  static std::map<const CLI::Option*, const CLI::Option*> map;
  return map;
}

}  // namespace

CLI::Option* mark_alias(CLI::Option* alias, const CLI::Option* primary) {
  const std::string name = primary->get_name();
  alias->description("older spelling of " + name);
  alias->type_name(primary->get_type_name());
  if (primary->get_delimiter() != '\0') alias->delimiter(primary->get_delimiter());
  // Both spellings given would leave one of the values unread, whichever CLI11 stored last.
  alias->check(CLI::Validator(
      [primary, name](std::string&) {
        return primary->count() > 0
                   ? "the same option as " + name + " (its older spelling): give one"
                   : std::string();
      },
      ""));
  aliases()[alias] = primary;
  return alias;
}

const CLI::Option* alias_of(const CLI::Option* opt) {
  const auto it = aliases().find(opt);
  return it == aliases().end() ? nullptr : it->second;
}

CLI::Option* add_causal_option(CLI::App* sub, std::string& value, const std::string& help,
                               const std::string& value_text) {
  // The value may be left out: CLI11 then takes the default string, which is therefore the value
  // of `--causal` alone, not the default of the command (that is `value` as it stands).
  return sub->add_option("--causal", value, help)
      ->expected(0, 1)
      ->default_str("yes")
      ->option_text(value_text);
}

std::vector<bool> parse_causal(const std::string& value) {
  // CLI11 does not validate an empty value of an option whose value may be left out.
  if (value.empty()) throw UsageError("--causal: an empty value is not allowed");
  std::vector<bool> masks;
  const auto add = [&masks](bool causal) {
    if (std::find(masks.begin(), masks.end(), causal) == masks.end()) masks.push_back(causal);
  };
  for (size_t start = 0;;) {
    const size_t comma = value.find(',', start);
    const std::string item =
        value.substr(start, comma == std::string::npos ? comma : comma - start);
    if (item == "yes") {
      add(true);
    } else if (item == "no") {
      add(false);
    } else if (item == "both") {
      add(false);
      add(true);
    } else {
      throw UsageError("unknown --causal '" + (item.empty() ? value : item) +
                       "' (known: yes, no, or a list of them such as no,yes)");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return masks;
}

void parse_window(const std::string& value, int64_t& left, int64_t& right) {
  left = right = -1;
  if (value.empty()) return;
  const auto bad = [&value] {
    return UsageError(
        "--window takes LEFT,RIGHT: two integers, each -1 (unbounded) or more (got '" + value +
        "')");
  };
  const size_t comma = value.find(',');
  if (comma == std::string::npos) throw bad();
  const auto number = [&bad](const std::string& t) {
    if (t.empty() || t.size() > 9) throw bad();
    size_t i = t[0] == '-' ? 1 : 0;
    if (i == t.size()) throw bad();
    for (; i < t.size(); ++i)
      if (t[i] < '0' || t[i] > '9') throw bad();
    const int64_t x = std::stoll(t);
    if (x < -1) throw bad();
    return x;
  };
  left = number(value.substr(0, comma));
  right = number(value.substr(comma + 1));
}

std::vector<int64_t> parse_seqlens(const std::string& value, const char* option) {
  const auto bad = [&] {
    return UsageError(
        fmt::format("{} takes the sequences' lengths, comma-separated integers 0..{} (got '{}')",
                    option, kMaxN, value));
  };
  // Counted before anything is kept for them.
  if (std::count(value.begin(), value.end(), ',') >= kMaxSequences)
    throw UsageError(fmt::format("{} gives more than {} sequences", option, kMaxSequences));
  std::vector<int64_t> lens;
  size_t start = 0;
  while (true) {
    const size_t comma = value.find(',', start);
    const std::string t = value.substr(start, comma == std::string::npos ? comma : comma - start);
    if (t.empty() || t.size() > 7 || t.find_first_not_of("0123456789") != std::string::npos)
      throw bad();
    const int64_t x = std::stoll(t);
    if (x > kMaxN) throw bad();
    lens.push_back(x);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return lens;
}

std::string version_ids_help() {
  std::string s = "comma-separated version ids (";
  for (const VersionInfo& v : versions()) s.append(v.id).append(", ");
  s.resize(s.size() - 2);
  s.append(") or all");
  return s;
}

namespace {

// A table the command can produce may still be absent (one that needs a GPU).
void check_table(const Report& r, const std::string& id) {
  if (id.empty()) return;
  std::string ids;
  for (const Table& t : r.tables) {
    if (t.id == id) return;
    ids += (ids.empty() ? "" : ", ") + t.id;
  }
  throw UsageError("no table '" + id + "' in this report (tables: " + ids + ")");
}

// The JSON and the text join whatever the command staged; commit() writes the streams (the text
// on stdout among them) before it renames any file into place.
void write_outputs(const Report& r, const Outputs& out, OutputSet& files, const std::string& text) {
  if (out.json.kind != OutputTarget::Kind::none) files.add_file(out.json, json_text(r));
  if (out.text_to_stdout && !text.empty()) {
    OutputTarget stdout_target;
    stdout_target.kind = OutputTarget::Kind::stream;
    stdout_target.fd = 1;
    files.add_file(stdout_target, text);
  }
  files.commit();
}

}  // namespace

int emit(const Report& r, const Outputs& out, OutputSet& files) {
  check_table(r, out.table);
  // A report of versions is what a student hands in: say so when this binary does not run the
  // sources in front of them.
  if (!r.version_ids.empty()) {
    const std::vector<std::string> changed = changed_since_build();
    if (!changed.empty())
      std::fprintf(
          stderr,
          "flashlab: warning: this flashlab is older than its sources (%s%s changed "
          "since it was built): rebuild it before handing in its reports\n",
          changed.front().c_str(),
          changed.size() > 1 ? fmt::format(" and {} more", changed.size() - 1).c_str() : "");
  }
  const std::string text = out.text_to_stdout ? render_report(r, out.format, out.table) : "";
  write_outputs(r, out, files, text);
  return r.ok ? 0 : kExitFailed;
}

int emit(const Report& r, const Outputs& out) {
  OutputSet files;
  return emit(r, out, files);
}

int emit_sections(const std::vector<Section>& sections, const Report& merged, const Outputs& out) {
  check_table(merged, out.table);
  std::string text;
  for (const Section& s : sections) {
    std::string only;  // the section's own id of the one table asked for
    if (!out.table.empty()) {
      for (const Table& t : s.report.tables)
        if (s.name + "." + t.id == out.table) only = t.id;
      if (only.empty()) continue;
    }
    if (!text.empty()) text += "\n";
    if (out.format == TextFormat::markdown)
      text += "### " + s.heading + "\n\n";
    else if (out.format == TextFormat::csv)
      text += "# == " + s.heading + " ==\n";
    else
      text += "== " + s.heading + " ==\n\n";
    text += render_report(s.report, out.format, only);
  }
  OutputSet files;
  write_outputs(merged, out, files, out.text_to_stdout ? text : "");
  return merged.ok ? 0 : kExitFailed;
}

}  // namespace flashlab::cli
