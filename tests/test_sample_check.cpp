// `run --check sample` (run/sample_check.h): the forward outputs compared with the fp64 reference
// on three (batch, K/V head) slices. What is checked here:
//   - the slices: the first, the middle and the last (batch, K/V head), each once;
//   - a slice's reference is the full reference's rows of its heads, bit for bit (contiguous and
//     paged caches, grouped heads, the causal mask and a window);
//   - a wrong value inside a sampled slice fails the run, one outside is not seen (and the report
//     says only the slices were compared);
//   - the command line: forward-only versions, no dump, no packed batch, each refused in one line;
//     the report's config and observation; the memory check counts the slices, not the whole
//     reference.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/rng.h"
#include "reference/attention.h"
#include "run/host_memory.h"
#include "run/registry.h"
#include "run/runner.h"
#include "run/sample_check.h"
#include "test_cli_helpers.h"
#include "test_cpu_util.h"
#include "util/progress.h"

namespace flashlab {
namespace {

TEST(SampleCheck, SlicesAreTheFirstTheMiddleAndTheLast) {
  Shape s{3, 8, 1, 100, 64};
  s.Hkv = 2;  // 6 (batch, K/V head) pairs: 0, 3, 5
  const std::vector<CheckSlice> a = sample_slices(s);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].b, 0);
  EXPECT_EQ(a[0].kv_head, 0);
  EXPECT_EQ(a[1].b, 1);
  EXPECT_EQ(a[1].kv_head, 1);
  EXPECT_EQ(a[2].b, 2);
  EXPECT_EQ(a[2].kv_head, 1);
  EXPECT_EQ(slices_text(a), "(b 0, K/V head 0), (b 1, K/V head 1), (b 2, K/V head 1)");
  Shape one{1, 4, 1, 100, 64};
  one.Hkv = 1;  // one pair: one slice
  EXPECT_EQ(sample_slices(one).size(), 1u);
  Shape two{1, 4, 1, 100, 64};
  two.Hkv = 2;
  EXPECT_EQ(sample_slices(two).size(), 2u);
}

// Decoding attention is independent per (batch, K/V head): the stacked slices' reference is the
// full reference's rows, the same arithmetic on the same numbers.
TEST(SampleCheck, TheSlicesReferenceIsTheFullReferencesRows) {
  for (const int64_t page : {0, 16}) {
    Problem p = testing::make_paged_problem(3, 8, 2, 5, 300, 32, page, true, DType::bf16);
    p.window_left = 100;
    const Inputs in = make_inputs(p, 77 + page);
    const std::vector<CheckSlice> sl = sample_slices(p.shape);
    const Problem ps = sliced_problem(p, sl);
    EXPECT_EQ(ps.shape.B, 3);
    EXPECT_EQ(ps.shape.H, 4);
    EXPECT_EQ(ps.shape.kv_heads(), 1);
    EXPECT_FALSE(ps.shape.paged());
    const Forward full = reference::forward(p, in, false);
    const Forward part = reference::forward(ps, sliced_inputs(p, in, sl), false);
    const Forward rows = sliced_forward(p, full, sl);
    SCOPED_TRACE("page " + std::to_string(page));
    EXPECT_TRUE(testing::bitwise_equal(rows.O, part.O));
    EXPECT_TRUE(testing::bitwise_equal(rows.LSE, part.LSE));
  }
}

// judge() on a sampled run: the reference's own rounded answer passes; a wrong element inside a
// sampled slice fails; one in a head no slice holds is not compared.
TEST(SampleCheck, AWrongValueInASampledSliceFails) {
  RunConfig c;
  c.problem = testing::make_paged_problem(3, 8, 2, 1, 500, 32, 0, false, DType::bf16);
  c.versions = {find_version("split-kv")};
  c.sample_check = true;
  Progress progress;
  const RunOutcome r = prepare(c, progress);
  ASSERT_EQ(r.slices.size(), 3u);
  const Forward full = reference::forward(c.problem, r.inputs, false);
  VersionOutcome v;
  v.version = c.versions[0];
  v.has_fwd = true;
  v.fwd = full;
  round_all(DType::bf16, v.fwd.O);
  judge(v, r);
  EXPECT_TRUE(v.ok()) << (v.failures.empty() ? "" : v.failures[0]);
  const int64_t d = 32;
  // Query head 2 of batch 0 is in slice (0, 0) (heads 0..3); head 4 of batch 0 is in (0, 1),
  // which no slice holds.
  VersionOutcome outside = v;
  outside.fwd.O[4 * d] += 100.0;
  judge(outside, r);
  EXPECT_TRUE(outside.ok());
  VersionOutcome inside = v;
  inside.fwd.O[2 * d] += 100.0;
  judge(inside, r);
  EXPECT_FALSE(inside.ok());
}

TEST(SampleCheck, TheMemoryCheckCountsTheSlicesNotTheWholeReference) {
  RunConfig c;
  c.problem = testing::make_paged_problem(8, 32, 8, 1, 65536, 128, 0, false, DType::bf16);
  c.versions = {find_version("split-kv")};
  c.backend = Backend::cuda;  // the versions' own buffers are the device's
  const double full = run_host_bytes(c);
  c.sample_check = true;
  const double sampled = run_host_bytes(c);
  const double inputs = 8.0 * 2 * c.problem.shape.kv_elems();  // K and V in fp64
  EXPECT_LT(sampled, full);
  EXPECT_GT(sampled, inputs);
  // The full reference keeps its gradients (dK, dV as big as K, V) beside the inputs; the sampled
  // one keeps three slices' worth.
  EXPECT_GT(full - sampled, inputs / 2);
}

TEST(SampleCheck, TheCommandLineTakesForwardOnlyDenseOrPagedRuns) {
  testing::expect_refused(
      {{"run --versions naive --check sample", "version 'naive' has a backward"},
       {"run --versions split-kv --Nq 1 --Nk 64 --check sample --dump out_never_written",
        "--dump writes the whole reference"},
       {"run --versions split-kv --seqlens 3,5 --check sample", "a packed batch is checked whole"},
       {"run --versions split-kv --Nq 1 --Nk 64 --check some", "--check takes full or sample"}},
      " --backend cpu");
  const testing::CliResult r = testing::run_cli(
      "run --backend cpu --versions split-kv,tiled -B 2 -H 8 --heads-kv 4 --Nq 2 --Nk 700 -d 32 "
      "--dtype bf16 --check sample --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["config"]["check"], "sample");
  EXPECT_EQ(doc["config"]["slices"].size(), 3u);  // 8 pairs: 0, 4, 7
  bool said = false;
  for (const json& o : doc["observations"])
    said = said || o.get<std::string>().find("--check sample: O and LSE were compared with the "
                                             "fp64 reference on 3 of the 8") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace flashlab
