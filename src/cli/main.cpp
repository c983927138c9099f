// flashlab: FlashAttention-2 forward and backward, version by version, against an fp64 reference.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "build_info.h"
#include "cli/common.h"
#include "util/error.h"

namespace {

const char* kFooter = R"(Examples:
  flashlab list
  flashlab run --versions all -N 1024 -d 64 --dtype fp32
  flashlab run --backend cuda --dtype bf16 -B 4 -H 16 -N 4096 -d 128 --causal --json run.json
  flashlab gradcheck
  flashlab lab all --lang zh
  flashlab bench --backend cuda -d 128 --dtype bf16 --json bench.json
  flashlab plot bench.json -o bench.svg
  flashlab verify run.json --rerun
  flashlab new myrung --from atomic-dq

Exit status: 0 ok, 1 a check failed (e.g. a version over its error budget), 2 bad input,
3 the work itself failed. `flashlab COMMAND --help` shows each command's options.)";

int fail(int status, const std::string& what) {
  std::fprintf(stderr, "flashlab: error: %s\n", what.c_str());
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flashlab;
  CLI::App app{
      "flashlab: FlashAttention-2 forward and backward, version by version, measured "
      "against an fp64 reference"};
  app.name("flashlab");
  app.footer(kFooter);
  app.require_subcommand(1);
  app.set_version_flag(
      "--version", std::string("flashlab ") + FLASHLAB_VERSION + " (" + FLASHLAB_GIT_COMMIT + ")");
  cli::Action action;
  cli::register_list(app, action);
  cli::register_run(app, action);
  cli::register_gradcheck(app, action);
  cli::register_lab(app, action);
  cli::register_bench(app, action);
  cli::register_plot(app, action);
  cli::register_verify(app, action);
  cli::register_new(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return fail(cli::kExitUsage, e.what());
  }
  try {
    return action ? action() : cli::kExitUsage;
  } catch (const UsageError& e) {
    return fail(cli::kExitUsage, e.what());
  } catch (const NotImplemented& e) {
    return fail(cli::kExitFailed, e.what());
  } catch (const std::exception& e) {
    return fail(cli::kExitError, e.what());
  }
}
