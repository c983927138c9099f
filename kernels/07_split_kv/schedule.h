// The schedule of split-kv, shared by its CPU twin and (next) its CUDA kernel, so that both cut
// the work the same way: which rows share a tile, which key blocks a split streams, and how many
// splits a problem gets.
//
// Rows. The H / Hkv query heads that read one K/V head are packed into the rows of one tile, row
// R holding query row R / group of head R % group (query rows outer, heads inner), so a tile's
// rows are a run of consecutive query rows and K and V are read once for the whole group:
//
//   K/V head kh:  packed rows  0      1      ...  group-1 | group  ...      (R = r * group + g)
//                 query row    0      0           0       | 1
//                 query head   g = 0  g = 1       last    | g = 0
//
// The packed rows (group * Nq of them) are cut into row blocks of Br.
//
// Keys. The key blocks of Bc keys that some query row sees (a window or the causal mask leaves
// out blocks at either end) are cut into S splits as evenly as possible: split j streams blocks
// [begin(j), begin(j + 1)). One worker (a thread block on the GPU) is one (batch, K/V head, row
// block, split); with S > 1 each writes its rows' partial O and LSE to a workspace and a combine
// pass merges them.
//
// The split rule. Without splits there are U = B * Hkv * ceil(group * Nq / Br) workers, and the
// GPU holds W = SMs workers at once for a contiguous cache, 2 SMs for a paged one (its keys come
// in runs of one page, each found through the block table, and a worker of each pair keeps the
// memory busy while the other waits: on the H200, 16 splits of a 65,536-key cache of pages of 64
// took 0.083 ms, 32 splits 0.073 ms; a contiguous cache, 0.070 and 0.072). At d = 256 W = SMs
// for both: a worker's three 64 KiB key stages take 200 KiB of shared memory, so one fits an SM,
// and it keeps as many bytes in flight as two d = 128 workers. When U is at least W the GPU is
// full already: S = 1, and the single split writes O and LSE itself (no workspace, no combine).
// Otherwise S is one of the counts that keep every worker resident (U S <= W; more would only
// trim a last wave's tail), at most T (no split without a block) and kMaxKvSplits
// (core/problem.h): the one that moves the fewest elements through an SM, as the twin counts
// them (decoding is bound by memory):
//
//   cost(S) = rows d + ceil(T / S) 2 Bc d + rows (d + 1)      a worker: its Q rows, its K/V
//                                                              blocks, its rows written
//           + [S > 1] (S + 1) rows (d + 1)                     the combine: S partials read, a row
//                                                              written
//
// T the key blocks some row sees, rows = min(Br, group Nq) a worker's rows. More splits stream
// fewer blocks each but write and combine more partials; of equal costs the fewest splits.
// CpuOptions::splits (--splits) forces S (still at most T). The CPU twin plans for kStandInSms
// SMs, so it walks the schedule the GPU would get.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/problem.h"

namespace flashlab::FLASHLAB_FOLDER {

// The SMs the CPU twin plans for: an H100 SXM's and an H200's 132.
inline constexpr int64_t kStandInSms = 132;
// Workers a paged cache keeps resident per SM (the rule above), where two fit.
inline constexpr int64_t kPagedWorkersPerSm = 2;

// Workers the rule plans to hold resident on an SM (W / SMs above).
inline int64_t workers_per_sm(const Shape& s) {
  return s.paged() && s.d <= 128 ? kPagedWorkersPerSm : 1;
}

struct SplitSchedule {
  int64_t group = 1;       // query heads per K/V head, packed into one tile's rows
  int64_t rows = 0;        // packed rows of one K/V head: group * Nq
  int64_t row_blocks = 0;  // ceil(rows / Br)
  int64_t key_blocks = 0;  // ceil(Nk / Bc)
  int64_t first_block = 0, seen_blocks = 0;  // the blocks some row sees
  int64_t units = 0;                         // workers without splits: B * Hkv * row_blocks
  int64_t splits = 1;                        // S
  bool forced = false;                       // S came from CpuOptions::splits

  // The first key block of split j (begin(splits) is one past the last block).
  int64_t begin(int64_t j) const { return first_block + j * seen_blocks / splits; }
};

// The elements an SM moves with S splits (the rule above).
inline int64_t split_cost(int64_t T, int64_t rows, int64_t Bc, int64_t d, int64_t S) {
  const int64_t worker = rows * d + (T + S - 1) / S * 2 * Bc * d + rows * (d + 1);
  return worker + (S > 1 ? (S + 1) * rows * (d + 1) : 0);
}

// `slots`: the workers the GPU holds at once (W above).
inline int64_t choose_splits(const SplitSchedule& sc, int64_t rows, int64_t Bc, int64_t d,
                             int64_t slots) {
  if (sc.units >= slots || sc.seen_blocks <= 1) return 1;
  const int64_t most = std::min<int64_t>({sc.seen_blocks, kMaxKvSplits, slots / sc.units});
  const int64_t T = sc.seen_blocks;
  int64_t best = 1;
  for (int64_t S = 2; S <= most; ++S)
    if (split_cost(T, rows, Bc, d, S) < split_cost(T, rows, Bc, d, best)) best = S;
  return best;
}

// `forced` > 0: that many splits (at most the blocks some row sees, and kMaxKvSplits).
inline SplitSchedule split_schedule(const Problem& p, int64_t Br, int64_t Bc, int64_t forced,
                                    int64_t sms = kStandInSms) {
  const Shape& s = p.shape;
  SplitSchedule sc;
  sc.group = s.group();
  sc.rows = sc.group * s.Nq;
  sc.row_blocks = (sc.rows + Br - 1) / Br;
  sc.key_blocks = (s.Nk + Bc - 1) / Bc;
  // first_key and last_key grow with the row: the first row's first key, the last row's last.
  const int64_t first = p.first_key(0), last = p.last_key(s.Nq - 1);
  if (first <= last) {
    sc.first_block = first / Bc;
    sc.seen_blocks = last / Bc - sc.first_block + 1;
  }
  sc.units = s.B * s.kv_heads() * sc.row_blocks;
  sc.forced = forced > 0;
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(sc.seen_blocks, kMaxKvSplits));
  const int64_t slots = workers_per_sm(s) * sms;
  sc.splits =
      sc.forced ? std::min(forced, most) : choose_splits(sc, std::min(Br, sc.rows), Bc, s.d, slots);
  return sc;
}

}  // namespace flashlab::FLASHLAB_FOLDER
