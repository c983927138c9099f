// The FP8 rung (kernels/08_hopper_fp8): its three twins within the fp8 error budget on a matrix of
// shapes (d 64 and 128, causal and not, ragged N, Nq != Nk, grouped heads) on seeded normal and
// outlier inputs, with poisoned outputs and dry runs that count what the real runs counted; what
// incoherent processing buys on outlier inputs (and does not cost on normal ones); the outlier
// generator itself; and the fp8 budget's yardstick.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "core/dtype.h"
#include "core/packed.h"
#include "core/rng.h"
#include "reference/attention.h"
#include "run/budget.h"
#include "run/compare.h"
#include "run/registry.h"
#include "run/validate.h"
#include "test_cpu_util.h"

namespace flashlab {
namespace {

using testing::make_problem;
using testing::poison;

const char* const kFp8Ids[] = {"hopper-fp8", "hopper-fp8-no-hadamard", "hopper-fp8-per-tensor"};

struct Case {
  int64_t B, H, Hkv, Nq, Nk, d;
};

// Ragged against the 128-row blocks both ways, Nq above and below Nk, one row, grouped heads.
const Case kCases[] = {
    {1, 2, 2, 300, 300, 64}, {1, 1, 1, 1, 200, 128}, {2, 2, 1, 129, 77, 64},
    {1, 2, 2, 77, 390, 128}, {1, 4, 2, 256, 256, 128},
};

double rel(const HostTensor& x, const HostTensor& ref) {
  return compare(x, ref).rel;
}

TEST(HopperFp8, EveryTwinStaysWithinTheFp8Budget) {
  for (const Case& c : kCases)
    for (bool causal : {false, true})
      for (InputKind kind : {InputKind::normal, InputKind::outliers}) {
        Problem p = make_problem(c.B, c.H, c.Nq, c.Nk, c.d, causal, DType::fp8);
        p.shape.Hkv = c.Hkv;
        std::ostringstream name;
        name << "B" << c.B << " H" << c.H << " Hkv" << c.Hkv << " Nq" << c.Nq << " Nk" << c.Nk
             << " d" << c.d << (causal ? " causal " : " full ") << to_string(kind);
        SCOPED_TRACE(name.str());
        const Inputs in = make_inputs(p, 31 + c.Nq + 7 * c.Nk, kind);
        const Forward ref = reference::forward(p, in, true);
        const ErrorBudget budget = compute_budget(p, in, ref, Gradients{});
        for (const char* id : kFp8Ids) {
          SCOPED_TRACE(id);
          const VersionInfo* v = find_version(id);
          ASSERT_NE(v, nullptr);
          Forward f;
          poison(f, p, false);
          Counters counted, dry;
          CpuOptions o;
          v->cpu_forward(p, in, o, f, counted);
          const ErrorStats eo = compare(f.O, ref.O), el = compare_lse(f.LSE, ref.LSE);
          EXPECT_TRUE(eo.finite && el.finite);
          EXPECT_LE(eo.rel, budget.of("O").budget_rel);
          EXPECT_LE(el.rel, budget.of("LSE").budget_rel);
          // More than bf16 alone would give: the twin did round to e4m3.
          EXPECT_GT(eo.rel, 4 * budget.of("O").rounded_rel);
          for (double x : f.O) ASSERT_EQ(x, round_to(DType::bf16, x));  // O is stored in bf16
          CpuOptions dry_opt = o;
          dry_opt.dry_run = true;
          Forward empty;
          v->cpu_forward(p, Inputs{}, dry_opt, empty, dry);
          EXPECT_EQ(counted, dry);
          EXPECT_TRUE(empty.O.empty() && empty.LSE.empty());
        }
      }
}

// Causal with Nq > Nk: rows that see no key get O = 0 and LSE = -inf.
TEST(HopperFp8, RowsThatSeeNoKey) {
  const Problem p = make_problem(1, 2, 200, 50, 64, true, DType::fp8);  // rows 0..149 see nothing
  const Inputs in = make_inputs(p, 8);
  for (const char* id : kFp8Ids) {
    SCOPED_TRACE(id);
    Forward f;
    poison(f, p, false);
    Counters cnt;
    find_version(id)->cpu_forward(p, in, CpuOptions{}, f, cnt);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t r = 0; r < 150; ++r) {
        EXPECT_EQ(f.LSE[h * 200 + r], -INFINITY);
        for (int64_t k = 0; k < 64; ++k) EXPECT_EQ(f.O[(h * 200 + r) * 64 + k], 0.0);
      }
    for (double x : f.O) ASSERT_TRUE(std::isfinite(x));
  }
}

// Incoherent processing, at the lab's shape (one head, N = 2048, d = 128): on outlier inputs it
// lowers the block-scaled error clearly (measured 1.6x to 2.0x over seeds 0-4), and what is left
// is the error of normal inputs (e4m3's own, which no rotation removes); on normal inputs it
// changes nothing much. A rotation that did nothing, or that broke Q K^T, fails one of these.
TEST(HopperFp8, IncoherentProcessingLowersTheErrorOnOutliers) {
  const Problem p = make_problem(1, 1, 2048, 2048, 128, false, DType::fp8);
  double rung[2], block[2];
  for (InputKind kind : {InputKind::normal, InputKind::outliers}) {
    const Inputs in = make_inputs(p, 3, kind);
    const Forward ref = reference::forward(p, in, false);
    const int k = kind == InputKind::outliers;
    Forward f;
    Counters cnt;
    find_version("hopper-fp8")->cpu_forward(p, in, CpuOptions{}, f, cnt);
    rung[k] = rel(f.O, ref.O);
    find_version("hopper-fp8-no-hadamard")->cpu_forward(p, in, CpuOptions{}, f, cnt);
    block[k] = rel(f.O, ref.O);
  }
  EXPECT_GT(block[1] / rung[1], 1.4) << "outliers: block " << block[1] << ", rotated " << rung[1];
  EXPECT_LT(rung[1] / rung[0], 1.3) << "rotated: outliers " << rung[1] << ", normal " << rung[0];
  EXPECT_GT(block[0] / rung[0], 0.8);
  EXPECT_LT(block[0] / rung[0], 1.25);
}

// The outliers: the same normals as `normal`, plus a N(0, 100) term on about 0.1 % of the
// entries of Q, K and V; dO untouched; the same numbers on every call.
TEST(HopperFp8, OutlierInputsAreNormalsWithAFewLargeTerms) {
  Problem p = make_problem(1, 4, 512, 512, 64, false, DType::f64);
  const Inputs a = make_inputs(p, 11), b = make_inputs(p, 11, InputKind::outliers),
               c = make_inputs(p, 11, InputKind::outliers);
  EXPECT_TRUE(bitwise_equal(b.Q, c.Q) && bitwise_equal(b.K, c.K) && bitwise_equal(b.V, c.V));
  EXPECT_TRUE(bitwise_equal(a.dO, b.dO));
  for (const auto& [x, y] : {std::pair{&a.Q, &b.Q}, {&a.K, &b.K}, {&a.V, &b.V}}) {
    int64_t changed = 0;
    double sum2 = 0;
    for (size_t i = 0; i < x->size(); ++i)
      if ((*x)[i] != (*y)[i]) {
        ++changed;
        sum2 += ((*y)[i] - (*x)[i]) * ((*y)[i] - (*x)[i]);
      }
    const double n = static_cast<double>(x->size());  // 131072: about 131 outliers expected
    EXPECT_GT(changed, 0.5 * kOutlierShare * n);
    EXPECT_LT(changed, 1.5 * kOutlierShare * n);
    const double sd = std::sqrt(sum2 / changed);
    EXPECT_GT(sd, 0.7 * kOutlierStd);
    EXPECT_LT(sd, 1.3 * kOutlierStd);
  }
  // Rounded to the dtype like every input: bf16 for fp8.
  p.dtype = DType::fp8;
  for (double x : make_inputs(p, 11, InputKind::outliers).K) ASSERT_EQ(x, round_to(DType::bf16, x));
}

// The yardstick of the fp8 budget is the plain per-tensor FP8 forward: its O error is e4m3's
// (a few percent), far above bf16's rounding, and the budget covers O and LSE only.
TEST(HopperFp8, TheBudgetIsThePlainFp8Forward) {
  const Problem p = make_problem(1, 2, 256, 256, 64, false, DType::fp8);
  const Inputs in = make_inputs(p, 5);
  const Forward ref = reference::forward(p, in, true);
  const ErrorBudget b = compute_budget(p, in, ref, Gradients{});
  ASSERT_EQ(b.outputs.size(), 2u);
  EXPECT_GT(b.of("O").lowp_rel, 0.01);
  EXPECT_LT(b.of("O").lowp_rel, 0.1);
  EXPECT_GT(b.of("O").lowp_rel, 10 * b.of("O").rounded_rel);
  EXPECT_THROW(b.of("dQ"), std::logic_error);
}

// Only the FP8 versions take fp8, and they take nothing else.
TEST(HopperFp8, DtypeRefusals) {
  for (const VersionInfo& v : versions()) {
    if (v.exercise) continue;
    SCOPED_TRACE(v.id);
    EXPECT_EQ(dtype_refusal(v, DType::fp8).empty(), v.fp8);
    for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16})
      EXPECT_EQ(dtype_refusal(v, t).empty(), !v.fp8);
  }
  for (const char* id : kFp8Ids) {
    const VersionInfo* v = find_version(id);
    ASSERT_NE(v, nullptr);
    EXPECT_TRUE(v->fp8);
    EXPECT_EQ(v->pass, Pass::fwd);
    if (v->cuda) {  // built with CUDA (sm_90a): a forward, and no backward (FA3's stays bf16)
      EXPECT_NE(v->cuda->forward, nullptr);
      EXPECT_EQ(v->cuda->backward, nullptr);
    } else {
      EXPECT_FALSE(cuda_unavailable(*v).empty());  // says why
    }
    const Problem p = make_problem(1, 1, 8, 8, 64, false, DType::f32);
    Forward f;
    Counters cnt;
    EXPECT_THROW(v->cpu_forward(p, make_inputs(p, 1), CpuOptions{}, f, cnt), std::invalid_argument);
  }
}

}  // namespace
}  // namespace flashlab
