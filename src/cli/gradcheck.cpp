// flashlab gradcheck: the lecture's demo 1, as the gradcheck lab computes it.
#include "cli/common.h"
#include "labs/lab.h"
#include "run/validate.h"
#include "util/error.h"

namespace flashlab::cli {

void register_gradcheck(CLI::App& app, Action& action) {
  static LabOptions opt;
  static OutputOptions out;
  static std::string chosen;
  auto* sub = app.add_subcommand(
      "gradcheck",
      "gradient check: tiled forward and the backward versions vs the standard backward vs "
      "finite differences (N = 48, d = 16, blocks 16x12, fp64, causal and not, and 4 query heads "
      "over 2 K/V heads with a window)");
  sub->add_option("--versions", chosen,
                  "the backward versions to check, e.g. an exercise (default: every backward of "
                  "the ladder)");
  sub->add_option("--lang", opt.lang, "language of headings and observations: en or zh")
      ->capture_default_str();
  sub->add_option("--seed", opt.seed, "seed of the inputs")->capture_default_str();
  const LabInfo* lab = find_lab("gradcheck");
  if (!lab) throw std::logic_error("the gradcheck lab is not part of this build");
  static const std::vector<std::string> tables(lab->tables.begin(), lab->tables.end());
  add_output_options(sub, out, tables);
  sub->footer(R"(Examples:
  flashlab gradcheck
  flashlab gradcheck --lang zh
  flashlab gradcheck --versions ex1-ds
  flashlab gradcheck --json gradcheck.json)");
  sub->callback([&action] {
    action = [] {
      if (opt.lang != "en" && opt.lang != "zh")
        throw UsageError("unknown --lang '" + opt.lang + "' (known: en, zh)");
      const Outputs o = check_outputs(out, tables);
      opt.backend = "cpu";
      if (!chosen.empty()) opt.versions = parse_versions(chosen);
      Report r = find_lab("gradcheck")->run(opt);
      r.command = "gradcheck";
      return emit(r, o);
    };
  });
}

}  // namespace flashlab::cli
