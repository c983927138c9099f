// The machine's own ceilings, measured by micro-benchmarks (ceilings.cu), for the roofline the io
// lab draws: how many bytes per second HBM moves, and how many FLOP per second the tensor cores
// (mma.sync, the instruction the CUDA versions use; wgmma where the GPU and the build have sm_90a)
// and the fp32 FMA units (naive's matmuls) do. Each benchmark also checks its own result.
#pragma once

#include <cstddef>
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

// Floors of a pass of a given size, timed as the runner times a version's pass (cuda/runner.cu:
// L2 emptied by the same sweep before each run, two events around the launch, every run queued
// before any is waited for; the median of 10). What no kernel of that shape goes below: a
// launch's fixed cost and the ramp of a read from cold, which a long read hides and a short one
// does not.
struct PassFloor {
  double ms = 0;
  std::string how;
};
// A plain read of `bytes` (a multiple of 16): the read ceiling's ways at that size, the fastest.
PassFloor time_plain_read(size_t bytes);
// A kernel that does nothing, `blocks` x `threads`, with `smem_bytes` of dynamic shared memory a
// block (the carve-out of shared memory an SM must make for it is part of a launch).
PassFloor time_empty_kernel(int blocks, int threads, int smem_bytes);

}  // namespace flashlab::cuda
