// The ring on the GPUs (kernels/09_ring/cuda.cu), through NCCL, against the fp64 reference.
//
// One GPU: R = 1, a ring of one, which still sends its K/V shard to itself through NCCL before its
// step and its dK, dV "home" to itself at the end, over fp16, bf16 x d 64, 128 x causal or not x
// N odd and even (2R = 2 does not divide 17, 1001, 4097), grouped heads, for both shardings;
// every output within the budget every CUDA version is held to (gpu_check.h), and a second run
// bitwise equal to the first. Inputs are fresh seeded normals; every output the ring writes starts
// as NaN on the device (the ring poisons its buffers before each run).
//
// Several GPUs: R = 2, 4, 8 on a causal bf16 problem whose length 2R does not divide, skipped
// (with a message) when fewer GPUs are visible; and a ring asked for more ranks than there are
// GPUs is refused before anything runs.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "gpu_check.h"
#include "reference/attention.h"
#include "run/config.h"
#include "run/ring_blocks.h"
#include "run/validate.h"
#include "util/error.h"

namespace flashlab {
namespace {

using gpu_test::Case;
using gpu_test::case_name;

// A ring entry with its GPU side, or a skip that says why not.
const VersionInfo* ring_or_skip(const char* id, std::string& why) {
  const VersionInfo* v = find_version(id);
  if (!v || !v->cuda || !v->cuda->ring) {
    why = std::string(id) + " has no GPU side in this build";
    return nullptr;
  }
  why = cuda_unavailable(*v);  // built without NCCL, or no libnccl.so.2 to open
  return why.empty() ? v : nullptr;
}

void check_ring(const char* id, const Case& c, int ranks) {
  std::string why;
  const VersionInfo* v = ring_or_skip(id, why);
  if (!v) GTEST_SKIP() << why;
  const Problem p = gpu_test::problem_of(c);
  const uint64_t seed = 2800 + static_cast<uint64_t>(c.Nq * 7 + c.d + c.causal * 3 + c.H * 17 +
                                                     c.Hkv * 19 + ranks * 31);
  const Inputs in = make_inputs(p, seed);
  gpu_test::Expected e;
  e.ref = reference::forward(p, in, true);
  e.gref = reference::backward(p, in, e.ref);
  e.low = reference::lowp_forward(p, in);
  e.glow = reference::lowp_backward(p, in, e.low);

  cuda::RunOptions o = gpu_test::once();
  o.bitwise_repeats = 1;
  o.launch.ranks = ranks;
  const cuda::RunResult r = cuda::run(*v->cuda, p, in, nullptr, o);
  std::string log = std::string("[") + id + " R=" + std::to_string(ranks) + "] " + case_name(c) +
                    " (blocks: " + r.ring_blocks + ")";
  log += "\n    " + gpu_test::expect_within("O  ", p.dtype, r.fwd.O, e.ref.O, e.low.O);
  log += "\n    " + gpu_test::expect_within("LSE", DType::f32, r.fwd.LSE, e.ref.LSE, e.low.LSE);
  log += "\n    " + gpu_test::expect_within("dQ ", p.dtype, r.grads.dQ, e.gref.dQ, e.glow.dQ);
  log += "\n    " + gpu_test::expect_within("dK ", p.dtype, r.grads.dK, e.gref.dK, e.glow.dK);
  log += "\n    " + gpu_test::expect_within("dV ", p.dtype, r.grads.dV, e.gref.dV, e.glow.dV);
  EXPECT_TRUE(r.bitwise_repeatable) << id << " promised bitwise repeats";
  EXPECT_FALSE(r.ring_blocks.empty());
  std::cout << log << "\n";
}

std::vector<Case> one_gpu_cases() {
  return gpu_test::case_matrix({
      {1, 1, 2, 3},        // one row: the first of the two chunks is empty
      {17, 17, 2, 3},      // odd: chunks of 8 and 9 rows
      {128, 128, 2, 2},
      {1001, 1001, 1, 2},  // odd, and more than one tile per chunk
      {4097, 4097, 1, 1},
      {1000, 1000, 1, 8, 2},  // grouped heads: 4 query heads a K/V head
  });
}

class CudaRingOneGpu : public ::testing::TestWithParam<Case> {};

TEST_P(CudaRingOneGpu, ZigzagThroughNcclWithinBudget) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  check_ring("ring", GetParam(), 1);
}

TEST_P(CudaRingOneGpu, ContiguousThroughNcclWithinBudget) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  check_ring("ring-contiguous", GetParam(), 1);
}

INSTANTIATE_TEST_SUITE_P(RingOfOne, CudaRingOneGpu, ::testing::ValuesIn(one_gpu_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return case_name(i.param);
                         });

class CudaRingGpus : public ::testing::TestWithParam<int> {};

TEST_P(CudaRingGpus, CausalBf16WithinBudget) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const int R = GetParam();
  if (cuda::device_info().count < R)
    GTEST_SKIP() << "R = " << R << " needs " << R << " GPUs; " << cuda::device_info().count
                 << " visible";
  // 2R does not divide 4099: chunks differ by a row.
  const Case c{DType::bf16, 128, true, 1, 2, 4099, 4099};
  check_ring("ring", c, R);
  check_ring("ring-contiguous", c, R);
}

INSTANTIATE_TEST_SUITE_P(Ranks, CudaRingGpus, ::testing::Values(2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "R" + std::to_string(i.param);
                         });

// More ranks than GPUs: one line from the run's validation (exit 2 on the command line), and the
// same refusal from the runner, before anything is allocated.
TEST(CudaRingEntry, MoreRanksThanGpusIsRefused) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  std::string why;
  const VersionInfo* v = ring_or_skip("ring", why);
  if (!v) GTEST_SKIP() << why;
  const int R = cuda::device_info().count + 1;
  RunConfig c;
  c.backend = Backend::cuda;
  c.problem = gpu_test::problem_of({DType::bf16, 64, true, 1, 1, 64, 64});
  c.versions = {v};
  c.cpu.ranks = R;
  try {
    validate_run(c);
    ADD_FAILURE() << "--ranks " << R << " was accepted with " << R - 1 << " GPUs";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("GPUs"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
  cuda::RunOptions o = gpu_test::once();
  o.launch.ranks = R;
  const Inputs in = make_inputs(c.problem, 5);
  EXPECT_THROW(cuda::run(*v->cuda, c.problem, in, nullptr, o), std::runtime_error);
}

// The blocks the harness picks: a forward and a deterministic backward that take every pair.
TEST(CudaRingEntry, BlockKernelsAreDeterministicRungs) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  std::string why;
  const VersionInfo* v = ring_or_skip("ring", why);
  if (!v) GTEST_SKIP() << why;
  const Problem p = gpu_test::problem_of({DType::bf16, 128, true, 1, 2, 1001, 1001});
  const RingBlocks b = ring_blocks(*v->cuda, p, 1);
  ASSERT_TRUE(b.why.empty()) << b.why;
  EXPECT_NE(b.forward->cuda->forward, nullptr);
  EXPECT_NE(b.backward->cuda->backward, nullptr);
  EXPECT_TRUE(b.backward->deterministic) << b.backward->id;
  std::cout << "ring's blocks here: " << b.forward->id << ", " << b.backward->id << "\n";
}

}  // namespace
}  // namespace flashlab
