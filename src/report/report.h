// The data every command produces before it is printed or saved: tables (typed columns with units),
// observations (sentences whose numbers were computed), and the configuration that produced them.
// Renderers turn a Report into a terminal table, markdown, CSV or a `flashlab.report/v1` JSON
// document; plots are drawn from the JSON, never parsed back from text.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace flashlab {

using json = nlohmann::json;

struct Column {
  std::string key;     // machine name in JSON: "max_abs"
  std::string header;  // what a person reads: "max |x - ref|"
  std::string unit;    // "", "s", "ms", "B", "FLOP", "FLOP/s", "elements", "ratio" ...
  // printf-like hint for the terminal ("{:.3f}", "{:.2e}", "bytes" for 1.0 MiB style, "" = auto).
  std::string format;
};

struct Table {
  std::string id;     // stable key: "errors", "timing", "kept"
  std::string title;  // heading printed above it
  std::vector<Column> columns;
  std::vector<std::vector<json>> rows;  // each row has columns.size() cells: number, string, bool
                                        // or null (not measured)
};

struct Report {
  std::string command;  // "run", "gradcheck", "lab memory", "bench", "list"
  json config;          // the exact configuration and seed
  std::vector<Table> tables;
  std::vector<std::string> observations;
  json figures = json::object();  // named figures with units: {"x": {"value": 1.5, "unit": "ms"}}
  bool ok = true;                 // false when a check in the report failed (exit status 1)
  // Ids of the versions whose code produced the figures: the JSON records the SHA-256 of each
  // one's sources ("sources"), so a grader can check a report against a tree.
  std::vector<std::string> version_ids;
};

}  // namespace flashlab
