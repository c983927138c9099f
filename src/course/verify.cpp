#include "course/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "course/handin.h"
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

void check_schema(const std::string& path, const json& doc) {
  const std::vector<std::string> errors = schema_errors(report_schema(), doc);
  if (errors.empty()) return;
  std::string first = errors.front();
  if (first.size() > 300) first = first.substr(0, 300) + "...";
  if (errors.size() > 1) first += fmt::format(" (and {} more)", errors.size() - 1);
  throw UsageError("'" + path + "' is not a " + kReportSchema + " report: " + first);
}

// A path the report names must stay inside kernels/ of the tree.
std::string checked_path(const std::string& p) {
  const fs::path rel(p);
  bool ok = p.rfind("kernels/", 0) == 0 && rel.is_relative() && p.size() <= 1024;
  for (const fs::path& part : rel) ok = ok && part != "..";
  if (!ok) throw UsageError("the report names a source outside kernels/: " + brief(json(p), 80));
  return p;
}

// The SHA-256 of a file of the tree; nullopt when it is not a regular file or cannot be read.
std::optional<std::string> tree_hash(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  return sha256_file(p.string());
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
  const std::string where = "sources of " + brief(json(who), 60);
  const std::string folder = checked_path(string_field(set, "folder", where, 1024));
  const json& files = field(set, "files", where);
  if (!files.is_object()) throw UsageError("the report's " + where + ".files must be an object");
  const auto short_hash = [](const std::string& h) { return h.substr(0, 12); };
  for (auto it = files.begin(); it != files.end(); ++it) {
    const std::string path = checked_path(it.key());
    const std::string reported = string_field(files, it.key(), where + ".files", 64);
    const std::optional<std::string> now = tree_hash(root / path);
    std::string status = "match";
    if (!now)
      status = "missing from the tree (or not a file)";
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
                             tree_hash(root / path).value_or("").substr(0, 12),
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

bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

const json* find_table(const json& doc, const std::string& id) {
  const json& tables = field(doc, "tables", "");
  if (!tables.is_array()) throw UsageError("the report's tables must be an array");
  for (const json& t : tables)
    if (string_field(t, "id", "table", 64) == id) {
      if (!field(t, "rows", "'" + id + "' table").is_array())
        throw UsageError("the report's '" + id + "' table has no array of rows");
      return &t;
    }
  return nullptr;
}

// The ids a report's config.versions lists, as one "a,b" list for parse_versions.
std::string joined_ids(const json& c) {
  const json& ids = field(c, "versions", "config");
  if (!ids.is_array() || ids.size() > 64)
    throw UsageError("the report's config.versions must be a list of at most 64 version ids");
  std::string s;
  for (const json& id : ids) {
    if (!id.is_string() || id.get_ref<const std::string&>().size() > 64)
      throw UsageError("the report's config.versions holds " + brief(id) +
                       ", which is not a version id");
    if (!s.empty()) s.push_back(',');
    s.append(id.get<std::string>());
  }
  return s;
}

// The run a report's config describes, every field's type and range checked; what it runs on
// (backend, memory) is checked by run_config_of. Repeats and warm-up are not taken from the
// report: the compared errors come from the first run, so a rerun runs each version once.
RunConfig parse_run_config(const json& c, std::string& backend) {
  const std::string at = "config";
  RunConfig rc;
  backend = string_field(c, "backend", at, 16);
  if (backend != "cpu" && backend != "cuda")
    throw UsageError("the report's config.backend must be \"cpu\" or \"cuda\" (it is " +
                     brief(json(backend)) + ")");
  rc.versions = parse_versions(joined_ids(c));
  const std::string dtype = string_field(c, "dtype", at, 16);
  if (!parse_dtype(dtype, rc.problem.dtype))
    throw UsageError("the report's config.dtype " + brief(json(dtype)) + " is unknown");
  rc.problem.shape = Shape{int_field_or(c, "B", at, 1, kMaxBatchHeads, 1),
                           int_field_or(c, "H", at, 1, kMaxBatchHeads, 1),
                           int_field(c, "Nq", at, 1, kMaxN), int_field(c, "Nk", at, 1, kMaxN),
                           int_field(c, "d", at, 1, kMaxHeadDim)};
  rc.problem.causal = c.contains("causal") && bool_field(c, "causal", at);
  if (c.contains("scale")) {
    rc.problem.scale = number_field(c, "scale", at);
    if (!std::isfinite(rc.problem.scale) || rc.problem.scale < 0)
      throw UsageError("the report's config.scale must be a finite number >= 0");
  }
  rc.seed = static_cast<uint64_t>(
      int_field(c, "seed", at, 0, std::numeric_limits<int64_t>::max()));
  rc.repeats = 1;
  rc.warmup = 0;
  rc.cpu.Br = static_cast<int>(int_field_or(c, "br", at, 1, kMaxTile, rc.cpu.Br));
  rc.cpu.Bc = static_cast<int>(int_field_or(c, "bc", at, 1, kMaxTile, rc.cpu.Bc));
  rc.cpu.threads = static_cast<int>(int_field_or(c, "threads", at, 0, kMaxThreads, 0));
  return rc;
}

// The same, ready to run here: the backend resolved, the shape and memory checked.
RunConfig run_config_of(const json& c) {
  std::string backend;
  RunConfig rc = parse_run_config(c, backend);
  rc.backend = resolve_backend(backend);
  validate_run(rc);
  check_memory(rc);
  return rc;
}

// The errors table's rows by (version, output), every field checked.
struct RecordedError {
  double rel = 0, max_abs = 0;
  bool ok = false;
  json rel_text;  // as written, for the table
};

std::map<std::pair<std::string, std::string>, RecordedError> recorded_errors(const json& table) {
  std::map<std::pair<std::string, std::string>, RecordedError> out;
  int i = 0;
  for (const json& row : table["rows"]) {
    const std::string at = fmt::format("errors table's row {}", i++);
    RecordedError e;
    const std::string version = string_field(row, "version", at, 64);
    const std::string output = string_field(row, "output", at, 8);
    e.rel = number_field(row, "rel", at);
    e.max_abs = number_field(row, "max_abs", at);
    e.ok = bool_field(row, "ok", at);
    e.rel_text = row["rel"];
    if (!out.emplace(std::pair{version, output}, e).second)
      throw UsageError(fmt::format("the report's errors table has two rows for {} {}",
                                   brief(json(version)), brief(json(output))));
  }
  return out;
}

void rerun_run(const json& doc, RerunCheck& rc, Progress& progress) {
  const RunConfig c = run_config_of(field(doc, "config", ""));
  const json* errors = find_table(doc, "errors");
  if (!errors) throw UsageError("the run report has no 'errors' table to compare");
  const auto recorded = recorded_errors(*errors);
  const RunOutcome now = run_versions(c, progress);
  const bool fp64_cpu = c.backend == Backend::cpu && c.problem.dtype == DType::f64;
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
      const RecordedError& row = it->second;
      const double budget = now.budget.of(output).budget_rel;
      const bool ok_now = e.finite && e.rel <= budget;
      if (fp64_cpu && v.version->deterministic) {
        const bool same = same_bits(row.max_abs, e.max_abs) && same_bits(row.rel, e.rel);
        rc.add(id, output, "exact (CPU fp64)", row.rel_text, e.rel, same,
               fmt::format("rel {} then, {} now; max_abs {} then, {} now", row.rel, e.rel,
                           row.max_abs, e.max_abs));
      } else {
        const bool same = ok_now == row.ok && std::fabs(row.rel - e.rel) <= budget;
        rc.add(id, output, "within budget", row.rel_text, e.rel, same,
               fmt::format("rel {} then, {} now (budget {:.2e}); ok {} then, {} now", row.rel,
                           e.rel, budget, row.ok, ok_now));
      }
    }
  }
}

void rerun_gradcheck(const json& doc, RerunCheck& rc) {
  const json& c = field(doc, "config", "");
  const LabInfo* lab = find_lab("gradcheck");
  if (!lab) throw UsageError("this build has no gradcheck lab");
  LabOptions o;
  o.backend = "cpu";
  o.seed = static_cast<uint64_t>(
      int_field_or(c, "seed", "config", 0, std::numeric_limits<int64_t>::max(), 0));
  if (c.contains("versions") && !joined_ids(c).empty()) o.versions = parse_versions(joined_ids(c));
  const json* then = find_table(doc, "gradcheck");
  if (!then) throw UsageError("the gradcheck report has no 'gradcheck' table to compare");
  // The recorded rows, checked before anything runs.
  struct Old {
    std::string version;
    bool causal, within_bounds;
    std::map<std::string, json> values;
  };
  std::vector<Old> old_rows;
  int i = 0;
  for (const json& r : (*then)["rows"]) {
    const std::string at = fmt::format("gradcheck table's row {}", i++);
    Old x{string_field(r, "version", at, 64), bool_field(r, "causal", at),
          bool_field(r, "within_bounds", at), {}};
    for (const char* key : {"fwd_O", "vs_standard", "vs_fd"}) {
      const json& v = field(r, key, at);
      if (!v.is_null()) number_value(v, "the report's " + at + "." + key);
      x.values[key] = v;
    }
    old_rows.push_back(std::move(x));
  }
  const Report now = lab->run(o);
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
    const Old* old = nullptr;
    for (const Old& r : old_rows)
      if (r.version == id && r.causal == causal) old = &r;
    const std::string label = id + (causal ? " (causal)" : "");
    if (!old) {
      rc.add(label, "-", "-", nullptr, nullptr, false, "the report has no row for it");
      continue;
    }
    const VersionInfo* v = find_version(id);
    const bool exact = id == "standard" || (v && v->deterministic);
    for (const char* key : {"fwd_O", "vs_standard", "vs_fd"}) {
      const json& a = old->values.at(key);
      const json& b = row[col(key)];
      if (a.is_null() && b.is_null()) continue;
      bool same;
      if (exact)
        same = !a.is_null() && !b.is_null() && same_bits(number_value(a, key), number_value(b, key));
      else
        same = old->within_bounds == row[kok].get<bool>();
      rc.add(label, key, exact ? "exact (CPU fp64)" : "same verdict", a, b, same);
    }
  }
}

Report verify_one(const VerifyOptions& o, Progress& progress) {
  const json doc = load_handin(o.report);
  check_schema(o.report, doc);
  if (!doc.contains("sources"))
    throw UsageError("'" + o.report +
                     "' records no sources (it ran no version, or a flashlab older than source "
                     "hashes wrote it): nothing to verify");
  const std::string command = string_field(doc, "command", "", 128);
  const bool gradcheck = command == "gradcheck" || command == "lab gradcheck";
  if (o.rerun && command != "run" && !gradcheck)
    throw UsageError("--rerun repeats run and gradcheck reports; this one is '" + command + "'");
  const fs::path root(o.root);
  std::error_code ec;
  if (!fs::is_directory(root / "kernels", ec))
    throw UsageError("no flashlab tree at '" + o.root +
                     "' (no kernels/ folder): run verify in the repository root or pass --root");

  // Every field a check reads is read (and checked) first, with --rerun or without.
  if (command == "run") {
    std::string backend;
    parse_run_config(field(doc, "config", ""), backend);
    const json* errors = find_table(doc, "errors");
    if (!errors) throw UsageError("the run report has no 'errors' table");
    recorded_errors(*errors);
  }

  SourceCheck sc;
  const json& sources = field(doc, "sources", "");
  const json& versions = field(sources, "versions", "sources");
  if (!versions.is_object()) throw UsageError("the report's sources.versions must be an object");
  for (auto it = versions.begin(); it != versions.end(); ++it)
    check_set(sc, root, it.key(), it.value());
  check_set(sc, root, "(shared)", field(sources, "shared", "sources"));

  Report r;
  r.command = "verify";
  r.config = {{"report", o.report},
              {"root", o.root},
              {"rerun", o.rerun},
              {"report_command", command},
              {"report_commit", string_field(field(doc, "tool", ""), "git_commit", "tool", 64)},
              {"report_cpu", string_field(field(doc, "machine", ""), "cpu", "machine", 256)}};
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

}  // namespace

Report verify_report(const VerifyOptions& o, Progress& progress) {
  try {
    return verify_one(o, progress);
  } catch (const json::exception& e) {
    // Every field is read through the checked accessors (course/handin.h); this is the net under
    // them, so that a report shaped in a way no check foresaw is still one line and exit 2.
    throw UsageError("'" + o.report + "' is not a report this flashlab can read (" +
                     brief(json(std::string(e.what())), 120) + ")");
  }
}

}  // namespace flashlab
