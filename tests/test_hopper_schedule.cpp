// The Hopper forward's tile schedule (kernels/06_hopper/schedule.h), which the CUDA kernel and its
// CPU twin share, checked against brute force over the causal mask and sliding windows: the Q
// blocks cover every row once, a block visits exactly the K blocks its rows see, and the
// iterations it runs without a mask need none; for bands without a left side, the form a kernel for
// them can use (left_side = false) gives the same schedule.
#define FLASHLAB_FOLDER hopper_schedule_test
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "../kernels/06_hopper/schedule.h"

namespace {

using flashlab::hopper_schedule_test::block_schedule;
using flashlab::hopper_schedule_test::BlockSchedule;

struct Case {
  int Br, Bc, Nq, Nk;
  bool causal;
  int left = -1, right = -1;  // a sliding window (-1: no bound on that side)
  bool banded() const { return causal || left >= 0 || right >= 0; }
};

// Does query `row` see key `key`? (core/problem.h: bottom-right aligned.)
bool sees(const Case& c, int row, int key) {
  const int diag = row + (c.Nk - c.Nq);
  if (key < 0 || key >= c.Nk) return false;
  if (c.causal && key > diag) return false;
  if (c.left >= 0 && key < diag - c.left) return false;
  if (c.right >= 0 && key > diag + c.right) return false;
  return true;
}

// The schedule for the case's band, as kernels/common/band.h derives its sides. left_side = false:
// the form a kernel for bands without a left side (MaskKind::right) can use.
BlockSchedule schedule_of(const Case& c, int q_block, bool left_side = true) {
  const int left = c.left >= 0 ? std::min(c.left, c.Nk) : c.Nk;
  int right = c.right >= 0 ? std::min(c.right, c.Nq) : c.Nq;
  if (c.causal) right = std::min(right, 0);
  return block_schedule(c.Br, c.Bc, c.banded(), c.Nq, c.Nk, c.Nk - c.Nq, left, right, q_block,
                        left_side);
}

void check_case(const Case& c) {
  SCOPED_TRACE(testing::Message() << "Br " << c.Br << " Bc " << c.Bc << " Nq " << c.Nq << " Nk "
                                  << c.Nk << (c.causal ? " causal" : "") << " window (" << c.left
                                  << ", " << c.right << ")");
  const int q_blocks = (c.Nq + c.Br - 1) / c.Br, k_blocks = (c.Nk + c.Bc - 1) / c.Bc;
  int next_row = 0;  // the blocks cover rows 0, 1, ... in order, each once
  for (int i = 0; i < q_blocks; ++i) {
    const BlockSchedule s = schedule_of(c, i);
    if (c.left < 0) {  // no left side: the form without the left side's arithmetic agrees
      const BlockSchedule r = schedule_of(c, i, false);
      ASSERT_EQ(r.q0, s.q0);
      ASSERT_EQ(r.q_end, s.q_end);
      ASSERT_EQ(r.kv_begin, s.kv_begin);
      ASSERT_EQ(r.n_kv, s.n_kv);
      ASSERT_EQ(r.n_masked, s.n_masked);
      ASSERT_EQ(r.n_tail, s.n_tail);
      ASSERT_EQ(s.kv_begin, 0);
      ASSERT_EQ(s.n_tail, 0);
    }
    const int first = std::max(s.q0, 0);
    ASSERT_EQ(first, next_row);
    ASSERT_GT(s.q_end, first);
    ASSERT_LE(s.q_end - s.q0, c.Br);
    next_row = s.q_end;
    // Banded: the blocks end at the last row, so only the first may hold padding (above row 0);
    // otherwise only the last (past Nq).
    if (c.banded() ? i > 0 : i < q_blocks - 1) {
      ASSERT_EQ(s.q_end - s.q0, c.Br);
      ASSERT_GE(s.q0, 0);
    }
    if (!c.banded()) {
      ASSERT_GE(s.q0, 0);
    }
    // Visited: the K blocks from the first to the last one a real row sees, and no others.
    int first_seen = k_blocks, last_seen = -1;
    for (int r = first; r < s.q_end; ++r)
      for (int k = 0; k < c.Nk; ++k)
        if (sees(c, r, k)) {
          first_seen = std::min(first_seen, k / c.Bc);
          last_seen = std::max(last_seen, k / c.Bc);
        }
    if (last_seen < 0) {
      ASSERT_EQ(s.n_kv, 0);
      continue;
    }
    ASSERT_EQ(s.kv_begin, first_seen);
    ASSERT_EQ(s.n_kv, last_seen - first_seen + 1);
    ASSERT_LE(s.kv_begin + s.n_kv, k_blocks);
    // Masked iterations come first and last, and they are exactly those whose K block some real
    // row does not see whole.
    for (int it = 0; it < s.n_kv; ++it) {
      const int j = s.kv_block(it);
      ASSERT_EQ(j, s.kv_begin + s.n_kv - 1 - it);
      bool needs_mask = false;
      for (int r = first; r < s.q_end && !needs_mask; ++r)
        for (int k = j * c.Bc; k < (j + 1) * c.Bc && !needs_mask; ++k) needs_mask = !sees(c, r, k);
      ASSERT_EQ(s.masked(it), needs_mask) << "iteration " << it << ", K block " << j;
    }
    ASSERT_LE(s.n_masked + s.n_tail, s.n_kv);
  }
  ASSERT_EQ(next_row, c.Nq);
}

TEST(HopperSchedule, BlocksCoverRowsAndVisitWhatTheySee) {
  // The kernel's block shapes and a few more, on fixed edge cases and seeded random shapes.
  const int shapes[][2] = {{192, 128}, {128, 128}, {64, 64}, {128, 64}, {64, 128}};
  const int edges[][2] = {{1, 1},     {1, 1000}, {1000, 1},    {17, 1000}, {1000, 17},
                          {192, 192}, {193, 64}, {1024, 1024}, {400, 150}, {130, 131}};
  const int windows[][2] = {{-1, -1}, {64, 0}, {256, 256}, {0, 0}, {100, -1}, {-1, 30}, {1, 500}};
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<int> n(1, 700);
  for (const auto& sh : shapes)
    for (bool causal : {false, true})
      for (const auto& w : windows) {
        for (const auto& e : edges) check_case({sh[0], sh[1], e[0], e[1], causal, w[0], w[1]});
        for (int r = 0; r < 12; ++r)
          check_case({sh[0], sh[1], n(rng), n(rng), causal, w[0], w[1]});
      }
}

// The point of aligning causal blocks to the last row: the ragged block is the one with the fewest
// keys. At d = 64's block shape and N = 1024 the blocks visit 27 K blocks per head, where blocks
// aligned to row 0 would visit 32 (docs/perf.md, Hopper forward step 6).
TEST(HopperSchedule, CausalPaddingSitsWhereKeysAreFewest) {
  int visited = 0;
  for (int i = 0; i < (1024 + 191) / 192; ++i)
    visited += schedule_of({192, 128, 1024, 1024, true}, i).n_kv;
  EXPECT_EQ(visited, 27);
}

}  // namespace
