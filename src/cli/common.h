// What every subcommand shares: the output options (--json, --format, --table), printing a Report,
// and the registration hooks main() calls.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "report/render.h"
#include "report/report.h"

namespace flashlab::cli {

// What a parsed subcommand does; returns the exit status.
using Action = std::function<int()>;

// The whole command line: every subcommand registered on `app`; `action` is set by the one parsed.
// Integer options read decimal digits only, and no option takes an empty value.
void build_app(CLI::App& app, Action& action);

struct OutputOptions {
  std::string json;  // file, "-" for stdout, empty for none
  std::string format = "table";
  std::string table;  // print only this table
};

void add_output_options(CLI::App* sub, OutputOptions& o);

// Before any work: the format is known and the JSON file can be written.
TextFormat check_output_options(const OutputOptions& o);

// Writes the JSON (atomically) and prints the text. With --json - the JSON goes to stdout and the
// text is not printed. Returns 0 when report.ok, else 1.
int emit(const Report& r, const OutputOptions& o);

// Several reports printed one after another (lab all), saved as one merged JSON document.
int emit_sections(const std::vector<std::pair<std::string, Report>>& sections, const Report& merged,
                  const OutputOptions& o);

// "comma-separated version ids (naive, tiled, ...) or all", from the registry.
std::string version_ids_help();

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
