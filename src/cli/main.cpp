// flashlab: FlashAttention-2 forward and backward, version by version, against an fp64 reference.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "build_info.h"
#include "cli/common.h"
#include "util/error.h"

namespace {

int fail(int status, const std::string& what) {
  std::fprintf(stderr, "flashlab: error: %s\n", what.c_str());
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flashlab;
  CLI::App app;
  cli::Action action;
  cli::build_app(app, action);
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
