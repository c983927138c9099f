// flashlab new NAME [--from ID]: a new version folder from the template or a copy of a rung
// (src/course/new_version.h).
#include <fmt/format.h>

#include "cli/common.h"
#include "course/new_version.h"

namespace flashlab::cli {

namespace {

const std::vector<std::string> kTables = {"files"};

Report new_report(const NewVersionOptions& o, const NewVersionResult& r) {
  Report rep;
  rep.command = "new";
  rep.config = {{"name", o.name}, {"from", o.from}, {"root", o.root}};
  Table files{"files",
              fmt::format("Created {} from {}", r.folder, r.source),
              {{"file", "file", "", ""}},
              {}};
  for (const std::string& f : r.files) files.rows.push_back({r.folder + "/" + f});
  rep.tables = {files};
  rep.observations.push_back(fmt::format(
      "{} is written whole; nothing outside it changed: the next build finds it by itself.",
      r.folder));
  for (const std::string& line : r.next) rep.observations.push_back("next: " + line);
  rep.observations.push_back(
      "with the cuda preset: cmake --build --preset cuda and build/cuda/flashlab");
  return rep;
}

}  // namespace

void register_new(CLI::App& app, Action& action) {
  static NewVersionOptions o;
  static OutputOptions out;
  auto* sub = app.add_subcommand(
      "new", "start a version of your own: kernels/NN_NAME/ from the template or a copy of a rung");
  sub->add_option("name", o.name, "the new version's id (lowercase, digits, '-')")->required();
  sub->add_option("--from", o.from, "copy this version's folder instead of the template");
  sub->add_option("--root", o.root, "the source tree")->capture_default_str();
  add_output_options(sub, out, kTables);
  sub->footer(R"(Examples:
  flashlab new myrung                      # from kernels/template (README.md says what to fill in)
  flashlab new myrung --from atomic-dq     # a copy of kernels/04_atomic_dq to change

Nothing outside the new folder changes: the build globs kernels/ and registers it. A folder with
several entries (hopper and hopper-deterministic) is copied with each id renamed (NAME and
NAME-deterministic); two `new` at once take turns.)");
  sub->callback([&action] {
    action = [] {
      const Outputs outputs = check_outputs(out, kTables);
      // The folder is new's work and its report the only word of it: with stdout closed from the
      // start, refuse before creating anything rather than create a folder that nobody is told of.
      const bool to_stdout = outputs.text_to_stdout ||
                             (outputs.json.kind == OutputTarget::Kind::stream && outputs.json.fd == 1);
      if (to_stdout && stream_was_closed(1))
        throw std::runtime_error(
            "cannot write to stdout: it is closed; nothing was created (give new an open stdout, "
            "even >/dev/null)");
      const NewVersionResult r = new_version(o);
      return emit(new_report(o, r), outputs);
    };
  });
}

}  // namespace flashlab::cli
