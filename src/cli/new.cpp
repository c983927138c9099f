// flashlab new NAME [--from ID]: a new version folder from the template or a copy of a rung
// (src/course/new_version.h).
#include <fmt/format.h>

#include <iostream>

#include "cli/common.h"
#include "course/new_version.h"

namespace flashlab::cli {

void register_new(CLI::App& app, Action& action) {
  static NewVersionOptions o;
  auto* sub = app.add_subcommand(
      "new", "start a version of your own: kernels/NN_NAME/ from the template or a copy of a rung");
  sub->add_option("name", o.name, "the new version's id (lowercase, digits, '-')")->required();
  sub->add_option("--from", o.from, "copy this version's folder instead of the template");
  sub->add_option("--root", o.root, "the source tree")->capture_default_str();
  sub->footer(R"(Examples:
  flashlab new myrung                      # from kernels/template (README.md says what to fill in)
  flashlab new myrung --from atomic-dq     # a copy of kernels/04_atomic_dq to change

Nothing outside the new folder changes: the build globs kernels/ and registers it.)");
  sub->callback([&action] {
    action = [] {
      const NewVersionResult r = new_version(o);
      std::string files;
      for (const std::string& f : r.files) files += (files.empty() ? "" : ", ") + f;
      std::cout << fmt::format("created {} from {}: {}\n\nnext:\n", r.folder, r.source, files);
      for (const std::string& line : r.next) std::cout << "  " << line << "\n";
      std::cout << "(with the cuda preset: cmake --build --preset cuda and build/cuda/flashlab)\n"
                << std::flush;
      return 0;
    };
  });
}

}  // namespace flashlab::cli
