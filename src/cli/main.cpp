// flashlab: FlashAttention-2 forward and backward, version by version, against an fp64 reference.
#include <malloc.h>

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
  // Buffers of 1 MiB and more come from the system and go back to it when freed. glibc would
  // otherwise raise this threshold as large buffers are freed and keep later ones in its heap after
  // they are freed, so the resident peak would exceed what a run holds by up to twice the largest
  // buffer freed; the memory check before a run counts what a run holds.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  CLI::App app;
  cli::Action action;
  cli::build_app(app, action);
  try {
    cli::check_inline_values(argc, argv);
    app.parse(argc, argv);
  } catch (const UsageError& e) {
    return fail(cli::kExitUsage, e.what());
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
