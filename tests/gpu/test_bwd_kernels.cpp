// The CUDA backward versions (recompute, atomic-dq, deterministic-dq, and where the GPU has sm_90a
// hopper and hopper-deterministic) fed the fp64
// reference's own forward -- O rounded to the storage dtype, LSE in fp32 -- so a failure here
// points at the backward kernels alone, never at the CUDA forward that feeds them elsewhere.
//
// Matrix: fp16, bf16 x d 64, 128 x causal or not x N in {1, 17, 128, 1000, 4097}, plus Nq != Nk
// shapes (with Nq > Nk under the causal mask the first Nq - Nk rows see no key: LSE = -inf, and
// their dQ must be exactly 0, never NaN). At d = 256 the three FA2 rungs (recompute, atomic-dq,
// deterministic-dq) on ragged, Nq != Nk, grouped-head and window shapes; the Hopper rung must
// refuse it. Also: shapes the versions must reject, and 50-run bitwise reproducibility on ragged
// and long shapes (CTAs that walk several K blocks) of the deterministic versions
// (deterministic-dq, hopper-deterministic), and of dK, dV for the others, d = 256 included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "gpu_check.h"
#include "reference/attention.h"
#include "run/registry.h"

namespace flashlab {
namespace {

using gpu_test::expect_within;

const char* const kBackwardIds[] = {"recompute", "atomic-dq", "deterministic-dq", "hopper",
                                    "hopper-deterministic"};

// Whether this build and GPU run the version (the Hopper rung needs sm_90a in both); the test
// logs the reason when not.
bool runs_here(const VersionInfo& v) {
  const std::string why = cuda_unavailable(v);
  if (!why.empty()) std::cout << "[" << v.id << "] not run: " << why << "\n";
  return why.empty();
}

using gpu_test::Case;
using gpu_test::case_name;
using gpu_test::problem_of;

std::vector<Case> bwd_cases() {
  // (Nq, Nk, B, H): heads shrink as N grows so the fp64 reference stays quick. 4097 = 32 * 128 + 1:
  // one key and one query past the last full tile of every kernel. 600 x 2100 over 8 heads: 17 K
  // blocks per head, more than deterministic-dq's CTAs (9 splits on 132 SMs), so its CTAs walk 2 K
  // blocks each.
  return gpu_test::case_matrix({{1, 1, 2, 3},
                                {17, 17, 2, 3},
                                {128, 128, 2, 2},
                                {1000, 1000, 1, 2},
                                {4097, 4097, 1, 1},
                                {17, 1000, 2, 1},
                                {1000, 17, 1, 2},
                                {1, 300, 2, 2},
                                {300, 1, 2, 2},
                                {200, 4097, 1, 1},
                                {600, 2100, 1, 8}});
}

using gpu_test::once;
using gpu_test::reference_forward_for;

// With a single visible key P = 1 on every row, so dS = dP - D is exactly 0 and so are dQ and dK.
// A kernel computes D = rowsum(O * dO) and dP = dO V^T in fp32 in different orders, and what is
// left is cancellation noise of size ~ d * 2^-24 * |dO| |V|: a relative error against an all-zero
// reference means nothing there, so such an output is held to an absolute bound instead.
std::string check_gradient(const char* what, DType store, const HostTensor& x,
                           const HostTensor& ref, const HostTensor& lowp) {
  const bool all_zero = std::all_of(ref.begin(), ref.end(), [](double v) { return v == 0.0; });
  if (!all_zero) return expect_within(what, store, x, ref, lowp);
  const gpu_test::ErrorStats e = gpu_test::compare(x, ref);
  constexpr double kCancellationBound = 1e-4;
  EXPECT_TRUE(e.bad.empty()) << what << ": " << e.bad;
  EXPECT_LE(e.max_abs, kCancellationBound) << what << ": exact gradient is 0";
  return std::string(what) + " exact 0, max_abs " + std::to_string(e.max_abs) +
         (e.max_abs <= kCancellationBound ? "" : " BAD");
}

// Each version of `ids` on case c, fed the fp64 reference's forward: every gradient within the
// budget, and exact zeros on the rows that see no key. A version must not refuse c.
void match_reference(const Case& c, const auto& ids) {
  const Problem p = problem_of(c);
  const Inputs in = make_inputs(p, 4242 + static_cast<uint64_t>(c.Nq * 31 + c.Nk * 17 + c.d));
  const Forward ref = reference::forward(p, in, true);
  const Gradients gref = reference::backward(p, in, ref);
  const Gradients glow = reference::lowp_backward(p, in, reference::lowp_forward(p, in));
  const Forward fwd_in = reference_forward_for(p, ref);

  for (const char* id : ids) {
    const VersionInfo* v = find_version(id);
    ASSERT_TRUE(v && v->cuda && v->cuda->backward) << id << " has no CUDA backward";
    if (!runs_here(*v)) continue;
    SCOPED_TRACE(std::string(id) + " " + case_name(c));
    ASSERT_EQ(v->cuda->check(p), "") << id << " rejects a shape it must support";
    const cuda::RunResult r = cuda::run(*v->cuda, p, in, &fwd_in, once());
    std::string log = std::string("[") + id + "] " + case_name(c);
    log += "\n    " + check_gradient("dQ", c.dtype, r.grads.dQ, gref.dQ, glow.dQ);
    log += "\n    " + check_gradient("dK", c.dtype, r.grads.dK, gref.dK, glow.dK);
    log += "\n    " + check_gradient("dV", c.dtype, r.grads.dV, gref.dV, glow.dV);

    // Rows that see no key: exactly zero gradient (checked element by element, not in a norm).
    int64_t nonzero = 0;
    for (int64_t h = 0; h < p.shape.heads(); ++h)
      for (int64_t i = 0; i < c.Nq; ++i)
        if (std::isinf(ref.LSE[h * c.Nq + i]))
          for (int64_t e = 0; e < c.d; ++e) nonzero += r.grads.dQ[(h * c.Nq + i) * c.d + e] != 0.0;
    EXPECT_EQ(nonzero, 0) << "dQ of rows that see no key must be exactly 0";
    std::cout << log << "\n";
  }
}

class BwdKernels : public ::testing::TestWithParam<Case> {};

TEST_P(BwdKernels, MatchFp64ReferenceWithinBudget) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  match_reference(GetParam(), kBackwardIds);
}

INSTANTIATE_TEST_SUITE_P(Matrix, BwdKernels, ::testing::ValuesIn(bwd_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return case_name(i.param);
                         });

// d = 256 (Bc = Br = 64 in the outer-K kernel, Br = 64 in recompute's dQ kernel; dQ added from
// registers): one and many blocks, ragged tails, Nq != Nk both ways (rows with no key), grouped
// heads, windows, and 600 x 4097 over 4 K/V heads: 65 K blocks a head, more than deterministic-dq's
// CTAs (on 132 SMs 33 splits, which walk two K blocks each), with and without a window.
std::vector<Case> bwd_d256_cases() {
  return gpu_test::case_matrix({{1, 1, 2, 3},
                                {17, 17, 2, 3},
                                {128, 128, 2, 2},
                                {1000, 1000, 1, 2},
                                {17, 1000, 2, 1},
                                {1000, 17, 1, 2},
                                {300, 1, 2, 2},
                                {600, 4097, 1, 4},
                                {1000, 1000, 1, 8, 2},
                                {1000, 1000, 1, 2, 0, 64, 0},
                                {1000, 1000, 1, 4, 1, 256, 256},
                                {600, 4097, 1, 8, 4, 256, 256}},
                               {256});
}

class BwdKernelsD256 : public ::testing::TestWithParam<Case> {};

TEST_P(BwdKernelsD256, MatchFp64ReferenceWithinBudget) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  match_reference(GetParam(), kBackwardIds);
}

INSTANTIATE_TEST_SUITE_P(HeadDim256, BwdKernelsD256, ::testing::ValuesIn(bwd_d256_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return case_name(i.param);
                         });

TEST(BwdKernels, RejectUnsupportedShapesWithAMessage) {
  for (const char* id : kBackwardIds) {
    const VersionInfo* v = find_version(id);
    ASSERT_TRUE(v) << id;
    if (!v->cuda) continue;  // not built (the Hopper rung in a build without sm_90a)
    ASSERT_TRUE(v->cuda->check) << id;
    Problem p = problem_of({DType::f16, 96, false, 1, 1, 64, 64});
    // The backward's own refusal (check, or backward_check where the forward takes more).
    const auto bwd_why = [&](const Problem& q) {
      const std::string why = v->cuda->check(q);
      return why.empty() ? cuda::backward_refusal(*v->cuda, q) : why;
    };
    EXPECT_NE(bwd_why(p).find("d = 96 is not one of them"), std::string::npos) << id;
    // d = 256: every backward takes it.
    p = problem_of({DType::bf16, 256, true, 2, 3, 1000, 17});
    EXPECT_EQ(bwd_why(p), "") << id;
    p = problem_of({DType::f32, 64, false, 1, 1, 64, 64});
    EXPECT_NE(v->cuda->check(p).find("fp16 or bf16"), std::string::npos) << id;
    p = problem_of({DType::bf16, 128, true, 2, 3, 1000, 17});
    EXPECT_EQ(v->cuda->check(p), "") << id;
  }
}

// The workspace each version asks for covers what its kernels address: LSE2 and D padded to
// whole blocks, and 0, 1 or nsplits fp32 copies of dQ, 1 <= nsplits <= ceil(Nk/128).
TEST(BwdKernels, WorkspaceGrowsWithTheDqAccumulators) {
  const Problem p = problem_of({DType::f16, 64, false, 2, 3, 1000, 1000});
  const int64_t dq = p.shape.q_elems() * 4;
  const auto ws = [&](const char* id) {
    return static_cast<int64_t>(find_version(id)->cuda->workspace_bytes(p, {}));
  };
  const int64_t rows = ws("recompute");
  EXPECT_GE(rows, 2 * p.shape.lse_elems() * 4);
  EXPECT_EQ(ws("atomic-dq"), rows + dq);
  const int64_t splits = (ws("deterministic-dq") - rows) / dq;
  EXPECT_EQ(ws("deterministic-dq"), rows + splits * dq);
  EXPECT_GE(splits, 1);
  EXPECT_LE(splits, 8);  // ceil(1000 / 128) = 8 K blocks
  // hopper: atomic-dq's and the forward's tile counter; hopper-deterministic: two splits and a
  // turn counter per (head, Q block of 128 rows, split).
  if (find_version("hopper")->cuda) {
    EXPECT_EQ(ws("hopper"), rows + dq + 4);
    EXPECT_EQ(ws("hopper-deterministic"), rows + 2 * dq + p.shape.heads() * 8 * 2 * 4);
    // d = 256: both run the outer-K kernel without dQ and the dQ pass, which writes dQ itself.
    const Problem q = problem_of({DType::f16, 256, false, 2, 3, 1000, 1000});
    const auto ws256 = [&](const char* id) {
      return static_cast<int64_t>(find_version(id)->cuda->workspace_bytes(q, {}));
    };
    EXPECT_EQ(ws256("hopper"), ws256("recompute") + 4);
    EXPECT_EQ(ws256("hopper-deterministic"), ws256("recompute"));
  }
}

// deterministic-dq keeps a few dQ splits per head, not one per K block: at the largest benchmark
// shape (B = 1, H = 16, N = 16384, d = 128) one split per K block would be 128 splits, 17 GB.
TEST(BwdKernels, DeterministicDqWorkspaceIsBoundedAtLongSequences) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const Problem p = problem_of({DType::bf16, 128, false, 1, 16, 16384, 16384});
  const auto ws = static_cast<int64_t>(find_version("deterministic-dq")->cuda->workspace_bytes(p, {}));
  const int64_t dq = p.shape.q_elems() * 4;
  std::cout << "[deterministic-dq] B=1 H=16 N=16384 d=128: workspace " << ws << " bytes, "
            << ws / dq << " splits\n";
  EXPECT_LT(ws, int64_t{3} << 30);
}

class BwdDeterminism : public ::testing::TestWithParam<Case> {};

TEST_P(BwdDeterminism, DeterministicVersionsAreBitwiseReproducibleOverFiftyRuns) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const Problem p = problem_of(GetParam());
  const Inputs in = make_inputs(p, 99);
  const Forward fwd_in = reference_forward_for(p, reference::forward(p, in, false));
  cuda::RunOptions o = once();
  o.bitwise_repeats = 49;
  for (const char* id : {"deterministic-dq", "atomic-dq", "hopper-deterministic", "hopper"}) {
    const VersionInfo* v = find_version(id);
    ASSERT_TRUE(v && v->cuda && v->cuda->backward) << id;
    if (!runs_here(*v)) continue;
    const cuda::RunResult r = cuda::run(*v->cuda, p, in, &fwd_in, o);
    std::cout << "[" << id << "] 50 runs: dQ differed from the first in " << r.differing_runs.dQ
              << ", dK in " << r.differing_runs.dK << ", dV in " << r.differing_runs.dV << "\n";
    EXPECT_EQ(r.differing_runs.dK, 0) << id;
    EXPECT_EQ(r.differing_runs.dV, 0) << id;
    if (v->deterministic) {
      EXPECT_EQ(r.differing_runs.dQ, 0) << id;
      EXPECT_TRUE(r.bitwise_repeatable) << id;
    }
  }
}

// Ragged and causal, more queries than keys (rows without keys) and several K blocks per row; and
// shapes with more K blocks than the GPU needs CTAs, where each outer-K CTA walks several K blocks
// into its one split (on 132 SMs: 16 splits of 4 K blocks; 7 splits of ~5 K blocks, causal). At
// d = 256 (64-key blocks): the first shape again, 4 heads of 4097 keys, 65 K blocks a head,
// whose outer-K CTAs walk two each (33 splits on 132 SMs), and 8 query heads over 2 K/V heads
// under the causal mask and a window of 300 keys, Nq != Nk (the Hopper rung's turns per
// warpgroup walk grouped heads and a window's left side).
INSTANTIATE_TEST_SUITE_P(Shapes, BwdDeterminism,
                         ::testing::Values(Case{DType::f16, 64, true, 2, 3, 1100, 777},
                                           Case{DType::bf16, 128, false, 1, 8, 3000, 8191},
                                           Case{DType::f16, 64, true, 2, 8, 4097, 4097},
                                           Case{DType::f16, 256, true, 2, 3, 1100, 777},
                                           Case{DType::bf16, 256, false, 1, 4, 1500, 4097},
                                           Case{DType::bf16, 256, true, 1, 8, 1000, 2000, 2, 300,
                                                0}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return case_name(i.param);
                         });

}  // namespace
}  // namespace flashlab
