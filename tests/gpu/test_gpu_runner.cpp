// The CUDA runner itself: device discovery, poisoning, refusing what does not fit before any
// allocation, timing, and the checks the versions put in front of their kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/rng.h"
#include "gpu_check.h"
#include "run/registry.h"

namespace flashlab {
namespace {

Problem small_problem(int64_t d = 64) {
  Problem p;
  p.shape = {1, 2, 33, 45, d};
  p.dtype = DType::bf16;
  return p;
}

TEST(CudaRunner, DeviceIsPresentOrSaysWhyNot) {
  const cuda::DeviceInfo& dev = cuda::device_info();
  if (!dev.present) {
    EXPECT_FALSE(dev.why_absent.empty());
    GTEST_SKIP() << "no CUDA device: " << dev.why_absent;
  }
  EXPECT_FALSE(dev.name.empty());
  EXPECT_GE(dev.cc_major, 8);
  EXPECT_GT(dev.sms, 0);
  EXPECT_GT(dev.l2_bytes, 0);
  EXPECT_GT(dev.total_bytes, 0);
  std::cout << dev.name << ", cc " << dev.cc_major << "." << dev.cc_minor << ", " << dev.sms
            << " SMs, L2 " << (dev.l2_bytes >> 20) << " MiB, driver " << dev.driver_version
            << ", runtime " << dev.runtime_version << "\n";
}

// A version whose forward launches nothing: every output must come back as the poison (NaN).
TEST(CudaRunner, UnwrittenOutputsComeBackAsNaN) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const cuda::Version lazy{[](const Problem&) { return std::string(); },
                           [](const Problem&, const cuda::LaunchOptions&) { return size_t{0}; },
                           [](const cuda::DeviceTensors&) {}, nullptr};
  const Problem p = small_problem();
  const Inputs in = make_inputs(p, 5);
  const cuda::RunResult r = cuda::run(lazy, p, in, nullptr, cuda::RunOptions{});
  ASSERT_EQ(r.fwd.O.size(), static_cast<size_t>(p.shape.q_elems()));
  for (double x : r.fwd.O) ASSERT_TRUE(std::isnan(x));
  for (double x : r.fwd.LSE) ASSERT_TRUE(std::isnan(x));
}

TEST(CudaRunner, RefusesWhatDoesNotFitBeforeAllocating) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const VersionInfo* tiled = find_version("tiled");
  ASSERT_TRUE(tiled && tiled->cuda);
  Problem p;
  p.shape = {65535, 1, 1 << 20, 1 << 20, 128};  // ~35 TB of inputs
  p.dtype = DType::f16;
  EXPECT_GT(cuda::required_device_bytes(*tiled->cuda, p, {}), cuda::device_info().total_bytes);
  try {
    cuda::run(*tiled->cuda, p, Inputs{}, nullptr, cuda::RunOptions{});
    FAIL() << "a problem larger than the device ran";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("device memory"), std::string::npos) << e.what();
  }
}

TEST(CudaRunner, NaiveRefusesAnSAndPLargerThanTheDevice) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const VersionInfo* naive = find_version("naive");
  ASSERT_TRUE(naive && naive->cuda && naive->cuda->check);
  Problem p = small_problem();
  p.shape.B = 64;
  p.shape.Nq = p.shape.Nk = 200000;  // 2 x 64 x 4e10 x 4 bytes
  EXPECT_FALSE(naive->cuda->check(p).empty());
}

TEST(CudaRunner, TiledRejectsHeadDimsItIsNotBuiltFor) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const VersionInfo* tiled = find_version("tiled");
  ASSERT_TRUE(tiled && tiled->cuda && tiled->cuda->check);
  for (int64_t d : {32, 96, 192, 512}) {
    const Problem p = small_problem(d);
    const std::string why = tiled->cuda->check(p);
    EXPECT_NE(why.find("head dim"), std::string::npos) << "d = " << d << ": '" << why << "'";
    EXPECT_THROW(cuda::run(*tiled->cuda, p, make_inputs(p, 1), nullptr, cuda::RunOptions{}),
                 std::runtime_error);
  }
  for (int64_t d : {64, 128, 256}) EXPECT_TRUE(tiled->cuda->check(small_problem(d)).empty()) << d;
}

TEST(CudaRunner, TimesEveryRepeatAndCountsMemory) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const VersionInfo* naive = find_version("naive");
  ASSERT_TRUE(naive && naive->cuda);
  const Problem p = small_problem();
  cuda::RunOptions opt;
  opt.warmup = 1;
  opt.repeats = 4;
  const cuda::RunResult r = cuda::run(*naive->cuda, p, make_inputs(p, 3), nullptr, opt);
  ASSERT_EQ(r.fwd_time.ms.size(), 4u);
  ASSERT_EQ(r.bwd_time.ms.size(), 4u);
  for (double ms : r.fwd_time.ms) EXPECT_GT(ms, 0.0);
  for (double ms : r.bwd_time.ms) EXPECT_GT(ms, 0.0);
  EXPECT_EQ(r.workspace_bytes, static_cast<int64_t>(naive->cuda->workspace_bytes(p, {})));
  EXPECT_GE(r.peak_device_bytes, cuda::required_device_bytes(*naive->cuda, p, {}));
}

TEST(CudaRunner, CpuOnlyDtypesAreRefused) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const VersionInfo* naive = find_version("naive");
  ASSERT_TRUE(naive && naive->cuda);
  Problem p = small_problem();
  p.dtype = DType::f32;
  EXPECT_THROW(cuda::run(*naive->cuda, p, make_inputs(p, 1), nullptr, cuda::RunOptions{}),
               std::runtime_error);
}

}  // namespace
}  // namespace flashlab
