// `flashlab run`: reference -> validate -> time, in that order.
//
//   1. inputs from the seed (rounded to the dtype once), the fp64 reference (O, LSE, P, dQ, dK, dV)
//   2. the error budget (one storage-dtype computation)
//   3. each version on the backend: warm-up runs, timed runs, every run's outputs compared bitwise
//      with the first; the first run's outputs compared with the reference
//
// Backward-only versions take O and LSE from the registry's feeding forward (tiled) on the same
// backend (run once, untimed); naive's backward uses naive's own forward, whose P it needs.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/device_api.h"
#include "report/report.h"
#include "run/budget.h"
#include "run/compare.h"
#include "run/config.h"
#include "run/sample_check.h"
#include "util/timing.h"

namespace flashlab {

class Progress;

struct VersionOutcome {
  const VersionInfo* version = nullptr;
  bool has_fwd = false, has_bwd = false;
  Forward fwd;      // the first run's O and LSE (P dropped)
  Gradients grads;  // the first run's dQ, dK, dV
  TimeStats fwd_time, bwd_time;
  // The SM clock before and after each pass's timed repeats (GPU runs where NVML can be read).
  cuda::PassClock fwd_clock, bwd_clock;
  std::optional<bool> bitwise_repeat;  // every run gave the first run's bits
  int64_t workspace_bytes = 0;
  std::optional<int64_t> peak_device_bytes;
  std::map<std::string, ErrorStats> errors;  // by output name
  std::vector<std::string> failures;         // outputs over budget, NaN/Inf, broken promises
  // "not implemented: ... (kernels/exercises/...:LINE)" when a starter reached a step still to
  // be written, or "error: ..." when the version threw anything else: either way it has no
  // outputs and fails, and the other versions of the run go on.
  std::string not_implemented;
  // A version whose backward takes fewer problems than its forward (cuda::Version::
  // backward_check): why its backward did not run; its forward ran and is judged alone.
  std::string backward_refused;
  // A ring on the GPUs: the kernels its ranks ran on their blocks, and the timed runs' compute and
  // transfer times per rank and step (core/device_api.h).
  std::string ring_blocks;
  cuda::RingStepTimes ring_steps;
  bool ok() const { return failures.empty(); }
};

struct RunOutcome {
  Inputs inputs;
  // --check sample: the slices compared, and the problem they come from; the reference, its
  // gradients and the budget are then the stacked slices' (run/sample_check.h).
  std::vector<CheckSlice> slices;
  Problem problem;
  Forward ref_fwd;
  Gradients ref_grads;
  ErrorBudget budget;
  double reference_s = 0, budget_s = 0;
  std::vector<VersionOutcome> versions;
};

// One version on the configured backend: warm-up, timed runs, bitwise repeat; not yet judged.
// shared_fwd: O and LSE for a backward-only version (see shared_forward).
VersionOutcome run_version(const RunConfig& c, const VersionInfo& v, const Inputs& in,
                           const Forward* shared_fwd, Progress& progress, const std::string& label);

// The feeding forward (run/registry.h) on the configured backend, once, untimed.
Forward shared_forward(const RunConfig& c, const Inputs& in);

// Inputs, the fp64 reference and the error budget (steps 1 and 2 above).
RunOutcome prepare(const RunConfig& c, Progress& progress);

// Runs everything (validation is the caller's job: validate_run + check_memory first).
RunOutcome run_versions(const RunConfig& c, Progress& progress);

// Compare a version's outputs with the reference and judge them against the budget.
void judge(VersionOutcome& v, const RunOutcome& ref);

// The tables ("errors", "timing", "budget"), observations and figures of a run.
Report run_report(const RunConfig& c, const RunOutcome& r);

}  // namespace flashlab
