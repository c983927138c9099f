#include "course/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <span>
#include <sstream>

#include "course/handin.h"
#include "hashed_sources.h"
#include "labs/lab.h"
#include "report/json_doc.h"
#include "report/schema_check.h"
#include "run/budget.h"
#include "run/registry.h"
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

// A path the report names must stay inside `inside` (kernels/, or a harness folder) of the tree.
std::string checked_path(const std::string& p, const std::string& inside = "kernels") {
  const fs::path rel(p);
  bool ok = p.rfind(inside + "/", 0) == 0 && rel.is_relative() && p.size() <= 1024;
  for (const fs::path& part : rel) ok = ok && part != "..";
  if (!ok)
    throw UsageError("the report names a source outside " + inside + "/: " + brief(json(p), 80));
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
    sc.table.rows.push_back({who, path, nullptr, tree_hash(root / path).value_or("").substr(0, 12),
                             "not in the report"});
  }
}

// The harness set: the files of src/, reference/ and labs/ (harness_dirs()), which the report may
// not choose. A report without it was written by a flashlab that did not hash them: it fails.
void check_harness(SourceCheck& sc, const fs::path& root, const json& sources) {
  const std::string who = "(harness)";
  if (!sources.contains("harness")) {
    ++sc.mismatches;
    sc.notes.push_back(
        "MISMATCH harness: the report records no hashes of src/, reference/ and labs/ (a "
        "flashlab older than them wrote it): hand in a report written by this tree's flashlab");
    return;
  }
  const json& set = sources["harness"];
  const json& files = field(set, "files", "sources.harness");
  if (!files.is_object()) throw UsageError("the report's sources.harness.files must be an object");
  std::map<std::string, std::string> reported;
  for (auto it = files.begin(); it != files.end(); ++it) {
    bool inside = false;
    for (const char* d : harness_dirs())
      inside = inside || it.key().rfind(std::string(d) + "/", 0) == 0;
    if (!inside)
      throw UsageError("the report's sources.harness names " + brief(json(it.key()), 80) +
                       ", which is in none of its folders");
    checked_path(it.key(), it.key().substr(0, it.key().find('/')));
    reported[it.key()] = string_field(files, it.key(), "sources.harness.files", 64);
  }
  std::set<std::string> tree;
  for (const char* d : harness_dirs())
    for (const std::string& p : folder_sources(root, d)) tree.insert(p);
  for (const auto& [path, hash] : reported) {
    const std::optional<std::string> now = tree_hash(root / path);
    const std::string status = !now           ? "missing from the tree (or not a file)"
                               : *now != hash ? "differs"
                                              : "match";
    ++sc.files;
    if (status != "match") {
      ++sc.mismatches;
      sc.notes.push_back(fmt::format("MISMATCH {} ({}): {}", path, who, status));
    }
    sc.table.rows.push_back(
        {who, path, hash.substr(0, 12), now ? json(now->substr(0, 12)) : json(), status});
  }
  for (const std::string& path : tree) {
    if (reported.count(path)) continue;
    ++sc.files;
    ++sc.mismatches;
    sc.notes.push_back(fmt::format("MISMATCH {} ({}): not in the report", path, who));
    sc.table.rows.push_back({who, path, nullptr, tree_hash(root / path).value_or("").substr(0, 12),
                             "not in the report"});
  }
}

// --rerun runs this binary's code: the tree whose sources were compared must be the one it was
// built from, or a tree with other code and a report of that code would pass. The first few
// files that differ, or an empty list.
std::vector<std::string> differs_from_binary(const fs::path& root) {
  std::vector<std::string> out;
  const auto compare = [&](std::span<const SourceHash> files) {
    for (const SourceHash& h : files)
      if (tree_hash(root / h.path).value_or("") != h.sha256) out.push_back(h.path);
  };
  for (const VersionInfo& v : versions()) compare(v.sources);
  compare(shared_sources());
  compare(harness_sources());
  return out;
}

// ---- what a report says about itself ----

// Failures a report shows without running anything: its own verdict, and (run reports) verdicts
// and budgets that do not follow from its figures and this flashlab's budget rule.
struct SelfCheck {
  std::vector<std::string> notes;
  void fail(std::string note) { notes.push_back("FAIL " + std::move(note)); }
};

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
  rc.problem.shape =
      Shape{int_field_or(c, "B", at, 1, kMaxBatchHeads, 1),
            int_field_or(c, "H", at, 1, kMaxBatchHeads, 1), int_field(c, "Nq", at, 1, kMaxN),
            int_field(c, "Nk", at, 1, kMaxN), int_field(c, "d", at, 1, kMaxHeadDim)};
  rc.problem.causal = c.contains("causal") && bool_field(c, "causal", at);
  // The axes beyond dense heads: grouped K/V heads, a window, a packed batch, a paged cache.
  rc.problem.shape.Hkv = int_field_or(c, "Hkv", at, 1, rc.problem.shape.H, rc.problem.shape.H);
  if (c.contains("window")) {
    const json& w = c["window"];
    if (!w.is_array() || w.size() != 2)
      throw UsageError("the report's config.window must be [left, right] (it is " + brief(w) + ")");
    const json pair = {{"left", w[0]}, {"right", w[1]}};
    rc.problem.window_left = int_field(pair, "left", at + ".window", -1, kMaxN);
    rc.problem.window_right = int_field(pair, "right", at + ".window", -1, kMaxN);
  }
  if (c.contains("seqlens_q") || c.contains("seqlens_k")) {
    const auto lens = [&](const char* key) {
      const json& v = field(c, key, at);
      if (!v.is_array() || v.empty() || v.size() > static_cast<size_t>(kMaxSequences))
        throw UsageError(
            fmt::format("the report's config.{} must be a list of 1..{} lengths (it "
                        "is {})",
                        key, kMaxSequences, brief(v)));
      std::vector<int64_t> out;
      for (size_t i = 0; i < v.size(); ++i)
        out.push_back(int_field(json{{"length", v[i]}}, "length",
                                fmt::format("{}.{}[{}]", at, key, i), 0, kMaxN));
      return out;
    };
    set_packed(rc.problem.shape, lens("seqlens_q"), lens("seqlens_k"));
  }
  // A paged cache: its page size (validate_run checks the rest, as for `run --page-size`).
  rc.problem.shape.page_size = int_field_or(c, "page_size", at, 1, kMaxPageSize, 0);
  if (c.contains("scale")) {
    rc.problem.scale = number_field(c, "scale", at);
    if (!std::isfinite(rc.problem.scale) || rc.problem.scale < 0)
      throw UsageError("the report's config.scale must be a finite number >= 0");
  }
  rc.seed = static_cast<uint64_t>(int_field(c, "seed", at, 0, std::numeric_limits<int64_t>::max()));
  if (c.contains("inputs")) {  // reports before --inputs existed drew normal inputs
    const std::string kind = string_field(c, "inputs", at, 16);
    if (!parse_input_kind(kind, rc.inputs))
      throw UsageError("the report's config.inputs " + brief(json(kind)) +
                       " is unknown (known: normal, outliers)");
  }
  rc.repeats = 1;
  rc.warmup = 0;
  rc.cpu.Br = static_cast<int>(int_field_or(c, "br", at, 1, kMaxTile, rc.cpu.Br));
  rc.cpu.Bc = static_cast<int>(int_field_or(c, "bc", at, 1, kMaxTile, rc.cpu.Bc));
  rc.cpu.threads = static_cast<int>(int_field_or(c, "threads", at, 0, kMaxThreads, 0));
  rc.cpu.splits = static_cast<int>(int_field_or(c, "splits", at, 1, kMaxKvSplits, 0));
  rc.cpu.ranks = static_cast<int>(int_field_or(c, "ranks", at, 1, kMaxRanks, 0));
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
  double rel = 0, max_abs = 0, budget_rel = 0;
  bool ok = false;
  json rel_text;  // as written, for the table
};
using RecordedErrors = std::map<std::pair<std::string, std::string>, RecordedError>;

RecordedErrors recorded_errors(const json& table) {
  RecordedErrors out;
  int i = 0;
  for (const json& row : table["rows"]) {
    const std::string at = fmt::format("errors table's row {}", i++);
    RecordedError e;
    const std::string version = string_field(row, "version", at, 64);
    const std::string output = string_field(row, "output", at, 8);
    e.rel = number_field(row, "rel", at);
    e.max_abs = number_field(row, "max_abs", at);
    e.budget_rel = number_field(row, "budget_rel", at);
    e.ok = bool_field(row, "ok", at);
    e.rel_text = row["rel"];
    if (!out.emplace(std::pair{version, output}, e).second)
      throw UsageError(fmt::format("the report's errors table has two rows for {} {}",
                                   brief(json(version)), brief(json(output))));
  }
  return out;
}

// A run report's verdicts and budgets against its own figures: each row's ok must follow from
// its rel and budget, each row's budget must be the config's, and the budget factor this
// flashlab's (kBudgetFactor). The budgets themselves are recomputed by --rerun.
void self_check_run(const json& config, const RecordedErrors& rows, SelfCheck& sc) {
  const json& budget = field(config, "error_budget", "config");
  const double factor = number_field(budget, "factor", "config.error_budget");
  if (factor != kBudgetFactor)
    sc.fail(fmt::format("budget: the report's budget factor is {}, this flashlab's is {}", factor,
                        kBudgetFactor));
  const json& outputs = field(budget, "outputs", "config.error_budget");
  for (const auto& [key, e] : rows) {
    const auto& [version, output] = key;
    const double stated = number_field(field(outputs, output, "config.error_budget.outputs"),
                                       "budget_rel", "config.error_budget.outputs." + output);
    if (!same_bits(stated, e.budget_rel))
      sc.fail(
          fmt::format("budget: {} {} is judged against {:.3e}, but the report's budget for "
                      "{} is {:.3e}",
                      version, output, e.budget_rel, output, stated));
    const bool follows = std::isfinite(e.rel) && e.rel <= e.budget_rel;
    if (follows != e.ok)
      sc.fail(fmt::format("verdict: {} {} says ok {} with rel {:.3e} and budget {:.3e}", version,
                          output, e.ok, e.rel, e.budget_rel));
  }
}

// How closely a rerun must reproduce a recorded error. On the CPU in fp64 a deterministic
// version gives the same bits on every run, so the figures must be equal. Otherwise (a version
// whose threads race, or a GPU) the rerun's error may differ in its last digits: the recorded one
// must lie within kRerunRelTol of the rerun's, or within kRerunBudgetTol of the budget, whichever
// is wider. (A racing fp64 run moves dQ's rel error by about 0.1 %.)
inline constexpr double kRerunRelTol = 0.05;
inline constexpr double kRerunBudgetTol = 0.01;

bool within_tolerance(double then, double now, double budget) {
  if (std::isnan(then) || std::isnan(now)) return std::isnan(then) && std::isnan(now);
  if (std::isinf(then) || std::isinf(now)) return then == now;
  return std::fabs(then - now) <=
         std::max(kRerunRelTol * std::fabs(now), kRerunBudgetTol * std::fabs(budget));
}

void rerun_run(const json& doc, RerunCheck& rc, Progress& progress) {
  const RunConfig c = run_config_of(field(doc, "config", ""));
  const json* errors = find_table(doc, "errors");
  if (!errors) throw UsageError("the run report has no 'errors' table to compare");
  const RecordedErrors recorded = recorded_errors(*errors);
  const RunOutcome now = run_versions(c, progress);
  const bool fp64_cpu = c.backend == Backend::cpu && c.problem.dtype == DType::f64;
  std::set<std::pair<std::string, std::string>> seen;
  for (const VersionOutcome& v : now.versions) {
    const std::string id = v.version->id;
    if (!v.not_implemented.empty()) {
      bool had = false;
      for (const auto& [key, row] : recorded) had = had || key.first == id;
      rc.add(id, "-", "-", nullptr, nullptr, !had,
             had ? "the report has errors, this tree says " + v.not_implemented : "");
      for (const auto& [key, row] : recorded)
        if (key.first == id) seen.insert(key);
      continue;
    }
    for (const auto& [output, e] : v.errors) {
      const auto it = recorded.find({id, output});
      if (it == recorded.end()) {
        rc.add(id, output, "-", nullptr, e.rel, false, "the report has no error for it");
        continue;
      }
      seen.insert(it->first);
      const RecordedError& row = it->second;
      const double budget = now.budget.of(output).budget_rel;
      const bool ok_now = e.finite && e.rel <= budget;
      // The budget is recomputed here, never read: the recorded one must be the same figure.
      const bool same_budget = c.problem.dtype == DType::f64
                                   ? same_bits(row.budget_rel, budget)
                                   : std::fabs(row.budget_rel - budget) <= 1e-9 * budget;
      if (!same_budget)
        rc.add(id, output + " budget", "recomputed", row.budget_rel, budget, false,
               fmt::format("{} budget {:.6e} in the report, {:.6e} recomputed", output,
                           row.budget_rel, budget));
      if (fp64_cpu && v.version->deterministic) {
        const bool same = same_bits(row.max_abs, e.max_abs) && same_bits(row.rel, e.rel);
        rc.add(id, output, "exact (CPU fp64)", row.rel_text, e.rel, same,
               fmt::format("rel {} then, {} now; max_abs {} then, {} now", row.rel, e.rel,
                           row.max_abs, e.max_abs));
      } else {
        // max_abs is held to the same tolerance, its 1%-of-budget floor in its own units: the
        // budget times this output's max_abs / rel. Without that floor an error at the rounding
        // floor of a racing sum (ex2's atomic adds in fp64) could move the worst element by one
        // rounding step, more than 5 % of itself, and fail a rerun that is right.
        const double abs_budget = e.rel > 0 ? budget * e.max_abs / e.rel : 0.0;
        const bool same = ok_now == row.ok && within_tolerance(row.rel, e.rel, budget) &&
                          within_tolerance(row.max_abs, e.max_abs, abs_budget);
        rc.add(id, output, "within 5% (or 1% of budget)", row.rel_text, e.rel, same,
               fmt::format("rel {} then, {} now (budget {:.2e}); ok {} then, {} now", row.rel,
                           e.rel, budget, row.ok, ok_now));
      }
    }
  }
  for (const auto& [key, row] : recorded)
    if (!seen.count(key))
      rc.add(key.first, key.second, "-", row.rel_text, nullptr, false,
             "the report has an error its configuration does not produce");
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
    std::string problem;  // "" for one head (reports from before the grouped case have none)
  };
  std::vector<Old> old_rows;
  int i = 0;
  for (const json& r : (*then)["rows"]) {
    const std::string at = fmt::format("gradcheck table's row {}", i++);
    Old x{string_field(r, "version", at, 64),
          bool_field(r, "causal", at),
          bool_field(r, "within_bounds", at),
          {},
          {}};
    for (const char* key : {"fwd_O", "vs_standard", "vs_fd"}) {
      const json& v = field(r, key, at);
      if (!v.is_null()) number_value(v, "the report's " + at + "." + key);
      x.values[key] = v;
    }
    if (r.is_object() && r.contains("problem")) x.problem = string_field(r, "problem", at, 64);
    old_rows.push_back(std::move(x));
  }
  const Report now = lab->run(o);
  const Table& t = now.tables.front();
  const auto col = [&](const char* key) {
    for (size_t i = 0; i < t.columns.size(); ++i)
      if (t.columns[i].key == key) return i;
    throw std::logic_error(std::string("gradcheck table without ") + key);
  };
  const size_t kc = col("causal"), kp = col("problem"), kv = col("version"),
               kok = col("within_bounds");
  for (const std::vector<json>& row : t.rows) {
    const std::string id = row[kv].get<std::string>();
    const bool causal = row[kc].get<bool>();
    const std::string problem = row[kp].get<std::string>();
    const Old* old = nullptr;
    for (const Old& r : old_rows)
      if (r.version == id && r.causal == causal && r.problem == problem) old = &r;
    std::string tags = causal ? "causal" : "";
    if (!problem.empty()) tags += (tags.empty() ? "" : ", ") + problem;
    const std::string label = id + (tags.empty() ? "" : " (" + tags + ")");
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
        same =
            !a.is_null() && !b.is_null() && same_bits(number_value(a, key), number_value(b, key));
      else
        same = old->within_bounds == row[kok].get<bool>();
      rc.add(label, key, exact ? "exact (CPU fp64)" : "same verdict", a, b, same);
    }
  }
}

// Units of measured time and rates: a rerun gives other figures, so they are not compared.
bool timed_unit(const std::string& unit) {
  static const std::set<std::string> units = {"s",       "ms",      "µs",  "us",   "ns",  "FLOP/s",
                                              "GFLOP/s", "TFLOP/s", "B/s", "GB/s", "TB/s"};
  return units.count(unit) > 0;
}

// A lab report run again with its options (backend, language, seed, chosen versions) and compared
// table by table. A table that measures no time is compared whole and exactly (the labs' CPU
// figures are counts and deterministic computations); in one that does, only the counts (units
// B, FLOP, elements) and the row labels.
void rerun_lab(const json& doc, const std::string& name, RerunCheck& rc) {
  const LabInfo* lab = find_lab(name);
  if (!lab) throw UsageError("this flashlab has no lab " + brief(json(name)));
  const json& c = field(doc, "config", "");
  LabOptions o;
  o.backend = c.contains("backend") ? string_field(c, "backend", "config", 16) : "cpu";
  if (o.backend != "cpu" && o.backend != "cuda")
    throw UsageError("the report's config.backend must be \"cpu\" or \"cuda\"");
  if (o.backend == "cuda") resolve_backend("cuda");  // a clear line when there is no device
  o.lang = c.contains("lang") ? string_field(c, "lang", "config", 8) : "en";
  if (o.lang != "en" && o.lang != "zh") throw UsageError("the report's config.lang is unknown");
  o.seed = static_cast<uint64_t>(
      int_field_or(c, "seed", "config", 0, std::numeric_limits<int64_t>::max(), 0));
  if (lab->versions_help && c.contains("versions")) o.versions = parse_versions(joined_ids(c));
  // The recorded tables, checked before anything runs.
  std::map<std::string, const json*> then;
  for (const std::string_view id : lab->tables)
    if (const json* t = find_table(doc, std::string(id))) then[std::string(id)] = t;
  const Report now = lab->run(o);
  for (const Table& t : now.tables) {
    const auto it = then.find(t.id);
    if (it == then.end()) {
      rc.add(t.id, "-", "-", nullptr, nullptr, false, "the report has no such table");
      continue;
    }
    const json& rows = (*it->second)["rows"];
    if (rows.size() != t.rows.size()) {
      rc.add(t.id, "rows", "count", rows.size(), t.rows.size(), false,
             fmt::format("{} rows in the report, {} in the rerun", rows.size(), t.rows.size()));
      continue;
    }
    bool timed = false;
    for (const Column& col : t.columns) timed = timed || timed_unit(col.unit);
    for (size_t i = 0; i < t.rows.size(); ++i) {
      const json& old = rows[i];
      if (!old.is_object())
        throw UsageError("the report's " + t.id +
                         " table has a row that is "
                         "not an object");
      for (size_t k = 0; k < t.columns.size(); ++k) {
        const Column& col = t.columns[k];
        if (timed_unit(col.unit) || k >= t.rows[i].size()) continue;
        const json& b = t.rows[i][k];
        const bool count = col.unit == "B" || col.unit == "FLOP" || col.unit == "elements";
        if (timed && !count && !b.is_string() && !b.is_boolean()) continue;
        const auto cell = old.find(col.key);
        const json a = cell == old.end() ? json() : *cell;
        bool same;
        if (b.is_number())
          same =
              (a.is_number() || a.is_string()) &&
              same_bits(number_value(a, "the report's " + t.id + "." + col.key), b.get<double>());
        else
          same = a == b;
        const std::string label = fmt::format("{} row {}", t.id, i);
        rc.add(
            label, col.key, "exact", a.is_string() || a.is_number() ? a : json(brief(a)), b, same,
            fmt::format("{} {}: {} in the report, {} rerun", label, col.key, brief(a), brief(b)));
      }
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
  const bool one_lab =
      command.rfind("lab ", 0) == 0 && command != "lab all" && command != "lab list" && !gradcheck;
  if (o.rerun && command != "run" && !gradcheck && !one_lab)
    throw UsageError("--rerun repeats run, gradcheck and single-lab reports; this one is '" +
                     command + "'");
  const fs::path root(o.root);
  std::error_code ec;
  if (!fs::is_directory(root / "kernels", ec))
    throw UsageError("no flashlab tree at '" + o.root +
                     "' (no kernels/ folder): run verify in the repository root or pass --root");

  // Every field a check reads is read (and checked) first, with --rerun or without.
  SelfCheck self;
  if (!bool_field(doc, "ok", ""))
    self.fail("report: its own checks failed (\"ok\": false); a hand-in must pass them");
  if (command == "run") {
    std::string backend;
    const json& config = field(doc, "config", "");
    parse_run_config(config, backend);
    const json* errors = find_table(doc, "errors");
    if (!errors) throw UsageError("the run report has no 'errors' table");
    self_check_run(config, recorded_errors(*errors), self);
  }

  SourceCheck sc;
  const json& sources = field(doc, "sources", "");
  const json& versions = field(sources, "versions", "sources");
  if (!versions.is_object()) throw UsageError("the report's sources.versions must be an object");
  for (auto it = versions.begin(); it != versions.end(); ++it)
    check_set(sc, root, it.key(), it.value());
  check_set(sc, root, "(shared)", field(sources, "shared", "sources"));
  check_harness(sc, root, sources);

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
  for (const std::string& n : self.notes) r.observations.push_back(n);
  r.ok = sc.mismatches == 0 && self.notes.empty();

  if (o.rerun) {
    const std::vector<std::string> other = differs_from_binary(root);
    if (!other.empty()) {
      r.observations.push_back(fmt::format(
          "MISMATCH tree: --rerun runs this flashlab's code, but {} is not the tree it was built "
          "from ({} file(s) differ, first {}): build flashlab in that tree, or pass the tree it "
          "was built from with --root",
          o.root, other.size(), other.front()));
      r.ok = false;
      return r;
    }
    RerunCheck rc;
    if (gradcheck)
      rerun_gradcheck(doc, rc);
    else if (one_lab)
      rerun_lab(doc, command.substr(4), rc);
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

// ---- grading a class ----

namespace {

struct Requirement {
  std::string key, value;
};

std::vector<Requirement> parse_requirements(const std::vector<std::string>& list) {
  static const std::vector<std::string> keys = {"versions", "command", "dtype",
                                                "backend",  "min-n",   "budget-factor"};
  std::vector<Requirement> out;
  for (const std::string& r : list) {
    const size_t eq = r.find('=');
    const std::string key = r.substr(0, eq);
    if (eq == std::string::npos || eq + 1 == r.size())
      throw UsageError("--require takes KEY=VALUE (got '" + r + "')");
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      throw UsageError("--require: unknown key '" + key +
                       "' (known: versions, command, dtype, backend, min-n, budget-factor)");
    const std::string value = r.substr(eq + 1);
    if (key == "versions") parse_versions(value);  // unknown ids are a usage error
    if (key == "min-n" || key == "budget-factor") {
      char* end = nullptr;
      const double x = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !(x > 0) || x > 1e30)
        throw UsageError("--require " + key + " takes a positive number (got '" + value + "')");
    }
    out.push_back({key, value});
  }
  return out;
}

// The hand-ins named, as (student, path): a file as it is (the student is its name without
// ".json"), a folder's *.json files directly in it or one subfolder down.
std::vector<std::pair<std::string, std::string>> handin_files(
    const std::vector<std::string>& paths) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) {
      if (!fs::exists(path, ec)) throw UsageError("cannot read '" + path + "': no such file");
      out.emplace_back(fs::path(path).stem().string(), path);
      continue;
    }
    std::vector<std::pair<std::string, std::string>> found;
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it.depth() >= 1) it.disable_recursion_pending();
      if (it->path().extension() != ".json" || it->is_directory(ec)) continue;
      std::string student = it->path().lexically_relative(path).generic_string();
      student.resize(student.size() - 5);
      found.emplace_back(student, it->path().string());
      if (out.size() + found.size() > kMaxHandins)
        throw UsageError(fmt::format("more than {} hand-ins under '{}'", kMaxHandins, path));
    }
    if (ec) throw UsageError("cannot read the folder '" + path + "': " + ec.message());
    if (found.empty()) throw UsageError("no *.json hand-ins in the folder '" + path + "'");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  if (out.size() > kMaxHandins) throw UsageError(fmt::format("more than {} hand-ins", kMaxHandins));
  return out;
}

// The ids of the versions a hand-in ran: its config's list, and the versions it records sources of.
std::set<std::string> versions_of(const json& doc) {
  std::set<std::string> ids;
  const json& c = doc["config"];
  if (c.contains("versions") && c["versions"].is_array())
    for (const json& id : c["versions"])
      if (id.is_string()) ids.insert(id.get<std::string>());
  if (doc.contains("sources"))
    for (auto it = doc["sources"]["versions"].begin(); it != doc["sources"]["versions"].end(); ++it)
      ids.insert(it.key());
  return ids;
}

// What a well-formed hand-in lacks of the course's policy, one line each.
std::vector<std::string> policy_failures(const json& doc, const std::vector<Requirement>& reqs) {
  std::vector<std::string> out;
  const json& c = doc["config"];
  const auto config_string = [&](const char* key) {
    return c.contains(key) && c[key].is_string() ? c[key].get<std::string>() : std::string("none");
  };
  for (const Requirement& r : reqs) {
    if (r.key == "versions") {
      const std::set<std::string> has = versions_of(doc);
      for (const VersionInfo* v : parse_versions(r.value))
        if (!has.count(v->id)) out.push_back(fmt::format("REQUIRE versions: no {}", v->id));
    } else if (r.key == "command") {
      if (doc["command"] != r.value)
        out.push_back(fmt::format("REQUIRE command: {}, not {}", brief(doc["command"]), r.value));
    } else if (r.key == "dtype" || r.key == "backend") {
      const std::string has = config_string(r.key.c_str());
      if (has != r.value)
        out.push_back(fmt::format("REQUIRE {}: {}, not {}", r.key, brief(json(has)), r.value));
    } else if (r.key == "min-n") {
      const double want = std::strtod(r.value.c_str(), nullptr);
      double least = INFINITY;
      for (const char* key : {"Nq", "Nk", "N"})
        if (c.contains(key) && c[key].is_number()) least = std::min(least, c[key].get<double>());
      if (std::isinf(least))
        out.push_back("REQUIRE min-n: the hand-in records no N");
      else if (least < want)
        out.push_back(fmt::format("REQUIRE min-n: N = {}, below {}", least, r.value));
    } else if (r.key == "budget-factor") {
      const double want = std::strtod(r.value.c_str(), nullptr);
      const json b = c.contains("error_budget") ? c["error_budget"] : json();
      const bool has = b.is_object() && b.contains("factor") && b["factor"].is_number();
      if (!has)
        out.push_back("REQUIRE budget-factor: the hand-in records no error budget");
      else if (b["factor"].get<double>() != want)
        out.push_back(
            fmt::format("REQUIRE budget-factor: {}, not {}", b["factor"].get<double>(), r.value));
    }
  }
  return out;
}

bool is_problem(const std::string& line) {
  return line.rfind("MISMATCH", 0) == 0 || line.rfind("FAIL", 0) == 0 ||
         line.rfind("REQUIRE", 0) == 0;
}

}  // namespace

Report verify_class(const ClassOptions& o, Progress& progress) {
  const std::vector<Requirement> reqs = parse_requirements(o.require);
  const auto handins = handin_files(o.paths);
  Table t{"class",
          "Hand-ins: one row per student and version",
          {{"student", "student", "", ""},
           {"command", "report", "", ""},
           {"version", "version", "", ""},
           {"status", "status", "", ""},
           {"worst", "worst rel / budget", "ratio", "{:.3g}"},
           {"what", "what is wrong", "", ""}},
          {}};
  int pass = 0, fail = 0, refused = 0;
  std::vector<std::string> lines;
  size_t i = 0;
  for (const auto& [student, path] : handins) {
    progress.step(fmt::format("verify {}/{}: {}", ++i, handins.size(), student));
    std::vector<std::string> problems;
    Report r;
    json doc;
    try {
      r = verify_report({path, o.root, o.rerun}, progress);
      doc = load_handin(path);  // read and checked once already: cannot fail now
      for (const std::string& line : policy_failures(doc, reqs)) problems.push_back(line);
      for (const std::string& line : r.observations)
        if (is_problem(line)) problems.push_back(line);
    } catch (const std::exception& e) {
      ++refused;
      t.rows.push_back({student, nullptr, nullptr, "REFUSED", nullptr, e.what()});
      lines.push_back(fmt::format("REFUSED {}: {}", student, e.what()));
      continue;
    }
    const std::string command = doc["command"].get<std::string>();
    const bool ok = r.ok && problems.empty();
    ok ? ++pass : ++fail;
    // A run report: a row per version with its worst error against its budget.
    std::vector<std::string> ids;
    std::map<std::string, double> worst;
    if (command == "run") {
      for (const json& id : doc["config"]["versions"]) ids.push_back(id.get<std::string>());
      for (const json& table : doc["tables"])
        if (table["id"] == "errors")
          for (const json& row : table["rows"]) {
            const double rel = number_value(row["rel"], "rel");
            const double budget = number_value(row["budget_rel"], "budget_rel");
            double& w = worst[row["version"].get<std::string>()];
            w = std::max(w, std::isnan(rel) || budget <= 0 ? INFINITY : rel / budget);
          }
    } else {
      std::string all;
      for (const std::string& id : versions_of(doc)) all += (all.empty() ? "" : ",") + id;
      ids.push_back(all.empty() ? "-" : all);
    }
    for (const std::string& id : ids) {
      // What is wrong with this version: the first problem naming it, else the hand-in's first.
      std::string what;
      for (const std::string& p : problems)
        if (what.empty() && p.find(" " + id) != std::string::npos) what = p;
      if (what.empty() && !problems.empty()) what = problems.front();
      if (problems.size() > 1) what += fmt::format(" (+{} more)", problems.size() - 1);
      const auto w = worst.find(id);
      t.rows.push_back({student, command, id, ok ? "PASS" : "FAIL",
                        w == worst.end() ? json() : json(w->second), what});
    }
    if (!ok && problems.empty()) lines.push_back(fmt::format("FAIL {}", student));
    for (const std::string& p : problems) lines.push_back(fmt::format("FAIL {}: {}", student, p));
  }
  Report out;
  out.command = "verify";
  out.config = {
      {"handins", handins.size()}, {"root", o.root}, {"rerun", o.rerun}, {"require", o.require}};
  out.tables.push_back(std::move(t));
  out.observations.push_back(fmt::format("{} hand-in(s): {} pass, {} fail, {} refused.",
                                         handins.size(), pass, fail, refused));
  for (const std::string& l : lines) out.observations.push_back(l);
  out.figures["pass"] = {{"value", pass}, {"unit", ""}};
  out.figures["fail"] = {{"value", fail}, {"unit", ""}};
  out.figures["refused"] = {{"value", refused}, {"unit", ""}};
  out.ok = fail == 0 && refused == 0;
  return out;
}

}  // namespace flashlab
