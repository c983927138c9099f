// The io lab's runs: every pass of every version at every shape, with the lecture's count and,
// on a GPU, the hardware counters of each kernel (io_tables.cpp and io_observations.cpp turn them
// into tables and observations; io.cpp puts the report together).
// FLASHLAB_IO_LOG=1 prints a line per measured run on stderr (for logs of long device runs).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cuda/counters.h"
#include "cuda/runner.h"
#include "io_model.h"

namespace flashlab::lab::io_runs {

inline constexpr int64_t kNs[] = {512, 1024, 2048, 4096, 8192, 16384};
inline constexpr int64_t kDs[] = {128, 64};
inline constexpr int64_t kRooflineN = 4096;
inline constexpr double kSectorBytes = 32;
inline constexpr double kHmmaFlops = 2.0 * 16 * 8 * 16;  // one mma.sync m16n8k16

// One kernel as the counters saw it.
struct Kernel {
  std::string name;  // short name, "#k" added when the pass launches it more than once
  std::map<std::string, double> v;
  std::optional<Counters> model;  // the lecture's count for this kernel, where there is one

  std::optional<double> get(const char* key) const {
    const auto it = v.find(key);
    return it == v.end() ? std::nullopt : std::optional<double>(it->second);
  }
  std::optional<double> dram() const {
    const auto r = get("dram_read_bytes"), w = get("dram_write_bytes");
    return r && w ? std::optional<double>(*r + *w) : std::nullopt;
  }
  std::optional<double> seconds() const {
    const auto t = get("time_ns");
    return t ? std::optional<double>(*t * 1e-9) : std::nullopt;
  }
  // FLOPs from the counters: tensor-core instructions and fp32 FMAs.
  std::optional<double> flops() const {
    const auto h = get("hmma_inst"), f = get("ffma_thread_inst");
    if (!h && !f) return std::nullopt;
    return kHmmaFlops * h.value_or(0) + 2 * f.value_or(0);
  }
};

// One pass of one version at one shape.
struct PassRun {
  const VersionInfo* version;
  bool backward;
  Problem p;
  io_model::PassModel model;
  bool measured = false;
  std::vector<Kernel> kernels;
  std::string why_not;  // set when the GPU half was attempted and failed for this pass
  int replays = 0;
  std::string note;

  const char* pass() const { return backward ? "bwd" : "fwd"; }
  double sum(const char* key) const {
    double s = 0;
    for (const Kernel& k : kernels) s += k.get(key).value_or(0);
    return s;
  }
  std::optional<double> dram() const {
    if (!measured) return std::nullopt;
    return sum("dram_read_bytes") + sum("dram_write_bytes");
  }
  std::optional<double> sm_read_hit_pct() const {
    const double r = sum("l2_sm_read_sectors");
    return measured && r > 0 ? std::optional<double>(100 * sum("l2_sm_read_hit_sectors") / r)
                             : std::nullopt;
  }
  std::optional<double> seconds() const {
    return measured ? std::optional<double>(sum("time_ns") * 1e-9) : std::nullopt;
  }
};

// a / b, when both are there and b > 0.
std::optional<double> ratio(std::optional<double> a, std::optional<double> b);

// The share of the sectors the SMs read at L2 that hit there, in percent.
std::optional<double> sm_read_hit_pct(const Kernel& k);

// Runs one version once with counters: O and LSE in RunResult::fwd, the counters of each pass.
// A backward-only version gets the tiled forward's O and LSE. Throws with the reason it cannot run.
using RunWithCounters =
    std::function<cuda::RunResult(const VersionInfo&, const Problem&, const Forward* tiled)>;

// The GPU's: the version's own checks and the device memory first, then cuda::run with
// cuda::counters_only() on inputs from `seed` (made once per head dim).
RunWithCounters gpu_runner(uint64_t seed);

// Every pass of every version at every shape: the model always, the counters when `run` is given.
// A version whose model cannot be counted (a starter folder still to be written, which says
// `not implemented`) is left out, with the reason added to `left_out` when given.
std::vector<PassRun> collect(const RunWithCounters* run,
                             std::vector<std::string>* left_out = nullptr);

// The pass of version `id` at (d, N), or nullptr.
const PassRun* find(const std::vector<PassRun>& all, const char* id, bool bwd, int64_t d,
                    int64_t N);
// The kernel of a pass by its name, or nullptr.
const Kernel* find_kernel(const PassRun* r, const char* name);

// standard = naive fwd + bwd, FA = tiled fwd + atomic-dq bwd.
struct Ratio {
  int64_t d = 0, N = 0;
  double std_model = 0, fa_model = 0;
  std::optional<double> std_dram, fa_dram, std_l2, fa_l2;
};

// At every (d, N) where all four passes are there.
std::vector<Ratio> ratios(const std::vector<PassRun>& all);

}  // namespace flashlab::lab::io_runs
