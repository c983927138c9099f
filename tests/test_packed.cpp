// Packed batches (FlashAttention's varlen layout: [tokens, H, d], LSE [H, tokens], cumulative
// offsets), on the CPU:
//
//   - a packed batch of equal lengths is the dense batch laid out by token, bit for bit, in the
//     reference and in every twin;
//   - every twin on mixed lengths (1, 17, 128, 1000, 4097, and 0), with grouped heads, windows and
//     the causal mask, against the fp64 reference within the budget of test_cpu_versions.cpp;
//   - sequences of length 0; FLOPs counted per sequence; finite differences;
//   - a walk over the sequences meets each once, with its offsets and its own problem, and 40,000
//     short sequences run through every twin in seconds;
//   - the command line: bad lengths get one line and exit 2, a dump holds the packed tensors and
//     the offsets, a report's config names the lengths and `verify` reruns it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <random>
#include <string>

#include "cli/common.h"
#include "core/packed.h"
#include "core/rng.h"
#include "reference/attention.h"
#include "run/config.h"
#include "run/registry.h"
#include "run/validate.h"
#include "test_cli_helpers.h"
#include "test_cpu_util.h"
#include "util/npy.h"

namespace flashlab {
namespace {

using testing::bitwise_equal;

Problem packed_problem(std::vector<int64_t> lq, std::vector<int64_t> lk, int64_t H, int64_t Hkv,
                       int64_t d, bool causal, int64_t left, int64_t right, DType t) {
  Problem p;
  p.shape.H = H;
  p.shape.Hkv = Hkv;
  p.shape.d = d;
  set_packed(p.shape, std::move(lq), std::move(lk));
  p.causal = causal;
  p.window_left = left;
  p.window_right = right;
  p.dtype = t;
  return p;
}

// Dense [B, heads, N, d] -> token-major [B*N, heads, d] (equal lengths N).
HostTensor by_token(const HostTensor& x, int64_t B, int64_t heads, int64_t N, int64_t d) {
  HostTensor out(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < d; ++c)
          out[(((b * N + r) * heads) + h) * d + c] = x[(((b * heads + h) * N) + r) * d + c];
  return out;
}
// Dense LSE [B, H, N] -> [H, B*N].
HostTensor lse_by_token(const HostTensor& x, int64_t B, int64_t H, int64_t N) {
  HostTensor out(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t r = 0; r < N; ++r) out[h * B * N + b * N + r] = x[(b * H + h) * N + r];
  return out;
}

TEST(Packed, EqualLengthsAreTheDenseBatchLaidOutByToken) {
  const int64_t B = 3, H = 4, Hkv = 2, N = 45, d = 16;
  Problem dense = testing::make_problem(B, H, N, N, d, true, DType::f32);
  dense.shape.Hkv = Hkv;
  dense.window_left = 20;
  const Problem packed = packed_problem({N, N, N}, {N, N, N}, H, Hkv, d, true, 20, -1, DType::f32);
  const Inputs in = make_inputs(dense, 91);
  Inputs pin;
  pin.Q = by_token(in.Q, B, H, N, d);
  pin.K = by_token(in.K, B, Hkv, N, d);
  pin.V = by_token(in.V, B, Hkv, N, d);
  pin.dO = by_token(in.dO, B, H, N, d);

  const Forward rf = reference::forward(dense, in, true),
                pf = reference::forward(packed, pin, true);
  EXPECT_TRUE(bitwise_equal(by_token(rf.O, B, H, N, d), pf.O));
  EXPECT_TRUE(bitwise_equal(lse_by_token(rf.LSE, B, H, N), pf.LSE));
  const Gradients rg = reference::backward(dense, in, rf),
                  pg = reference::backward(packed, pin, pf);
  EXPECT_TRUE(bitwise_equal(by_token(rg.dQ, B, H, N, d), pg.dQ));
  EXPECT_TRUE(bitwise_equal(by_token(rg.dK, B, Hkv, N, d), pg.dK));
  EXPECT_TRUE(bitwise_equal(by_token(rg.dV, B, Hkv, N, d), pg.dV));

  CpuOptions opt;
  opt.Br = 16;
  opt.Bc = 12;
  opt.threads = 1;  // one thread: atomic-dq's adds come in one order too
  for (const VersionInfo& v : versions()) {
    if (v.exercise || v.fp8) continue;  // the FP8 rung takes fp8 only: tests/test_hopper_fp8.cpp
    SCOPED_TRACE(v.id);
    Counters cd, cp;
    Forward df, fp;
    if (v.cpu_forward) {
      cpu_forward(v, dense, in, opt, df, cd);
      cpu_forward(v, packed, pin, opt, fp, cp);
      EXPECT_TRUE(bitwise_equal(by_token(df.O, B, H, N, d), fp.O));
      EXPECT_TRUE(bitwise_equal(lse_by_token(df.LSE, B, H, N), fp.LSE));
    }
    if (v.cpu_backward) {
      Gradients dg, gp;
      cpu_backward(v, dense, in, v.cpu_forward ? df : rf, opt, dg, cd);
      cpu_backward(v, packed, pin, v.cpu_forward ? fp : pf, opt, gp, cp);
      EXPECT_TRUE(bitwise_equal(by_token(dg.dQ, B, H, N, d), gp.dQ));
      EXPECT_TRUE(bitwise_equal(by_token(dg.dK, B, Hkv, N, d), gp.dK));
      EXPECT_TRUE(bitwise_equal(by_token(dg.dV, B, Hkv, N, d), gp.dV));
    }
    EXPECT_EQ(cd, cp) << "the same blocks, counted the same";
  }
}

struct Case {
  std::vector<int64_t> lq, lk;
  int64_t H, Hkv, d, left, right;
  int Br, Bc;
};

std::vector<Case> cases() {
  return {
      {{1, 17, 0, 128, 67}, {1, 17, 9, 128, 40}, 4, 2, 16, -1, -1, 16, 12},  // grouped heads
      {{5, 0, 33, 70}, {30, 12, 33, 0}, 2, 1, 16, 8, 0, 8, 16},              // multi-query, window
      {{64, 3, 100}, {64, 50, 77}, 3, 3, 32, 16, 16, 16, 16},                // two-sided window
  };
}

void check_case(const Case& c, bool causal, DType t) {
  const Problem p = packed_problem(c.lq, c.lk, c.H, c.Hkv, c.d, causal, c.left, c.right, t);
  SCOPED_TRACE(std::string(causal ? "causal " : "") + to_string(t) + " H" + std::to_string(c.H) +
               " Hkv" + std::to_string(c.Hkv) + " window " + std::to_string(c.left) + "," +
               std::to_string(c.right));
  CpuOptions opt;
  opt.Br = c.Br;
  opt.Bc = c.Bc;
  opt.threads = 2;
  testing::check_twins(p, make_inputs(p, 700 + c.H * 13 + c.left), opt);
}

TEST(Packed, CpuTwinsMatchTheReferenceInFp64) {
  for (const Case& c : cases())
    for (bool causal : {false, true}) check_case(c, causal, DType::f64);
}

TEST(Packed, CpuTwinsStayWithinTheLowPrecisionBudgets) {
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (const Case& c : cases()) check_case(c, true, t);
}

// The lengths the issue names: 1, 17, 128, 1000 and 4097 in one batch, grouped heads.
TEST(Packed, MixedLengthsUpTo4097) {
  Case c{{1, 17, 128, 1000, 4097}, {1, 17, 128, 1000, 4097}, 2, 1, 16, -1, -1, 64, 64};
  check_case(c, true, DType::bf16);
  c.left = 256;
  c.right = 256;
  check_case(c, false, DType::f16);
}

// A sequence with keys but no query rows has dK = dV = 0; one with query rows but no keys has
// O = 0, LSE = -inf and dQ = 0 (its rows see no key); the others are untouched by them.
TEST(Packed, SequencesOfLengthZero) {
  const Problem p = packed_problem({0, 6, 4}, {5, 0, 7}, 2, 1, 8, false, -1, -1, DType::f64);
  const Inputs in = make_inputs(p, 5);
  const Forward f = reference::forward(p, in, true);
  const Gradients g = reference::backward(p, in, f);
  const Shape& s = p.shape;
  for (int64_t t = s.q_start(1); t < s.q_start(2); ++t)
    for (int64_t h = 0; h < s.H; ++h) {
      EXPECT_EQ(f.LSE[h * s.total_q() + t], -INFINITY);
      for (int64_t c = 0; c < s.d; ++c) {
        EXPECT_EQ(f.O[(t * s.H + h) * s.d + c], 0.0);
        EXPECT_EQ(g.dQ[(t * s.H + h) * s.d + c], 0.0);
      }
    }
  for (int64_t e = 0; e < s.k_start(1) * s.kv_heads() * s.d; ++e) {
    EXPECT_EQ(g.dK[e], 0.0);
    EXPECT_EQ(g.dV[e], 0.0);
  }
  // The last sequence is a problem of its own: its rows match it run alone.
  const Sequence last = sequence_at(p, 2);
  const Forward alone = reference::forward(last.problem, sequence_inputs(p, in, last), false);
  EXPECT_TRUE(bitwise_equal(gather_rows(f.O, s.q_start(2), 4, s.H, s.d), alone.O));
  double sum = 0;
  for (double x : g.dK) sum += std::abs(x);
  EXPECT_GT(sum, 0.0);
}

TEST(Packed, FlopsAreCountedPerSequence) {
  const Problem p = packed_problem({100, 7, 300}, {50, 7, 300}, 4, 2, 64, true, -1, -1, DType::f16);
  double sum = 0;
  for (int64_t b = 0; b < 3; ++b) sum += fwd_flops(sequence_at(p, b).problem);
  EXPECT_EQ(fwd_flops(p), sum);
  // 100 queries over 50 keys, causal bottom-right: the last 50 rows see 1..50 keys, the first
  // 50 none; 7 x 7 causal; 300 x 300 causal: FA2's convention halves the full product.
  EXPECT_EQ(sum, 4.0 * 4 * 64 * (100.0 * 50 / 2 + 7.0 * 7 / 2 + 300.0 * 300 / 2));
}

TEST(Packed, BackwardMatchesFiniteDifferences) {
  const Problem p = packed_problem({3, 0, 5}, {4, 2, 6}, 4, 2, 4, true, 2, -1, DType::f64);
  const Inputs in = make_inputs(p, 17);
  const Forward f = reference::forward(p, in, true);
  const Gradients g = reference::backward(p, in, f);
  for (const char which : {'Q', 'K', 'V'}) {
    const HostTensor& grad = which == 'Q' ? g.dQ : which == 'K' ? g.dK : g.dV;
    double worst = 0;
    for (int64_t e = 0; e < static_cast<int64_t>(grad.size()); ++e)
      worst =
          std::max(worst, std::abs(reference::finite_difference(p, in, which, e, 1e-6) - grad[e]));
    EXPECT_LE(worst, 1e-8) << which;
  }
}

TEST(Packed, BadLengthsGetOneLineAndExit2) {
  const std::vector<testing::Refused> cases = {
      {"run --seqlens 1,x", "--seqlens takes the sequences' lengths"},
      {"run --seqlens 1,,2", "--seqlens takes the sequences' lengths"},
      {"run --seqlens -3", "--seqlens takes the sequences' lengths"},
      {"run --seqlens 2000000", "--seqlens takes the sequences' lengths"},
      {"run --seqlens 4,5 --seqlens-k 4", "--seqlens-k gives 1 key length(s) for 2 sequences"},
      {"run --seqlens-k 4", "--seqlens-k needs --seqlens"},
      {"run --seqlens 0,0", "no sequence with both query rows and keys"},
      {"run --seqlens 3,4 --seqlens-k 0,0", "no sequence with both query rows and keys"},
      {"run --seqlens 5,6 -N 8", "--seqlens sets the batch and its lengths"},
      {"run --seqlens 5,6 -B 2", "--seqlens sets the batch and its lengths"},
      {"run --seqlens 5,6 -H 4 --heads-kv 3", "--heads-kv 3 must divide the 4 query heads"},
      {"bench --varlen 6,0,300", "--varlen takes COUNT,MIN,MAX"},
      {"bench --varlen 6,300,20", "--varlen takes COUNT,MIN,MAX"},
      {"bench --varlen 6,20", "--varlen takes COUNT,MIN,MAX"},
      {"bench --varlen 6,20,30,40", "--varlen takes COUNT,MIN,MAX"},
      {"bench --seqlens 3,5 --varlen 1,2,3", "--seqlens and --varlen each give"},
      {"bench --varlen 2,5,9 -N 64", "leave out -N and --tokens"},
  };
  testing::expect_refused(cases, " --backend cpu");

  // More sequences than a packed batch holds (kMaxSequences), and a count whose shortest draw
  // holds more tokens than a packed batch, are refused before anything is drawn; sequences times
  // heads are held to a dense batch's B*H.
  const std::string over = fmt::format("bench --varlen {},5,9", kMaxSequences + 1);
  const std::string over_text =
      fmt::format("--varlen takes COUNT,MIN,MAX: 1..{} sequences", kMaxSequences);
  const int64_t too_short = kMaxPackedTokens / kMaxSequences + 1;
  const std::string heavy = fmt::format("bench --varlen {},{},99", kMaxSequences, too_short);
  const std::string heavy_text =
      fmt::format("are more than the {} tokens a packed batch holds", kMaxPackedTokens);
  const int64_t B = 40000, H = kMaxBatchHeads / B + 1;
  std::string wide = fmt::format("run -H {} --seqlens 1", H);
  for (int64_t b = 1; b < B; ++b) wide += ",1";
  const std::string wide_text = fmt::format(
      "B*H must be at most {} (got {}: {} sequences x {} heads)", kMaxBatchHeads, B * H, B, H);
  testing::expect_refused({{over.c_str(), over_text.c_str()},
                           {heavy.c_str(), heavy_text.c_str()},
                           {wide.c_str(), wide_text.c_str()}},
                          " --backend cpu");
  // A --seqlens list of more than kMaxSequences does not fit on a command line (the kernel caps
  // one argument at 128 KiB), so its count is checked on the parser itself: before a length is
  // kept.
  std::string many = "1";
  many.reserve(2 * static_cast<size_t>(kMaxSequences) + 1);
  for (int64_t n = 0; n < kMaxSequences; ++n) many += ",1";
  try {
    cli::parse_seqlens(many, "--seqlens");
    ADD_FAILURE() << "a list of " << kMaxSequences + 1 << " lengths was taken";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("--seqlens gives more than {} sequences", kMaxSequences));
  }
  many.resize(many.size() - 2);  // kMaxSequences lengths: taken
  EXPECT_EQ(cli::parse_seqlens(many, "--seqlens").size(), static_cast<size_t>(kMaxSequences));
}

// A walk over a batch meets sequence b once, in order, with the offsets the lengths before it sum
// to, where its P starts, and a dense problem of its own: every setting of the batch, B = 1, its
// lengths, and no list of lengths. sequence_at and cu_seqlens give the same offsets.
TEST(Packed, AWalkMeetsEachSequenceOnceWithItsOffsets) {
  std::mt19937 rng(4711);
  std::vector<int64_t> lq(300), lk(300);
  for (size_t b = 0; b < lq.size(); ++b) {
    lq[b] = rng() % 3 == 0 ? 0 : rng() % 50;  // a third or more with no query rows
    lk[b] = rng() % 60;
  }
  Problem p = packed_problem(lq, lk, 6, 2, 16, true, 9, 0, DType::bf16);
  p.scale = 0.3;
  const Shape& s = p.shape;
  const std::vector<int32_t> cu_q = cu_seqlens(s.lens_q), cu_k = cu_seqlens(s.lens_k);
  ASSERT_EQ(cu_q.size(), lq.size() + 1);
  ASSERT_EQ(cu_k.size(), lk.size() + 1);
  int64_t next = 0, p_elems = 0;
  for_each_sequence(p, [&](const Sequence& q) {
    ASSERT_EQ(q.b, next++);
    EXPECT_EQ(q.q0, s.q_start(q.b));
    EXPECT_EQ(q.k0, s.k_start(q.b));
    EXPECT_EQ(q.q0, cu_q[q.b]);
    EXPECT_EQ(q.k0, cu_k[q.b]);
    EXPECT_EQ(q.p0, p_elems);
    p_elems += s.H * lq[q.b] * lk[q.b];
    const Problem& one = q.problem;
    EXPECT_EQ(one.shape.B, 1);
    EXPECT_EQ(one.shape.Nq, lq[q.b]);
    EXPECT_EQ(one.shape.Nk, lk[q.b]);
    EXPECT_EQ(q.empty(), lq[q.b] == 0 || lk[q.b] == 0);
    EXPECT_FALSE(one.shape.packed());
    EXPECT_EQ(one.shape.lens_k.size(), 0u);
    EXPECT_EQ(one.shape.H, s.H);
    EXPECT_EQ(one.shape.Hkv, s.Hkv);
    EXPECT_EQ(one.shape.d, s.d);
    EXPECT_EQ(one.causal, p.causal);
    EXPECT_EQ(one.scale, p.scale);
    EXPECT_EQ(one.dtype, p.dtype);
    EXPECT_EQ(one.window_left, p.window_left);
    EXPECT_EQ(one.window_right, p.window_right);
  });
  EXPECT_EQ(next, s.B);
  EXPECT_EQ(p_elems, packed_p_elems(s));
  EXPECT_EQ(cu_q.back(), s.total_q());
  EXPECT_EQ(cu_k.back(), s.total_k());
  for (const int64_t b : {int64_t{0}, int64_t{1}, s.B / 2, s.B - 1}) {
    const Sequence q = sequence_at(p, b);
    EXPECT_EQ(q.b, b);
    EXPECT_EQ(q.q0, s.q_start(b));
    EXPECT_EQ(q.k0, s.k_start(b));
    EXPECT_EQ(q.problem.shape.Nq, lq[b]);
    EXPECT_EQ(q.problem.shape.Nk, lk[b]);
  }
  EXPECT_THROW(sequence_at(p, s.B), std::invalid_argument);
}

// 40,000 short sequences (lengths 0..6, drawn by a seed) through the reference, every twin and the
// error budget: the walk is linear in the sequences, so this takes a few seconds (when each
// sequence summed its offsets afresh and copied every length, it took minutes).
TEST(Packed, ManyShortSequencesRunInSeconds) {
  constexpr int kSequences = 40000;
  std::mt19937 rng(90210);
  std::string lens = std::to_string(rng() % 7);
  for (int b = 1; b < kSequences; ++b) {
    lens += ',';
    lens += std::to_string(rng() % 7);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const testing::CliResult r = testing::run_cli(
      "run --backend cpu --dtype bf16 -H 2 --heads-kv 1 -d 8 --causal --window 3,0 --repeats 1 "
      "--warmup 0 --versions all --json - --seqlens " +
      lens);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"ok\": true"), std::string::npos);
  EXPECT_EQ(r.out.find("\"ok\": false"), std::string::npos);
  EXPECT_NE(r.out.find(fmt::format("packed {} sequences, lengths 0..6", kSequences)),
            std::string::npos);
  EXPECT_LT(seconds, 60.0) << "a walk over " << kSequences << " sequences";
  std::cout << kSequences << " sequences: " << seconds << " s\n";
}

// bench --varlen draws its lengths from the seed: the same seed, the same batch; another seed,
// another batch. Every version is checked on the packed check point before it is timed.
TEST(Packed, ABenchOfSeededLengthsRuns) {
  const auto bench = [](const std::string& seed) {
    return testing::run_cli(
        "bench --backend cpu --varlen 5,20,200 --heads-kv 1 --causal yes "
        "--versions tiled,deterministic-dq --repeats 1 --warmup 0 --seed " +
        seed + " --json -");
  };
  const testing::CliResult a = bench("3"), b = bench("3"), c = bench("4");
  ASSERT_EQ(a.status, 0) << a.err;
  const auto lengths = [](const std::string& out) {
    const size_t at = out.find("\"seqlens\"");
    return at == std::string::npos ? std::string() : out.substr(at, out.find(']', at) - at);
  };
  EXPECT_FALSE(lengths(a.out).empty());
  EXPECT_EQ(lengths(a.out), lengths(b.out));
  EXPECT_NE(lengths(a.out), lengths(c.out));
  EXPECT_EQ(a.out.find("\"ok\": false"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("a packed batch of 5 sequences"), std::string::npos) << a.out;
}

// The dump holds what FA's varlen API takes: Q [tokens, H, d], K and V [tokens, Hkv, d], LSE
// [H, tokens] and the int32 offsets; the report names the lengths, and verify reruns it.
TEST(Packed, ADumpAndAReportHoldTheBatch) {
  testing::ScratchDir dir;
  const std::string dump = (dir.path() / "dump").string(), rep = (dir.path() / "r.json").string();
  const testing::CliResult r = testing::run_cli(
      "run --backend cpu --dtype bf16 --seqlens 3,0,20 --seqlens-k 5,4,20 -H 4 --heads-kv 2 -d 8 "
      "--causal --versions tiled,deterministic-dq --dump " +
      testing::quoted(dump) + " --json " + testing::quoted(rep));
  ASSERT_EQ(r.status, 0) << r.err;
  const NpyArray cu_q = parse_npy(testing::slurp(dir.path() / "dump" / "cu_seqlens_q.npy"));
  const NpyArray cu_k = parse_npy(testing::slurp(dir.path() / "dump" / "cu_seqlens_k.npy"));
  EXPECT_EQ(cu_q.descr, "<i4");
  EXPECT_EQ(cu_q.values, (std::vector<double>{0, 3, 3, 23}));
  EXPECT_EQ(cu_k.values, (std::vector<double>{0, 5, 9, 29}));
  EXPECT_EQ(parse_npy(testing::slurp(dir.path() / "dump" / "Q.npy")).shape,
            (std::vector<int64_t>{23, 4, 8}));
  EXPECT_EQ(parse_npy(testing::slurp(dir.path() / "dump" / "V.npy")).shape,
            (std::vector<int64_t>{29, 2, 8}));
  EXPECT_EQ(parse_npy(testing::slurp(dir.path() / "dump" / "tiled.LSE.npy")).shape,
            (std::vector<int64_t>{4, 23}));
  const std::string report = testing::slurp(rep);
  EXPECT_NE(report.find("\"seqlens_q\""), std::string::npos);
  const testing::CliResult v = testing::run_cli("verify " + testing::quoted(rep) + " --root " +
                                                testing::quoted(FLASHLAB_SOURCE_DIR));
  EXPECT_EQ(v.status, 0) << v.out << v.err;
}

}  // namespace
}  // namespace flashlab
