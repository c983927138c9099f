// split-kv on the GPU (kernels/07_split_kv/cuda.cu): the decoding forward against the fp64
// reference, on the shapes decoding has.
//
// Matrix: Nq in {1, 4, 64} x Nk in {1, 17, 4097, 65536} (not 64 x 65536) x H / Hkv in {1, 4, 8}
// (8 query heads), each for fp16 and bf16, d = 64, 128 and 256; the cache contiguous or paged with
// pages of 16, 64 or 256 keys in turn, causal in turn where Nq > 1; windows; splits forced from 1
// to 128 and chosen by the rule, merged in place by the last split or (more workers' rows than
// counters) by the combine kernel. Each output within gpu_check.h's budget, every run repeated bit
// for bit (the combine sums the splits in a fixed order), and a paged cache's answer bit for bit
// the contiguous cache's (the same keys, in the same order). The expected outputs come from the
// reference on the contiguous layout (core/paged.h: contiguous_problem), so the pool's layout is
// checked by the kernel alone. The runner poisons O, LSE and the workspace with NaN first.
//
// The tests of the entry itself (its axes, its limits, its workspace formula, its split count
// against the twin's) need no device.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "core/paged.h"
#include "core/rng.h"
#include "gpu_check.h"
#include "reference/attention.h"
#include "run/registry.h"

namespace flashlab {
namespace {

struct SplitCase {
  DType dtype;
  int64_t d;
  int64_t B, H, Hkv, Nq, Nk;
  int64_t page = 0;  // 0: contiguous
  bool causal = false;
  int splits = 0;    // 0: the rule's
  int64_t window_left = -1, window_right = -1;
};

std::string case_name(const SplitCase& c) {
  std::string n = to_string(c.dtype) + "_d" + std::to_string(c.d) + "_B" + std::to_string(c.B) +
                  "H" + std::to_string(c.H) + "Hkv" + std::to_string(c.Hkv) + "_Nq" +
                  std::to_string(c.Nq) + "_Nk" + std::to_string(c.Nk) +
                  (c.page ? "_page" + std::to_string(c.page) : "_contiguous") +
                  (c.causal ? "_causal" : "");
  if (c.splits) n += "_splits" + std::to_string(c.splits);
  if (c.window_left >= 0 || c.window_right >= 0)
    n += "_w" + std::to_string(c.window_left) + "_" + std::to_string(c.window_right);
  return n;
}

void PrintTo(const SplitCase& c, std::ostream* os) {
  *os << case_name(c);
}

Problem problem_of(const SplitCase& c) {
  Problem p;
  p.shape = Shape{c.B, c.H, c.Nq, c.Nk, c.d};
  p.shape.Hkv = c.Hkv;
  p.shape.page_size = c.page;
  p.causal = c.causal;
  p.dtype = c.dtype;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  return p;
}

std::vector<SplitCase> all_cases() {
  std::vector<SplitCase> cases;
  const int64_t pages[] = {0, 16, 64, 256};
  for (DType t : {DType::f16, DType::bf16})
    for (int64_t d : {64, 128, 256}) {
      int i = 0;
      for (int64_t nq : {1, 4, 64})
        for (int64_t nk : {1, 17, 4097, 65536}) {
          if (nq == 64 && nk == 65536) continue;  // the reference's cost, not the kernel's
          for (int64_t group : {1, 4, 8}) {
            cases.push_back({t, d, 2, 8, 8 / group, nq, nk, pages[i % 4], nq > 1 && (i / 4) % 2});
            ++i;
          }
        }
      // Windows, on grouped heads and paged caches.
      cases.push_back({t, d, 2, 8, 2, 4, 4097, 64, true, 0, 100, 0});
      cases.push_back({t, d, 1, 8, 1, 64, 4097, 16, false, 0, 300, 20});
    }
  // Splits forced: one to 128 (9000 keys are 141 blocks of 64), contiguous and paged.
  int i = 0;
  for (int s : {1, 2, 3, 5, 16, 33, 64, 128}) {
    cases.push_back({DType::bf16, 128, 1, 8, 2, 1, 9000, i % 2 ? 256 : 0, false, s});
    cases.push_back({DType::f16, 64, 1, 32, 8, 4, 9000, i % 2 ? 0 : 16, true, s});
    // d = 256 (its own tile traits, Q read from shared memory): every page size in turn.
    cases.push_back({i % 2 ? DType::f16 : DType::bf16, 256, 1, 16, 2, i % 4 == 3 ? 4 : 1, 9000,
                     pages[i % 4], i % 4 == 3, s});
    ++i;
  }
  // More workers' rows (B Hkv row blocks: 2048) than the in-place merge has counters
  // (split_launch.h, kArrivalSlots): the combine kernel merges the splits instead.
  cases.push_back({DType::bf16, 64, 8, 64, 64, 64, 300, 0, true, 3});
  cases.push_back({DType::f16, 128, 8, 64, 16, 64, 300, 64, false, 3});
  cases.push_back({DType::bf16, 256, 8, 64, 16, 64, 300, 16, true, 3});
  return cases;
}

const VersionInfo& split_kv() {
  const VersionInfo* v = find_version("split-kv");
  EXPECT_NE(v, nullptr);
  return *v;
}

class CudaSplitKv : public ::testing::TestWithParam<SplitCase> {};

TEST_P(CudaSplitKv, MatchesTheReferenceAndItsContiguousTwin) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const SplitCase& c = GetParam();
  const VersionInfo& v = split_kv();
  ASSERT_NE(v.cuda, nullptr);
  if (const std::string why = cuda_unavailable(v); !why.empty()) GTEST_SKIP() << why;
  const Problem p = problem_of(c);
  ASSERT_EQ(v.cuda->check(p), "");
  const Inputs in = make_inputs(p, 8100 + static_cast<uint64_t>(c.Nq * 7 + c.Nk * 13 + c.Hkv * 3 +
                                                                 c.d + c.page + c.splits));
  const Problem pc = c.page ? contiguous_problem(p) : p;
  const Inputs ic = c.page ? contiguous_inputs(p, in) : in;
  const Forward ref = reference::forward(pc, ic, false);
  const Forward low = reference::lowp_forward(pc, ic);

  cuda::RunOptions o = gpu_test::once();
  o.launch.kv_splits = c.splits;
  o.bitwise_repeats = 2;
  const cuda::RunResult r = cuda::run(*v.cuda, p, in, nullptr, o);
  const int64_t S = v.cuda->kv_splits(p, o.launch);
  std::cout << case_name(c) << ": " << S << " split(s)\n    "
            << gpu_test::expect_within("O  ", p.dtype, r.fwd.O, ref.O, low.O) << "\n    "
            << gpu_test::expect_within("LSE", DType::f32, r.fwd.LSE, ref.LSE, low.LSE) << "\n";
  EXPECT_TRUE(r.bitwise_repeatable) << "the combine sums the splits in a fixed order";
  // The workspace: each split's partial O and LSE in fp32, none with one split.
  const int64_t rows = p.shape.group() * p.shape.Nq;
  EXPECT_EQ(r.workspace_bytes, S > 1 ? S * p.shape.kv_head_count() * rows * (c.d + 1) * 4 : 0);
  if (c.splits > 0) {
    const int64_t blocks = (c.Nk + 63) / 64;  // no window: every block is seen by some row
    EXPECT_EQ(S, std::min<int64_t>(c.splits, blocks));
  }
  if (c.page) {
    // The same keys in the same order, cut into the same splits: the contiguous cache's answer,
    // bit for bit. (The rule gives a paged cache twice the workers, schedule.h, so the contiguous
    // run is told S.)
    o.bitwise_repeats = 0;
    o.launch.kv_splits = static_cast<int>(S);
    const cuda::RunResult rc = cuda::run(*v.cuda, pc, ic, nullptr, o);
    EXPECT_EQ(v.cuda->kv_splits(pc, o.launch), S);
    EXPECT_TRUE(rc.fwd.O == r.fwd.O) << "paged O differs from the contiguous cache's";
    EXPECT_TRUE(rc.fwd.LSE == r.fwd.LSE) << "paged LSE differs from the contiguous cache's";
  }
}

INSTANTIATE_TEST_SUITE_P(SplitKv, CudaSplitKv, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<SplitCase>& i) {
                           return case_name(i.param);
                         });

// ---- the entry, on any machine ------------------------------------------------------------------

TEST(GpuSplitKvEntry, TakesGroupedHeadsWindowsAndPagedCachesNotPackedBatches) {
  const VersionInfo& v = split_kv();
  ASSERT_NE(v.cuda, nullptr) << v.cuda_absent;
  EXPECT_NE(v.cuda->forward, nullptr);
  EXPECT_EQ(v.cuda->backward, nullptr);
  EXPECT_EQ(v.cuda->axes, unsigned{kGroupedHeads | kWindow | kPaged});
  Problem p = problem_of({DType::bf16, 96, 1, 8, 2, 1, 4096});
  const std::string why = v.cuda->check(p);
  EXPECT_NE(why.find("head dims 64, 128 and 256"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << "one line";
  // Too many packed rows for the grid's row blocks: refused in one line, not launched.
  p = problem_of({DType::bf16, 128, 1, 64, 1, 20000, 20000});
  EXPECT_NE(v.cuda->check(p).find("packed rows per K/V head"), std::string::npos);
}

// The kernels plan with 16 packed rows and 64 keys a tile; the twin at those tiles walks the same
// schedule on a GPU of its stand-in SM count (132, the H200's): the same split count, forced or not.
TEST(GpuSplitKvEntry, SplitsAsTheTwinDoesAtTheKernelsTiles) {
  const VersionInfo& v = split_kv();
  ASSERT_NE(v.cuda, nullptr);
  const cuda::DeviceInfo& dev = cuda::device_info();
  if (dev.present && dev.sms != 132) GTEST_SKIP() << "the twin plans for 132 SMs, this GPU has "
                                                  << dev.sms;
  CpuOptions o;
  o.Br = 16;
  o.Bc = 64;
  for (const SplitCase& c : all_cases()) {
    const Problem p = problem_of(c);
    o.splits = c.splits;
    EXPECT_EQ(v.cuda->kv_splits(p, {.kv_splits = c.splits}), v.kv_splits(p, o)) << case_name(c);
  }
  // B = 1, 32 query heads over 8, one query row, 32768 keys: 8 workers, 16 splits of 32 blocks.
  const Problem p = problem_of({DType::bf16, 128, 1, 32, 8, 1, 32768});
  EXPECT_EQ(v.cuda->kv_splits(p, {}), 16);
  EXPECT_EQ(v.cuda->workspace_bytes(p, {}), size_t{16} * 8 * 4 * 129 * 4);
  EXPECT_EQ(v.cuda->workspace_bytes(p, {.kv_splits = 1}), 0u);
  // In pages of 64: two workers an SM at d = 128 (32 splits), one at d = 256, whose 200 KiB of
  // shared memory leave room for no second (16 splits).
  Problem paged = p;
  paged.shape.page_size = 64;
  EXPECT_EQ(v.cuda->kv_splits(paged, {}), 32);
  paged.shape.d = 256;
  EXPECT_EQ(v.cuda->kv_splits(paged, {}), 16);
  EXPECT_EQ(v.cuda->workspace_bytes(paged, {}), size_t{16} * 8 * 4 * 257 * 4);
}

}  // namespace
}  // namespace flashlab
