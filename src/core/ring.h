// Context parallelism: one problem over R ranks (kernels/09_ring). What such a version declares
// beyond a plain one (VersionEntry::ring), and what its schedule counts, rank by rank and step by
// step, so that `flashlab run --ranks R` and `flashlab lab ring` can print it.
//
//   step t:   rank r computes its Q shard against the K/V shard of rank (r - t) mod R
//             and sends the block it holds to rank r + 1 (forward: K, V; backward: K, V, dK, dV)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"

namespace flashlab {

// The most ranks --ranks takes.
inline constexpr int kMaxRanks = 64;

// Per rank, per step: [rank][step].
using PerRankStep = std::vector<std::vector<int64_t>>;

// What a ring's schedule moves and computes, counted by walking it (a dry run of the twin, the same
// threads and mailboxes without the arithmetic), and the closed forms the counts must equal.
struct RingCounts {
  int ranks = 1;
  const char* sharding = "";   // "zigzag" or "contiguous"
  std::vector<int64_t> rows;   // each rank's query rows (its shard)
  PerRankStep fwd_bytes;       // bytes rank r sends after step t of the forward (K, V)
  PerRankStep bwd_kv_bytes;    // ... of the backward: K, V
  PerRankStep bwd_grad_bytes;  // ... and dK, dV (at the last step: home to their owner)
  PerRankStep fwd_flops;       // matmul FLOPs of the tiles rank r computes at step t
  PerRankStep bwd_flops;
  std::vector<int64_t> fwd_closed, bwd_closed;  // the closed forms of each rank's bytes in all
};

// What a ring version adds to its registry entry.
struct RingSpec {
  const char* sharding;  // "zigzag" or "contiguous"
  // Why the twin cannot run the problem on `ranks` ranks, in one sentence ("" when it can).
  std::string (*check)(const Problem& p, int ranks);
  // The counts of the problem at the options (o.ranks ranks; 0 means 1).
  RingCounts (*counts)(const Problem& p, const CpuOptions& o);
};

// A rank's count over its steps.
inline int64_t row_sum(const std::vector<int64_t>& per_step) {
  int64_t s = 0;
  for (int64_t x : per_step) s += x;
  return s;
}

}  // namespace flashlab
