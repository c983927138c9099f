// The machine's own ceilings, measured by micro-benchmarks (ceilings.cu), for the roofline the io
// lab draws: how many bytes per second HBM moves, and how many FLOP per second the tensor cores
// (mma.sync, the instruction the CUDA versions use; wgmma where the GPU and the build have sm_90a)
// and the fp32 FMA units (naive's matmuls) do. Each benchmark also checks its own result.
#pragma once

#include <string>
#include <vector>

namespace flashlab::cuda {

struct Ceiling {
  std::string key;   // "hbm_copy", "hbm_read", "mma_sync_bf16", "wgmma_bf16", "ffma_fp32"
  std::string name;  // short, for legends: "HBM copy", "mma.sync", "wgmma", "fp32 FMA"
  std::string unit;  // "B/s" or "FLOP/s"
  double value = 0;  // median of the timed runs; 0 when not measured (why_not says why)
  std::string how;   // what ran: sizes, grid, repeats
  bool check_ok = false;
  std::string check;    // what the result check found
  std::string why_not;  // set when the benchmark could not run here
};

// Runs every benchmark on the current device (a few hundred milliseconds). Throws
// std::runtime_error without a device or on a CUDA error.
std::vector<Ceiling> measure_ceilings();

}  // namespace flashlab::cuda
