// The whole command line as one CLI11 app: the subcommands, the help footer, and the two rules
// every option follows. main() parses it; the tests walk it to fuzz every subcommand and option.
#include <charconv>
#include <memory>

#include "build_info.h"
#include "cli/common.h"
#include "run/registry.h"
#include "util/error.h"

namespace flashlab::cli {

namespace {

const char* kFooter = R"(Examples:
  flashlab list
  flashlab run --versions all -N 1024 -d 64 --dtype fp32
  flashlab run --backend cuda --dtype bf16 -B 4 -H 16 -N 4096 -d 128 --causal --json run.json
  flashlab gradcheck
  flashlab lab all --lang zh
  flashlab bench --backend cuda -N 1024,4096 -d 64,128 --dtype bf16 --causal yes --json bench.json
  flashlab plot bench.json -o bench.svg
  flashlab verify run.json --rerun
  flashlab new myrung --from atomic-dq

Exit status: 0 ok, 1 a check failed (e.g. a version over its error budget), 2 bad input,
3 the work itself failed. `flashlab COMMAND --help` shows each command's options; an option
that several commands take is spelled the same in each (bench takes lists where run takes one).)";

// CLI11 reads integers with strtoll(..., base 0): "0100" would be octal 64, "0x10" hex 16, and a
// value too large for the type would saturate silently. Integer options take decimal digits only:
// leading zeros are decimal, unsigned options take no sign, and a value that does not fit is
// refused. The text is rewritten without leading zeros, so CLI11's own conversion reads it as
// decimal.
CLI::Validator decimal_integer(bool is_unsigned) {
  return CLI::Validator(
      [is_unsigned](std::string& s) -> std::string {
        size_t i = 0;
        const bool negative = !s.empty() && s[0] == '-';
        if (!s.empty() && (s[0] == '-' || s[0] == '+')) ++i;
        // A list where one value is taken (run -N 1024,4096): bench sweeps lists, run does not.
        if (s.find(',') != std::string::npos)
          return "'" + s + "' is a list, but this option takes one value";
        if (i == s.size() || s.find_first_not_of("0123456789", i) != std::string::npos)
          return "'" + s + "' is not a decimal integer";
        if (negative && is_unsigned && s.find_first_not_of('0', i) != std::string::npos)
          return "must not be negative (got " + s + ")";
        const size_t first = std::min(s.find_first_not_of('0', i), s.size() - 1);
        const std::string digits = s.substr(first);
        const std::string canonical = (negative && digits != "0" ? "-" : "") + digits;
        bool fits;
        if (is_unsigned) {
          uint64_t v;
          fits = std::from_chars(digits.data(), digits.data() + digits.size(), v).ec == std::errc();
        } else {
          int64_t v;
          fits = std::from_chars(canonical.data(), canonical.data() + canonical.size(), v).ec ==
                 std::errc();
        }
        if (!fits) return "'" + s + "' is out of range";
        s = canonical;
        return "";
      },
      "");
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& s) { return s.empty() ? std::string("an empty value is not allowed") : ""; },
      "");
}

// --help shows one spelling per quantity: an older spelling kept for scripts is not listed.
class Help : public CLI::Formatter {
 public:
  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    return alias_of(opt) ? std::string() : CLI::Formatter::make_option(opt, is_positional);
  }
};

}  // namespace

void check_inline_values(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") return;  // what follows are values
    if (a.size() > 3 && a.rfind("--", 0) == 0 && a.back() == '=')
      throw UsageError(a.substr(0, a.size() - 1) + ": an empty value is not allowed");
  }
}

void build_app(CLI::App& app, Action& action) {
  app.name("flashlab");
  app.description(
      "flashlab: FlashAttention-2 forward and backward, version by version, measured against an "
      "fp64 reference");
  app.footer(kFooter);
  app.formatter(std::make_shared<Help>());  // before the subcommands, which copy it
  app.require_subcommand(1);
  app.set_version_flag(
      "--version", std::string("flashlab ") + FLASHLAB_TOOL_VERSION + " (" + built_commit() + ")");
  register_list(app, action);
  register_run(app, action);
  register_gradcheck(app, action);
  register_lab(app, action);
  register_bench(app, action);
  register_plot(app, action);
  register_verify(app, action);
  register_new(app, action);
  // The rules hold for every option that takes a value, in every subcommand.
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* opt : sub->get_options()) {
      if (opt->get_expected_max() == 0) continue;  // a flag
      opt->check(non_empty());
      const std::string type = opt->get_type_name();
      if (type == "INT" || type == "UINT") opt->transform(decimal_integer(type == "UINT"));
    }
}

}  // namespace flashlab::cli
