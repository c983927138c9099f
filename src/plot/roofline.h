// The io lab's figure (`flashlab lab io --json io.json && flashlab plot io.json -o io.svg`):
//
//   roofline, one panel per head dim   x = FLOP per DRAM byte, y = FLOP/s, both log; the roofs
//                                      min(ceiling, HBM bandwidth x intensity) for every compute
//                                      ceiling the lab measured; one point per kernel, one colour
//                                      per version (table "roofline", table "ceilings")
//   standard / FA traffic against N    the lecture's count, DRAM and L2 as measured (table "ratio")
//
// A report made without a GPU has only the ratio's modeled line, and the figure draws just that.
#pragma once

#include "plot/chart.h"
#include "report/report.h"

namespace flashlab::plot {

// True for a `lab io` report.
bool is_io_report(const json& doc);

// Throws std::invalid_argument when the report lacks the io lab's "ratio" table.
Chart io_chart(const json& doc);

}  // namespace flashlab::plot
