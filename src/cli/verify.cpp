// flashlab verify REPORT.json [--rerun]: checks a hand-in report against the tree it is run in
// (src/course/verify.h); with several reports or a folder, grades a class.
#include "course/verify.h"

#include <filesystem>

#include "cli/common.h"
#include "util/progress.h"

namespace flashlab::cli {

void register_verify(CLI::App& app, Action& action) {
  static std::vector<std::string> paths;
  static VerifyOptions o;
  static std::vector<std::string> require;
  static OutputOptions out;
  static const std::vector<std::string> tables = {"sources", "rerun", "class"};
  auto* sub = app.add_subcommand(
      "verify",
      "grade hand-in reports against this tree: schema, verdicts, budgets, source hashes, and "
      "(--rerun) the figures themselves; several reports or a folder give a class table");
  sub->add_option("reports", paths, "reports written with --json, or folders of them")->required();
  sub->add_flag("--rerun", o.rerun,
                "run each report's configuration again here (with the binary built from the tree) "
                "and compare every recorded error and count (run, gradcheck and lab reports)");
  sub->add_option("--root", o.root, "the tree whose sources are hashed")->capture_default_str();
  sub->add_option("--require", require,
                  "what a hand-in must hold, KEY=VALUE, repeatable: versions=ID,ID command=CMD "
                  "dtype=fp64 backend=cpu min-n=256 budget-factor=4");
  add_output_options(sub, out, tables);
  sub->footer(R"(Examples:
  flashlab run --versions ex1-ds --dtype fp64 -N 256 --json handin.json
  flashlab verify handin.json
  flashlab verify handin.json --rerun
  flashlab verify handins/ --rerun --require versions=ex1-ds --require dtype=fp64 --json class.json

--rerun compares errors bit for bit on the CPU in fp64 for a deterministic version; otherwise
each recorded error must be within 5% of the rerun's (or 1% of the budget, whichever is wider).
A lab's counts are compared exactly, its times not at all.

Exit status: 0 everything matches (every hand-in passes), 1 a report fails its own checks, a
source, budget, verdict or rerun figure differs, or a hand-in misses the policy, 2 bad input (no
such file, not JSON, not a flashlab.report/v1 report, no sources recorded); with several
hand-ins one that is refused is a row of the table, and the exit status 1.)");
  sub->callback([&action] {
    action = [] {
      const Outputs checked = check_outputs(out, tables, {}, paths);
      std::error_code ec;
      const bool one =
          paths.size() == 1 && require.empty() && !std::filesystem::is_directory(paths.front(), ec);
      Progress progress;
      Report r;
      if (one) {
        o.report = paths.front();
        r = verify_report(o, progress);
      } else {
        r = verify_class({paths, o.root, o.rerun, require}, progress);
      }
      progress.clear();
      return emit(r, checked);
    };
  });
}

}  // namespace flashlab::cli
