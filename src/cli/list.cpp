// flashlab list: the version ladder from the registry, and which backends this build can use.
#include <fmt/format.h>

#include "cli/common.h"
#include "cuda/runner.h"
#include "run/registry.h"
#include "util/sysinfo.h"

namespace flashlab::cli {

namespace {

// The axes of the problem beyond dense multi-head attention that `axes` takes, for people.
std::string axes_text(unsigned axes) {
  std::string s;
  if (axes & kGroupedHeads) s += "grouped heads";
  if (axes & kWindow) s += std::string(s.empty() ? "" : ", ") + "window";
  if (axes & kPacked) s += std::string(s.empty() ? "" : ", ") + "packed";
  if (axes & kPaged) s += std::string(s.empty() ? "" : ", ") + "paged";
  return s.empty() ? "-" : s;
}

// The CPU column: the axes, for the FP8 rung the one dtype it takes, for the ring its ranks.
std::string takes_text(const VersionInfo& x) {
  if (x.ring) return axes_text(x.axes) + "; --ranks R";
  if (!x.fp8) return axes_text(x.axes);
  return x.axes ? axes_text(x.axes) + "; --dtype fp8 only" : "--dtype fp8 only";
}

Report list_report() {
  Report r;
  r.command = "list";
  r.config = json::object();
  Table v{"versions",
          "Versions (each rung adds one idea to the one before)",
          {{"id", "id", "", ""},
           {"pass", "pass", "", ""},
           {"deterministic", "deterministic", "", ""},
           {"workspace", "workspace (bytes)", "", ""},
           {"takes", "takes (cpu)", "", ""},
           {"code", "code", "", ""},
           {"idea", "the one idea it adds", "", ""}},
          {}};
  Table ex{"exercises",
           "The chapter's exercises, as starter versions to finish (kernels/exercises/)",
           {{"id", "id", "", ""},
            {"pass", "pass", "", ""},
            {"code", "code", "", ""},
            {"task", "what to write", "", ""}},
           {}};
  Table cu{"cuda",
           "The CUDA side of each version, in this build and on this machine",
           {{"id", "id", "", ""},
            {"built", "built", "", ""},
            {"code", "code for", "", ""},
            {"takes", "takes", "", ""},
            {"status", "here", "", ""}},
           {}};
  for (const VersionInfo& x : versions()) {
    if (x.exercise)
      ex.rows.push_back({x.id, to_string(x.pass), x.folder, x.idea});
    else
      v.rows.push_back({x.id, to_string(x.pass), x.deterministic, x.workspace, takes_text(x),
                        x.folder, x.idea});
    const std::string why = cuda_unavailable(x);
    // A CUDA entry with no pass declares a kernel still to come (its own line says so).
    const bool built = x.cuda && (x.cuda->forward || x.cuda->backward || x.cuda->ring);
    cu.rows.push_back({x.id, built, built ? json(x.cuda_targets) : json(),
                       built ? json(axes_text(x.cuda->axes)) : json(),
                       why.empty() ? std::string("available") : "unavailable: " + why});
  }
  const cuda::DeviceInfo& d = cuda::device_info();
  Table b{
      "backends",
      "Backends of this build",
      {{"backend", "backend", "", ""}, {"built", "built", "", ""}, {"device", "device", "", ""}},
      {}};
  b.rows.push_back({"cpu", true, fmt::format("{} ({} threads)", cpu_model(), cpu_cores())});
  std::string dev = d.present
                        ? fmt::format("{} (sm_{}{}, {} SMs)", d.name, d.cc_major, d.cc_minor, d.sms)
                        : "none: " + d.why_absent;
  b.rows.push_back({"cuda", cuda_built(), dev});
  r.tables = {v, ex, cu, b};
  r.observations.push_back(
      "Every version has a CPU twin (same block schedule, plain loops over tiles); "
      "`flashlab run --versions all` puts them side by side against the fp64 reference.");
  r.observations.push_back(
      "\"takes\" names the axes of the problem beyond dense multi-head attention a version runs: "
      "grouped K/V heads (--heads-kv), a sliding window (--window), a packed batch of "
      "sequences of their own lengths (--seqlens; on the CPU every twin runs it sequence by "
      "sequence) and a paged K/V cache (--page-size); a version asked for a problem it does not "
      "take is refused with one line, and `--versions all` leaves it out. --dtype fp8 is the FP8 "
      "versions' alone (\"--dtype fp8 only\"): they quantize bf16 inputs to e4m3 themselves, and "
      "every other version refuses it with one line.");
  if (!ex.rows.empty())
    r.observations.push_back(
        "The exercises run by id (`flashlab run --versions ex1-ds`) and report `not implemented` "
        "with the file and line of the first step still to write; docs/COURSEWORK.md walks "
        "through them. `flashlab new NAME --from ID` starts a version of your own.");
  r.observations.push_back(d.present
                               ? fmt::format("--backend auto runs on the GPU ({}).", d.name)
                               : "--backend auto runs on the CPU: no CUDA device is usable here.");
  return r;
}

}  // namespace

void register_list(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("list", "the versions of the ladder and the backends built");
  static OutputOptions out;
  static const std::vector<std::string> tables = {"versions", "exercises", "cuda", "backends"};
  add_output_options(sub, out, tables);
  sub->footer(R"(Examples:
  flashlab list
  flashlab list --format markdown --table versions
  flashlab list --table cuda          # which CUDA sides this build has, and which run here
  flashlab list --json -)");
  sub->callback(
      [&action] { action = [] { return emit(list_report(), check_outputs(out, tables)); }; });
}

}  // namespace flashlab::cli
