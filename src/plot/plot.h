// Figures drawn from a saved `flashlab.report/v1` JSON document (never from printed text).
//
// Supported reports:
//   - `lab cost` (table "cost"): IO and matmul FLOPs vs N, standard vs FlashAttention, log-log;
//     and the roofline times.
//   - `bench` (table "bench"): TFLOP/s vs N, one panel per (pass, dtype, d, causal), one line per
//     version.
//   - `lab io`: the measured roofline and the standard/FA traffic ratio (plot/roofline.h).
#pragma once

#include <string>

#include "report/report.h"

namespace flashlab {

// A standalone SVG document. Throws std::invalid_argument for a report it cannot draw.
std::string plot_svg(const json& report);

}  // namespace flashlab
