// A Report as a `flashlab.report/v1` JSON document (described by docs/report.schema.json):
//
//   { "schema": "flashlab.report/v1", "command": "run",
//     "tool": {"name", "version", "git_commit"}, "created_utc": "2026-11-29T10:40:00Z",
//     "machine": {"cpu", "cores", "memory_bytes", "os", "gpu": null | {...}},
//     "config": {...exact configuration and seed...},
//     "tables": [{"id", "title", "columns": [{"key","header","unit","format"}],
//                 "rows": [{"<key>": value, ...}, ...]}],
//     "observations": ["..."], "figures": {"name": {"value": 1.5, "unit": "ms"}}, "ok": true,
//     "sources": {"versions": {"<id>": {"folder", "files": {"<path>": "<sha256>"}}},
//                 "shared": {"folder": "kernels/common", "files": {...}},
//                 "harness": {"folders": ["src", "reference", "labs"], "files": {...}}} }
//
// "sources" is there when the report ran versions (Report::version_ids): the SHA-256 of each
// version folder's files, of kernels/common and of the harness (src/, reference/, labs/) as the
// binary was built from them (see `flashlab verify`).
//
// Rows are objects keyed by column key (null where a value was not measured). Non-finite numbers,
// which JSON cannot hold, are written as the strings "inf", "-inf" and "nan".
#pragma once

#include "report/report.h"

namespace flashlab {

inline constexpr const char* kReportSchema = "flashlab.report/v1";

// The machine this process runs on: CPU model, cores, memory, OS, and the GPU when one is present.
json machine_json();

json to_json(const Report& r);

// The "sources" object for these version ids (each must be registered).
json sources_json(const std::vector<std::string>& ids);

// The Report back from a document (for tools such as the plotter). Throws std::invalid_argument
// when `doc` is not a flashlab.report/v1 document.
Report report_from_json(const json& doc);

// A figure entry {"value": v, "unit": u}.
json figure(double value, const std::string& unit);

}  // namespace flashlab
