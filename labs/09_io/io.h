// The io lab with what it learns about the machine passed in, so that every path (no GPU; a GPU
// whose counters cannot be read; a GPU with counters) is reachable from a test. io() in io.cpp
// fills the setup from the machine and calls io_lab().
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cuda/ceilings.h"
#include "cuda/counters.h"
#include "io_runs.h"
#include "labs/lab.h"

namespace flashlab::lab {

struct IoSetup {
  bool gpu = false;              // run on the GPU (else the modeled half only)
  std::string gpu_name;          // for the headings
  std::string why_no_gpu;        // when gpu is false: why ("no CUDA device: ...", "--backend cpu")
  cuda::CounterStatus counters;  // when gpu: whether the counters can be read
  std::function<std::vector<cuda::Ceiling>()> ceilings;  // when gpu: the micro-benchmarks
  io_runs::RunWithCounters run;  // when gpu and counters: one version with counters
};

Report io_lab(const LabOptions& o, const IoSetup& setup);

}  // namespace flashlab::lab
