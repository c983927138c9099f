// Every CUDA version in the registry against the fp64 reference, over the matrix
// fp16, bf16 x d 64, 128 x causal or not x N in {1, 17, 128, 1000, 4097} plus Nq != Nk shapes
// (one of them with more tiles than the GPU has SMs), a few of those shapes and of the axes below
// at d = 256 for the versions that take it (the forward of tiled and the three FA2 backward rungs
// must run there, not be left out), and over a second matrix of the axes beyond
// dense multi-head attention: grouped K/V heads (H / Hkv = 1, 4, 8 and H: MHA, GQA, MQA) and
// sliding windows (64, 0) and (256, 256), each with and without the causal mask, alone and
// together. A version that does not take an axis says so in one line and is skipped there.
//
// The list of versions comes from the registry: a version is tested on every pass its CUDA entry
// implements, so a new rung is covered as soon as its entry has a forward or a backward. A
// backward-only version gets O and LSE from the CUDA `tiled` forward of the same inputs (as the
// CLI does). The reference runs once per case and serves every version (gpu_check.h:
// check_every_version, the loop the packed test shares).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rng.h"
#include "gpu_check.h"
#include "reference/attention.h"

namespace flashlab {
namespace {

using gpu_test::Case;
using gpu_test::case_name;

std::vector<Case> all_cases() {
  // (Nq, Nk, B, H): heads shrink as N grows so the fp64 reference stays quick.
  return gpu_test::case_matrix({
      {1, 1, 2, 3},
      {17, 17, 2, 3},
      {128, 128, 2, 2},
      {1000, 1000, 1, 2},
      {4097, 4097, 1, 1},
      // Nq != Nk: under the causal mask, Nq > Nk leaves the first Nq - Nk rows with no key.
      {17, 1000, 2, 1},
      {1000, 17, 1, 2},
      {1, 4097, 1, 1},
      {4097, 1000, 1, 1},
      // More tiles than an H200 has SMs (150 heads): a persistent kernel's blocks walk several
      // tiles each, in a fixed stride or (causal) in the order of a tile counter, and under the
      // causal mask the first Q block of each head sees no key.
      {400, 150, 1, 150},
  });
}

// Head dim 256 (the versions that take it; the others say so and are skipped): ragged, Nq != Nk,
// grouped heads, windows, more tiles than SMs.
std::vector<Case> d256_cases() {
  return gpu_test::case_matrix({{128, 128, 2, 2},
                                {1000, 1000, 1, 2},
                                {17, 1000, 2, 1},
                                {1000, 17, 1, 2},
                                {1, 4097, 1, 1},
                                {1000, 1000, 1, 8, 2},
                                {400, 150, 1, 150},
                                {1000, 1000, 1, 2, 0, 64, 0},
                                {17, 1000, 2, 1, 0, 256, 256},
                                {1000, 1000, 1, 8, 2, 256, 256},
                                {1000, 1000, 1, 4, 1, 64, 0}},
                               {256});
}

// The versions the d = 256 matrix must run on every one of its shapes, forward and backward:
// every CUDA rung of the FA2 chapter and the Hopper rung.
constexpr std::initializer_list<const char*> kMustRunAtD256 = {
    "tiled", "recompute", "atomic-dq", "deterministic-dq", "hopper", "hopper-deterministic"};

std::vector<Case> axes_cases() {
  // (Nq, Nk, B, H, Hkv, window left, window right).
  return gpu_test::case_matrix({
      // Grouped heads: H / Hkv = 4, 8 (= H: one K/V head), 16 (= H), 1 (Hkv = H, said
      // explicitly); ragged and Nq != Nk shapes, and more tiles than SMs.
      {17, 17, 2, 8, 2},
      {1000, 1000, 1, 8, 1},
      {128, 128, 2, 16, 1},
      {1000, 1000, 1, 4, 4},
      {17, 1000, 2, 4, 1},
      {1000, 17, 1, 8, 2},
      {400, 150, 1, 96, 24},
      // Windows: (64, 0) and (256, 256), on square, ragged and Nq != Nk shapes.
      {1000, 1000, 1, 2, 0, 64, 0},
      {4097, 4097, 1, 1, 0, 256, 256},
      {128, 128, 2, 2, 0, 64, 0},
      {17, 1000, 2, 1, 0, 256, 256},
      {1000, 17, 1, 2, 0, 64, 0},
      {1, 4097, 1, 1, 0, 256, 256},
      // Both at once.
      {1000, 1000, 1, 8, 2, 256, 256},
      {4097, 4097, 1, 4, 1, 64, 0},
  });
}

// may_refuse: a refusal naming it leaves a version out (the d = 256 matrix: "head dim"); the
// versions of must_run may not be left out.
void match_reference(const Case& c, const char* may_refuse = nullptr,
                     std::initializer_list<const char*> must_run = {}) {
  const Problem p = gpu_test::problem_of(c);
  const uint64_t seed = 1000 + static_cast<uint64_t>(c.Nq * 7 + c.Nk * 13 + c.d + c.causal +
                                                     c.H * 17 + c.Hkv * 19 + c.window_left * 23 +
                                                     c.window_right * 29);
  const Inputs in = make_inputs(p, seed);

  gpu_test::Expected e;
  e.ref = reference::forward(p, in, true);
  e.gref = reference::backward(p, in, e.ref);
  e.low = reference::lowp_forward(p, in);
  e.glow = reference::lowp_backward(p, in, e.low);

  const gpu_test::VersionLoop loop{.matrix = "test matrix",
                                   .no_feed = "no CUDA tiled forward to feed ",
                                   .feed_axes = 0,
                                   .deterministic_repeats = 1,
                                   .log_repeatable = false,
                                   .may_refuse = may_refuse};
  int tested = 0;
  std::vector<std::string> ran;
  gpu_test::check_every_version(p, in, e, case_name(c), loop, tested, &ran);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_GT(tested, 0) << "no CUDA version in the registry has a pass to test";
  gpu_test::expect_ran(ran, must_run, case_name(c));
}

class CudaVersions : public ::testing::TestWithParam<Case> {};

TEST_P(CudaVersions, MatchFp64ReferenceWithinBudget) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  match_reference(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Matrix, CudaVersions, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return case_name(i.param);
                         });

class CudaVersionsD256 : public ::testing::TestWithParam<Case> {};

TEST_P(CudaVersionsD256, MatchFp64ReferenceWithinBudget) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  match_reference(GetParam(), "head dim", kMustRunAtD256);
}

INSTANTIATE_TEST_SUITE_P(HeadDim256, CudaVersionsD256, ::testing::ValuesIn(d256_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return case_name(i.param);
                         });

class CudaVersionsAxes : public ::testing::TestWithParam<Case> {};

TEST_P(CudaVersionsAxes, MatchFp64ReferenceWithinBudget) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  match_reference(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Axes, CudaVersionsAxes, ::testing::ValuesIn(axes_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return case_name(i.param);
                         });

}  // namespace
}  // namespace flashlab
