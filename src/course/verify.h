// `flashlab verify REPORT.json [--rerun]`: is this hand-in report what the tree in front of the
// grader produces, and does it pass?
//
//   1. the document is a flashlab.report/v1 report (checked against docs/report.schema.json, which
//      is built into the binary) that records its sources; it is read as hostile input
//      (course/handin.h): bounded in size and depth, every field checked before it is used;
//   2. its own verdict: a report whose ok is false fails, and in a run report each row's ok must
//      follow from its rel and budget, each row's budget must be the config's, and the budget
//      factor this flashlab's;
//   3. the SHA-256 of every source file it records (each version's folder, kernels/common, and the
//      harness: src/, reference/, labs/) is recomputed from the tree: same, different, missing,
//      or a file the report does not know;
//   4. with --rerun (run, gradcheck and single-lab reports): the tree must be the one this binary
//      was built from (else its code is not what runs); the report's configuration runs again
//      here, each version once, and every recorded error is compared: bit for bit on the CPU in
//      fp64 for a deterministic version, otherwise within 5% of the rerun's (or 1% of the budget,
//      whichever is wider), with the same verdict; the budgets are recomputed and compared; a
//      gradcheck's figures exactly (deterministic versions) or by verdict; a lab's counts exactly.
//
// Bad input (no such file, not JSON, not the schema, no sources, a field of the wrong type, a
// configuration that cannot run here) is a UsageError (exit 2) raised before anything runs;
// failures and mismatches make the report's ok false (exit 1), each with a line naming it.
#pragma once

#include <string>
#include <vector>

#include "report/report.h"

namespace flashlab {

class Progress;

struct VerifyOptions {
  std::string report;      // path of the report
  std::string root = ".";  // the tree whose sources are hashed
  bool rerun = false;
};

Report verify_report(const VerifyOptions& o, Progress& progress);

// ---- grading a class ----
//
// `flashlab verify a.json b.json ...` or `flashlab verify FOLDER`: each hand-in is verified as
// above (a report verify refuses is a row saying why, not the end of the run), the course's
// policy (--require) is applied to it, and one table has a row per student and version: PASS or
// FAIL, the version's worst error against its budget, and what is wrong.
//
// A FOLDER holds the hand-ins as *.json files, directly or in one subfolder per student; the
// student is the file's path below the folder, without ".json".
//
// --require KEY=VALUE, any number of times:
//   versions=ID,ID   the hand-in runs (or its lab takes) each of these versions
//   command=CMD      it is a report of this command ("run", "gradcheck", "lab no-lse")
//   dtype=fp64       its config's dtype        backend=cpu   its config's backend
//   min-n=256        its Nq and Nk (or N) are at least this
//   budget-factor=4  its error budget's factor is this (no looser budget than the course's)
struct ClassOptions {
  std::vector<std::string> paths;  // reports and folders
  std::string root = ".";
  bool rerun = false;
  std::vector<std::string> require;
};

// Most hand-ins one run grades (a folder with more is refused before anything is read).
inline constexpr size_t kMaxHandins = 2000;

Report verify_class(const ClassOptions& o, Progress& progress);

}  // namespace flashlab
