// What `flashlab run` was asked to do, after parsing and validation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/device_api.h"
#include "core/problem.h"
#include "core/rng.h"
#include "report/report.h"
#include "run/registry.h"

namespace flashlab {

enum class Backend { cpu, cuda };

std::string to_string(Backend b);

struct RunConfig {
  Problem problem;
  std::vector<const VersionInfo*> versions;  // registry order, no duplicates
  Backend backend = Backend::cpu;
  uint64_t seed = 0;
  InputKind inputs = InputKind::normal;  // --inputs: normal, or with FA3's outliers (core/rng.h)
  CpuOptions cpu;  // tile sizes and threads of the CPU twins
  int repeats = 3;
  int warmup = 1;
  int pause_ms = 0;  // idle before each pass's warm-ups on the GPU (bench --pause)
  int bitwise_repeats = 2;  // extra device runs compared bit for bit (the CPU compares every run)
  std::string dump_dir;     // empty: no dump
  // --check sample: the forward outputs compared with the fp64 reference on a few (batch, K/V
  // head) slices only (run/sample_check.h), not the whole problem.
  bool sample_check = false;
  // Said under the tables: versions that "all" left out because they cannot run here.
  std::vector<std::string> notes;
};

// What the run asks of a CUDA version's launch: --splits for a version that splits the keys,
// --ranks for a ring (its block kernels are picked when it runs: run/ring_blocks.h).
inline cuda::LaunchOptions launch_options(const RunConfig& c) {
  return {.kv_splits = c.cpu.splits, .ranks = c.cpu.ranks};
}

// Matmul FLOPs by the FA2 paper's convention: forward 4 B H Nq Nk d, halved under the causal mask;
// with a window, 4 B H d for every (row, key) pair a row sees; a packed batch, the sum over its
// sequences (no padding counted). Backward 2.5x forward.
double fwd_flops(const Problem& p);
inline double bwd_flops(const Problem& p) {
  return 2.5 * fwd_flops(p);
}

// Whether the run's fp64 reference and error budget are the forward's only: no selected version
// has a backward pass (decoding's split-kv, the FP8 rung, tiled alone), and the dtype is not
// fp64, whose budget estimates every output's rounding floor from the gradients too. The
// reference then keeps no P and runs no backward (a third of the work at one query row), and the
// budget has O and LSE only.
bool forward_only_reference(const RunConfig& c);

// The problem and options as a JSON object (the report's "config").
json config_json(const RunConfig& c);

}  // namespace flashlab
