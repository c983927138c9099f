// The kernels a ring's ranks run on their pairs of chunks (core/device_api.h: RingCuda). The ring
// names the versions it may borrow, best first; the harness, which sees the registry, takes for
// each pass the first one that runs on this GPU and takes every pair of the problem. The ring
// folder itself never names another folder's code: it reaches it through these pointers.
#pragma once

#include <string>
#include <vector>

#include "core/device_api.h"
#include "core/problem.h"
#include "run/registry.h"

namespace flashlab {

struct RingBlocks {
  const VersionInfo* forward = nullptr;
  const VersionInfo* backward = nullptr;
  std::string why;  // set when a pass has no kernel: one sentence
};

// Why v's kernels of one pass (the forward, else the backward; v has it) do not take every block
// of `problems`, or empty: an axis it lacks, its check, and for the backward the check of a
// backward that takes fewer problems than its forward (cuda::backward_refusal), in the runner's
// words. Whether the version runs on this GPU is not asked here.
std::string block_refusal(const cuda::Version& v, bool forward,
                          const std::vector<Problem>& problems);

// For the ring `ring` running p over `ranks` ranks on the GPU in front of us.
RingBlocks ring_blocks(const cuda::Version& ring, const Problem& p, int ranks);

// `launch` with its ring_forward and ring_backward filled (left as they are when already set).
// Throws std::runtime_error with ring_blocks' reason when a pass has no kernel.
cuda::LaunchOptions with_ring_blocks(const cuda::Version& ring, const Problem& p,
                                     cuda::LaunchOptions launch);

}  // namespace flashlab
