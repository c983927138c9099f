// The CUDA side of exercise 2 (kernels/exercises/ex2_fa2_bwd/cuda.cu): the starter stops before
// launching anything with `not implemented`, and the solution (tests/exercise_solutions/
// ex2_fa2_bwd/cuda.cu, compiled into this binary as a version of its own) matches the fp64
// reference within the budget, fed the reference's own forward, on fp16 and bf16, d = 64, 128 and
// a head dim that is no multiple of anything (40), causal or not, ragged and Nq != Nk shapes.
// Skips without a device; the solution's tests skip in the students' tree, which has no
// solutions (tests/solutions.h).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>

#include "core/dtype.h"
#include "core/rng.h"
#include "gpu_check.h"
#include "reference/attention.h"
#include "run/registry.h"
#include "solutions.h"
#include "util/error.h"

namespace flashlab {
namespace {

using gpu_test::Case;
using gpu_test::case_name;
using gpu_test::expect_within;
using gpu_test::once;
using gpu_test::problem_of;
using gpu_test::reference_forward_for;

std::vector<Case> cases() {
  std::vector<Case> c = gpu_test::case_matrix(
      {{1, 1, 1, 2}, {17, 17, 2, 2}, {200, 200, 1, 2}, {65, 300, 1, 2}, {300, 40, 2, 1}});
  for (DType t : {DType::f16, DType::bf16})
    for (bool causal : {false, true}) c.push_back({t, 40, causal, 1, 2, 97, 130});
  return c;
}

TEST(GpuExercises, Ex2StarterSaysNotImplemented) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const VersionInfo* v = find_version("ex2-fa2-bwd");
  ASSERT_TRUE(v && v->cuda && v->cuda->backward);
  Problem p;
  p.shape = {1, 1, 64, 64, 64};
  p.dtype = DType::f16;
  const Inputs in = make_inputs(p, 3);
  const Forward fwd = reference_forward_for(p, reference::forward(p, in, false));
  try {
    cuda::run(*v->cuda, p, in, &fwd, once());
    ADD_FAILURE() << "the starter ran to the end";
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("kernels/exercises/ex2_fa2_bwd/cuda.cu:"),
              std::string::npos)
        << e.what();
  }
}

class GpuEx2Solution : public ::testing::TestWithParam<Case> {};

TEST_P(GpuEx2Solution, MatchesFp64ReferenceWithinBudget) {
  const cuda::Version* solution = testing::cuda_solution("ex2_fa2_bwd");
  if (solution == nullptr) GTEST_SKIP() << testing::no_solution("ex2_fa2_bwd");
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const Case& c = GetParam();
  const Problem p = problem_of(c);
  const cuda::Version& v = *solution;
  ASSERT_EQ(v.check(p), "");
  const Inputs in = make_inputs(p, 99 + static_cast<uint64_t>(c.Nq * 7 + c.Nk * 3 + c.d));
  const Forward ref = reference::forward(p, in, true);
  const Gradients gref = reference::backward(p, in, ref);
  const Gradients glow = reference::lowp_backward(p, in, reference::lowp_forward(p, in));
  const Forward fwd_in = reference_forward_for(p, ref);
  const cuda::RunResult r = cuda::run(v, p, in, &fwd_in, once());
  std::string log = "[ex2 solution] " + case_name(c);
  log += "\n    " + expect_within("dQ", c.dtype, r.grads.dQ, gref.dQ, glow.dQ);
  log += "\n    " + expect_within("dK", c.dtype, r.grads.dK, gref.dK, glow.dK);
  log += "\n    " + expect_within("dV", c.dtype, r.grads.dV, gref.dV, glow.dV);
  std::cout << log << "\n";
}

INSTANTIATE_TEST_SUITE_P(Matrix, GpuEx2Solution, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return case_name(i.param);
                         });

TEST(GpuExercises, Ex2SolutionRejectsWhatItCannotRun) {
  const cuda::Version* solution = testing::cuda_solution("ex2_fa2_bwd");
  if (solution == nullptr) GTEST_SKIP() << testing::no_solution("ex2_fa2_bwd");
  const cuda::Version& v = *solution;
  Problem p;
  p.shape = {1, 1, 64, 64, 256};
  p.dtype = DType::f16;
  EXPECT_NE(v.check(p).find("head dims 1 to 128"), std::string::npos);
  p.shape.d = 64;
  p.dtype = DType::f32;
  EXPECT_NE(v.check(p).find("fp16 or bf16"), std::string::npos);
}

}  // namespace
}  // namespace flashlab
