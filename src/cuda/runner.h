// Running a CUDA version from the host: device discovery, memory checks, upload (fp16/bf16 words),
// poisoning, timing with CUDA events (L2 flushed before every repeat, nothing allocated inside the
// timed region) and download. Built as a stub that reports "no device" when CUDA is off.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/device.h"
#include "core/device_api.h"
#include "core/problem.h"
#include "cuda/counters.h"

namespace flashlab::cuda {

struct RunOptions {
  int warmup = 3;
  int repeats = 10;
  // Milliseconds of idle before each pass's warm-ups (bench --pause): every pass then starts with
  // the board's power budget restored, whatever ran before it (docs/perf.md, "The pass on a
  // timeline").
  int pause_ms = 0;
  bool flush_l2 = true;     // empty L2 before every timed repeat (cuda/l2_flush.h)
  int bitwise_repeats = 2;  // how many extra runs to compare outputs bitwise (0: skip)
  // Read hardware counters around every kernel of each pass (cuda/counters.h), in extra runs
  // after the first and before any timing, each after the L2 flush whatever flush_l2 says. Check
  // counter_status() first: run() throws when the counters cannot be read.
  bool counters = false;
  LaunchOptions launch;  // passed to the version (DeviceTensors::launch) and its workspace
};

// One run for the answer and the counters around each kernel: no warm-up, no timing, no bitwise
// repeats (the io lab and its GPU tests).
inline RunOptions counters_only() {
  RunOptions o;
  o.warmup = o.repeats = o.bitwise_repeats = 0;
  o.flush_l2 = false;
  o.counters = true;
  return o;
}

struct PassTiming {
  std::vector<double> ms;  // one per timed repeat
};

struct RunResult {
  Forward fwd;      // O, LSE (downloaded, as doubles) when the version has a forward
  Gradients grads;  // dQ, dK, dV when the version has a backward
  PassTiming fwd_time, bwd_time;
  // The SM clock just before each pass's timed repeats and just after them (core/clock.h); not
  // known for a ring, or where NVML cannot be read.
  PassClock fwd_clock, bwd_clock;
  int64_t workspace_bytes = 0;
  int64_t peak_device_bytes = 0;   // all buffers this run allocated, workspace included
  bool bitwise_repeatable = true;  // outputs identical over bitwise_repeats extra runs
  int bitwise_mismatches = 0;      // how many of those runs differed from the first
  // The same count per output: in how many of the extra runs each one differed from the first
  // (atomic-dq's dQ is expected to; its dK and dV are not).
  struct PerOutput {
    int O = 0, LSE = 0, dQ = 0, dK = 0, dV = 0;
  } differing_runs;
  // A version whose backward does not take the problem its forward takes: why (backward_refusal,
  // core/device_api.h); its forward ran alone. Empty otherwise.
  std::string backward_refused;
  PassCounters fwd_counters, bwd_counters;  // filled when RunOptions::counters is set
  // A ring (Version::ring): the kernels its ranks ran on their blocks ("hopper, hopper-
  // deterministic"), and the timed runs' compute and transfer times per rank and step.
  std::string ring_blocks;
  RingStepTimes ring_steps;
};

// Bytes the run would allocate on the device for this version (inputs, outputs, workspace); for a
// ring, on the GPU of its largest rank.
// run() also allocates the L2 flush's buffer (cuda/l2_flush.h: four times the L2 size) when it
// flushes (RunOptions::flush_l2 or counters), checks it against the free memory with the rest, and
// counts it in RunResult::peak_device_bytes.
int64_t required_device_bytes(const Version& v, const Problem& p, const LaunchOptions& launch);

// Runs `v` on the device. For a backward-only version, `fwd_in` supplies O and LSE (from the
// tiled forward of the same backend). A ring runs over opt.launch.ranks GPUs, its block kernels
// picked from the registry unless opt.launch names them (run/ring_blocks.h). Throws
// std::runtime_error with a clear message on any CUDA error or when the problem does not fit.
RunResult run(const Version& v, const Problem& p, const Inputs& in, const Forward* fwd_in,
              const RunOptions& opt);

// The same for a forward on inputs drawn on the device from `seed` (normals from a hash of the
// seed, the tensor and the index: not core/rng.h's numbers) and, for a paged cache, the seed's
// shuffled block table: for timing shapes whose fp64 inputs would not fit the host (`lab decode`).
// Nothing here checks the answer against a reference; the caller can check what it downloads.
RunResult run_generated(const Version& v, const Problem& p, uint64_t seed, const RunOptions& opt);

}  // namespace flashlab::cuda
