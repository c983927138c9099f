// Every CUDA version in the registry against the fp64 reference, over the matrix
// fp16, bf16 x d 64, 128 x causal or not x N in {1, 17, 128, 1000, 4097} plus Nq != Nk shapes
// (one of them with more tiles than the GPU has SMs), and over a second matrix of the axes beyond
// dense multi-head attention: grouped K/V heads (H / Hkv = 1, 4, 8 and H: MHA, GQA, MQA) and
// sliding windows (64, 0) and (256, 256), each with and without the causal mask, alone and
// together. A version that does not take an axis says so in one line and is skipped there.
//
// The list of versions comes from the registry: a version is tested on every pass its CUDA entry
// implements, so a new rung is covered as soon as its entry has a forward or a backward. A
// backward-only version gets O and LSE from the CUDA `tiled` forward of the same inputs (as the
// CLI does). The reference runs once per case and serves every version.
#include <gtest/gtest.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "gpu_check.h"
#include "reference/attention.h"
#include "run/registry.h"

namespace flashlab {
namespace {

using gpu_test::expect_within;

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

void match_reference(const Case& c) {
  const Problem p = gpu_test::problem_of(c);
  const uint64_t seed = 1000 + static_cast<uint64_t>(c.Nq * 7 + c.Nk * 13 + c.d + c.causal +
                                                     c.H * 17 + c.Hkv * 19 + c.window_left * 23 +
                                                     c.window_right * 29);
  const Inputs in = make_inputs(p, seed);

  const Forward ref = reference::forward(p, in, true);
  const Gradients gref = reference::backward(p, in, ref);
  const Forward low = reference::lowp_forward(p, in);
  const Gradients glow = reference::lowp_backward(p, in, low);

  cuda::RunOptions opt;
  opt.warmup = 0;
  opt.repeats = 0;
  opt.flush_l2 = false;

  // O and LSE for the backward-only versions: the CUDA tiled forward of the same inputs.
  std::optional<Forward> tiled_fwd;
  auto forward_for_backward = [&]() -> const Forward* {
    if (!tiled_fwd) {
      const VersionInfo* t = find_version("tiled");
      if (!t || !t->cuda || !t->cuda->forward) return nullptr;
      cuda::RunOptions o = opt;
      o.bitwise_repeats = 0;
      tiled_fwd = cuda::run(*t->cuda, p, in, nullptr, o).fwd;
    }
    return &*tiled_fwd;
  };

  int tested = 0;
  for (const VersionInfo& v : versions()) {
    if (v.exercise) continue;  // the starters: tests/gpu/test_gpu_exercises.cpp
    if (!v.cuda || (!v.cuda->forward && !v.cuda->backward)) continue;
    if (const std::string why = cuda_unavailable(v); !why.empty()) {
      std::cout << "[" << v.id << "] not on this GPU: " << why << "\n";
      continue;
    }
    SCOPED_TRACE(std::string("version ") + v.id + ", case " + case_name(c));
    if (const unsigned missing = p.axes() & ~v.cuda->axes) {
      std::cout << "[" << v.id << "] " << case_name(c) << ": does not take "
                << axis_name(missing) << " on cuda yet\n";
      continue;
    }
    if (v.cuda->check) {
      const std::string why = v.cuda->check(p);
      EXPECT_TRUE(why.empty()) << v.id << " rejects a shape of the test matrix: " << why;
      if (!why.empty()) continue;
    }
    const bool fwd = v.cuda->forward != nullptr, bwd = v.cuda->backward != nullptr;
    const Forward* fwd_in = (bwd && !fwd) ? forward_for_backward() : nullptr;
    if (bwd && !fwd) {
      ASSERT_NE(fwd_in, nullptr) << "no CUDA tiled forward to feed " << v.id;
    }
    cuda::RunOptions o = opt;
    o.bitwise_repeats = v.deterministic ? 1 : 0;
    const cuda::RunResult r = cuda::run(*v.cuda, p, in, fwd_in, o);
    std::string log = std::string("[") + v.id + "] " + case_name(c);
    if (fwd) {
      log += "\n    " + expect_within("O  ", c.dtype, r.fwd.O, ref.O, low.O);
      log += "\n    " + expect_within("LSE", DType::f32, r.fwd.LSE, ref.LSE, low.LSE);
    }
    if (bwd) {
      log += "\n    " + expect_within("dQ ", c.dtype, r.grads.dQ, gref.dQ, glow.dQ);
      log += "\n    " + expect_within("dK ", c.dtype, r.grads.dK, gref.dK, glow.dK);
      log += "\n    " + expect_within("dV ", c.dtype, r.grads.dV, gref.dV, glow.dV);
    }
    if (v.deterministic) {
      EXPECT_TRUE(r.bitwise_repeatable) << v.id << " promised bitwise repeats";
    }
    std::cout << log << "\n";
    ++tested;
  }
  EXPECT_GT(tested, 0) << "no CUDA version in the registry has a pass to test";
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
