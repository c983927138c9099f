// split-kv, the decoding rung (kernels/07_split_kv): its CPU twin against the fp64 reference over
// the decoding matrix, the counts of its schedule, its split rule, and what it promises bit for
// bit.
//
//   - Nq in {1, 4, 64} x Nk in {1, 17, 4097} x K/V groups of 1, 4 and 8 query heads, each shape
//     with a page size (16, 64, 256, or a contiguous cache), a dtype (fp16, bf16, fp32, fp64), a
//     head dim (64, 128), the causal mask or none and a number of splits (forced, or the rule's)
//     in rotation, so that every value meets every shape's neighbours; forced splits 1 .. 128 on
//     one shape; a window; rows that see no key. Outputs are poisoned first; the budget is
//     test_cpu_versions.cpp's (fp64: 1e-12 of the size; else 10x the storage-dtype computation's
//     error, plus a floor);
//   - its dry run counts what its real run counts, and the counts are the schedule's closed forms:
//     K and V read once per K/V head, the partials and the combine, the block table's entries;
//   - bit for bit: repeats and thread counts, a paged cache and the contiguous one, one split
//     and tiled;
//   - the split rule's table in kernels/07_split_kv/README.md, and the workspace formula;
//   - the command line: a run on a paged cache passes and leaves the other versions out with a
//     line each, its dump and report validate against the schema, and verify reruns it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/packed.h"
#include "core/paged.h"
#include "core/rng.h"
#include "reference/attention.h"
#include "run/registry.h"
#include "test_cli_helpers.h"
#include "test_cpu_util.h"
#include "util/npy.h"

namespace flashlab {
namespace {

using json = nlohmann::json;
using testing::bitwise_equal;
using testing::expect_close;
using testing::poison;

const VersionInfo& split_kv() {
  const VersionInfo* v = find_version("split-kv");
  if (!v) throw std::logic_error("split-kv is not registered");
  return *v;
}

std::string name(const Problem& p, const CpuOptions& o) {
  std::ostringstream s;
  s << "B" << p.shape.B << " H" << p.shape.H << " Hkv" << p.shape.kv_heads() << " Nq" << p.shape.Nq
    << " Nk" << p.shape.Nk << " d" << p.shape.d << " page " << p.shape.page_size
    << (p.causal ? " causal " : " ") << to_string(p.dtype) << " splits "
    << (o.splits ? std::to_string(o.splits) : "chosen") << " window " << p.window_left << ","
    << p.window_right;
  return s.str();
}

// The twin against the reference, poisoned first; its dry run counts the same. Returns the splits
// it ran with.
int64_t check_against_reference(const Problem& p, const CpuOptions& o, uint64_t seed) {
  SCOPED_TRACE(name(p, o));
  const Inputs in = make_inputs(p, seed);
  const Forward ref = reference::forward(p, in, false);
  const Forward lowp = reference::lowp_forward(p, in);
  Forward f;
  poison(f, p, false);
  Counters counted, dry;
  cpu_forward(split_kv(), p, in, o, f, counted);
  expect_close("O", p, f.O, ref.O, lowp.O);
  expect_close("LSE", p, f.LSE, ref.LSE, lowp.LSE);
  CpuOptions dry_opt = o;
  dry_opt.dry_run = true;
  Forward none;
  cpu_forward(split_kv(), p, Inputs{}, dry_opt, none, dry);
  EXPECT_EQ(counted, dry);
  EXPECT_TRUE(none.O.empty() && none.LSE.empty());
  return split_kv().kv_splits(p, o);
}

// Every (Nq, Nk, group) of the issue, the other settings in rotation.
TEST(SplitKv, MatchesTheReferenceOverTheDecodingMatrix) {
  const int64_t pages[] = {16, 0, 64, 256};
  const DType types[] = {DType::f16, DType::bf16, DType::f32, DType::f64};
  const int forced[] = {0, 1, 2, 3, 7, 0, 16, 128, 0, 5};
  int n = 0, split = 0;
  for (const int64_t Nq : {1, 4, 64})
    for (const int64_t Nk : {1, 17, 4097})
      for (const int64_t group : {1, 4, 8}) {
        const int64_t Hkv = Nq * Nk * group > 64 * 4097 ? 1 : 2;  // the largest stay quick
        const int64_t d = n % 3 == 1 ? 128 : 64;
        const Problem p = testing::make_paged_problem(1 + n % 2, group * Hkv, Hkv, Nq, Nk, d, pages[n % 4],
                                         n % 5 >= 2, types[(n / 2) % 4]);
        CpuOptions o;
        o.splits = forced[n % 10];
        o.threads = 2;
        split = std::max<int64_t>(split, check_against_reference(p, o, 300 + n));
        ++n;
      }
  EXPECT_EQ(n, 27);
  EXPECT_GT(split, 16) << "the matrix ran many splits somewhere";
}

// Forced splits 1 .. 128 on one shape (65 key blocks: from 66 on, one block a split).
TEST(SplitKv, ForcedSplitsFrom1To128) {
  const Problem p = testing::make_paged_problem(1, 8, 2, 4, 4097, 64, 64, true, DType::f32);
  const Inputs in = make_inputs(p, 41);
  const Forward ref = reference::forward(p, in, false), lowp = reference::lowp_forward(p, in);
  Forward first;
  for (int S = 1; S <= kMaxKvSplits; ++S) {
    SCOPED_TRACE("splits " + std::to_string(S));
    CpuOptions o;
    o.splits = S;
    EXPECT_EQ(split_kv().kv_splits(p, o), std::min(S, 65));
    Forward f;
    poison(f, p, false);
    Counters c;
    cpu_forward(split_kv(), p, in, o, f, c);
    expect_close("O", p, f.O, ref.O, lowp.O);
    expect_close("LSE", p, f.LSE, ref.LSE, lowp.LSE);
    if (S == 1) first = f;
    if (S > 65) {  // no more splits than blocks: the 65-split schedule
      CpuOptions at65 = o;
      at65.splits = 65;
      Forward g;
      cpu_forward(split_kv(), p, in, at65, g, c);
      EXPECT_TRUE(bitwise_equal(f.O, g.O));
    }
    if (S == 2) {
      EXPECT_FALSE(bitwise_equal(f.O, first.O)) << "a combine changes the rounding";
    }
  }
}

// A window (left only, both sides, under the causal mask) with a paged cache, in every dtype.
TEST(SplitKv, TakesAWindow) {
  struct W {
    int64_t left, right;
    bool causal;
  };
  int n = 0;
  for (const W w : {W{100, -1, false}, W{300, 20, false}, W{64, 0, true}, W{0, 0, true}})
    for (const DType t : {DType::f64, DType::bf16}) {
      Problem p = testing::make_paged_problem(2, 8, 2, 4, 1000, 64, n % 2 ? 16 : 0, w.causal, t);
      p.window_left = w.left;
      p.window_right = w.right;
      CpuOptions o;
      o.splits = n % 3 == 0 ? 0 : 4;
      check_against_reference(p, o, 70 + n++);
    }
}

// Causal with Nq > Nk: rows that see no key get O = 0 and LSE = -inf, whatever the splits.
TEST(SplitKv, RowsThatSeeNoKey) {
  const Problem p = testing::make_paged_problem(1, 4, 1, 64, 17, 64, 16, true, DType::f32);  // rows 0..46
  const Inputs in = make_inputs(p, 3);
  for (const int S : {1, 2}) {
    CpuOptions o;
    o.Bc = 8;  // 3 key blocks: two splits
    o.splits = S;
    ASSERT_EQ(split_kv().kv_splits(p, o), S);
    Forward f;
    poison(f, p, false);
    Counters c;
    cpu_forward(split_kv(), p, in, o, f, c);
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t r = 0; r < 64; ++r) {
        const double lse = f.LSE[h * 64 + r];
        if (r < 47) {
          EXPECT_EQ(lse, -INFINITY) << h << " " << r;
          for (int64_t k = 0; k < 64; ++k) EXPECT_EQ(f.O[(h * 64 + r) * 64 + k], 0.0);
        } else {
          EXPECT_TRUE(std::isfinite(lse)) << h << " " << r;
        }
      }
  }
}

// The counts of the schedule in closed form, at Nq = 1 without a mask: each split reads its rows
// of Q, K and V are read once per K/V head, the partials written and read back by the combine.
TEST(SplitKv, CountsAreTheSchedulesClosedForms) {
  const int64_t B = 2, H = 8, Hkv = 2, Nk = 1000, d = 64, Bc = 64, group = H / Hkv;
  const int64_t T = (Nk + Bc - 1) / Bc;  // 16 key blocks
  for (const int64_t page : {0, 16, 128}) {
    for (const int S : {1, 4}) {
      const Problem p = testing::make_paged_problem(B, H, Hkv, 1, Nk, d, page, false, DType::f16);
      CpuOptions o;
      o.Bc = Bc;
      o.splits = S;
      o.dry_run = true;
      Forward f;
      Counters c;
      cpu_forward(split_kv(), p, Inputs{}, o, f, c);
      SCOPED_TRACE("page " + std::to_string(page) + " splits " + std::to_string(S));
      const int64_t heads = B * Hkv, rows = group;  // one row block of `group` rows
      // The block table: one entry per page a tile touches (pages of 16: four a tile; of 128:
      // one, two tiles a page).
      const int64_t table = page == 0 ? 0 : page == 16 ? (Nk + 15) / 16 : T;
      const int64_t combine_read = S > 1 ? S * rows * (d + 1) : 0;
      EXPECT_EQ(c.elems_read, heads * (S * rows * d + 2 * Nk * d + table + combine_read));
      EXPECT_EQ(c.elems_written, heads * (S * rows * (d + 1) + (S > 1 ? rows * (d + 1) : 0)));
      EXPECT_EQ(c.matmul_flops, heads * 4 * rows * Nk * d);
      EXPECT_EQ(c.tiles_computed, heads * T);
      EXPECT_EQ(c.tiles_skipped, 0);
      EXPECT_EQ(c.atomic_adds, 0);
      // tiled reads K and V once per query head: group times what split-kv reads.
      if (page == 0 && S == 1) {
        Counters t;
        cpu_forward(*find_version("tiled"), p, Inputs{}, o, f, t);
        EXPECT_EQ(t.matmul_flops, c.matmul_flops);
        EXPECT_EQ(t.elems_read - B * H * d, group * (c.elems_read - heads * rows * d));
      }
    }
  }
}

// A window skips the key blocks no row sees: they are in no split and counted as skipped.
TEST(SplitKv, BlocksOutsideTheWindowAreInNoSplit) {
  Problem p = testing::make_paged_problem(1, 4, 1, 1, 4096, 64, 0, false, DType::f32);
  p.window_left = 200;  // keys 3895 .. 4095: blocks 60 .. 63
  CpuOptions o;
  o.dry_run = true;
  Forward f;
  Counters c;
  cpu_forward(split_kv(), p, Inputs{}, o, f, c);
  EXPECT_EQ(c.tiles_computed, 4);
  EXPECT_EQ(c.tiles_skipped, 60);
  EXPECT_EQ(split_kv().kv_splits(p, o), 4);  // one unit, four blocks: one block a split
}

TEST(SplitKv, BitwiseAcrossRepeatsAndThreads) {
  const Problem p = testing::make_paged_problem(2, 8, 2, 4, 3000, 64, 64, true, DType::bf16);
  const Inputs in = make_inputs(p, 12);
  for (const int S : {0, 1, 6}) {
    Forward first;
    for (const int threads : {1, 2, 3, 2}) {
      CpuOptions o;
      o.splits = S;
      o.threads = threads;
      Forward f;
      poison(f, p, false);
      Counters c;
      cpu_forward(split_kv(), p, in, o, f, c);
      if (first.O.empty()) {
        first = f;
        continue;
      }
      EXPECT_TRUE(bitwise_equal(f.O, first.O) && bitwise_equal(f.LSE, first.LSE))
          << "splits " << S << ", " << threads << " threads";
    }
  }
}

// The same keys through a block table give the same bits as the contiguous cache.
TEST(SplitKv, APagedCacheGivesTheContiguousAnswerBitForBit) {
  for (const int64_t page : {1, 16, 64, 256})
    for (const int S : {0, 1, 5}) {
      const Problem p = testing::make_paged_problem(2, 8, 2, 4, 700, 64, page, true, DType::f32);
      const Problem c = contiguous_problem(p);
      const Inputs in = make_inputs(p, 8), dense = make_inputs(c, 8);
      ASSERT_FALSE(bitwise_equal(in.K, dense.K));  // the pages are shuffled
      CpuOptions o;
      o.splits = S;
      Forward fp, fc;
      Counters cp, cc;
      cpu_forward(split_kv(), p, in, o, fp, cp);
      cpu_forward(split_kv(), c, dense, o, fc, cc);
      EXPECT_TRUE(bitwise_equal(fp.O, fc.O) && bitwise_equal(fp.LSE, fc.LSE))
          << "page " << page << " splits " << S;
      EXPECT_EQ(cp.matmul_flops, cc.matmul_flops);
      EXPECT_GT(cp.elems_read, cc.elems_read) << "the block table is read too";
    }
}

// One split walks tiled's key blocks in tiled's order for every row: the same bits.
TEST(SplitKv, OneSplitIsTiledBitForBit) {
  for (const int64_t Hkv : {8, 2})
    for (const DType t : {DType::f32, DType::f64}) {
      const Problem p = testing::make_paged_problem(1, 8, Hkv, 5, 900, 64, 0, true, t);
      const Inputs in = make_inputs(p, 2);
      CpuOptions o;
      o.splits = 1;
      Forward a, b;
      Counters c;
      cpu_forward(split_kv(), p, in, o, a, c);
      cpu_forward(*find_version("tiled"), p, in, o, b, c);
      EXPECT_TRUE(bitwise_equal(a.O, b.O) && bitwise_equal(a.LSE, b.LSE)) << "Hkv " << Hkv;
    }
}

// kernels/07_split_kv/README.md's table of the rule (132 SMs, Br = Bc = 64, d = 128), and the
// workspace: each split's partial O and LSE in fp32, none with one split.
TEST(SplitKv, TheSplitRuleOfTheReadme) {
  struct Row {
    int64_t B, H, Hkv, Nq, Nk;
    bool causal;
    int64_t splits;
  };
  for (const Row r : {Row{1, 32, 8, 1, 32768, false, 16}, Row{64, 32, 8, 1, 32768, false, 1},
                      Row{2, 64, 8, 64, 32768, true, 1}, Row{1, 8, 1, 1, 4097, false, 33},
                      Row{1, 8, 8, 1, 17, false, 1}}) {
    const Problem p = testing::make_paged_problem(r.B, r.H, r.Hkv, r.Nq, r.Nk, 128, 0, r.causal, DType::bf16);
    const CpuOptions o;
    EXPECT_EQ(split_kv().kv_splits(p, o), r.splits) << r.B << " " << r.H << " " << r.Nk;
    EXPECT_EQ(split_kv().workspace_bytes(p, o),
              r.splits > 1 ? r.splits * r.B * r.H * r.Nq * (128 + 1) * 4 : 0);
  }
  // A paged cache keeps two workers an SM busy: the same problem in pages of 64 gets 32 splits.
  const Problem paged = testing::make_paged_problem(1, 32, 8, 1, 32768, 128, 64, false, DType::bf16);
  EXPECT_EQ(split_kv().kv_splits(paged, CpuOptions{}), 32);  // 33 would stream 16 blocks too
  // A growing batch fills the GPU: at this length more splits always pay, so S is the most one
  // wave holds, 132 / U (U = 8 B workers), down to 1 from B = 9.
  for (int64_t B = 1; B <= 17; ++B) {
    const Problem p = testing::make_paged_problem(B, 32, 8, 1, 32768, 128, 0, false, DType::bf16);
    EXPECT_EQ(split_kv().kv_splits(p, CpuOptions{}), std::max<int64_t>(1, 132 / (8 * B)))
        << "B " << B;
  }
}

// A packed batch without a paged cache runs sequence by sequence, each its own schedule.
TEST(SplitKv, APackedBatchRunsSequenceBySequence) {
  Problem p;
  p.shape.H = 8;
  p.shape.Hkv = 2;
  p.shape.d = 64;
  set_packed(p.shape, {1, 4, 0, 3}, {300, 17, 50, 1000});
  p.causal = true;
  p.dtype = DType::f32;
  CpuOptions o;
  o.threads = 2;
  testing::check_twins(p, make_inputs(p, 6), o);
}

TEST(SplitKv, ARunOnAPagedCachePassesAndLeavesTheOthersOut) {
  testing::ScratchDir dir;
  const std::string rep = dir / "r.json", dump = dir / "dump";
  const testing::CliResult r = testing::run_cli(
      "run --backend cpu --dtype bf16 -B 2 -H 8 --heads-kv 2 --Nq 1 --Nk 300 -d 64 --page-size 16 "
      "--causal --repeats 1 --warmup 0 --json " +
      testing::quoted(rep) + " --dump " + testing::quoted(dump));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const json doc = json::parse(testing::slurp(rep));
  EXPECT_EQ(doc["config"]["page_size"], 16);
  EXPECT_EQ(doc["config"]["versions"], json::array({"split-kv"}));
  EXPECT_TRUE(doc["ok"].get<bool>());
  std::string notes;
  for (const json& o : doc["observations"]) notes += o.get<std::string>() + "\n";
  for (const char* id : {"naive", "tiled", "hopper"})
    EXPECT_NE(notes.find(std::string(id) +
                         " is left out of --versions all: it does not take a paged K/V cache"),
              std::string::npos)
        << notes;
  EXPECT_NE(notes.find("split-kv cut each K/V head's keys into"), std::string::npos) << notes;
  EXPECT_NE(r.out.find("K/V in pages of 16"), std::string::npos) << r.out;

  // The dump: the pool, the block table and the lengths, as FA's paged-cache API takes them.
  const json index = json::parse(testing::slurp(dump + "/index.json"));
  EXPECT_EQ(index["config"]["page_size"], 16);
  const NpyArray table = parse_npy(testing::slurp(dump + "/block_table.npy"));
  EXPECT_EQ(table.descr, "<i4");
  EXPECT_EQ(table.shape, (std::vector<int64_t>{2, 19}));  // 300 keys in pages of 16
  const NpyArray lens = parse_npy(testing::slurp(dump + "/cache_seqlens.npy"));
  EXPECT_EQ(lens.values, (std::vector<double>{300, 300}));
  const NpyArray K = parse_npy(testing::slurp(dump + "/K.npy"));
  EXPECT_EQ(K.shape, (std::vector<int64_t>{38, 2, 16, 64}));  // [pages, Hkv, P, d]
  // Gathered through the table, the pool is the contiguous problem's K of the same seed.
  Problem p = testing::make_paged_problem(2, 8, 2, 1, 300, 64, 16, true, DType::bf16);
  std::vector<int32_t> t(table.values.begin(), table.values.end());
  const Inputs dense = make_inputs(contiguous_problem(p), 0);
  EXPECT_TRUE(bitwise_equal(from_pages(p.shape, K.values, t), dense.K));
  // split-kv alone has no backward: the reference is the forward's (run/config.h), and the dump
  // has no reference gradients.
  int reference_files = 0;
  for (const json& e : index["files"])
    if (e["version"] == "reference") {
      ++reference_files;
      EXPECT_TRUE(e["tensor"] == "O" || e["tensor"] == "LSE") << e.dump();
    }
  EXPECT_EQ(reference_files, 2);
  EXPECT_FALSE(std::ifstream(dump + "/reference.dQ.npy").good());

  // The dump's config is the report's (the schema's config, page_size among it), less the budget.
  json wrapped = doc;
  wrapped["config"] = index["config"];
  EXPECT_FALSE(index["config"].contains("error_budget"));
  const std::string dumped = dir / "dump_config.json";
  std::ofstream(dumped) << wrapped.dump();
  bool ok = false;
  const std::string log = testing::validate_reports({rep, dumped}, ok);
  EXPECT_TRUE(ok) << log;
  const testing::CliResult v = testing::run_cli(
      "verify " + testing::quoted(rep) + " --rerun --root " + testing::quoted(FLASHLAB_SOURCE_DIR));
  EXPECT_EQ(v.status, 0) << v.out << v.err;
}

// --splits on run and bench: it reaches the twin (the observation, the workspace and the bits say
// so), is recorded in the report, validates against the schema and is read back by verify; a bad
// count, or --splits where no selected version splits the keys, gets one line and exit 2.
TEST(SplitKv, SplitsOnTheCommandLine) {
  testing::ScratchDir dir;
  const std::string shape =
      "run --backend cpu --dtype fp32 -H 8 --heads-kv 2 --Nq 4 --Nk 2000 -d 64 --causal "
      "--repeats 1 --warmup 0 --versions tiled,split-kv ";
  const auto run = [&](const std::string& extra, const std::string& name) {
    const std::string rep = dir / (name + ".json"), dump = dir / name;
    const testing::CliResult r = testing::run_cli(
        shape + extra + " --json " + testing::quoted(rep) + " --dump " + testing::quoted(dump));
    EXPECT_EQ(r.status, 0) << extra << "\n" << r.err << r.out;
    return std::pair{json::parse(testing::slurp(rep)),
                     parse_npy(testing::slurp(dump + "/split-kv.O.npy"))};
  };
  const auto [chosen, o_chosen] = run("", "chosen");
  const auto [seven, o_seven] = run("--splits 7", "seven");
  const auto [one, o_one] = run("--splits 1", "one");
  const auto [many, o_many] = run("--splits 128", "many");  // 32 key blocks: 32 splits
  const auto notes = [](const json& doc) {
    std::string all;
    for (const json& o : doc["observations"]) all += o.get<std::string>() + "\n";
    return all;
  };
  EXPECT_FALSE(chosen["config"].contains("splits"));
  EXPECT_EQ(seven["config"]["splits"], 7);
  EXPECT_NE(notes(chosen).find("split-kv cut each K/V head's keys into 16 splits (its split rule's "
                               "choice for this shape)"),
            std::string::npos)
      << notes(chosen);
  EXPECT_NE(notes(seven).find("into 7 splits (--splits 7)"), std::string::npos) << notes(seven);
  EXPECT_NE(notes(one).find("into 1 split (--splits 1: one split writes O and LSE itself"),
            std::string::npos)
      << notes(one);
  EXPECT_NE(notes(many).find("into 32 splits (--splits 128, but no more splits than key blocks"),
            std::string::npos)
      << notes(many);
  EXPECT_FALSE(o_seven.values == o_one.values) << "the splits change the rounding";
  for (const json* doc : {&chosen, &seven, &one, &many}) EXPECT_TRUE((*doc)["ok"].get<bool>());
  // The timing table's workspace: 7 splits' partials of 8 heads x 4 rows x 65, in fp32.
  int64_t workspace = -1;
  for (const json& t : seven["tables"])
    if (t["id"] == "timing")
      for (const json& row : t["rows"])
        if (row["version"] == "split-kv") workspace = row["workspace_bytes"].get<int64_t>();
  EXPECT_EQ(workspace, 7 * 8 * 4 * 65 * 4);

  // Reports with and without --splits validate; verify reruns the forced one to the same errors.
  std::vector<std::string> files = {dir / "chosen.json", dir / "seven.json"};
  const testing::CliResult bench = testing::run_cli(
      "bench --backend cpu -N 64 -d 16 --causal yes --versions split-kv --splits 3 --repeats 1 "
      "--warmup 0 --json " +
      testing::quoted(dir / "bench.json"));
  ASSERT_EQ(bench.status, 0) << bench.err;
  EXPECT_EQ(json::parse(testing::slurp(dir / "bench.json"))["config"]["splits"], 3);
  files.push_back(dir / "bench.json");
  bool ok = false;
  const std::string log = testing::validate_reports(files, ok);
  EXPECT_TRUE(ok) << log;
  const testing::CliResult v =
      testing::run_cli("verify " + testing::quoted(dir / "seven.json") + " --rerun --root " +
                       testing::quoted(FLASHLAB_SOURCE_DIR));
  EXPECT_EQ(v.status, 0) << v.out << v.err;

  const std::vector<testing::Refused> bad = {
      {"run --splits 0", "--splits must be in 1..128 (got 0)"},
      {"run --splits 129", "--splits must be in 1..128 (got 129)"},
      {"run --splits -3", "--splits must be in 1..128 (got -3)"},
      {"run --splits x", "--splits"},
      {"run --splits 4 --versions tiled,atomic-dq",
       "--splits sets how many splits a version that splits the keys makes (split-kv), and "
       "--versions selects none"},
      {"bench --splits 200", "--splits must be in 1..128 (got 200)"},
      {"bench --splits 2 --versions tiled", "--versions selects none"},
  };
  testing::expect_refused(bad, " --backend cpu");
}

}  // namespace
}  // namespace flashlab
