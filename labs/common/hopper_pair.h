// The Hopper rung in the labs that compare backward versions on the GPU (determinism, bwd-ratio):
// `hopper` (atomic dQ by bulk reduce-add) and `hopper-deterministic` (dQ in a fixed order) are
// measured beside the mma.sync rungs only when the GPU is in use and can run them. On the CPU
// backend they are left out: the labs are about the GPU kernels' behaviour, and the Hopper twins
// follow the same outer-K schedule as atomic-dq's, so their rows would repeat atomic-dq's.
#pragma once

#include <functional>
#include <string>

#include "labs/lab.h"
#include "run/registry.h"

namespace flashlab::lab {

inline constexpr const char* kHopper = "hopper";
inline constexpr const char* kHopperDeterministic = "hopper-deterministic";

// "" when the lab includes the Hopper pair: `gpu` is set, this build registers both versions and
// `unavailable` (cuda_unavailable, or a test's stand-in) has no objection to either. Otherwise
// why not, as a clause in the lab's language.
std::string hopper_pair_absent(
    const LabOptions& o, bool gpu,
    const std::function<std::string(const VersionInfo&)>& unavailable = [](const VersionInfo& v) {
      return cuda_unavailable(v);
    });

// The observation line a lab prints when the pair is absent: which versions, and `why`.
std::string hopper_pair_absent_note(const LabOptions& o, const std::string& why);

}  // namespace flashlab::lab
