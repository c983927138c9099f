// flashlab lab list | NAME | all: the chapter labs (labs/NN_name/), printed or saved as JSON.
#include "labs/lab.h"

#include <fmt/format.h>

#include <algorithm>
#include <new>

#include "cli/common.h"
#include "run/config.h"
#include "run/validate.h"
#include "util/error.h"
#include "util/progress.h"

namespace flashlab::cli {

namespace {

struct LabArgs {
  std::string name = "list";
  std::string lang = "en";
  std::string backend = "auto";
  uint64_t seed = 0;
  std::string versions;  // empty: the lab's own choice
  OutputOptions out;
};

std::string known_labs() {
  std::string s;
  for (const LabInfo& l : labs()) s += (s.empty() ? "" : ", ") + std::string(l.name);
  return s;
}

// The tables `lab NAME` can produce; `lab all` prefixes each with its lab's name.
std::vector<std::string> lab_tables(const std::string& name) {
  if (name == "list") return {"labs"};
  std::vector<std::string> ids;
  for (const LabInfo& l : labs())
    if (name == "all" || name == l.name)
      for (std::string_view id : l.tables)
        ids.push_back((name == "all" ? std::string(l.name) + "." : std::string()) +
                      std::string(id));
  return ids;
}

std::vector<std::string> every_lab_table() {
  std::vector<std::string> ids = lab_tables("list");
  for (const LabInfo& l : labs())
    for (const std::string& id : lab_tables(l.name)) ids.push_back(id);
  for (const std::string& id : lab_tables("all")) ids.push_back(id + " (lab all)");
  return ids;
}

Report list_labs(const std::string& lang) {
  Report r;
  r.command = "lab list";
  Table t{"labs",
          "Labs (in the order `lab all` runs them)",
          {{"name", "name", "", ""}, {"title", "title", "", ""}, {"folder", "code", "", ""}},
          {}};
  for (const LabInfo& l : labs())
    t.rows.push_back({l.name, lang == "zh" ? l.title_zh : l.title_en, l.folder});
  r.tables.push_back(t);
  r.observations.push_back(
      lang == "zh" ? "用 `flashlab lab NAME` 运行其中一个，`flashlab lab all` 全部运行。"
                   : "Run one with `flashlab lab NAME`, or all of them with "
                     "`flashlab lab all`.");
  return r;
}

// Prefix a lab's table ids and figure names with its name, so `lab all` is one document.
void merge_into(Report& all, const std::string& name, const Report& r) {
  for (Table t : r.tables) {
    t.id = name + "." + t.id;
    all.tables.push_back(std::move(t));
  }
  for (const std::string& o : r.observations) all.observations.push_back("[" + name + "] " + o);
  if (r.figures.is_object())
    for (auto it = r.figures.begin(); it != r.figures.end(); ++it)
      all.figures[name + "." + it.key()] = it.value();
  all.config["labs"][name] = r.config;
  all.ok = all.ok && r.ok;
  for (const std::string& id : r.version_ids)
    if (std::find(all.version_ids.begin(), all.version_ids.end(), id) == all.version_ids.end())
      all.version_ids.push_back(id);
}

// One lab; a failure inside it (a student's version that says `not implemented`, or throws) is
// that lab's FAIL line, and the rest of the work (the other labs of `lab all`, the JSON) goes on.
// Bad input is still the command's error.
Report run_isolated(const LabInfo& lab, const LabOptions& opt) {
  try {
    return lab.run(opt);
  } catch (const UsageError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    Report r;
    r.config = json::object();
    r.observations.push_back(fmt::format("FAIL lab {}: {}", lab.name, e.what()));
    r.ok = false;
    for (const VersionInfo* v : opt.versions) r.version_ids.push_back(v->id);
    return r;
  }
}

std::string labs_with_versions() {
  std::string s;
  for (const LabInfo& l : labs())
    if (l.versions_help) s += (s.empty() ? "" : ", ") + std::string(l.name);
  return s;
}

}  // namespace

void register_lab(CLI::App& app, Action& action) {
  static LabArgs a;
  auto* sub = app.add_subcommand("lab", "the chapter labs: list, one by NAME, or all");
  sub->add_option("name", a.name, "list, all, or a lab's name: " + known_labs())
      ->capture_default_str();
  sub->add_option("--lang", a.lang, "language of headings and observations: en or zh")
      ->capture_default_str();
  sub->add_option("--backend", a.backend, "cpu, cuda, or auto (cuda when a device is present)")
      ->capture_default_str();
  sub->add_option("--seed", a.seed, "seed of the inputs")->capture_default_str();
  sub->add_option("--versions", a.versions,
                  "gradcheck, bwd-ratio, no-lse: the version(s) to run instead of the lab's own "
                  "choice, e.g. an exercise once solved");
  add_output_options(sub, a.out, every_lab_table());
  sub->footer(R"(Examples:
  flashlab lab list
  flashlab lab memory
  flashlab lab cost --format markdown
  flashlab lab all --lang zh --json labs.json
  flashlab lab bwd-ratio --versions ex2-fa2-bwd)");
  sub->callback([&action] {
    action = [] {
      if (a.lang != "en" && a.lang != "zh")
        throw UsageError("unknown --lang '" + a.lang + "' (known: en, zh)");
      const Backend backend = resolve_backend(a.backend);
      const LabInfo* lab = find_lab(a.name);
      if (!lab && a.name != "all" && a.name != "list")
        throw UsageError("unknown lab '" + a.name + "' (known: " + known_labs() + ", all, list)");
      const Outputs out = check_outputs(a.out, lab_tables(a.name));
      LabOptions opt;
      opt.lang = a.lang;
      opt.backend = to_string(backend);
      opt.seed = a.seed;
      const json asked = {{"lang", a.lang}, {"backend", opt.backend}, {"seed", a.seed}};
      if (a.name == "list") {
        if (!a.versions.empty())
          throw UsageError("--versions goes with one lab (" + labs_with_versions() + ")");
        Report r = list_labs(a.lang);
        r.config = asked;
        return emit(r, out);
      }
      if (lab) {
        if (!a.versions.empty()) {
          if (!lab->versions_help)
            throw UsageError("lab " + a.name +
                             " takes no --versions (labs that do: " + labs_with_versions() + ")");
          opt.versions = parse_versions(a.versions);
        }
        Report r = run_isolated(*lab, opt);
        r.command = "lab " + a.name;
        for (const auto& [key, value] : asked.items())
          if (!r.config.contains(key)) r.config[key] = value;
        // The versions chosen, so that `verify --rerun` runs the same lab again.
        if (!opt.versions.empty() && !r.config.contains("versions")) {
          r.config["versions"] = json::array();
          for (const VersionInfo* v : opt.versions) r.config["versions"].push_back(v->id);
        }
        return emit(r, out);
      }
      if (!a.versions.empty())
        throw UsageError("--versions goes with one lab (" + labs_with_versions() + "), not all");
      Report all;
      all.command = "lab all";
      all.config = asked;
      all.config["labs"] = json::object();
      std::vector<Section> sections;
      Progress progress;
      for (const LabInfo& l : labs()) {
        progress.step(fmt::format("lab {}", l.name));
        Report r = run_isolated(l, opt);
        merge_into(all, l.name, r);
        sections.push_back({l.name,
                            fmt::format("{}: {}", l.name, a.lang == "zh" ? l.title_zh : l.title_en),
                            std::move(r)});
      }
      progress.clear();
      return emit_sections(sections, all, out);
    };
  });
}

}  // namespace flashlab::cli
