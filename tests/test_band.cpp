// The band of keys the CUDA kernels test (kernels/common/band.h), checked against the row-by-row
// definition of core/problem.h (Problem::first_key, last_key) by brute force: which keys a row
// sees, which Q blocks meet a K block and which K blocks meet a Q block (the same pairs from both
// sides), which tiles need a mask, and which K block of a deterministic dQ split writes a Q block
// first.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "../kernels/common/band.h"

namespace flashlab {
namespace {

using cuda::Band;
using cuda::band_of;
using cuda::BlockRange;

Problem problem(int64_t Nq, int64_t Nk, bool causal, int64_t left, int64_t right) {
  Problem p;
  p.shape = {1, 1, Nq, Nk, 64};
  p.causal = causal;
  p.window_left = left;
  p.window_right = right;
  return p;
}

// Does row r (padding rows past Nq included: their band continues the real rows') see key k?
bool sees(const Problem& p, int64_t r, int64_t k) {
  if (k < 0 || k >= p.shape.Nk) return false;
  if (r < p.shape.Nq) return k >= p.first_key(r) && k <= p.last_key(r);
  const Band b = band_of(p);
  return b.sees(static_cast<int>(r), static_cast<int>(k));
}

void check(const Problem& p, int Br, int Bc) {
  SCOPED_TRACE(testing::Message() << "Nq " << p.shape.Nq << " Nk " << p.shape.Nk
                                  << (p.causal ? " causal" : "") << " window (" << p.window_left
                                  << ", " << p.window_right << ") Br " << Br << " Bc " << Bc);
  const Band b = band_of(p);
  const int Nq = static_cast<int>(p.shape.Nq), Nk = static_cast<int>(p.shape.Nk);
  EXPECT_EQ(b.banded, p.causal || p.windowed());
  for (int r = 0; r < Nq; ++r)
    for (int k = 0; k < Nk; ++k)
      ASSERT_EQ(b.sees(r, k), k >= p.first_key(r) && k <= p.last_key(r)) << "row " << r << " key "
                                                                           << k;
  const int m_end = (Nq + Br - 1) / Br, n_end = (Nk + Bc - 1) / Bc;
  for (int i = 0; i < m_end; ++i)
    for (int j = 0; j < n_end; ++j) {
      // Some row of Q block i (padding included) sees some key of K block j.
      bool meets = false, all = true;
      for (int r = i * Br; r < (i + 1) * Br; ++r)
        for (int k = j * Bc; k < (j + 1) * Bc; ++k) {
          const bool s = sees(p, r, k);
          meets = meets || s;
          if (r < Nq) all = all && s;  // every real row sees every key of the tile (none past Nk)
        }
      ASSERT_EQ(b.q_blocks(j, Bc, Br).has(i), meets) << "Q block " << i << ", K block " << j;
      ASSERT_EQ(b.k_blocks(i, Br, Bc).has(j), meets) << "Q block " << i << ", K block " << j;
      // A tile that needs no mask has every real row seeing every key; cuts() may be cautious
      // only where a band exists.
      const bool cut = b.cuts(i * Br, Br, j * Bc, Bc);
      if (!cut) {
        ASSERT_TRUE(all) << "tile (" << i << ", " << j << ") needs a mask";
      }
      if (!b.banded) {
        ASSERT_EQ(cut, (j + 1) * Bc > Nk);
      }
    }
}

TEST(Band, MatchesTheRowByRowDefinition) {
  std::mt19937 rng(20261201);
  const int64_t sizes[] = {1, 2, 17, 63, 64, 65, 128, 129, 300};
  const int64_t sides[] = {-1, 0, 1, 5, 64, 100, 256, 1000};
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t Nq = sizes[rng() % std::size(sizes)], Nk = sizes[rng() % std::size(sizes)];
    const bool causal = rng() % 2;
    const int64_t left = sides[rng() % std::size(sides)], right = sides[rng() % std::size(sides)];
    const int Br = (rng() % 2) ? 64 : 128, Bc = (rng() % 2) ? 64 : 128;
    check(problem(Nq, Nk, causal, left, right), Br, Bc);
    if (HasFatalFailure()) return;
    ++checked;
  }
  EXPECT_EQ(checked, 400);
}

// The first K block of split s (of S) at or past K block lo, found by walking the split's blocks.
int walk_first(bool snake, int s, int lo, int S, int Tc) {
  for (int j = 0; j < Tc + 2 * S; ++j) {
    const bool mine = snake ? cuda::snake_block(s, j / S, S) == j : j % S == s;
    if (mine && j >= lo) return j;
  }
  return -1;
}

TEST(Band, SplitsFindTheirFirstBlockPastAnyPoint) {
  for (bool snake : {false, true})
    for (int S = 1; S <= 7; ++S)
      for (int s = 0; s < S; ++s)
        for (int lo = 0; lo < 40; ++lo) {
          const int want = walk_first(snake, s, lo, S, 40);
          const int got = snake ? cuda::snake_first_at_or_past(s, lo, S)
                                : cuda::strided_first_at_or_past(s, lo, S);
          ASSERT_EQ(got, want) << (snake ? "snake" : "strided") << " S " << S << " s " << s
                               << " lo " << lo;
        }
  // Snake order: split s takes exactly one K block of each group of S.
  for (int S = 1; S <= 7; ++S)
    for (int g = 0; g < 5; ++g) {
      std::vector<int> seen;
      for (int s = 0; s < S; ++s) seen.push_back(cuda::snake_block(s, g, S));
      std::sort(seen.begin(), seen.end());
      for (int s = 0; s < S; ++s) ASSERT_EQ(seen[s], g * S + s);
    }
}

TEST(Band, FloorDivisionRoundsDown) {
  EXPECT_EQ(cuda::floor_div(7, 2), 3);
  EXPECT_EQ(cuda::floor_div(-7, 2), -4);
  EXPECT_EQ(cuda::floor_div(-8, 2), -4);
  EXPECT_EQ(cuda::floor_div(0, 5), 0);
  EXPECT_EQ(cuda::floor_div(-1, 128), -1);
}

}  // namespace
}  // namespace flashlab
