// What the folder's twin offers its tests beyond the registry: a run of either pass on a given
// sharding that also returns what it counted rank by rank and step by step (core/ring.h).
#pragma once

#include <string>

#include "core/problem.h"
#include "core/ring.h"
#include "schedule.h"

namespace flashlab::cpu::FLASHLAB_FOLDER {

using ::flashlab::FLASHLAB_FOLDER::Sharding;

// The ranks a run uses: o.ranks, or one.
inline int ranks_of(const CpuOptions& o) {
  return o.ranks > 0 ? o.ranks : 1;
}

// "" when the twin can run p on `ranks` ranks; else the one sentence why not.
std::string check_ranks(const Problem& p, int ranks);

// The passes, counting into `counts` (its fwd_* or bwd_* rows; may be null).
void ring_forward(const Problem& p, const Inputs& in, const CpuOptions& o, Sharding sh,
                  Forward& out, Counters& cnt, RingCounts* counts);
void ring_backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                   Sharding sh, Gradients& g, Counters& cnt, RingCounts* counts);

// The counts of both passes by a dry run, with the closed forms.
RingCounts ring_counts(const Problem& p, const CpuOptions& o, Sharding sh);

}  // namespace flashlab::cpu::FLASHLAB_FOLDER
