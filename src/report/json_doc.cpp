#include "report/json_doc.h"

#include <cmath>
#include <ctime>
#include <span>
#include <stdexcept>

#include "build_info.h"
#include "cuda/runner.h"
#include "run/registry.h"
#include "util/sysinfo.h"

namespace flashlab {

namespace {

json finite_or_string(const json& v) {
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  }
  return v;
}

// Replace non-finite floats anywhere in a value (config and figures may hold them too).
json sanitize(const json& v) {
  if (v.is_object()) {
    json out = json::object();
    for (auto it = v.begin(); it != v.end(); ++it) out[it.key()] = sanitize(it.value());
    return out;
  }
  if (v.is_array()) {
    json out = json::array();
    for (const json& x : v) out.push_back(sanitize(x));
    return out;
  }
  return finite_or_string(v);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

json figure(double value, const std::string& unit) {
  return {{"value", value}, {"unit", unit}};
}

json machine_json() {
  json m = {
      {"cpu", cpu_model()}, {"cores", cpu_cores()},       {"memory_bytes", total_memory_bytes()},
      {"os", os_name()},    {"cuda_built", cuda_built()}, {"gpu", nullptr}};
  const cuda::DeviceInfo& d = cuda::device_info();
  if (d.present) {
    m["gpu"] = {
        {"name", d.name},
        {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
        {"sms", d.sms},
        {"memory_bytes", d.total_bytes},
        {"l2_bytes", d.l2_bytes},
        {"driver_version", d.driver_version},
        {"runtime_version", d.runtime_version}};
  } else {
    m["gpu_absent_reason"] = d.why_absent;
  }
  return m;
}

json sources_json(const std::vector<std::string>& ids) {
  const auto set = [](const std::string& folder, std::span<const SourceHash> files) {
    json f = json::object();
    for (const SourceHash& h : files) f[h.path] = h.sha256;
    return json{{"folder", folder}, {"files", f}};
  };
  json versions = json::object();
  for (const std::string& id : ids) {
    const VersionInfo* v = find_version(id);
    if (!v) throw std::logic_error("a report names version '" + id + "', which is not registered");
    versions[id] = set(v->folder, v->sources);
  }
  json harness = set("", harness_sources());
  harness.erase("folder");
  harness["folders"] = json::array();
  for (const char* d : harness_dirs()) harness["folders"].push_back(d);
  return {{"versions", versions},
          {"shared", set("kernels/common", shared_sources())},
          {"harness", harness}};
}

json to_json(const Report& r) {
  json doc;
  doc["schema"] = kReportSchema;
  doc["command"] = r.command;
  doc["tool"] = {{"name", "flashlab"},
                 {"version", FLASHLAB_TOOL_VERSION},
                 {"git_commit", built_commit()}};
  doc["created_utc"] = utc_now();
  doc["machine"] = machine_json();
  doc["config"] = r.config.is_null() ? json::object() : sanitize(r.config);
  json tables = json::array();
  for (const Table& t : r.tables) {
    json cols = json::array();
    for (const Column& c : t.columns)
      cols.push_back(
          {{"key", c.key}, {"header", c.header}, {"unit", c.unit}, {"format", c.format}});
    json rows = json::array();
    for (const auto& row : t.rows) {
      json obj = json::object();
      for (size_t i = 0; i < t.columns.size(); ++i)
        obj[t.columns[i].key] = i < row.size() ? finite_or_string(row[i]) : json();
      rows.push_back(std::move(obj));
    }
    tables.push_back({{"id", t.id}, {"title", t.title}, {"columns", cols}, {"rows", rows}});
  }
  doc["tables"] = tables;
  doc["observations"] = r.observations;
  doc["figures"] = r.figures.is_null() ? json::object() : sanitize(r.figures);
  if (!r.version_ids.empty()) doc["sources"] = sources_json(r.version_ids);
  doc["ok"] = r.ok;
  return doc;
}

Report report_from_json(const json& doc) {
  if (!doc.is_object() || doc.value("schema", "") != kReportSchema)
    throw std::invalid_argument(std::string("not a ") + kReportSchema + " document");
  Report r;
  r.command = doc.value("command", "");
  r.config = doc.value("config", json::object());
  for (const json& t : doc.value("tables", json::array())) {
    Table tab;
    tab.id = t.value("id", "");
    tab.title = t.value("title", "");
    for (const json& c : t.value("columns", json::array()))
      tab.columns.push_back(
          {c.value("key", ""), c.value("header", ""), c.value("unit", ""), c.value("format", "")});
    for (const json& row : t.value("rows", json::array())) {
      std::vector<json> cells;
      for (const Column& c : tab.columns)
        cells.push_back(row.contains(c.key) ? row[c.key] : json());
      tab.rows.push_back(std::move(cells));
    }
    r.tables.push_back(std::move(tab));
  }
  for (const json& o : doc.value("observations", json::array())) r.observations.push_back(o);
  r.figures = doc.value("figures", json::object());
  r.ok = doc.value("ok", true);
  if (doc.contains("sources") && doc["sources"].is_object()) {
    const json vs = doc["sources"].value("versions", json::object());
    for (auto it = vs.begin(); it != vs.end(); ++it) r.version_ids.push_back(it.key());
  }
  return r;
}

}  // namespace flashlab
