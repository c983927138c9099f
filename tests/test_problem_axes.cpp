// The problem's axes beyond dense multi-head attention: grouped K/V heads (--heads-kv) and the
// sliding window (--window), composed with the causal mask.
//
//   - the fp64 reference against an independent statement of each axis: grouped heads are
//     multi-head attention on K and V repeated per query head, with dK, dV summed over the group;
//     the window is the definition's visibility rule, written out here once more;
//   - finite differences against the reference backward with grouped heads and a window;
//   - every CPU twin that declares an axis, on random shapes, against the reference within the
//     budget of tests/test_cpu_versions.cpp, its dry run counting what its real run counted, the
//     window's skipped tiles counted, and the deterministic twins bitwise repeatable;
//   - the command line: each bad value gets one line and exit 2, a version that does not take an
//     axis is refused by name, and a run with both axes passes.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "core/dtype.h"
#include "core/rng.h"
#include "reference/attention.h"
#include "run/registry.h"
#include "test_cli_helpers.h"
#include "test_cpu_util.h"

namespace flashlab {
namespace {

using testing::max_abs;
using testing::max_abs_error;
using testing::poison;

Problem axes_problem(int64_t B, int64_t H, int64_t Hkv, int64_t Nq, int64_t Nk, int64_t d,
                     bool causal, int64_t left, int64_t right, DType t) {
  Problem p = testing::make_problem(B, H, Nq, Nk, d, causal, t);
  p.shape.Hkv = Hkv;
  p.window_left = left;
  p.window_right = right;
  return p;
}

// Key c is visible to query r, written from the definition (not from Problem::first_key).
bool visible(const Problem& p, int64_t r, int64_t c) {
  const int64_t i = r + p.shape.Nk - p.shape.Nq;  // the query's position among the keys
  if (p.causal && c > i) return false;
  if (p.window_left >= 0 && c < i - p.window_left) return false;
  if (p.window_right >= 0 && c > i + p.window_right) return false;
  return true;
}

// O and LSE straight from the definition, one query row at a time; query head h reads K/V head
// (h's batch, (h mod H) / (H / Hkv)).
void direct_forward(const Problem& p, const Inputs& in, HostTensor& O, HostTensor& LSE) {
  const Shape& s = p.shape;
  const int64_t Hkv = s.Hkv;
  O.assign(s.q_elems(), 0.0);
  LSE.assign(s.lse_elems(), -INFINITY);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t hq = 0; hq < s.H; ++hq) {
      const int64_t h = b * s.H + hq, kh = b * Hkv + hq / (s.H / Hkv);
      for (int64_t r = 0; r < s.Nq; ++r) {
        std::vector<double> w(s.Nk, 0.0);
        double m = -INFINITY;
        for (int64_t c = 0; c < s.Nk; ++c) {
          if (!visible(p, r, c)) continue;
          double dot = 0;
          for (int64_t k = 0; k < s.d; ++k)
            dot += in.Q[(h * s.Nq + r) * s.d + k] * in.K[(kh * s.Nk + c) * s.d + k];
          w[c] = dot * p.softmax_scale();
          m = std::max(m, w[c]);
        }
        if (m == -INFINITY) continue;
        double l = 0;
        for (int64_t c = 0; c < s.Nk; ++c) l += visible(p, r, c) ? (w[c] = std::exp(w[c] - m)) : 0;
        for (int64_t c = 0; c < s.Nk; ++c)
          if (visible(p, r, c))
            for (int64_t k = 0; k < s.d; ++k)
              O[(h * s.Nq + r) * s.d + k] += w[c] / l * in.V[(kh * s.Nk + c) * s.d + k];
        LSE[h * s.Nq + r] = m + std::log(l);
      }
    }
}

TEST(ProblemAxes, ReferenceForwardMatchesTheDefinition) {
  struct W {
    int64_t left, right;
  };
  for (bool causal : {false, true})
    for (W w : {W{-1, -1}, W{2, 0}, W{3, 3}, W{0, 0}, W{-1, 1}, W{4, -1}})
      for (auto [Nq, Nk] : {std::pair{9, 9}, {5, 11}, {11, 5}}) {
        const Problem p = axes_problem(2, 4, 2, Nq, Nk, 3, causal, w.left, w.right, DType::f64);
        const Inputs in = make_inputs(p, 31);
        HostTensor O, LSE;
        direct_forward(p, in, O, LSE);
        const Forward f = reference::forward(p, in, true);
        SCOPED_TRACE(testing::quoted(std::to_string(Nq) + "x" + std::to_string(Nk) + " window " +
                                     std::to_string(w.left) + "," + std::to_string(w.right) +
                                     (causal ? " causal" : "")));
        EXPECT_LE(max_abs_error(f.O, O), 1e-14);
        EXPECT_LE(max_abs_error(f.LSE, LSE), 1e-14);
      }
}

// K and V of a grouped problem repeated for every query head: the same attention, as MHA.
Inputs repeat_kv(const Problem& p, const Inputs& in) {
  const Shape& s = p.shape;
  const int64_t kv_head = s.Nk * s.d;
  Inputs out = in;
  out.K.clear();
  out.V.clear();
  for (int64_t h = 0; h < s.heads(); ++h) {
    const int64_t kh = s.kv_of(h);
    out.K.insert(out.K.end(), in.K.begin() + kh * kv_head, in.K.begin() + (kh + 1) * kv_head);
    out.V.insert(out.V.end(), in.V.begin() + kh * kv_head, in.V.begin() + (kh + 1) * kv_head);
  }
  return out;
}

TEST(ProblemAxes, GroupedHeadsAreMultiHeadOnRepeatedKV) {
  for (int64_t Hkv : {1, 2, 4})
    for (bool causal : {false, true}) {
      SCOPED_TRACE("Hkv " + std::to_string(Hkv) + (causal ? " causal" : ""));
      const Problem p = axes_problem(2, 4, Hkv, 13, 17, 8, causal, 5, 2, DType::f64);
      Problem mha = p;
      mha.shape.Hkv = 0;
      const Inputs in = make_inputs(p, 40 + Hkv);
      const Inputs rep = repeat_kv(p, in);
      const Forward f = reference::forward(p, in, true), fm = reference::forward(mha, rep, true);
      EXPECT_TRUE(testing::bitwise_equal(f.O, fm.O));
      EXPECT_TRUE(testing::bitwise_equal(f.LSE, fm.LSE));
      const Gradients g = reference::backward(p, in, f), gm = reference::backward(mha, rep, fm);
      EXPECT_TRUE(testing::bitwise_equal(g.dQ, gm.dQ));
      // dK, dV of a K/V head: the sum of the repeated heads' gradients.
      const Shape& s = p.shape;
      HostTensor dK(s.kv_elems(), 0.0), dV(s.kv_elems(), 0.0);
      const int64_t kv_head = s.Nk * s.d;
      for (int64_t h = 0; h < s.heads(); ++h)
        for (int64_t e = 0; e < kv_head; ++e) {
          dK[s.kv_of(h) * kv_head + e] += gm.dK[h * kv_head + e];
          dV[s.kv_of(h) * kv_head + e] += gm.dV[h * kv_head + e];
        }
      EXPECT_LE(max_abs_error(g.dK, dK), 1e-13 * max_abs(dK));
      EXPECT_LE(max_abs_error(g.dV, dV), 1e-13 * max_abs(dV));
    }
}

TEST(ProblemAxes, BackwardMatchesFiniteDifferences) {
  struct C {
    int64_t H, Hkv, Nq, Nk;
    bool causal;
    int64_t left, right;
  };
  for (C c : {C{4, 1, 6, 9, false, 2, 1}, C{4, 2, 9, 6, true, 3, -1}, C{2, 2, 7, 7, false, 0, 2}}) {
    const Problem p =
        axes_problem(1, c.H, c.Hkv, c.Nq, c.Nk, 4, c.causal, c.left, c.right, DType::f64);
    const Inputs in = make_inputs(p, 6);
    const Gradients g = reference::backward(p, in, reference::forward(p, in, true));
    double worst = 0;
    for (auto [which, grad] : {std::pair{'Q', &g.dQ}, {'K', &g.dK}, {'V', &g.dV}})
      for (int64_t e = 0; e < static_cast<int64_t>(grad->size()); ++e)
        worst = std::max(
            worst, std::abs(reference::finite_difference(p, in, which, e, 1e-6) - (*grad)[e]));
    EXPECT_LE(worst, 1e-8) << "H " << c.H << " Hkv " << c.Hkv << " " << c.Nq << "x" << c.Nk;
  }
}

struct Case {
  int64_t B, H, Hkv, Nq, Nk, d;
  int64_t left, right;
  int Br, Bc;
};

std::string name(const Case& c, bool causal, DType t) {
  std::ostringstream s;
  s << "B" << c.B << " H" << c.H << " Hkv" << c.Hkv << " Nq" << c.Nq << " Nk" << c.Nk << " d" << c.d
    << " window " << c.left << "," << c.right << " Br" << c.Br << " Bc" << c.Bc
    << (causal ? " causal " : " ") << to_string(t);
  return s.str();
}

std::vector<Case> cases() {
  std::vector<Case> c = {
      {1, 4, 1, 40, 40, 16, -1, -1, 16, 8},  // multi-query
      {2, 4, 2, 37, 50, 16, 8, 0, 8, 8},     // grouped, a left window
      {1, 2, 2, 50, 23, 16, 5, 5, 16, 12},   // multi-head, a two-sided window
      {1, 8, 2, 1, 70, 16, 16, -1, 16, 16},  // one query row (decoding), a window
      {1, 3, 1, 64, 64, 32, 0, 0, 16, 16},   // each query sees one key
  };
  Rng rng(2027, 3);
  const int64_t groups[] = {1, 2, 4};
  const int tiles[] = {8, 12, 16};
  for (int n = 0; n < 4; ++n) {
    const int64_t Hkv = 1 + rng.below(2), H = Hkv * groups[rng.below(3)];
    c.push_back({1, H, Hkv, 1 + rng.below(80), 1 + rng.below(80), 16, rng.below(40) - 1,
                 rng.below(40) - 1, tiles[rng.below(3)], tiles[rng.below(3)]});
  }
  return c;
}

void check_case(const Case& c, bool causal, DType t) {
  SCOPED_TRACE(name(c, causal, t));
  const Problem p = axes_problem(c.B, c.H, c.Hkv, c.Nq, c.Nk, c.d, causal, c.left, c.right, t);
  const Inputs in = make_inputs(p, 500 + c.Nq * 3 + c.Nk);
  CpuOptions opt;
  opt.Br = c.Br;
  opt.Bc = c.Bc;
  opt.threads = 2;
  testing::check_twins(p, in, opt);
}

TEST(ProblemAxes, CpuTwinsMatchTheReferenceInFp64) {
  for (const Case& c : cases())
    for (bool causal : {false, true}) check_case(c, causal, DType::f64);
}

TEST(ProblemAxes, CpuTwinsStayWithinTheLowPrecisionBudgets) {
  const std::vector<Case> all = cases();
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (size_t n = 0; n < 5; ++n)
      for (bool causal : {false, true}) check_case(all[n], causal, t);
}

// Each twin that takes both axes is in the matrix above; the ladder's rungs all take grouped heads.
TEST(ProblemAxes, EveryRungTakesGroupedHeads) {
  for (const VersionInfo& v : versions())
    if (!v.exercise) {
      EXPECT_TRUE(v.axes & kGroupedHeads) << v.id;
    }
}

// Tiles outside the window are skipped like tiles above the diagonal, and counted so: a window of
// 16 keys over 256 keys in 16 x 16 tiles visits the diagonal band only.
TEST(ProblemAxes, TilesOutsideTheWindowAreSkippedAndCounted) {
  Problem p = axes_problem(1, 1, 1, 256, 256, 16, false, 16, 0, DType::f32);
  CpuOptions dry;
  dry.Br = dry.Bc = 16;
  dry.dry_run = true;
  Forward f;
  Counters full, window;
  testing::fwd_of("tiled")(p, Inputs{}, dry, f, window);
  EXPECT_EQ(window.tiles_computed, 16 + 15);  // the diagonal tile and the one left of it
  EXPECT_EQ(window.tiles_skipped, 16 * 16 - 31);
  p.window_left = p.window_right = -1;
  testing::fwd_of("tiled")(p, Inputs{}, dry, f, full);
  EXPECT_EQ(full.tiles_skipped, 0);
  EXPECT_LT(window.matmul_flops * 8, full.matmul_flops);
}

// Grouped heads read K and V once per K/V head in the outer-K backward: the twin's count of
// elements read falls by the K/V bytes the group shares.
TEST(ProblemAxes, GroupedHeadsReadKVOncePerKVHead) {
  Problem mha = axes_problem(1, 8, 8, 128, 128, 64, false, -1, -1, DType::f32);
  Problem gqa = mha;
  gqa.shape.Hkv = 2;
  CpuOptions dry;
  dry.Br = dry.Bc = 64;
  dry.dry_run = true;
  Gradients g;
  Counters a, b;
  testing::bwd_of("atomic-dq")(mha, Inputs{}, Forward{}, dry, g, a);
  testing::bwd_of("atomic-dq")(gqa, Inputs{}, Forward{}, dry, g, b);
  // K_j, V_j read per (K/V head, K block), dK_j, dV_j written per (K/V head, K block).
  EXPECT_EQ(a.elems_read - b.elems_read, (8 - 2) * 2 * 128 * 64);
  EXPECT_EQ(a.elems_written - b.elems_written, (8 - 2) * 2 * 128 * 64);
  EXPECT_EQ(a.matmul_flops, b.matmul_flops);
}

TEST(ProblemAxes, BadValuesGetOneLineAndExit2) {
  const std::vector<testing::Refused> cases = {
      {"run -H 4 --heads-kv 3 -N 16", "--heads-kv 3 must divide the 4 query heads"},
      {"run -H 4 --heads-kv 0 -N 16", "--heads-kv must be at least 1 (got 0)"},
      {"run -H 4 --heads-kv 8 -N 16", "--heads-kv must be in 1..4 (got 8)"},
      {"run -N 16 --window 3", "--window takes LEFT,RIGHT"},
      {"run -N 16 --window a,b", "--window takes LEFT,RIGHT"},
      {"run -N 16 --window -2,0", "--window takes LEFT,RIGHT"},
      {"run -N 16 --window 1,2,3", "--window takes LEFT,RIGHT"},
      {"run -N 16 --window 4,2000000", "--window RIGHT must be in -1..1048576 (got 2000000)"},
      {"run -H 2 --heads-kv 1 -N 16 --versions ex1-ds", "version 'ex1-ds' does not take grouped"},
      {"run -N 16 --window 4,0 --versions ex1-ds", "version 'ex1-ds' does not take a sliding"},
      {"bench --heads-kv 3", "--heads-kv 3 does not divide H = hidden / d = 2 at d = 64"},
      {"bench --heads-kv 0", "--heads-kv must be at least 1 (got 0)"},
      {"bench --hidden 0", "--hidden must be in 1..65536 (got 0)"},
      {"bench --tokens -5", "--tokens must be in 1..1048576 (got -5)"},
  };
  testing::expect_refused(cases, " --backend cpu");
}

// bench sweeps grouped heads too: every point reads H / Hkv query heads per K/V head, and its
// check point is grouped the same way.
TEST(ProblemAxes, ABenchWithGroupedHeadsRuns) {
  const testing::CliResult r = testing::run_cli(
      "bench --backend cpu -N 64 --hidden 256 --heads-kv 2 --versions tiled,atomic-dq --repeats 1 "
      "--warmup 0 --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"heads_kv\": 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("over 2 K/V heads"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"ok\": false"), std::string::npos) << r.out;
}

TEST(ProblemAxes, ARunWithBothAxesPasses) {
  const testing::CliResult r = testing::run_cli(
      "run --backend cpu --dtype bf16 -B 2 -H 4 --heads-kv 2 --Nq 70 --Nk 90 -d 32 --window 20,5 "
      "--causal --versions all --json -");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"Hkv\": 2"), std::string::npos);
  EXPECT_NE(r.out.find("All 10 version(s) are within their error budget."), std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace flashlab
