// What every subcommand shares: the output options (--json, --format, --table), checking every
// output before any work, writing them whole, printing a Report, and the registration hooks.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "report/render.h"
#include "report/report.h"
#include "util/files.h"

namespace flashlab::cli {

// What a parsed subcommand does; returns the exit status.
using Action = std::function<int()>;

// The whole command line: every subcommand registered on `app`; `action` is set by the one parsed.
// Integer options read decimal digits only, and no option takes an empty value.
void build_app(CLI::App& app, Action& action);

// `--json=` (an empty value after '=') makes CLI11 take the next argument as the value: refused
// here, before parsing, like any other empty value. Throws UsageError.
void check_inline_values(int argc, const char* const* argv);

struct OutputOptions {
  std::string json;  // file, "-" for stdout, empty for none
  std::string format = "table";
  std::string table;  // print only this table
};

// `table_ids`: the tables the command can produce, for --table's help.
void add_output_options(CLI::App* sub, OutputOptions& o, const std::vector<std::string>& table_ids);

// The output options resolved before any work: the text format, the --table id checked against the
// tables the command can produce, the JSON target, and every output of the command (`others`: -o,
// --dump) checked against the rest and against the command's input files.
struct Outputs {
  TextFormat format = TextFormat::table;
  std::string table;
  OutputTarget json;
  bool text_to_stdout = true;  // false when an output goes to stdout
};
Outputs check_outputs(const OutputOptions& o, const std::vector<std::string>& table_ids,
                      const std::vector<OutputTarget>& others = {},
                      const std::vector<std::string>& inputs = {});

// A report as the JSON text that is written (any bytes that are not UTF-8, such as a path's, are
// replaced by U+FFFD).
std::string json_text(const Report& r);

// Stages the JSON into `files` with whatever the command staged there already, commits them all,
// and prints the text (unless an output went to stdout). Returns 0 when report.ok, else 1.
int emit(const Report& r, const Outputs& out, OutputSet& files);
int emit(const Report& r, const Outputs& out);

// Several reports printed one after another (lab all), saved as one merged JSON document whose
// table ids are "<section name>.<table id>".
struct Section {
  std::string name, heading;
  Report report;
};
int emit_sections(const std::vector<Section>& sections, const Report& merged, const Outputs& out);

// An older spelling of an option, kept so that scripts written with it still run: it sets the same
// variable as `primary`, is refused together with it, and is left out of --help (which shows one
// spelling per quantity).
CLI::Option* mark_alias(CLI::Option* alias, const CLI::Option* primary);
template <class T>
CLI::Option* add_alias(CLI::App* sub, const std::string& name, const CLI::Option* primary,
                       T& value) {
  return mark_alias(sub->add_option(name, value), primary);
}
// The option an alias stands for; null for any other option.
const CLI::Option* alias_of(const CLI::Option* opt);

// --causal, spelled alike in run and bench: `--causal yes`, `--causal no`, or a list of them
// (`--causal no,yes`, bench's sweep); `--causal` alone means yes, and `both` is the older spelling
// of no,yes. `value` holds the text; parse_causal reads it.
CLI::Option* add_causal_option(CLI::App* sub, std::string& value, const std::string& help,
                               const std::string& value_text);
// The masks in the order given, each once (false: not causal). Throws UsageError.
std::vector<bool> parse_causal(const std::string& value);

// --window LEFT,RIGHT: two integers, each -1 (no bound on that side) or more; "" means no window.
void parse_window(const std::string& value, int64_t& left, int64_t& right);

// --seqlens L1,L2,...: the lengths of a packed batch's sequences, each 0..kMaxN (`option` names
// the flag in the error). Throws UsageError.
std::vector<int64_t> parse_seqlens(const std::string& value, const char* option);

// "comma-separated version ids (naive, tiled, ...) or all", from the registry.
std::string version_ids_help();

// "a, b or c"
std::string one_of(const std::vector<std::string>& items);

// Exit statuses.
inline constexpr int kExitFailed = 1;  // a check in the report failed
inline constexpr int kExitUsage = 2;   // bad input
inline constexpr int kExitError = 3;   // the work itself failed

void register_list(CLI::App& app, Action& action);
void register_run(CLI::App& app, Action& action);
void register_gradcheck(CLI::App& app, Action& action);
void register_lab(CLI::App& app, Action& action);
void register_bench(CLI::App& app, Action& action);
void register_plot(CLI::App& app, Action& action);
void register_verify(CLI::App& app, Action& action);  // cli/verify.cpp
void register_new(CLI::App& app, Action& action);     // cli/new.cpp

}  // namespace flashlab::cli
