#include "course/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "hashed_sources.h"
#include "labs/lab.h"
#include "report/json_doc.h"
#include "report/schema_check.h"
#include "run/runner.h"
#include "run/validate.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/sha256.h"

namespace flashlab {

namespace {

namespace fs = std::filesystem;

json load(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UsageError("cannot read '" + path + "': no such file");
  if (fs::is_directory(path, ec)) throw UsageError("cannot read '" + path + "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw UsageError("'" + path + "' is not JSON (" + std::string(e.what()) + ")");
  }
}

void check_schema(const std::string& path, const json& doc) {
  const std::vector<std::string> errors = schema_errors(report_schema(), doc);
  if (errors.empty()) return;
  std::string first = errors.front();
  if (errors.size() > 1) first += fmt::format(" (and {} more)", errors.size() - 1);
  throw UsageError("'" + path + "' is not a " + kReportSchema + " report: " + first);
}

// A path the report names must stay inside kernels/ of the tree.
std::string checked_path(const std::string& p) {
  const fs::path rel(p);
  bool ok = p.rfind("kernels/", 0) == 0 && rel.is_relative();
  for (const fs::path& part : rel) ok = ok && part != "..";
  if (!ok) throw UsageError("the report names a source outside kernels/: '" + p + "'");
  return p;
}

// The files of a folder that a build would hash: every file below it, in every subfolder, whose
// path relative to the folder does not match the build's rule (kernels/versions.cmake).
std::set<std::string> folder_sources(const fs::path& root, const std::string& folder) {
  static const std::regex unhashed(kUnhashedRegex);
  std::set<std::string> out;
  std::error_code ec;
  const fs::path dir = root / folder;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string rel = it->path().lexically_relative(dir).generic_string();
    if (!std::regex_search(rel, unhashed)) out.insert(folder + "/" + rel);
  }
  return out;
}

struct SourceCheck {
  Table table{"sources",
              "Sources recorded in the report against this tree (SHA-256)",
              {{"version", "version", "", ""},
               {"file", "file", "", ""},
               {"reported", "reported", "", ""},
               {"tree", "in this tree", "", ""},
               {"status", "status", "", ""}},
              {}};
  int files = 0, mismatches = 0;
  std::vector<std::string> notes;
};

void check_set(SourceCheck& sc, const fs::path& root, const std::string& who, const json& set) {
  const std::string folder = checked_path(set["folder"].get<std::string>());
  const json& files = set["files"];
  const auto short_hash = [](const std::string& h) { return h.substr(0, 12); };
  for (auto it = files.begin(); it != files.end(); ++it) {
    const std::string path = checked_path(it.key());
    const std::string reported = it.value().get<std::string>();
    const std::optional<std::string> now = sha256_file((root / path).string());
    std::string status = "match";
    if (!now)
      status = "missing from the tree";
    else if (*now != reported)
      status = "differs";
    ++sc.files;
    if (status != "match") {
      ++sc.mismatches;
      sc.notes.push_back(fmt::format("MISMATCH {} ({}): {}", path, who, status));
    }
    sc.table.rows.push_back(
        {who, path, short_hash(reported), now ? json(short_hash(*now)) : json(), status});
  }
  for (const std::string& path : folder_sources(root, folder)) {
    if (files.contains(path)) continue;
    ++sc.files;
    ++sc.mismatches;
    sc.notes.push_back(fmt::format("MISMATCH {} ({}): not in the report", path, who));
    sc.table.rows.push_back({who, path, nullptr,
                             sha256_file((root / path).string()).value_or("").substr(0, 12),
                             "not in the report"});
  }
}

// ---- --rerun ----

struct RerunCheck {
  Table table{"rerun",
              "The report's configuration run again here",
              {{"version", "version", "", ""},
               {"output", "output", "", ""},
               {"compared", "compared", "", ""},
               {"reported", "reported", "", "{:.6e}"},
               {"rerun", "rerun", "", "{:.6e}"},
               {"status", "status", "", ""}},
              {}};
  int compared = 0, mismatches = 0;
  std::vector<std::string> notes;
  void add(const std::string& version, const std::string& output, const std::string& how,
           const json& reported, const json& now, bool same, const std::string& why = "") {
    ++compared;
    if (!same) {
      ++mismatches;
      notes.push_back(
          fmt::format("MISMATCH rerun {} {}: {}", version, output, why.empty() ? "differs" : why));
    }
    table.rows.push_back({version, output, how, reported, now, same ? "match" : "differs"});
  }
};

// A recorded number back as a double ("nan", "inf", "-inf" for what JSON cannot hold).
double number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  return NAN;
}

bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

const json* find_table(const json& doc, const std::string& id) {
  for (const json& t : doc["tables"])
    if (t["id"] == id) return &t;
  return nullptr;
}

int64_t config_int(const json& c, const char* key, int64_t fallback) {
  if (!c.contains(key)) return fallback;
  if (!c[key].is_number_integer())
    throw UsageError(std::string("the report's config.") + key + " is not an integer");
  return c[key].get<int64_t>();
}

// ["a", "b"] -> "a,b", for parse_versions.
std::string joined_ids(const json& ids) {
  if (!ids.is_array()) throw UsageError("the report's config.versions is not a list");
  std::string s;
  for (const json& id : ids) {
    if (!id.is_string()) throw UsageError("the report's config.versions holds a non-string");
    if (!s.empty()) s.push_back(',');
    s.append(id.get<std::string>());
  }
  return s;
}

RunConfig run_config_of(const json& c) {
  RunConfig rc;
  for (const char* key : {"backend", "versions", "dtype", "Nq", "Nk", "d", "seed"})
    if (!c.contains(key))
      throw UsageError(std::string("the report's config has no '") + key + "': cannot rerun it");
  rc.backend = resolve_backend(c["backend"].get<std::string>());
  rc.versions = parse_versions(joined_ids(c["versions"]));
  const std::string dtype = c["dtype"].get<std::string>();
  if (!parse_dtype(dtype, rc.problem.dtype))
    throw UsageError(fmt::format("the report's dtype '{}' is unknown", dtype));
  rc.problem.shape = Shape{config_int(c, "B", 1), config_int(c, "H", 1), config_int(c, "Nq", 1),
                           config_int(c, "Nk", 1), config_int(c, "d", 1)};
  rc.problem.causal = c.value("causal", false);
  rc.problem.scale = c.value("scale", 0.0);
  rc.seed = static_cast<uint64_t>(config_int(c, "seed", 0));
  rc.repeats = static_cast<int>(config_int(c, "repeats", 1));
  rc.warmup = static_cast<int>(config_int(c, "warmup", 0));
  rc.cpu.Br = static_cast<int>(config_int(c, "br", rc.cpu.Br));
  rc.cpu.Bc = static_cast<int>(config_int(c, "bc", rc.cpu.Bc));
  rc.cpu.threads = static_cast<int>(config_int(c, "threads", 0));
  validate_run(rc);
  check_memory(rc);
  return rc;
}

void rerun_run(const json& doc, RerunCheck& rc, Progress& progress) {
  const RunConfig c = run_config_of(doc["config"]);
  const json* errors = find_table(doc, "errors");
  if (!errors) throw UsageError("the run report has no 'errors' table to compare");
  const RunOutcome now = run_versions(c, progress);
  const bool fp64_cpu = c.backend == Backend::cpu && c.problem.dtype == DType::f64;
  std::map<std::pair<std::string, std::string>, const json*> recorded;
  for (const json& row : (*errors)["rows"])
    recorded[{row.value("version", ""), row.value("output", "")}] = &row;
  for (const VersionOutcome& v : now.versions) {
    const std::string id = v.version->id;
    if (!v.not_implemented.empty()) {
      bool had = false;
      for (const auto& [key, row] : recorded) had = had || key.first == id;
      rc.add(id, "-", "-", nullptr, nullptr, !had,
             had ? "the report has errors, this tree says " + v.not_implemented : "");
      continue;
    }
    for (const auto& [output, e] : v.errors) {
      const auto it = recorded.find({id, output});
      if (it == recorded.end()) {
        rc.add(id, output, "-", nullptr, e.rel, false, "the report has no error for it");
        continue;
      }
      const json& row = *it->second;
      const double budget = now.budget.of(output).budget_rel;
      const bool ok_now = e.finite && e.rel <= budget;
      const bool ok_then = row.value("ok", false);
      if (fp64_cpu && v.version->deterministic) {
        const bool same =
            same_bits(number(row["max_abs"]), e.max_abs) && same_bits(number(row["rel"]), e.rel);
        rc.add(id, output, "exact (CPU fp64)", row["rel"], e.rel, same,
               fmt::format("rel {} then, {} now; max_abs {} then, {} now", row["rel"].dump(), e.rel,
                           row["max_abs"].dump(), e.max_abs));
      } else {
        const bool same = ok_now == ok_then && std::fabs(number(row["rel"]) - e.rel) <= budget;
        rc.add(id, output, "within budget", row["rel"], e.rel, same,
               fmt::format("rel {} then, {} now (budget {:.2e}); ok {} then, {} now",
                           row["rel"].dump(), e.rel, budget, ok_then, ok_now));
      }
    }
  }
}

void rerun_gradcheck(const json& doc, RerunCheck& rc) {
  const json& c = doc["config"];
  const LabInfo* lab = find_lab("gradcheck");
  if (!lab) throw UsageError("this build has no gradcheck lab");
  LabOptions o;
  o.backend = "cpu";
  o.seed = static_cast<uint64_t>(config_int(c, "seed", 0));
  if (c.contains("versions") && !c["versions"].empty())
    o.versions = parse_versions(joined_ids(c["versions"]));
  const Report now = lab->run(o);
  const json* then = find_table(doc, "gradcheck");
  if (!then) throw UsageError("the gradcheck report has no 'gradcheck' table to compare");
  const Table& t = now.tables.front();
  const auto col = [&](const char* key) {
    for (size_t i = 0; i < t.columns.size(); ++i)
      if (t.columns[i].key == key) return i;
    throw std::logic_error(std::string("gradcheck table without ") + key);
  };
  const size_t kc = col("causal"), kv = col("version"), kok = col("within_bounds");
  for (const std::vector<json>& row : t.rows) {
    const std::string id = row[kv].get<std::string>();
    const bool causal = row[kc].get<bool>();
    const json* old = nullptr;
    for (const json& r : (*then)["rows"])
      if (r.value("version", "") == id && r.value("causal", !causal) == causal) old = &r;
    const std::string label = id + (causal ? " (causal)" : "");
    if (!old) {
      rc.add(label, "-", "-", nullptr, nullptr, false, "the report has no row for it");
      continue;
    }
    const VersionInfo* v = find_version(id);
    const bool exact = id == "standard" || (v && v->deterministic);
    for (const char* key : {"fwd_O", "vs_standard", "vs_fd"}) {
      const json& a = (*old)[key];
      const json& b = row[col(key)];
      if (a.is_null() && b.is_null()) continue;
      bool same;
      if (exact)
        same = !a.is_null() && !b.is_null() && same_bits(number(a), number(b));
      else
        same = (*old).value("within_bounds", false) == row[kok].get<bool>();
      rc.add(label, key, exact ? "exact (CPU fp64)" : "same verdict", a, b, same);
    }
  }
}

}  // namespace

Report verify_report(const VerifyOptions& o, Progress& progress) {
  const json doc = load(o.report);
  check_schema(o.report, doc);
  if (!doc.contains("sources"))
    throw UsageError("'" + o.report +
                     "' records no sources (it ran no version, or a flashlab older than source "
                     "hashes wrote it): nothing to verify");
  const std::string command = doc["command"].get<std::string>();
  const bool gradcheck = command == "gradcheck" || command == "lab gradcheck";
  if (o.rerun && command != "run" && !gradcheck)
    throw UsageError("--rerun repeats run and gradcheck reports; this one is '" + command + "'");
  const fs::path root(o.root);
  std::error_code ec;
  if (!fs::is_directory(root / "kernels", ec))
    throw UsageError("no flashlab tree at '" + o.root +
                     "' (no kernels/ folder): run verify in the repository root or pass --root");

  SourceCheck sc;
  const json& sources = doc["sources"];
  for (auto it = sources["versions"].begin(); it != sources["versions"].end(); ++it)
    check_set(sc, root, it.key(), it.value());
  check_set(sc, root, "(shared)", sources["shared"]);

  Report r;
  r.command = "verify";
  r.config = {{"report", o.report},
              {"root", o.root},
              {"rerun", o.rerun},
              {"report_command", command},
              {"report_commit", doc["tool"]["git_commit"]},
              {"report_cpu", doc["machine"]["cpu"]}};
  r.tables.push_back(sc.table);
  r.observations.push_back(
      sc.mismatches == 0
          ? fmt::format("All {} source files recorded in the report match this tree.", sc.files)
          : fmt::format("{} of {} source files do not match this tree.", sc.mismatches, sc.files));
  for (const std::string& n : sc.notes) r.observations.push_back(n);
  r.ok = sc.mismatches == 0;

  if (o.rerun) {
    RerunCheck rc;
    if (gradcheck)
      rerun_gradcheck(doc, rc);
    else
      rerun_run(doc, rc, progress);
    r.tables.push_back(rc.table);
    r.observations.push_back(
        rc.mismatches == 0 ? fmt::format("Rerun here: all {} recorded errors match.", rc.compared)
                           : fmt::format("Rerun here: {} of {} recorded errors do not match.",
                                         rc.mismatches, rc.compared));
    for (const std::string& n : rc.notes) r.observations.push_back(n);
    r.ok = r.ok && rc.mismatches == 0;
  }
  return r;
}

}  // namespace flashlab
