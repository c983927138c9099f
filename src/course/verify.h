// `flashlab verify REPORT.json [--rerun]`: is this hand-in report what the tree in front of the
// grader produces?
//
//   1. the document is a flashlab.report/v1 report (checked against docs/report.schema.json, which
//      is built into the binary) that records its sources;
//   2. the SHA-256 of every source file it records (each version's folder, and kernels/common) is
//      recomputed from the tree: same, different, missing, or a file the report does not know;
//   3. with --rerun (run and gradcheck reports): the report's configuration runs again here and
//      its errors are compared with the recorded ones: bit for bit on the CPU in fp64 for a
//      deterministic version, otherwise within the output's error budget (run) or bound
//      (gradcheck), with the same verdict.
//
// Bad input (no such file, not JSON, not the schema, no sources, a configuration that cannot run
// here) is a UsageError (exit 2) raised before anything runs; mismatches make the report's ok
// false (exit 1).
#pragma once

#include <string>

#include "report/report.h"

namespace flashlab {

class Progress;

struct VerifyOptions {
  std::string report;      // path of the report
  std::string root = ".";  // the tree whose sources are hashed
  bool rerun = false;
};

Report verify_report(const VerifyOptions& o, Progress& progress);

}  // namespace flashlab
