// flashlab: FlashAttention-2 forward and backward, version by version, against an fp64 reference.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>

#include "build_info.h"
#include "cli/common.h"
#include "util/error.h"
#include "util/files.h"

namespace {

// The line on stderr, whole: a NUL inside the message (from a report's string) is shown as \0
// rather than cutting the line short.
int fail(int status, const std::string& what) {
  std::string line = "flashlab: error: ";
  for (char c : what) {
    if (c == '\0')
      line += "\\0";
    else
      line += c;
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
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
  // Before any thread starts: signals remove staged outputs, SIGPIPE becomes EPIPE.
  install_signal_cleanup();
  CLI::App app;
  cli::Action action;
  try {
    cli::build_app(app, action);  // reads the registry, which refuses an id registered twice
  } catch (const std::exception& e) {
    return fail(cli::kExitError, e.what());
  }
  try {
    cli::check_inline_values(argc, argv);
    app.parse(argc, argv);
  } catch (const UsageError& e) {
    return fail(cli::kExitUsage, e.what());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) return fail(cli::kExitUsage, e.what());
    app.exit(e);  // --help, --version: printed to stdout, which must take it
    std::cout.flush();
    if (!std::cout) return fail(cli::kExitError, "cannot write to stdout");
    return 0;
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
