// `flashlab bench`: the FA2 paper's sweep. A fixed number of tokens (B*N = 16k) and hidden size
// (2048, so H = 2048/d) while N grows from 512 to 16k: every point does the same number of
// matmul FLOPs per token row, so TFLOP/s are comparable along N.
//
// Each (dtype, d, causal) configuration is first checked against the fp64 reference at a small
// shape (B=1, H=2, the smallest N of the sweep, capped at 1024): a version that fails there has
// ok = no on every row of that configuration. On the CPU the sweep is scaled down (B*N = 512
// tokens, hidden 128) so the command can run without a GPU; the report says so.
#pragma once

#include <cstdint>
#include <vector>

#include "report/report.h"
#include "run/config.h"

namespace flashlab {

class Progress;

struct BenchConfig {
  Backend backend = Backend::cuda;
  std::vector<int64_t> Ns;
  std::vector<int64_t> ds;
  std::vector<DType> dtypes;
  std::vector<bool> causal;  // false, true, or both
  std::vector<const VersionInfo*> versions;
  // The passes timed (--passes): a version none of whose passes is asked for is left out; one
  // asked for its forward only skips its backward in the timed runs.
  bool time_fwd = true, time_bwd = true;
  int64_t tokens = 16384;  // B * N
  int64_t hidden = 2048;   // H * d
  int64_t heads_kv = 0;    // K/V heads at every point (0: H; grouped heads: it divides H)
  // A packed batch of these lengths instead of the N sweep (--seqlens, or --varlen's seeded
  // lengths): one point per dtype, d and mask, FLOPs counted per sequence.
  std::vector<int64_t> varlen;
  int repeats = 10, warmup = 3;
  int pause_ms = 0;  // --pause: idle before each pass's warm-ups (GPU)
  uint64_t seed = 0;
  CpuOptions cpu;
};

// COUNT lengths drawn uniformly from [lo, hi] by the seed (its own stream): bench --varlen.
std::vector<int64_t> seeded_lengths(uint64_t seed, int64_t count, int64_t lo, int64_t hi);

// The paper's sweep on cuda, the small sweep on cpu (lists left empty are filled in).
void fill_bench_defaults(BenchConfig& b);

// Ranges, each version's support of each shape (cuda), host memory. UsageError on failure.
void validate_bench(const BenchConfig& b);

// The host memory the sweep holds at its peak (its check points and its timed points).
double bench_host_bytes(const BenchConfig& b);

Report run_bench(const BenchConfig& b, Progress& progress);

}  // namespace flashlab
