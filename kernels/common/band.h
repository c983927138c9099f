// Which keys a query row sees, as the CUDA kernels test it, and which blocks of one axis meet
// which blocks of the other. Host and device code: the kernels walk these ranges and the host
// tests them against the row-by-row definition of core/problem.h.
//
// Row r sees the keys of a band about its diagonal r + offset (offset = Nk - Nq, bottom-right):
//
//   r + offset - left  <=  key  <=  r + offset + right,   0 <= key < Nk
//
// with left and right from band_of() below: a side with no bound is widened
// until it covers every key, so the causal mask is the band (Nk, 0), a window (L, R) the band
// (L, R), both together (L, 0), and dense attention the band (Nk, Nq). A kernel needs no special
// case for any of them; `banded` only tells it whether there is a mask to apply at all.
//
//   keys ->               K block j: the Q blocks [q_blocks(j).begin, .end) meet it
//   +----------------+    Q block i: the K blocks [k_blocks(i).begin, .end) meet it
//   |\\\\            |    (a pair "meets" when some row of the Q block, counting the padding rows
//   | \\\\\          |    of a ragged last block, sees some key of the K block: the two ranges
//   |  \\\\\         |    describe the same pairs, and both are nondecreasing in the block)
//   |   \\\\\        |
//   +----------------+    the band of a window (L, R): L keys left of the diagonal, R right
//
// Sizes are int: with Nq, Nk <= 2^30 (shape_check), r + offset + right <= Nq + Nk - 1 and
// r + offset - left >= -Nq stay inside 32 bits.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/problem.h"

#if defined(__CUDACC__)
#define FLASHLAB_BAND_HD __host__ __device__ __forceinline__
#else
#define FLASHLAB_BAND_HD inline
#endif

namespace flashlab::cuda {

struct BlockRange {
  int begin, end;  // [begin, end); empty when end <= begin
  FLASHLAB_BAND_HD int count() const { return end > begin ? end - begin : 0; }
  FLASHLAB_BAND_HD bool has(int x) const { return x >= begin && x < end; }
};

// a / b rounded down, for b > 0 and any a.
FLASHLAB_BAND_HD int floor_div(int a, int b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

struct Band {
  int Nq = 0, Nk = 0;
  int offset = 0;             // Nk - Nq
  int left = 0, right = 0;    // the band's sides (band_of)
  bool banded = false;        // causal or windowed: some row does not see some key

  // Whether row r sees key k (0 <= k < Nk is the caller's to test).
  FLASHLAB_BAND_HD bool sees(int r, int k) const {
    return k >= r + offset - left && k <= r + offset + right;
  }

  // The Q blocks of Br rows that meet K block j of Bc keys.
  FLASHLAB_BAND_HD BlockRange q_blocks(int j, int Bc, int Br) const {
    const int m_end = (Nq + Br - 1) / Br;
    if (!banded) return {0, m_end};
    const int lo_row = j * Bc - offset - right;           // the first row that sees key j Bc
    const int hi_row = j * Bc + Bc - 1 - offset + left;   // the last row that sees key j Bc + Bc - 1
    const int begin = lo_row <= 0 ? 0 : lo_row / Br;
    const int end = hi_row < 0 ? 0 : (hi_row / Br + 1 < m_end ? hi_row / Br + 1 : m_end);
    return {begin, end > begin ? end : begin};
  }

  // The K blocks of Bc keys that meet Q block i of Br rows: exactly the j with
  // q_blocks(j).has(i).
  FLASHLAB_BAND_HD BlockRange k_blocks(int i, int Br, int Bc) const {
    const int n_end = (Nk + Bc - 1) / Bc;
    if (!banded) return {0, n_end};
    const int lo = floor_div(i * Br + offset - left, Bc);
    const int hi = floor_div(i * Br + Br - 1 + offset + right, Bc) + 1;
    const int begin = lo < 0 ? 0 : lo;
    const int end = hi < n_end ? hi : n_end;
    return {begin, end > begin ? end : begin};
  }

  // Whether the tile (rows [r0, r0 + rows), keys [k0, k0 + cols)) needs a mask: some key of it is
  // past Nk, or the band of some real row (below Nq) cuts it.
  FLASHLAB_BAND_HD bool cuts(int r0, int rows, int k0, int cols) const {
    if (k0 + cols > Nk) return true;
    if (!banded) return false;
    const int r1 = (r0 + rows < Nq ? r0 + rows : Nq) - 1;
    return k0 + cols - 1 > r0 + offset + right || k0 < r1 + offset - left;
  }
};

// Which sides of the band a kernel must test, a compile-time choice where the registers are
// tight: none (no mask but the ragged end of the keys), the right side only (the causal mask, a
// window with no left bound), or both (a window with a left side).
enum class MaskKind : int { none = 0, right = 1, both = 2 };

// The problem's band. A side with no bound is widened until it covers every key: Nk on the left
// (r + offset - Nk = r - Nq < 0), Nq on the right (r + offset + Nq = r + Nk >= Nk); under the
// causal mask the right side is at most 0.
inline Band band_of(const Problem& p) {
  const int64_t Nq = p.shape.Nq, Nk = p.shape.Nk;
  int64_t left = p.window_left >= 0 ? std::min(p.window_left, Nk) : Nk;
  int64_t right = p.window_right >= 0 ? std::min(p.window_right, Nq) : Nq;
  if (p.causal) right = std::min<int64_t>(right, 0);
  Band b;
  b.Nq = static_cast<int>(Nq);
  b.Nk = static_cast<int>(Nk);
  b.offset = static_cast<int>(p.causal_offset());
  b.left = static_cast<int>(left);
  b.right = static_cast<int>(right);
  b.banded = p.causal || p.windowed();
  return b;
}

inline MaskKind mask_kind_of(const Problem& p) {
  if (!p.causal && !p.windowed()) return MaskKind::none;
  return p.window_left >= 0 ? MaskKind::both : MaskKind::right;
}

// The dQ splits of a deterministic backward, each written by a fixed sequence of K blocks in
// increasing order; the first of them that meets a Q block stores its rows of the split, the later
// ones add, and a split that none of them meets is never read. Two assignments of K blocks to
// splits (S splits, Tc K blocks):
//
//   snake (deterministic-dq): split s takes one K block of each group of S, j = g S + s in even
//                             groups and g S + S - 1 - s in odd ones (causal work evens out)
//   strided (hopper-deterministic): split s takes j = s, s + S, s + 2S, ...
//
// Either way a split's K blocks increase, so the first one at or past k_blocks(i).begin is the
// first that meets Q block i, if it is below k_blocks(i).end.
FLASHLAB_BAND_HD int snake_block(int s, int group, int S) {
  return group * S + (group % 2 ? S - 1 - s : s);
}
// The first K block of split s at or past K block `lo`.
FLASHLAB_BAND_HD int snake_first_at_or_past(int s, int lo, int S) {
  const int g = lo / S;
  const int j = snake_block(s, g, S);
  return j >= lo ? j : snake_block(s, g + 1, S);
}
FLASHLAB_BAND_HD int strided_first_at_or_past(int s, int lo, int S) {
  return lo + ((s - lo) % S + S) % S;
}

}  // namespace flashlab::cuda
