// The shape check the CUDA versions share (kernels/common/shape_check.h), on the CPU: each message
// names the version and the limit a problem breaks, and a problem inside every limit passes.
#include <gtest/gtest.h>

#include <string>

#include "common/fa2_bwd/params.h"
#include "common/shape_check.h"
#include "core/problem.h"

namespace flashlab {
namespace {

using cuda::shape_check;
using cuda::ShapeLimits;

// Limits like tiled's and hopper's forward (their cuda.cu).
constexpr ShapeLimits kForward{
    .head_dims = {64, 128}, .max_rows = int64_t{1} << 30, .positive_scale = true};
// The FA2 backward versions' own (recompute, atomic-dq, deterministic-dq).
constexpr const ShapeLimits& kBackward = cuda::kFa2BwdLimits;

Problem problem(DType dtype, int64_t d, int64_t Nq = 256, int64_t Nk = 256) {
  Problem p;
  p.dtype = dtype;
  p.shape = {2, 3, Nq, Nk, d};
  return p;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ShapeCheck, PassesAProblemInsideEveryLimit) {
  for (DType t : {DType::f16, DType::bf16}) {
    for (int64_t d : {64, 128}) {
      EXPECT_EQ(shape_check(problem(t, d, 1000, 17), "tiled", kForward), "");
      EXPECT_EQ(shape_check(problem(t, d, 17, 1000), "recompute", kBackward), "");
    }
    EXPECT_EQ(shape_check(problem(t, 256, 17, 1000), "recompute", kBackward), "");
  }
}

TEST(ShapeCheck, NamesTheVersionAndTheLimit) {
  const std::string dtype = shape_check(problem(DType::f32, 64), "tiled", kForward);
  EXPECT_TRUE(has(dtype, "tiled on CUDA")) << dtype;
  EXPECT_TRUE(has(dtype, "fp16 or bf16, not ")) << dtype;

  const std::string d = shape_check(problem(DType::f16, 96), "atomic-dq", kBackward);
  EXPECT_EQ(d,
            "atomic-dq on CUDA is built for head dims 64, 128 and 256; d = 96 is not one of them");
  const std::string three = shape_check(problem(DType::f16, 32), "v", {.head_dims = {64, 96, 128}});
  EXPECT_TRUE(has(three, "head dims 64, 96 and 128; d = 32")) << three;

  Problem p = problem(DType::bf16, 64);
  p.shape.H = 0;
  EXPECT_EQ(shape_check(p, "tiled", kForward), "B, H, Nq and Nk must be at least 1");
  p.shape.H = 65536;
  EXPECT_TRUE(has(shape_check(p, "hopper", kForward), "at most 65535 heads (B*H)"));
}

TEST(ShapeCheck, AppliesOnlyTheLimitsAVersionStates) {
  // Rows: 2^30 passes the forward's limit, one more does not; the backward has no row limit of
  // its own, but Nq*d must stay below 2^31.
  EXPECT_EQ(shape_check(problem(DType::f16, 64, int64_t{1} << 30, 64), "tiled", kForward), "");
  EXPECT_EQ(shape_check(problem(DType::f16, 64, (int64_t{1} << 30) + 1, 64), "tiled", kForward),
            "tiled on CUDA needs Nq, Nk <= 2^30");
  EXPECT_EQ(shape_check(problem(DType::f16, 128, 64, int64_t{1} << 24), "recompute", kBackward),
            "recompute on CUDA needs Nq*d and Nk*d below 2^31");
  EXPECT_EQ(
      shape_check(problem(DType::f16, 128, 64, (int64_t{1} << 24) - 1), "recompute", kBackward),
      "");

  // The scale: only a version that states it needs a positive one.
  Problem p = problem(DType::f16, 64);
  p.scale = -0.125;
  EXPECT_EQ(shape_check(p, "tiled", kForward), "tiled on CUDA needs a positive softmax scale");
  EXPECT_EQ(shape_check(p, "recompute", kBackward), "");
}

}  // namespace
}  // namespace flashlab
