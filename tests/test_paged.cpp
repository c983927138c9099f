// A paged K/V cache (--page-size; core/paged.h): K and V in a pool of pages [pages, Hkv, P, d]
// and a block table [B, ceil(Nk / P)], as serving engines keep them.
//
//   - the block table is a seeded cycle through the pool: every page away from its place, the
//     same table for the same seed on every machine (pinned here), another for another seed;
//   - the inputs are the contiguous problem's numbers of the same seed, laid out in the pages,
//     with NaN in the slots past each sequence's last key;
//   - the layout, written out here once more from its definition, is the one the reference reads;
//   - the fp64 reference, the storage-dtype computation and the error budget give a paged problem
//     the contiguous problem's answer bit for bit (dK, dV laid out in the pool, 0 in the unused
//     slots), at page sizes 1 to 256 and lengths 1 to 4097; finite differences agree;
//   - the command line: a bad page size, or one with a packed batch, gets one line and exit 2.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "core/paged.h"
#include "core/rng.h"
#include "reference/attention.h"
#include "run/budget.h"
#include "run/config.h"
#include "run/validate.h"
#include "test_cli_helpers.h"
#include "test_cpu_util.h"

namespace flashlab {
namespace {

using testing::bitwise_equal;

TEST(Paged, TheShapeCountsThePool) {
  const Problem p = testing::make_paged_problem(3, 4, 2, 1, 100, 8, 16, false, DType::f32);
  const Shape& s = p.shape;
  EXPECT_TRUE(s.paged());
  EXPECT_EQ(s.pages_per_seq(), 7);  // 100 keys in pages of 16: six whole pages and 4 keys
  EXPECT_EQ(s.num_pages(), 21);
  EXPECT_EQ(s.kv_elems(), 21 * 16 * 2 * 8);
  EXPECT_EQ(s.q_elems(), 3 * 4 * 1 * 8);
  EXPECT_EQ(p.axes(), kGroupedHeads | kPaged);
  EXPECT_EQ(std::string(axis_name(kPaged)), "a paged K/V cache (--page-size)");
  const Problem c = contiguous_problem(p);
  EXPECT_FALSE(c.shape.paged());
  EXPECT_EQ(c.shape.kv_elems(), 3 * 2 * 100 * 8);
}

// Every page of the pool is named once, and none keeps its place in order (a single cycle).
TEST(Paged, TheBlockTableIsASeededCycleOfThePool) {
  for (const int64_t page : {1, 16, 64}) {
    const Problem p = testing::make_paged_problem(5, 2, 1, 1, 300, 8, page, false, DType::f32);
    const std::vector<int32_t> table = shuffled_block_table(p.shape, 9);
    ASSERT_EQ(static_cast<int64_t>(table.size()), p.shape.num_pages());
    EXPECT_NO_THROW(check_block_table(p.shape, table, "test"));
    int64_t cycle = 0;
    for (int64_t at = 0; cycle == 0 || at != 0; at = table[at]) ++cycle;
    EXPECT_EQ(cycle, p.shape.num_pages()) << "one cycle through the whole pool";
    EXPECT_EQ(table, shuffled_block_table(p.shape, 9));
    EXPECT_NE(table, shuffled_block_table(p.shape, 10));
  }
  // A pool of two pages swaps them; a pool of one has nothing to shuffle.
  EXPECT_EQ(shuffled_block_table(testing::make_paged_problem(1, 1, 1, 1, 17, 8, 16, false, DType::f32).shape, 0),
            (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(shuffled_block_table(testing::make_paged_problem(1, 1, 1, 1, 16, 8, 16, false, DType::f32).shape, 0),
            (std::vector<int32_t>{0}));
  // A table that names a page twice, one outside the pool, or too few pages is refused.
  const Shape s = testing::make_paged_problem(1, 1, 1, 1, 40, 8, 16, false, DType::f32).shape;
  EXPECT_THROW(check_block_table(s, {0, 0, 1}, "test"), std::invalid_argument);
  EXPECT_THROW(check_block_table(s, {0, 1, 3}, "test"), std::invalid_argument);
  EXPECT_THROW(check_block_table(s, {0, 1}, "test"), std::invalid_argument);
}

// The same seed gives the same table on every machine: the generator is our own integer code.
TEST(Paged, TheBlockTableIsPinned) {
  const Problem p = testing::make_paged_problem(2, 1, 1, 1, 50, 8, 16, false, DType::f32);
  EXPECT_EQ(shuffled_block_table(p.shape, 42), (std::vector<int32_t>{2, 7, 3, 1, 5, 6, 0, 4}));
}

TEST(Paged, InputsAreTheContiguousProblemsInShuffledPages) {
  for (const DType t : {DType::f32, DType::bf16}) {
    const Problem p = testing::make_paged_problem(2, 4, 2, 3, 37, 8, 16, true, t);
    const Inputs paged = make_inputs(p, 5), dense = make_inputs(contiguous_problem(p), 5);
    EXPECT_TRUE(bitwise_equal(paged.Q, dense.Q));
    EXPECT_TRUE(bitwise_equal(paged.dO, dense.dO));
    EXPECT_EQ(paged.block_table, shuffled_block_table(p.shape, 5));
    EXPECT_TRUE(dense.block_table.empty());
    ASSERT_EQ(static_cast<int64_t>(paged.K.size()), p.shape.kv_elems());
    EXPECT_TRUE(bitwise_equal(from_pages(p.shape, paged.K, paged.block_table), dense.K));
    EXPECT_TRUE(bitwise_equal(from_pages(p.shape, paged.V, paged.block_table), dense.V));
    // 37 keys in 3 pages of 16: 11 slots of each sequence's last page hold no key, and NaN.
    int64_t nan = 0;
    for (const double x : paged.K) nan += std::isnan(x);
    EXPECT_EQ(nan, 2 * 11 * 2 * 8);
  }
}

// The pool written from the layout's definition (pages [Hkv, P, d], the block table naming the
// page of keys iP .. iP + P - 1), with a table chosen here: the reference reads it as the
// contiguous cache.
TEST(Paged, TheLayoutIsPagesOfHeadsByKey) {
  const int64_t B = 2, Hkv = 2, Nk = 10, d = 3, P = 4;  // 3 pages a sequence, 6 in the pool
  const Problem p = testing::make_paged_problem(B, 4, Hkv, 2, Nk, d, P, false, DType::f64);
  const Problem c = contiguous_problem(p);
  const Inputs dense = make_inputs(c, 21);
  Inputs in = dense;
  in.block_table = {4, 0, 5, 2, 3, 1};
  in.K.assign(6 * P * Hkv * d, 1e300);  // unused slots: huge, so a read of one shows
  in.V = in.K;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t j = 0; j < Nk; ++j)
        for (int64_t e = 0; e < d; ++e) {
          const int64_t page = in.block_table[b * 3 + j / P];
          const int64_t at = ((page * Hkv + h) * P + j % P) * d + e;
          in.K[at] = dense.K[((b * Hkv + h) * Nk + j) * d + e];
          in.V[at] = dense.V[((b * Hkv + h) * Nk + j) * d + e];
        }
  EXPECT_TRUE(bitwise_equal(in.K, to_pages(p.shape, dense.K, in.block_table, 1e300)));
  const Forward fp = reference::forward(p, in, true), fc = reference::forward(c, dense, true);
  EXPECT_TRUE(bitwise_equal(fp.O, fc.O));
  EXPECT_TRUE(bitwise_equal(fp.LSE, fc.LSE));
}

// The reference, the storage-dtype computation and the budget: the contiguous problem's answer,
// bit for bit; dK and dV in the pool, 0 where no key is.
void check_same_answer(const Problem& p, uint64_t seed) {
  const Problem c = contiguous_problem(p);
  const Inputs in = make_inputs(p, seed), dense = make_inputs(c, seed);
  const Forward fp = reference::forward(p, in, true), fc = reference::forward(c, dense, true);
  EXPECT_TRUE(bitwise_equal(fp.O, fc.O));
  EXPECT_TRUE(bitwise_equal(fp.LSE, fc.LSE));
  const Gradients gp = reference::backward(p, in, fp), gc = reference::backward(c, dense, fc);
  EXPECT_TRUE(bitwise_equal(gp.dQ, gc.dQ));
  EXPECT_TRUE(bitwise_equal(gp.dK, to_pages(p.shape, gc.dK, in.block_table, 0.0)));
  EXPECT_TRUE(bitwise_equal(gp.dV, to_pages(p.shape, gc.dV, in.block_table, 0.0)));
  if (p.dtype != DType::f64) {
    const Forward lp = reference::lowp_forward(p, in), lc = reference::lowp_forward(c, dense);
    EXPECT_TRUE(bitwise_equal(lp.O, lc.O));
    const Gradients lgp = reference::lowp_backward(p, in, lp),
                    lgc = reference::lowp_backward(c, dense, lc);
    EXPECT_TRUE(bitwise_equal(lgp.dK, to_pages(p.shape, lgc.dK, in.block_table, 0.0)));
  }
  const ErrorBudget bp = compute_budget(p, in, fp, gp), bc = compute_budget(c, dense, fc, gc);
  ASSERT_EQ(bp.outputs.size(), bc.outputs.size());
  for (size_t x = 0; x < bp.outputs.size(); ++x)
    EXPECT_EQ(bp.outputs[x].budget_rel, bc.outputs[x].budget_rel) << bp.outputs[x].output;
}

TEST(Paged, TheReferenceGivesTheContiguousAnswerBitForBit) {
  struct C {
    int64_t B, H, Hkv, Nq, Nk, page;
    bool causal;
    DType t;
  };
  for (const C c :
       {C{1, 2, 2, 1, 1, 16, false, DType::f64}, C{2, 4, 1, 1, 17, 16, true, DType::f32},
        C{1, 8, 2, 4, 300, 64, true, DType::bf16}, C{3, 2, 1, 5, 70, 1, false, DType::f16},
        C{1, 4, 4, 2, 4097, 256, true, DType::f32}}) {
    SCOPED_TRACE("Nk " + std::to_string(c.Nk) + " page " + std::to_string(c.page));
    check_same_answer(testing::make_paged_problem(c.B, c.H, c.Hkv, c.Nq, c.Nk, 16, c.page, c.causal, c.t),
                      30 + c.Nk);
  }
}

// Every element of the pool, the unused slots among them (their gradient is 0: no key is there).
TEST(Paged, BackwardMatchesFiniteDifferences) {
  Problem p = testing::make_paged_problem(2, 2, 1, 3, 6, 4, 4, true, DType::f64);
  p.window_left = 3;
  const Inputs in = make_inputs(p, 8);
  const Gradients g = reference::backward(p, in, reference::forward(p, in, true));
  for (const char which : {'Q', 'K', 'V'}) {
    const HostTensor& grad = which == 'Q' ? g.dQ : which == 'K' ? g.dK : g.dV;
    double worst = 0;
    int64_t unused = 0;
    for (int64_t e = 0; e < static_cast<int64_t>(grad.size()); ++e) {
      const double fd = reference::finite_difference(p, in, which, e, 1e-6);
      worst = std::max(worst, std::abs(fd - grad[e]));
      if (which != 'Q' && std::isnan(in.K[e])) {
        ++unused;
        EXPECT_EQ(fd, 0.0);
        EXPECT_EQ(grad[e], 0.0);
      }
    }
    EXPECT_LE(worst, 1e-8) << which;
    if (which != 'Q') {
      EXPECT_EQ(unused, 2 * 2 * 1 * 4) << which;  // 2 free slots a sequence
    }
  }
}

TEST(Paged, TheReportAndTheDumpCountThePool) {
  RunConfig c;
  c.problem = testing::make_paged_problem(2, 4, 2, 1, 100, 16, 32, false, DType::f16);
  EXPECT_EQ(config_json(c)["page_size"], 32);
  RunConfig dense = c;
  dense.problem.shape.page_size = 0;
  EXPECT_FALSE(config_json(dense).contains("page_size"));
  // The pool has 8 pages of 32 slots where the contiguous cache has 100 keys a sequence; the
  // block table and the lengths are int32.
  EXPECT_EQ(estimate_dump_bytes(c) - estimate_dump_bytes(dense),
            (2 * 2 + 2 * 8) * (8 * 32 - 2 * 100) * 2 * 16 + 4.0 * (8 + 2));
  EXPECT_NO_THROW(check_paged(c.problem));
}

TEST(Paged, BadInputGetsOneLineAndExit2) {
  const std::vector<testing::Refused> cases = {
      {"run --page-size 0", "--page-size must be a power of two in 1..65536 (got 0)"},
      {"run --page-size -16", "--page-size must be a power of two in 1..65536 (got -16)"},
      {"run --page-size 24", "--page-size must be a power of two in 1..65536 (got 24)"},
      {"run --page-size 131072", "--page-size must be a power of two in 1..65536 (got 131072)"},
      {"run --page-size x", "--page-size"},
      {"run --page-size 16 --seqlens 3,4", "--page-size does not combine with a packed batch"},
      {"run --page-size 16 --versions tiled", "version 'tiled' does not take a paged K/V cache"},
      {"run --page-size 16 --versions naive,tiled -H 4 --heads-kv 2",
       "version 'naive' does not take a paged K/V cache"},
      {"run --page-size 16 --seqlens 3,4 --versions split-kv",
       "--page-size does not combine with a packed batch"},
  };
  testing::expect_refused(cases, " --backend cpu");
}

}  // namespace
}  // namespace flashlab
