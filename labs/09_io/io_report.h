// The io lab's report in parts, put together by io.cpp: its tables (io_tables.cpp) and its
// observations (io_observations.cpp), from the runs of io_runs.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cuda/ceilings.h"
#include "io_runs.h"
#include "labs/lab.h"

namespace flashlab::lab::io_report {

// A figure for a table cell: null when it was not measured or is not finite.
json num(std::optional<double> x);
// A ceiling in tera-units (TB/s, TFLOP/s).
double tera(const cuda::Ceiling& c);
// The ceiling with this key, when it was measured; else nullptr.
const cuda::Ceiling* ceiling(const std::vector<cuda::Ceiling>& cs, const char* key);

Table io_table(const LabOptions& o, const std::vector<io_runs::PassRun>& all,
               const std::string& where);
Table kernels_table(const LabOptions& o, const std::vector<io_runs::PassRun>& all,
                    const std::string& where);
Table ratio_table(const LabOptions& o, const std::vector<io_runs::Ratio>& rs);
Table ceilings_table(const LabOptions& o, const std::vector<cuda::Ceiling>& cs,
                     const std::string& where);
// Each measured kernel at N = kRooflineN: FLOPs from the counters (or the model), DRAM bytes.
Table roofline_table(const LabOptions& o, const std::vector<io_runs::PassRun>& all);

// What the lecture's count says: the standard/FA ratio by head dim, atomic-dq against its floor.
void model_observations(const LabOptions& o, Report& rep, const std::vector<io_runs::Ratio>& rs,
                        const std::vector<io_runs::PassRun>& all);
// What the GPU's counters say (only when they were read).
void measured_observations(const LabOptions& o, Report& rep, const std::vector<io_runs::Ratio>& rs,
                           const std::vector<io_runs::PassRun>& all,
                           const std::vector<cuda::Ceiling>& cs, const std::string& gpu);

}  // namespace flashlab::lab::io_report
