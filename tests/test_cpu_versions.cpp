// Acceptance 4, correctness: every CPU twin against the fp64 reference on random shapes -- N = 1,
// N not a multiple of the tiles, Nq > Nk (causal rows that see no key) and Nq < Nk, causal and
// not, d in {16, 64, 128} -- with poisoned outputs, and its dry run counting exactly what its real
// run counted.
//
// Budgets, with size = max(max |ref|, 1) (inputs are standard normals, so 1 is the natural size
// of a gradient that cancels to 0, as dQ and dK do when Nk = 1): fp64 twins match to 1e-12 of
// size. For fp32, fp16 and bf16 a twin's error may be at most kLowpFactor times the error of the
// plain computation in the storage dtype (reference::lowp_*), plus a floor of kFloorUlps * d
// units of roundoff of size. The floor covers what the FA backward does differently on purpose:
// it takes D = rowsum(O * dO), a d-term dot product of rounded values, where the plain backward
// takes rowsum(P * dP); when the true dS cancels to 0 (Nk = 1: D = dP exactly, dQ = dK = 0) the
// lowp error is 0 and the FA error is that dot product's rounding.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "core/dtype.h"
#include "core/rng.h"
#include "reference/attention.h"
#include "run/registry.h"
#include "solutions.h"
#include "test_cpu_util.h"

namespace flashlab {
namespace {

using testing::bwd_of;
using testing::expect_close;
using testing::fwd_of;
using testing::make_problem;
using testing::max_abs;
using testing::max_abs_error;
using testing::poison;

struct Case {
  int64_t B, H, Nq, Nk, d;
  int Br, Bc;
};

std::vector<Case> cases() {
  std::vector<Case> c = {
      {1, 1, 1, 1, 16, 16, 16},     // N = 1
      {1, 2, 1, 37, 64, 16, 12},    // one query, many keys
      {2, 1, 37, 1, 16, 8, 8},      // one key: causal rows 0..35 see nothing
      {1, 2, 50, 23, 64, 16, 12},   // Nq > Nk, ragged both ways
      {1, 1, 23, 50, 128, 16, 16},  // Nq < Nk
      {1, 2, 70, 70, 16, 32, 16},   // square, ragged
      {2, 1, 33, 65, 128, 64, 64},  // one Q block shorter than Br
  };
  Rng rng(2024, 1);
  const int64_t ds[] = {16, 64, 128};
  const int tiles[] = {8, 12, 16, 32};
  for (int n = 0; n < 6; ++n)
    c.push_back({1 + rng.below(2), 1 + rng.below(2), 1 + rng.below(90), 1 + rng.below(90),
                 ds[rng.below(3)], tiles[rng.below(4)], tiles[rng.below(4)]});
  return c;
}

std::string name(const Case& c, bool causal, DType t) {
  std::ostringstream s;
  s << "B" << c.B << " H" << c.H << " Nq" << c.Nq << " Nk" << c.Nk << " d" << c.d << " Br" << c.Br
    << " Bc" << c.Bc << (causal ? " causal " : " full ") << to_string(t);
  return s.str();
}

// Runs one backward twin for real (poisoned outputs) and dry, checks outputs and counts.
void check_backward(const char* id, CpuBackwardFn fn, const Problem& p, const Inputs& in,
                    const Forward& fwd, const CpuOptions& opt, const Gradients& ref,
                    const Gradients& lowp) {
  SCOPED_TRACE(id);
  Gradients g;
  poison(g, p);
  Counters counted, dry;
  fn(p, in, fwd, opt, g, counted);
  expect_close("dQ", p, g.dQ, ref.dQ, lowp.dQ);
  expect_close("dK", p, g.dK, ref.dK, lowp.dK);
  expect_close("dV", p, g.dV, ref.dV, lowp.dV);
  CpuOptions dry_opt = opt;
  dry_opt.dry_run = true;
  Gradients empty;
  fn(p, Inputs{}, Forward{}, dry_opt, empty, dry);  // a dry run needs no tensors
  EXPECT_EQ(counted, dry);
  EXPECT_TRUE(empty.dQ.empty() && empty.dK.empty() && empty.dV.empty());
}

// Checks every twin of the registry on one case, or, with `only`, that backward-only version alone
// (a solution under test, which the registry does not list). The backward-only versions read
// tiled's forward.
void check_case(const Case& c, bool causal, DType t, const VersionEntry* only = nullptr) {
  SCOPED_TRACE(name(c, causal, t));
  const Problem p = make_problem(c.B, c.H, c.Nq, c.Nk, c.d, causal, t);
  const Inputs in = make_inputs(p, 100 + c.Nq * 7 + c.Nk);
  const Forward ref = reference::forward(p, in, true);
  const Gradients ref_g = reference::backward(p, in, ref);
  const Forward lowp = reference::lowp_forward(p, in);
  const Gradients lowp_g = reference::lowp_backward(p, in, lowp);
  CpuOptions opt;
  opt.Br = c.Br;
  opt.Bc = c.Bc;

  Forward tiled;  // what the FA backward versions read
  if (only != nullptr) {
    Counters counted;
    fwd_of("tiled")(p, in, opt, tiled, counted);
    check_backward(only->id, only->cpu_backward, p, in, tiled, opt, ref_g, lowp_g);
    return;
  }
  for (const VersionInfo& v : versions()) {
    if (v.exercise) continue;  // the starters: tests/test_exercises.cpp
    if (v.fp8) continue;       // e4m3, --dtype fp8 only: tests/test_hopper_fp8.cpp
    if (v.cpu_forward == nullptr) continue;
    SCOPED_TRACE(v.id);
    Forward f;
    poison(f, p, v.cpu_forward == fwd_of("naive"));
    Counters counted, dry;
    v.cpu_forward(p, in, opt, f, counted);
    expect_close("O", p, f.O, ref.O, lowp.O);
    expect_close("LSE", p, f.LSE, ref.LSE, lowp.LSE);
    CpuOptions dry_opt = opt;
    dry_opt.dry_run = true;
    Forward empty;
    v.cpu_forward(p, Inputs{}, dry_opt, empty, dry);
    EXPECT_EQ(counted, dry);
    EXPECT_TRUE(empty.O.empty() && empty.LSE.empty() && empty.P.empty());
    if (v.cpu_backward != nullptr)  // naive: its backward reads its own P
      check_backward(v.id, v.cpu_backward, p, in, f, opt, ref_g, lowp_g);
    if (v.cpu_forward == fwd_of("tiled")) tiled = f;
  }
  ASSERT_FALSE(tiled.O.empty());
  for (const VersionInfo& v : versions())
    if (v.cpu_backward != nullptr && v.cpu_forward == nullptr && !v.exercise)
      check_backward(v.id, v.cpu_backward, p, in, tiled, opt, ref_g, lowp_g);
}

TEST(CpuVersions, MatchTheReferenceInFp64) {
  for (const Case& c : cases())
    for (bool causal : {false, true}) check_case(c, causal, DType::f64);
}

TEST(CpuVersions, StayWithinTheFp32Budget) {
  for (const Case& c : cases())
    for (bool causal : {false, true}) check_case(c, causal, DType::f32);
}

TEST(CpuVersions, StayWithinTheHalfBudgets) {
  const std::vector<Case> all = cases();
  for (DType t : {DType::f16, DType::bf16})
    for (size_t n = 0; n < 5; ++n)
      for (bool causal : {false, true}) check_case(all[n], causal, t);
}

// Exercise 3 solved (tests/exercise_solutions/ex3_no_lse), held to the ladder's budgets on the
// same cases.
TEST(CpuVersions, SolvedExercise3StaysWithinEveryBudget) {
  const VersionEntry* ex3 = testing::solution("ex3_no_lse");
  if (ex3 == nullptr) GTEST_SKIP() << testing::no_solution("ex3_no_lse");
  const std::vector<Case> all = cases();
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    const bool half = t == DType::f16 || t == DType::bf16;  // the first five cases, as above
    for (size_t n = 0; n < (half ? 5 : all.size()); ++n)
      for (bool causal : {false, true}) check_case(all[n], causal, t, ex3);
  }
}

// Causal with Nq > Nk: rows that see no key get O = 0, LSE = -inf, dQ = 0 from every twin, and
// no NaN appears anywhere.
TEST(CpuVersions, RowsThatSeeNoKey) {
  for (DType t : {DType::f64, DType::f32}) {
    const Problem p = make_problem(1, 2, 40, 10, 16, true, t);  // rows 0..29 see nothing
    const Inputs in = make_inputs(p, 77);
    CpuOptions opt;
    opt.Br = 16;
    opt.Bc = 8;
    Counters cnt;
    Forward tiled;
    poison(tiled, p, false);
    fwd_of("tiled")(p, in, opt, tiled, cnt);
    for (const VersionInfo& v : versions()) {
      if (v.exercise) continue;  // the starters: tests/test_exercises.cpp
      if (v.cpu_backward == nullptr) continue;
      SCOPED_TRACE(v.id);
      Forward own;
      if (v.cpu_forward != nullptr) v.cpu_forward(p, in, opt, own, cnt);
      const Forward& f = v.cpu_forward != nullptr ? own : tiled;
      Gradients g;
      poison(g, p);
      v.cpu_backward(p, in, f, opt, g, cnt);
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t r = 0; r < 30; ++r) {
          EXPECT_EQ(f.LSE[h * 40 + r], -INFINITY);
          for (int64_t k = 0; k < 16; ++k) {
            EXPECT_EQ(f.O[(h * 40 + r) * 16 + k], 0.0);
            EXPECT_EQ(g.dQ[(h * 40 + r) * 16 + k], 0.0);
          }
        }
      for (const HostTensor* x :
           std::initializer_list<const HostTensor*>{&f.O, &g.dQ, &g.dK, &g.dV})
        for (double e : *x) ASSERT_TRUE(std::isfinite(e));
    }
  }
}

TEST(CpuVersions, RejectBadTilesAndMissingForward) {
  const Problem p = make_problem(1, 1, 8, 8, 16, false, DType::f32);
  const Inputs in = make_inputs(p, 1);
  Counters cnt;
  Forward f;
  Gradients g;
  CpuOptions zero_tiles;
  zero_tiles.Br = 0;
  EXPECT_THROW(fwd_of("tiled")(p, in, zero_tiles, f, cnt), std::invalid_argument);
  EXPECT_THROW(bwd_of("atomic-dq")(p, in, Forward{}, CpuOptions{}, g, cnt), std::invalid_argument);
  EXPECT_THROW(bwd_of("naive")(p, in, Forward{}, CpuOptions{}, g, cnt), std::invalid_argument);
}

}  // namespace
}  // namespace flashlab
