// Acceptance 4, counts: what the CPU twins count equals the closed forms of their schedules, and
// the lecture's figures (FLOPs FA / standard = 7/6; IO standard / FA near 1.8 at d = 128, 128 x 128
// blocks; causal blocks T(T+1)/2 of T^2) come out of the counters. All dry runs: no tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "solutions.h"
#include "test_cpu_util.h"

namespace flashlab {
namespace {

using testing::bwd_of;
using testing::fwd_of;
using testing::make_problem;

struct Counted {
  Counters naive_fwd, naive_bwd, tiled, recompute, atomic, deterministic;
};

Counted count_all(const Problem& p, int Br, int Bc) {
  CpuOptions o;
  o.Br = Br;
  o.Bc = Bc;
  o.dry_run = true;
  Counted c;
  Forward f;
  Gradients g;
  fwd_of("naive")(p, {}, o, f, c.naive_fwd);
  bwd_of("naive")(p, {}, f, o, g, c.naive_bwd);
  fwd_of("tiled")(p, {}, o, f, c.tiled);
  bwd_of("recompute")(p, {}, f, o, g, c.recompute);
  bwd_of("atomic-dq")(p, {}, f, o, g, c.atomic);
  bwd_of("deterministic-dq")(p, {}, f, o, g, c.deterministic);
  return c;
}

struct Shape5 {
  int64_t B, H, Nq, Nk, d;
  int Br, Bc;
};

// Ragged shapes with Nq != Nk, and one that the blocks divide.
const std::vector<Shape5>& unmasked_shapes() {
  static const std::vector<Shape5> shapes = {{1, 1, 1, 1, 16, 16, 16},
                                             {2, 3, 100, 37, 64, 16, 12},
                                             {1, 2, 37, 100, 128, 32, 64},
                                             {1, 1, 256, 256, 64, 64, 64}};
  return shapes;
}

// Non-causal: every count, term by term, for ragged shapes with Nq != Nk.
TEST(Counts, ClosedFormsWithoutMask) {
  for (const Shape5& s : unmasked_shapes()) {
    SCOPED_TRACE(::testing::Message() << s.Nq << "x" << s.Nk << " d" << s.d);
    const Problem p = make_problem(s.B, s.H, s.Nq, s.Nk, s.d, false, DType::f16);
    const Counted c = count_all(p, s.Br, s.Bc);
    const int64_t h = s.B * s.H, Nq = s.Nq, Nk = s.Nk, d = s.d, NN = Nq * Nk;
    const int64_t Tr = (Nq + s.Br - 1) / s.Br, Tc = (Nk + s.Bc - 1) / s.Bc;

    EXPECT_EQ(c.naive_fwd.matmul_flops, h * 4 * NN * d);
    EXPECT_EQ(c.tiled.matmul_flops, h * 4 * NN * d);
    EXPECT_EQ(c.naive_bwd.matmul_flops, h * 8 * NN * d);
    EXPECT_EQ(c.atomic.matmul_flops, h * 10 * NN * d);
    EXPECT_EQ(c.deterministic.matmul_flops, h * 10 * NN * d);
    EXPECT_EQ(c.recompute.matmul_flops, h * 14 * NN * d);

    // naive: S, softmax, PV / dV, dP, dS, dQ, dK over whole matrices.
    EXPECT_EQ(c.naive_fwd.elems_read, h * (2 * NN + Nq * d + 2 * Nk * d));
    EXPECT_EQ(c.naive_fwd.elems_written, h * (2 * NN + Nq + Nq * d));
    EXPECT_EQ(c.naive_bwd.elems_read, h * (5 * NN + 3 * Nq * d + 2 * Nk * d));
    EXPECT_EQ(c.naive_bwd.elems_written, h * (2 * NN + Nq * d + 2 * Nk * d));
    // tiled: Q_i once, K_j V_j per pair, O_i and LSE_i once.
    EXPECT_EQ(c.tiled.elems_read, h * (Nq * d + Tr * 2 * Nk * d));
    EXPECT_EQ(c.tiled.elems_written, h * (Nq * d + Nq));
    EXPECT_EQ(c.tiled.tiles_computed, h * Tr * Tc);
    EXPECT_EQ(c.tiled.tiles_skipped, 0);
    // atomic-dq: preprocess (O, dO -> D), K_j V_j, per pair Q_i dO_i LSE_i D_i + atomic dQ_i,
    // dK_j dV_j, convert (dQaccum -> dQ).
    const int64_t pre_r = 2 * Nq * d, pre_w = Nq, pair_r = Tc * (2 * Nq * d + 2 * Nq);
    EXPECT_EQ(c.atomic.elems_read, h * (pre_r + 2 * Nk * d + pair_r + Tc * Nq * d + Nq * d));
    EXPECT_EQ(c.atomic.elems_written, h * (pre_w + Tc * Nq * d + 2 * Nk * d + Nq * d));
    EXPECT_EQ(c.atomic.atomic_adds, h * Tc * Nq * d);
    // deterministic-dq: plain split writes instead of atomics; the convert reads every split.
    EXPECT_EQ(c.deterministic.elems_read, h * (pre_r + 2 * Nk * d + pair_r + Tc * Nq * d));
    EXPECT_EQ(c.deterministic.elems_written, c.atomic.elems_written);
    EXPECT_EQ(c.deterministic.atomic_adds, 0);
    // recompute: preprocess, outer-K pass (dK, dV), outer-Q pass (dQ written once per block).
    EXPECT_EQ(c.recompute.elems_read,
              h * (pre_r + 2 * Nk * d + pair_r + (2 * Nq * d + 2 * Nq) + Tr * 2 * Nk * d));
    EXPECT_EQ(c.recompute.elems_written, h * (pre_w + 2 * Nk * d + Nq * d));
    EXPECT_EQ(c.recompute.atomic_adds, 0);
    EXPECT_EQ(c.recompute.tiles_computed, 2 * h * Tr * Tc);
  }
}

// Exercise 3 solved (tests/exercise_solutions/ex3_no_lse), the backward without a stored LSE:
// atomic-dq plus the statistics pass (Q_i, K_j per pair, LSE_i written), term by term.
TEST(Counts, SolvedExercise3IsAtomicDqPlusTheStatisticsPass) {
  const VersionEntry* ex3 = testing::solution("ex3_no_lse");
  if (ex3 == nullptr) GTEST_SKIP() << testing::no_solution("ex3_no_lse");
  for (const Shape5& s : unmasked_shapes()) {
    SCOPED_TRACE(::testing::Message() << s.Nq << "x" << s.Nk << " d" << s.d);
    const Problem p = make_problem(s.B, s.H, s.Nq, s.Nk, s.d, false, DType::f16);
    const Counted c = count_all(p, s.Br, s.Bc);
    CpuOptions o;
    o.Br = s.Br;
    o.Bc = s.Bc;
    o.dry_run = true;
    Forward f;
    Gradients g;
    Counters no_lse;
    ex3->cpu_backward(p, {}, f, o, g, no_lse);
    const int64_t h = s.B * s.H, Nq = s.Nq, Nk = s.Nk, d = s.d;
    const int64_t Tr = (Nq + s.Br - 1) / s.Br;
    EXPECT_EQ(no_lse.matmul_flops, h * 12 * Nq * Nk * d);
    EXPECT_EQ(no_lse.elems_read, c.atomic.elems_read + h * (Nq * d + Tr * Nk * d));
    EXPECT_EQ(no_lse.elems_written, c.atomic.elems_written + h * Nq);
    EXPECT_EQ(no_lse.atomic_adds, c.atomic.atomic_adds);
  }
}

// Causal, square blocks: T(T+1)/2 of the T^2 pairs are computed, so FLOPs causal / full =
// 1/2 + 1/(2T): 0.508, 0.516, 0.531 for B = 64, 128, 256 at N = 4096 (the lecture's demo 4).
TEST(Counts, CausalSquareBlocksComputeHalfPlusOneOverTwoT) {
  const int64_t N = 4096;
  const double lecture[] = {0.508, 0.516, 0.531};
  int n = 0;
  for (int B : {64, 128, 256}) {
    const int64_t T = N / B;
    const Problem full = make_problem(1, 1, N, N, 64, false, DType::f16);
    Problem causal = full;
    causal.causal = true;
    const Counted f = count_all(full, B, B), c = count_all(causal, B, B);
    for (const Counters* x : {&c.tiled, &c.atomic, &c.deterministic}) {
      EXPECT_EQ(x->tiles_computed, T * (T + 1) / 2);
      EXPECT_EQ(x->tiles_skipped, T * (T - 1) / 2);
    }
    EXPECT_EQ(c.recompute.tiles_computed, T * (T + 1));  // two passes
    // Exactly (T + 1) / (2T) of the FLOPs, for the forward and every FA backward.
    for (auto [cz, fl] : {std::pair{&c.tiled, &f.tiled},
                          {&c.atomic, &f.atomic},
                          {&c.recompute, &f.recompute},
                          {&c.deterministic, &f.deterministic}})
      EXPECT_EQ(cz->matmul_flops * 2 * T, fl->matmul_flops * (T + 1));
    const double ratio = double(c.tiled.matmul_flops) / double(f.tiled.matmul_flops);
    EXPECT_EQ(std::round(ratio * 1000) / 1000, lecture[n++]);
    // IO nearly halves too (skipped blocks are not read), but less than the FLOPs.
    const double io = double(c.tiled.io()) / double(f.tiled.io());
    EXPECT_GT(io, ratio);
    EXPECT_LT(io, 0.6);
    // naive skips nothing.
    EXPECT_EQ(c.naive_fwd, f.naive_fwd);
  }
}

// Causal with Nq != Nk (bottom-right): counts of pairs against a direct enumeration.
TEST(Counts, CausalPairsAgainstEnumeration) {
  for (auto [Nq, Nk, Br, Bc] : {std::tuple{100, 37, 16, 12}, {37, 100, 8, 32}, {5, 5, 2, 3}}) {
    const Problem p = make_problem(1, 2, Nq, Nk, 16, true, DType::f32);
    int64_t visible = 0, hidden = 0, rows_visited = 0;
    for (int64_t i = 0; i * Br < Nq; ++i)
      for (int64_t j = 0; j * Bc < Nk; ++j) {
        // visited iff some row of the block sees some key of the block
        const int64_t last_row = std::min<int64_t>(Nq, (i + 1) * Br) - 1;
        const bool any = j * Bc <= last_row + (Nk - Nq);
        any ? ++visible : ++hidden;
        if (any) rows_visited += std::min<int64_t>(Nq, (i + 1) * Br) - i * Br;
      }
    const Counted c = count_all(p, Br, Bc);
    EXPECT_EQ(c.tiled.tiles_computed, 2 * visible);
    EXPECT_EQ(c.tiled.tiles_skipped, 2 * hidden);
    EXPECT_EQ(c.atomic.atomic_adds, 2 * rows_visited * 16);
  }
}

// The lecture's demo 3 (one head, d = 128, blocks 128 x 128): matmul FLOPs of FA fwd + bwd
// (tiled + atomic-dq) over the standard's (naive) are 14/12 = 7/6 at every N; the standard's
// traffic is about 11 N^2 against FA's about 6 N^2. The ratio climbs towards 11/6 as N grows,
// because the O(N d) terms (10 N d for FA: Q, O, preprocess, K V, dK dV, convert) weigh more at
// small N: 1.64 at N = 512, 1.77 at 2048, 1.81 at 8192.
TEST(Counts, LectureDemo3Figures) {
  double previous = 0;
  for (int64_t N : {512, 1024, 2048, 4096, 8192}) {
    const Problem p = make_problem(1, 1, N, N, 128, false, DType::f16);
    const Counted c = count_all(p, 128, 128);
    const int64_t standard_flops = c.naive_fwd.matmul_flops + c.naive_bwd.matmul_flops;
    const int64_t fa_flops = c.tiled.matmul_flops + c.atomic.matmul_flops;
    EXPECT_EQ(6 * fa_flops, 7 * standard_flops);
    const double standard_io = double(c.naive_fwd.io() + c.naive_bwd.io());
    const double fa_io = double(c.tiled.io() + c.atomic.io());
    const double NN = double(N) * N;
    EXPECT_NEAR(standard_io / NN, 11.0, 12.0 * 128 / N + 0.01);
    EXPECT_NEAR(fa_io / NN, 6.0, 10.0 * 128 / N + 0.1);
    const double ratio = standard_io / fa_io;
    EXPECT_GT(ratio, previous);
    EXPECT_GT(ratio, 1.6);
    EXPECT_LT(ratio, 11.0 / 6.0);
    if (N >= 2048) {
      EXPECT_NEAR(ratio, 1.8, 0.05);
    }
    previous = ratio;
  }
}

// Dry runs need no tensors and no N x N memory, even where a real run would need terabytes.
TEST(Counts, DryRunOfAHugeProblemIsCheap) {
  const Problem p = make_problem(1, 1, 131072, 131072, 128, true, DType::f16);
  CpuOptions o;
  o.Br = o.Bc = 128;
  o.dry_run = true;
  Forward f;
  Gradients g;
  Counters c;
  fwd_of("naive")(p, {}, o, f, c);
  bwd_of("naive")(p, {}, f, o, g, c);
  fwd_of("tiled")(p, {}, o, f, c);
  bwd_of("atomic-dq")(p, {}, f, o, g, c);
  EXPECT_TRUE(f.O.empty() && f.P.empty() && g.dQ.empty());
  EXPECT_GT(c.matmul_flops, 0);
}

}  // namespace
}  // namespace flashlab
