// lab fp8's verdict on one row: its O and LSE against the fp64 reference, held to the budget
// `flashlab run` holds the version to (run/budget.h: bf16's for the bf16 rung, fp8's for the FP8
// rows), and finite. A row over budget is a wrong answer: the lab says so in one FAIL line and
// fails (ok = false, exit status 1), whatever its error or speed would otherwise show.
#pragma once

#include <string>

namespace flashlab::lab::fp8_check {

struct RowResult {
  std::string version;  // registry id
  std::string where;    // what ran, for the line: "GPU, outlier inputs", "CPU twin, normal inputs"
  double o_rel = 0, lse_rel = 0;
  double o_budget = 0, lse_budget = 0;
  bool finite = true;  // no NaN or Inf in O, none in LSE where the reference is finite
};

// "" when the row is within its budget; else its FAIL line, in English or Chinese.
std::string verdict(const RowResult& r, bool zh);

}  // namespace flashlab::lab::fp8_check
