#include "run/ring_blocks.h"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

namespace flashlab {

namespace {

// The first of `ids` that has the pass, runs here and takes every problem (block_refusal); else
// null, with the reasons of each in `why`.
const VersionInfo* first_taking(std::span<const char* const> ids, bool forward,
                                const std::vector<Problem>& problems, std::string& why) {
  std::string reasons;
  for (const char* id : ids) {
    const VersionInfo* v = find_version(id);
    std::string no;
    if (!v || !v->cuda)
      no = "not in this build's CUDA side";
    else if (!(forward ? v->cuda->forward != nullptr : v->cuda->backward != nullptr))
      no = forward ? "no forward" : "no backward";
    else if (const std::string u = cuda_unavailable(*v); !u.empty())
      no = u;
    else
      no = block_refusal(*v->cuda, forward, problems);
    if (no.empty()) return v;
    reasons += fmt::format("{}{}: {}", reasons.empty() ? "" : "; ", id, no);
  }
  why = reasons;
  return nullptr;
}

}  // namespace

std::string block_refusal(const cuda::Version& v, bool forward,
                          const std::vector<Problem>& problems) {
  for (const Problem& b : problems) {
    if (const unsigned missing = b.axes() & ~v.axes)
      return fmt::format("does not take {}", axis_name(missing));
    std::string c = v.check ? v.check(b) : std::string();
    // A version whose backward takes fewer problems than its forward: the reason the runner gives
    // when it runs such a forward alone.
    if (c.empty() && !forward) c = cuda::backward_refusal(v, b);
    if (!c.empty())
      return fmt::format("refuses the {} x {} {} block: {}", b.shape.Nq, b.shape.Nk,
                         b.causal ? "causal" : "full", c);
  }
  return {};
}

RingBlocks ring_blocks(const cuda::Version& ring, const Problem& p, int ranks) {
  RingBlocks b;
  if (!ring.ring) {
    b.why = "not a ring";
    return b;
  }
  const std::vector<Problem> problems = ring.ring->block_problems(p, ranks > 0 ? ranks : 1);
  std::string why_f, why_b;
  b.forward = first_taking(ring.ring->forward_blocks, true, problems, why_f);
  b.backward = first_taking(ring.ring->backward_blocks, false, problems, why_b);
  if (!b.forward)
    b.why = "no forward kernel for the ring's blocks here (" + why_f + ")";
  else if (!b.backward)
    b.why = "no backward kernel for the ring's blocks here (" + why_b + ")";
  return b;
}

cuda::LaunchOptions with_ring_blocks(const cuda::Version& ring, const Problem& p,
                                     cuda::LaunchOptions launch) {
  if (launch.ring_forward && launch.ring_backward) return launch;
  const RingBlocks b = ring_blocks(ring, p, launch.ranks);
  if (!b.why.empty()) throw std::runtime_error(b.why);
  launch.ring_forward = b.forward->cuda;
  launch.ring_backward = b.backward->cuda;
  return launch;
}

}  // namespace flashlab
