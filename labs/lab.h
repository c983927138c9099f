// A chapter lab: computes its figures live from the project's own code and returns them as a
// Report (tables + observations + figures). `flashlab lab NAME` prints or saves it.
//
// One folder is one lab: labs/NN_name/, found by the build (labs/labs.cmake), which runs the labs
// in folder order (`lab all`) and lists them in `lab list`, the help text and the READMEs. A lab
// declares itself once, at global scope in one of its files, after its entry point:
//
//   Report my_lab(const LabOptions&);
//   FLASHLAB_LAB({.name = "my-lab", .title_en = "...", .title_zh = "...", .run = my_lab,
//                 .tables = {"my_table"}});
//
// and nothing outside the folder names it. Helpers several labs share live in labs/common/.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "report/report.h"
#include "run/registry.h"

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
  const char* versions_help = nullptr;  // what --versions chooses in this lab; null: it takes none
  const char* folder = nullptr;         // set by the build: "labs/05_bwd_ratio"
};

// All labs in the order `flashlab lab all` runs them (the folders' order).
std::span<const LabInfo> labs();
const LabInfo* find_lab(const std::string& name);

}  // namespace flashlab

// Declares a lab folder's entry (FLASHLAB_LAB_FOLDER is set by the build for each folder: lab_<folder>).
#define FLASHLAB_LAB(...)                                      \
  namespace flashlab::lab_entries {                            \
  extern const ::flashlab::LabInfo FLASHLAB_LAB_FOLDER;        \
  const ::flashlab::LabInfo FLASHLAB_LAB_FOLDER = __VA_ARGS__; \
  }                                                            \
  static_assert(true, "FLASHLAB_LAB(...) ends with a semicolon")
