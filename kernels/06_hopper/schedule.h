// The tile schedule of the Hopper forward, shared by the CUDA kernel and its CPU twin so that the
// two walk the same blocks in the same order by construction.
//
//   Q block (Br rows)  x  K/V blocks j = n_kv - 1, n_kv - 2, ..., 0   (from the diagonal down)
//
// Under the causal mask a block never visits the K blocks wholly above its diagonal, and it walks
// the rest from the last one down: the blocks that need a mask (the ragged last block, the blocks
// that cross the diagonal) come first, so the long tail of the loop runs with no mask code at all.
//
// Where the Q blocks sit. Without the mask they start at row 0 and the last one is ragged (Nq is
// not a multiple of Br): its rows past Nq are padding, loaded as zeros and never stored. Under the
// causal mask, which is aligned to the bottom-right corner, the blocks are aligned to the last row
// instead, so the ragged block is the first one: its padding rows lie above row 0 (q0 < 0), and
// it visits the fewest K blocks, where the last block visits all of them. Every block pays for
// Br rows whatever it holds, so the padding is cheapest where the keys are fewest: at d = 64
// (Br = 192), N = 1024, the blocks visit 27 K blocks per head instead of 32.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FLASHLAB_HD __host__ __device__
#else
#define FLASHLAB_HD
#endif

namespace flashlab::FLASHLAB_FOLDER {

struct BlockSchedule {
  int q0;        // first query row of the block: below 0 for a causal head's ragged first block
  int q_end;     // one past its last query row; rows [first_row(), q_end) are real
  int n_kv;      // K/V blocks visited
  int n_masked;  // the first n_masked of them (in visiting order) need the mask
  // The first real row: past the padding above row 0.
  FLASHLAB_HD int first_row() const { return q0 < 0 ? 0 : q0; }
  // The K/V block of iteration `it`: from the last visited block down to block 0.
  FLASHLAB_HD int kv_block(int it) const { return n_kv - 1 - it; }
};

// Query block `q_block` of a head with Nq queries and Nk keys; a query i sees keys
// j <= i + causal_offset when causal.
FLASHLAB_HD inline BlockSchedule block_schedule(int Br, int Bc, bool causal, int Nq, int Nk,
                                                int causal_offset, int q_block) {
  BlockSchedule s;
  const int padding = causal ? (Br - Nq % Br) % Br : 0;  // causal: the blocks end at row Nq
  s.q0 = q_block * Br - padding;
  s.q_end = s.q0 + Br < Nq ? s.q0 + Br : Nq;
  int n_kv = (Nk + Bc - 1) / Bc;
  int unmasked = Nk / Bc;  // whole blocks: no key past Nk
  if (causal) {
    // Keys up to the last row's diagonal are visited; keys up to the first real row's are seen
    // by every real row of the block, so the blocks wholly below that need no mask. (Padding
    // rows above row 0 may meet a mask there too: their results are never stored.)
    const int last_key = s.q_end - 1 + causal_offset;
    const int visited = last_key < 0 ? 0 : last_key / Bc + 1;
    n_kv = visited < n_kv ? visited : n_kv;
    const int seen_by_all = s.first_row() + causal_offset + 1;  // keys [0, seen_by_all)
    const int whole = seen_by_all <= 0 ? 0 : seen_by_all / Bc;
    unmasked = whole < unmasked ? whole : unmasked;
  }
  s.n_kv = n_kv;
  s.n_masked = n_kv - (unmasked < n_kv ? unmasked : n_kv);
  return s;
}

// hopper-deterministic's number of fp32 dQ splits: two, one when there is a single K block
// (docs/perf.md, hopper backward step 3). The backward's blocks are the outer-K pass's
// (common/fa2_bwd/blocks.h: Bc = 128 keys, Br = 64 queries per step at d = 128 and 128 at d = 64).
// The CUDA side allocates by them and the registry entry's workspace formula counts by them.
constexpr int64_t deterministic_dq_splits(int64_t Nk, int64_t Bc) {
  return (Nk + Bc - 1) / Bc < 2 ? (Nk + Bc - 1) / Bc : 2;
}

}  // namespace flashlab::FLASHLAB_FOLDER
