// split-kv's CUDA side is declared but its kernel is not written yet (kernels/07_split_kv/cuda.cu):
// its entry says so in one line, and nothing claims a CUDA result for it. The check needs no
// device: it is what `flashlab list` and `run --backend cuda --versions split-kv` print on any GPU.
#include <gtest/gtest.h>

#include <string>

#include "run/registry.h"

namespace flashlab {
namespace {

TEST(GpuSplitKv, TheCudaEntrySaysItsKernelIsNotBuiltYet) {
  const VersionInfo* v = find_version("split-kv");
  ASSERT_NE(v, nullptr);
  ASSERT_NE(v->cuda, nullptr) << v->cuda_absent;
  EXPECT_EQ(v->cuda->forward, nullptr);
  EXPECT_EQ(v->cuda->backward, nullptr);
  const std::string why = cuda_unavailable_on(*v, 9, 0);
  EXPECT_NE(why.find("its CUDA kernel is not built yet"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << "one line";
  // The same line on any GPU, and on a machine with none: no device can run a kernel not built.
  EXPECT_EQ(cuda_unavailable_on(*v, 8, 0), why);
  EXPECT_EQ(cuda_unavailable(*v), why);
  Problem p;
  p.shape = Shape{1, 8, 1, 4096, 128};
  p.shape.Hkv = 2;
  p.dtype = DType::bf16;
  ASSERT_NE(v->cuda->check, nullptr);
  EXPECT_EQ(v->cuda->check(p), why);
  EXPECT_EQ(v->cuda->axes, 0u);
}

}  // namespace
}  // namespace flashlab
