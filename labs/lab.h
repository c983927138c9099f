// A chapter lab: computes its figures live from the project's own code and returns them as a
// Report (tables + observations + figures). `flashlab lab NAME` prints or saves it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "registry.h"
#include "report/report.h"

namespace flashlab {

struct LabOptions {
  std::string lang = "en";       // "en" or "zh": headings and observations
  std::string backend = "auto";  // "cpu", "cuda" or "auto" (cuda when a device is present)
  uint64_t seed = 0;
  // Chosen with --versions: the versions a lab that takes them runs instead of its own choice
  // (gradcheck: the backwards to check; bwd-ratio: the backward to time; no-lse: the backward
  // without a stored LSE). Empty: the lab's own choice.
  std::vector<const VersionInfo*> versions;
};

struct LabInfo {
  const char* name;  // "memory", "cost", ...
  const char* title_en;
  const char* title_zh;
  Report (*run)(const LabOptions&);
  // Ids of the tables it can produce (some only on a GPU): `--table` is checked against them
  // before the lab runs, and a test checks that the lab produces no other.
  std::vector<std::string_view> tables;
  const char* versions_help;  // what --versions chooses in this lab; null: it takes none
};

// All labs in the order `flashlab lab all` runs them.
std::span<const LabInfo> labs();
const LabInfo* find_lab(const std::string& name);

}  // namespace flashlab
