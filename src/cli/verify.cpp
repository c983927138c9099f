// flashlab verify REPORT.json [--rerun]: checks a hand-in report against the tree it is run in
// (src/course/verify.h).
#include "course/verify.h"

#include "cli/common.h"
#include "util/progress.h"

namespace flashlab::cli {

void register_verify(CLI::App& app, Action& action) {
  static VerifyOptions o;
  static OutputOptions out;
  static const std::vector<std::string> tables = {"sources", "rerun"};
  auto* sub = app.add_subcommand(
      "verify", "check a report against this tree: schema, source hashes, and (--rerun) errors");
  sub->add_option("report", o.report, "a report written with --json")->required();
  sub->add_flag("--rerun", o.rerun,
                "run the report's configuration again here and compare its errors (run and "
                "gradcheck reports)");
  sub->add_option("--root", o.root, "the tree whose sources are hashed")->capture_default_str();
  add_output_options(sub, out, tables);
  sub->footer(R"(Examples:
  flashlab run --versions ex1-ds --dtype fp64 -N 256 --json handin.json
  flashlab verify handin.json
  flashlab verify handin.json --rerun

Exit status: 0 everything matches, 1 a source or a rerun error differs, 2 bad input (no such
file, not JSON, not a flashlab.report/v1 report, no sources recorded).)");
  sub->callback([&action] {
    action = [] {
      const Outputs checked = check_outputs(out, tables, {}, {o.report});
      Progress progress;
      const Report r = verify_report(o, progress);
      progress.clear();
      return emit(r, checked);
    };
  });
}

}  // namespace flashlab::cli
