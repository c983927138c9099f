// The tile schedule of the Hopper forward, shared by the CUDA kernel and its CPU twin so that the
// two walk the same blocks in the same order by construction.
//
//   Q block (Br rows)  x  K/V blocks j = kv_end - 1, kv_end - 2, ..., kv_begin   (diagonal down)
//
// A block never visits the K blocks none of its rows sees: under the causal mask those wholly
// above its diagonal, with a sliding window also those wholly left of it. It walks the rest from
// the last one down: the blocks that need a mask (the ragged last block, the blocks the diagonal
// or the window's right side crosses) come first and those the window's left side crosses come
// last, so the middle of the loop runs with no mask code at all.
//
//            kv_begin          kv_end
//   keys:  [ tail masked | no mask | masked ]      walked right to left: it = 0 is kv_end - 1
//
// Where the Q blocks sit. Without a mask they start at row 0 and the last one is ragged (Nq is
// not a multiple of Br): its rows past Nq are padding, loaded as zeros and never stored. Under the
// causal mask or a window, which are aligned to the bottom-right corner, the blocks are aligned to
// the last row instead, so the ragged block is the first one: its padding rows lie above row 0 (q0 < 0), and
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
  int q0;        // first query row of the block: below 0 for a banded head's ragged first block
  int q_end;     // one past its last query row; rows [first_row(), q_end) are real
  int kv_begin;  // the first K/V block visited (0 unless a window's left side skips some)
  int n_kv;      // K/V blocks visited: kv_begin .. kv_begin + n_kv - 1
  int n_masked;  // the first n_masked of them (in visiting order) need the mask ...
  int n_tail;    // ... and so do the last n_tail (a window's left side crosses them)
  // The first real row: past the padding above row 0.
  FLASHLAB_HD int first_row() const { return q0 < 0 ? 0 : q0; }
  // The K/V block of iteration `it`: from the last visited block down to kv_begin. kLeft = false
  // promises that no window's left side skips blocks (kv_begin = 0, n_tail = 0), which spares a
  // register where the kernel has none to spare.
  template <bool kLeft = true>
  FLASHLAB_HD int kv_block(int it) const {
    return kLeft ? kv_begin + n_kv - 1 - it : n_kv - 1 - it;
  }
  template <bool kLeft = true>
  FLASHLAB_HD bool masked(int it) const {
    return kLeft ? it < n_masked || it >= n_kv - n_tail : it < n_masked;
  }
};

// Query block `q_block` of a head with Nq queries and Nk keys. Query i sees the keys
// [i + offset - left, i + offset + right] of [0, Nk) (offset = Nk - Nq; the band of
// kernels/common/band.h: the causal mask is (Nk, 0), a window (L, R), no mask (Nk, Nq) with
// banded = false).
//
// left_side = false promises that the band has no left side (the causal mask, a window with no
// left bound: `left` reaches past key 0 for every row), so the block starts at key block 0 and no
// block needs the mask for a left side; a kernel built for such bands can pass it as a constant
// and skip that arithmetic once per tile and thread.
FLASHLAB_HD inline BlockSchedule block_schedule(int Br, int Bc, bool banded, int Nq, int Nk,
                                                int offset, int left, int right, int q_block,
                                                bool left_side = true) {
  BlockSchedule s;
  const int padding = banded ? (Br - Nq % Br) % Br : 0;  // banded: the blocks end at row Nq
  s.q0 = q_block * Br - padding;
  s.q_end = s.q0 + Br < Nq ? s.q0 + Br : Nq;
  const int n_all = (Nk + Bc - 1) / Bc;
  int kv_begin = 0, kv_end = n_all;
  int lo = 0, hi = Nk / Bc;  // blocks [lo, hi) need no mask: whole, no key past Nk
  if (banded && !left_side) {
    // No left side: from key block 0 to that of the last row's last key; needing no mask, the
    // blocks up to the first row's last key. (The right side's lines repeat the general branch's
    // below, which stays as it was: folded together, its kernels' SASS changed.)
    const int last_key = s.q_end - 1 + offset + right, all_to = s.first_row() + offset + right;
    const int visited_end = last_key < 0 ? 0 : last_key / Bc + 1;
    kv_end = visited_end < n_all ? visited_end : n_all;
    const int whole_hi = all_to + 1 <= 0 ? 0 : (all_to + 1) / Bc;
    hi = whole_hi < hi ? whole_hi : hi;
  } else if (banded) {
    // Visited: from the block of the first real row's first key to that of the last row's last
    // key. Needing no mask: the blocks wholly inside the keys every real row sees, from the last
    // row's first key to the first row's last key. (Padding rows above row 0 may meet a mask
    // there too: their results are never stored.)
    const int first_key = s.first_row() + offset - left, last_key = s.q_end - 1 + offset + right;
    kv_begin = first_key <= 0 ? 0 : first_key / Bc;
    const int visited_end = last_key < 0 ? 0 : last_key / Bc + 1;
    kv_end = visited_end < n_all ? visited_end : n_all;
    const int all_from = s.q_end - 1 + offset - left;  // keys [all_from, all_to] seen by all
    const int all_to = s.first_row() + offset + right;
    const int whole_lo = all_from <= 0 ? 0 : (all_from + Bc - 1) / Bc;
    const int whole_hi = all_to + 1 <= 0 ? 0 : (all_to + 1) / Bc;
    lo = whole_lo;
    hi = whole_hi < hi ? whole_hi : hi;
  }
  s.kv_begin = kv_begin;
  s.n_kv = kv_end > kv_begin ? kv_end - kv_begin : 0;
  if (hi <= lo) {  // every visited block needs the mask
    s.n_masked = s.n_kv;
    s.n_tail = 0;
  } else {
    const int top = hi > kv_begin ? hi : kv_begin;  // blocks [top, kv_end): the head
    const int bottom = lo < kv_end ? lo : kv_end;   // blocks [kv_begin, bottom): the tail
    s.n_masked = kv_end > top ? kv_end - top : 0;
    s.n_tail = bottom > kv_begin ? bottom - kv_begin : 0;
    if (s.n_masked + s.n_tail > s.n_kv) s.n_masked = s.n_kv - s.n_tail;
  }
  return s;
}

// hopper-deterministic's number of fp32 dQ splits: two, one when there is a single K block
// (docs/perf.md, hopper backward step 3). The backward's blocks are the outer-K pass's
// (common/fa2_bwd/blocks.h: Bc = 128 keys, Br = 64 queries per step at d = 128 and 128 at d = 64;
// Bc = Br = 64 at d = 256).
// The CUDA side allocates by them and the registry entry's workspace formula counts by them.
constexpr int64_t deterministic_dq_splits(int64_t Nk, int64_t Bc) {
  return (Nk + Bc - 1) / Bc < 2 ? (Nk + Bc - 1) / Bc : 2;
}

// The backward at d = 256 runs in two passes, hopper and hopper-deterministic alike: dK and dV by
// the outer-K pass, then dQ by a pass over Q blocks of kDqPassBr rows and K blocks of kDqPassBc
// keys (the CUDA dQ pass's, bwd_dq_pass.cuh, which the twin walks too). Nothing is accumulated
// across blocks, so the workspace holds no dQ accumulator, splits or turns.
constexpr bool two_pass_backward(int64_t d) {
  return d == 256;
}
inline constexpr int kDqPassBr = 128, kDqPassBc = 64;

}  // namespace flashlab::FLASHLAB_FOLDER
