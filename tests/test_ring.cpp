// ring, context parallelism on the CPU (kernels/09_ring): R ranks as threads passing K/V shards
// round a simulated ring, against the single-rank fp64 reference.
//
//   - R in {1, 2, 3, 4, 8}, causal and not, Nq = Nk not a multiple of 2R (chunks of unequal
//     size), grouped heads on some cases, fp64 and fp32, zigzag and contiguous shards: O, LSE,
//     dQ, dK, dV within test_cpu_util.h's budget (fp64: 1e-12 of the size; else 10x the fp32
//     computation's error plus a floor); outputs poisoned first;
//   - the bytes each rank sends, counted at each send of a real run, equal the dry run's and the
//     closed forms of schedule.h; the dry run counts what the real run counts;
//   - two runs are bitwise identical; finite differences agree with the ring's gradients;
//   - zigzag leaves the ranks less idle than contiguous shards under the causal mask;
//   - the command line: --ranks is taken by the ring versions, recorded in the report, refused
//     with one line where it cannot apply;
//   - the GPU side's block picker passes over a backward that refuses the blocks though its
//     forward takes them, with the runner's reason.
#define FLASHLAB_FOLDER v_09_ring
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "../kernels/09_ring/ring.h"
#include "core/device_api.h"
#include "core/rng.h"
#include "reference/attention.h"
#include "run/ring_blocks.h"
#include "test_cli_helpers.h"
#include "test_cpu_util.h"

namespace flashlab {
namespace {

using json = nlohmann::json;
namespace ring = cpu::v_09_ring;
namespace plan = ::flashlab::v_09_ring;
using ring::Sharding;
using testing::bitwise_equal;
using testing::expect_close;
using testing::poison;

struct RingRun {
  Forward fwd;
  Gradients grads;
  Counters fwd_counts, bwd_counts;
  RingCounts counts;
};

RingRun run_ring(const Problem& p, const Inputs& in, const CpuOptions& o, Sharding sh) {
  RingRun r;
  poison(r.fwd, p, false);
  poison(r.grads, p);
  ring::ring_forward(p, in, o, sh, r.fwd, r.fwd_counts, &r.counts);
  ring::ring_backward(p, in, r.fwd, o, sh, r.grads, r.bwd_counts, &r.counts);
  return r;
}

Problem problem(int64_t N, int64_t H, int64_t Hkv, bool causal, DType dt) {
  Problem p = testing::make_problem(2, H, N, N, 16, causal, dt);
  p.shape.Hkv = Hkv;
  return p;
}

CpuOptions options(int R) {
  CpuOptions o;
  o.Br = 8;  // ragged tiles inside the chunks too
  o.Bc = 5;
  o.ranks = R;
  return o;
}

// Every rank's counted bytes equal the closed form; the real run's counts equal the dry run's.
void expect_counts(const Problem& p, const CpuOptions& o, Sharding sh, const RingRun& real) {
  const RingCounts dry = ring::ring_counts(p, o, sh);
  const int R = ring::ranks_of(o);
  ASSERT_EQ(dry.ranks, R);
  EXPECT_EQ(real.counts.fwd_bytes, dry.fwd_bytes);
  EXPECT_EQ(real.counts.bwd_kv_bytes, dry.bwd_kv_bytes);
  EXPECT_EQ(real.counts.bwd_grad_bytes, dry.bwd_grad_bytes);
  EXPECT_EQ(real.counts.fwd_flops, dry.fwd_flops);
  EXPECT_EQ(real.counts.bwd_flops, dry.bwd_flops);
  const Shape& s = p.shape;
  const int64_t e_kv = dtype_bytes(p.dtype), e_acc = p.dtype == DType::f64 ? 8 : 4;
  for (int r = 0; r < R; ++r) {
    // Written out again from the schedule's picture: every shard but the next rank's goes by.
    const int64_t next = plan::shard(s.Nk, R, (r + 1) % R, sh).size();
    const int64_t row = s.B * s.kv_heads() * s.d;
    const int64_t fwd = R == 1 ? 0 : 2 * row * e_kv * (s.Nk - next);
    const int64_t bwd = R == 1 ? 0 : 2 * row * (e_kv * (s.Nk - next) + e_acc * s.Nk);
    EXPECT_EQ(row_sum(dry.fwd_bytes[r]), fwd) << "rank " << r;
    EXPECT_EQ(row_sum(dry.bwd_kv_bytes[r]) + row_sum(dry.bwd_grad_bytes[r]), bwd) << "rank " << r;
    EXPECT_EQ(dry.fwd_closed[r], fwd);
    EXPECT_EQ(dry.bwd_closed[r], bwd);
    // Step by step: the shard rank r holds at step t is rank (r - t)'s.
    for (int t = 0; t < R; ++t) {
      const int64_t held = plan::shard(s.Nk, R, plan::source_of(r, t, R), sh).size();
      EXPECT_EQ(dry.fwd_bytes[r][t], t < R - 1 ? 2 * row * e_kv * held : 0);
      EXPECT_EQ(dry.bwd_grad_bytes[r][t], R > 1 ? 2 * row * e_acc * held : 0);
    }
  }
  CpuOptions d = o;
  d.dry_run = true;
  Forward f;
  Gradients g;
  Counters fc, bc;
  ring::ring_forward(p, Inputs{}, d, sh, f, fc, nullptr);
  ring::ring_backward(p, Inputs{}, Forward{}, d, sh, g, bc, nullptr);
  EXPECT_EQ(fc, real.fwd_counts);
  EXPECT_EQ(bc, real.bwd_counts);
}

TEST(Ring, RanksAgainstTheReference) {
  int k = 0;
  for (int R : {1, 2, 3, 4, 8})
    for (bool causal : {false, true})
      for (DType dt : {DType::f64, DType::f32}) {
        // 37 and 50 are multiples of no 2R here; grouped heads on every other case.
        const int64_t N = (k % 2) ? 50 : 37;
        const Problem p = problem(N, 2, (k % 2) ? 1 : 2, causal, dt);
        const Inputs in = make_inputs(p, 100 + k++);
        const Forward ref = reference::forward(p, in, true);
        const Gradients ref_g = reference::backward(p, in, ref);
        const Forward lowp = reference::lowp_forward(p, in);
        const Gradients lowp_g = reference::lowp_backward(p, in, lowp);
        for (Sharding sh : {Sharding::zigzag, Sharding::contiguous}) {
          SCOPED_TRACE("R " + std::to_string(R) + (causal ? " causal " : " ") + to_string(dt) +
                       " N " + std::to_string(N) +
                       (sh == Sharding::zigzag ? " zigzag" : " contiguous"));
          const RingRun r = run_ring(p, in, options(R), sh);
          expect_close("O", p, r.fwd.O, ref.O, lowp.O);
          expect_close("LSE", p, r.fwd.LSE, ref.LSE, lowp.LSE);
          expect_close("dQ", p, r.grads.dQ, ref_g.dQ, lowp_g.dQ);
          expect_close("dK", p, r.grads.dK, ref_g.dK, lowp_g.dK);
          expect_close("dV", p, r.grads.dV, ref_g.dV, lowp_g.dV);
          expect_counts(p, options(R), sh, r);
          const RingRun again = run_ring(p, in, options(R), sh);
          EXPECT_TRUE(bitwise_equal(r.fwd.O, again.fwd.O) &&
                      bitwise_equal(r.fwd.LSE, again.fwd.LSE))
              << "two forward runs differ";
          EXPECT_TRUE(bitwise_equal(r.grads.dQ, again.grads.dQ) &&
                      bitwise_equal(r.grads.dK, again.grads.dK) &&
                      bitwise_equal(r.grads.dV, again.grads.dV))
              << "two backward runs differ";
        }
      }
}

// Bottom-right causal with Nq != Nk, a window, and rows that see no key (LSE = -inf, O = 0).
TEST(Ring, UnequalLengthsWindowsAndEmptyRows) {
  Problem p = problem(0, 4, 2, true, DType::f64);
  p.shape.Nq = 45;
  p.shape.Nk = 23;  // the first 22 query rows see no key
  for (int R : {3, 8}) {
    for (bool window : {false, true}) {
      p.window_left = window ? 4 : -1;
      p.window_right = window ? 0 : -1;
      SCOPED_TRACE("R " + std::to_string(R) + (window ? " window" : ""));
      const Inputs in = make_inputs(p, 7 + R);
      const Forward ref = reference::forward(p, in, true);
      const Gradients ref_g = reference::backward(p, in, ref);
      for (Sharding sh : {Sharding::zigzag, Sharding::contiguous}) {
        const RingRun r = run_ring(p, in, options(R), sh);
        expect_close("O", p, r.fwd.O, ref.O, ref.O);
        expect_close("LSE", p, r.fwd.LSE, ref.LSE, ref.LSE);
        expect_close("dQ", p, r.grads.dQ, ref_g.dQ, ref_g.dQ);
        expect_close("dK", p, r.grads.dK, ref_g.dK, ref_g.dK);
        expect_close("dV", p, r.grads.dV, ref_g.dV, ref_g.dV);
        expect_counts(p, options(R), sh, r);
      }
    }
  }
}

// Central finite differences of L = sum(O * dO) at random elements of Q, K, V against the ring's
// gradients on a small fp64 problem over three ranks.
TEST(Ring, Gradcheck) {
  for (bool causal : {false, true}) {
    const Problem p = problem(13, 2, 1, causal, DType::f64);
    const Inputs in = make_inputs(p, 31);
    for (Sharding sh : {Sharding::zigzag, Sharding::contiguous}) {
      const RingRun r = run_ring(p, in, options(3), sh);
      std::mt19937_64 pick(5);
      for (char which : {'Q', 'K', 'V'}) {
        const HostTensor& grad = which == 'Q' ? r.grads.dQ : which == 'K' ? r.grads.dK : r.grads.dV;
        for (int n = 0; n < 8; ++n) {
          const int64_t at = static_cast<int64_t>(pick() % grad.size());
          const double fd = reference::finite_difference(p, in, which, at, 1e-6);
          EXPECT_NEAR(grad[static_cast<size_t>(at)], fd, 1e-7) << which << "[" << at << "]";
        }
      }
    }
  }
}

// Zigzag balances the causal work: counted compute per step, the ranks' idle share (each step
// lasts as long as its busiest rank) is below contiguous sharding's, and zigzag's ranks compute
// within one tile row of each other in all.
TEST(Ring, ZigzagBalancesCausalWork) {
  const Problem p = problem(512, 2, 2, true, DType::f32);
  for (int R : {2, 4, 8}) {
    CpuOptions o = options(R);
    o.Br = o.Bc = 16;
    const auto idle = [&](Sharding sh) {
      const RingCounts c = ring::ring_counts(p, o, sh);
      double busy = 0, spans = 0;
      for (int t = 0; t < R; ++t) {
        int64_t most = 0;
        for (int r = 0; r < R; ++r) {
          most = std::max(most, c.fwd_flops[r][t]);
          busy += static_cast<double>(c.fwd_flops[r][t]);
        }
        spans += static_cast<double>(most) * R;
      }
      return 1 - busy / spans;
    };
    const double zig = idle(Sharding::zigzag), flat = idle(Sharding::contiguous);
    EXPECT_LT(zig, 0.1) << "R " << R;
    EXPECT_GT(flat, 0.2) << "R " << R;
  }
}

// The GPU side's plan (schedule.h: chunk_index, pair_kind), walked as cuda.cu walks it: every
// rank, step and pair of chunks of the held shard. Full pairs must be wholly visible, diagonal
// pairs square with the causal mask inside, and together they must cover each (query row, key)
// the mask lets through exactly once, and nothing else: the ring then computes the whole
// attention, whatever R, N (2R need not divide it) and the sharding.
TEST(Ring, GpuPairsCoverTheMaskOnce) {
  for (Sharding sh : {Sharding::zigzag, Sharding::contiguous})
    for (bool causal : {false, true})
      for (int R : {1, 2, 3, 4, 8})
        for (int64_t N : {int64_t{1}, int64_t{2} * R, int64_t{2} * R + 1, int64_t{37}}) {
          if (R > 1 && N < 2 * R) continue;  // check_ranks refuses it
          SCOPED_TRACE(::testing::Message() << "R " << R << " N " << N << " causal " << causal
                                          << (sh == Sharding::zigzag ? " zigzag" : " contiguous"));
          std::vector<int> seen(static_cast<size_t>(N * N), 0);
          for (int r = 0; r < R; ++r)
            for (int t = 0; t < R; ++t) {
              const int s = plan::source_of(r, t, R);
              for (int qw = 0; qw < 2; ++qw)
                for (int kw = 0; kw < 2; ++kw) {
                  const plan::Shard qs = plan::shard(N, R, r, sh), ks = plan::shard(N, R, s, sh);
                  const plan::Chunk qc = qw == 0 ? qs.first : qs.second;
                  const plan::Chunk kc = kw == 0 ? ks.first : ks.second;
                  const int64_t a = plan::chunk_index(R, r, qw, sh),
                                b = plan::chunk_index(R, s, kw, sh);
                  // chunk_index names the chunk shard() cut.
                  ASSERT_EQ(qc.begin, plan::chunk(N, R, a).begin);
                  ASSERT_EQ(kc.begin, plan::chunk(N, R, b).begin);
                  const plan::PairKind kind = plan::pair_kind(a, b, causal);
                  if (kind == plan::PairKind::skipped) continue;
                  if (kind == plan::PairKind::diagonal) {
                    ASSERT_EQ(qc.size(), kc.size());
                  }
                  for (int64_t i = 0; i < qc.size(); ++i)
                    for (int64_t j = 0; j < kc.size(); ++j)
                      if (kind == plan::PairKind::full || j <= i)  // the block's own mask
                        ++seen[static_cast<size_t>((qc.begin + i) * N + kc.begin + j)];
                }
            }
          for (int64_t i = 0; i < N; ++i)
            for (int64_t j = 0; j < N; ++j)
              ASSERT_EQ(seen[static_cast<size_t>(i * N + j)], !causal || j <= i ? 1 : 0)
                  << "query " << i << ", key " << j;
        }
}

// A version as hopper is at d = 256: its forward takes head dims its backward does not
// (cuda::Version::backward_check). No kernel is launched: the picker only asks.
void no_launch(const cuda::DeviceTensors&) {}
std::string toy_check(const Problem& p) {
  return p.shape.d % 64 == 0 ? "" : "toy takes head dims 64, 128 and 256";
}
std::string toy_backward_check(const Problem& p) {
  return p.shape.d <= 128
             ? ""
             : fmt::format("toy's backward takes head dims 64 and 128 (got {})", p.shape.d);
}

// The ring's block picker (run/ring_blocks.h: block_refusal) on the pairs of chunks the GPU side
// launches (schedule.h), for seeded random R, N, masks and head dims: the forward takes every
// block its check takes; the backward is refused where backward_check refuses, with the reason
// the runner gives (cuda::backward_refusal) for the first such block, and check's own reason
// comes first where both refuse.
TEST(Ring, BlockPickerAsksTheBackwardCheck) {
  cuda::Version toy{};
  toy.check = toy_check;
  toy.backward_check = toy_backward_check;
  toy.forward = toy.backward = no_launch;
  Rng rng(20240607, 9);
  const int64_t dims[] = {64, 96, 128, 256};
  int refused = 0;
  for (int trial = 0; trial < 32; ++trial) {
    const int R = 1 + static_cast<int>(rng.below(8));
    const int64_t N = 2 * R + rng.below(600);
    const bool causal = rng.below(2) == 1;
    const int64_t d = dims[rng.below(4)];
    SCOPED_TRACE(::testing::Message()
                 << "R " << R << " N " << N << " causal " << causal << " d " << d);
    std::vector<Problem> blocks;
    for (int64_t a = 0; a < 2 * R; ++a)
      for (int64_t b = 0; b < 2 * R; ++b) {
        const plan::PairKind kind = plan::pair_kind(a, b, causal);
        if (kind == plan::PairKind::skipped) continue;
        blocks.push_back(testing::make_problem(1, 2, plan::chunk(N, R, a).size(),
                                               plan::chunk(N, R, b).size(), d,
                                               kind == plan::PairKind::diagonal, DType::bf16));
      }
    ASSERT_FALSE(blocks.empty());
    const Problem& first = blocks.front();
    const auto refusal = [&](const std::string& why) {
      return fmt::format("refuses the {} x {} {} block: {}", first.shape.Nq, first.shape.Nk,
                         first.causal ? "causal" : "full", why);
    };
    const std::string fwd = block_refusal(toy, true, blocks);
    const std::string bwd = block_refusal(toy, false, blocks);
    if (d == 96) {
      EXPECT_EQ(fwd, refusal(toy_check(first)));
      EXPECT_EQ(bwd, refusal(toy_check(first)));
    } else if (d == 256) {
      ++refused;
      EXPECT_EQ(fwd, "");
      ASSERT_FALSE(cuda::backward_refusal(toy, first).empty());
      EXPECT_EQ(bwd, refusal(cuda::backward_refusal(toy, first)));
      EXPECT_NE(bwd.find("toy's backward takes head dims 64 and 128 (got 256)"), std::string::npos)
          << bwd;
    } else {
      EXPECT_EQ(fwd, "");
      EXPECT_EQ(bwd, "");
    }
  }
  EXPECT_GT(refused, 0);  // the draw reached the case the picker must refuse
}

TEST(Ring, RanksOnTheCommandLine) {
  testing::ScratchDir dir;
  const std::string rep = dir / "ring.json";
  const testing::CliResult r = testing::run_cli(
      "run --backend cpu --dtype fp64 -B 1 -H 2 -N 50 -d 16 --causal --repeats 1 --warmup 0 "
      "--versions tiled,ring,ring-contiguous --ranks 4 --json " +
      testing::quoted(rep));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const json doc = json::parse(testing::slurp(rep));
  EXPECT_EQ(doc["config"]["ranks"], 4);
  EXPECT_TRUE(doc["ok"].get<bool>());
  std::string notes;
  for (const json& o : doc["observations"]) notes += o.get<std::string>() + "\n";
  EXPECT_NE(notes.find("ring ran on 4 ranks (zigzag shards of 13, 12, 12, 13 query rows)"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("each equal to the closed form"), std::string::npos) << notes;
  EXPECT_EQ(notes.find("NOT equal"), std::string::npos) << notes;
  int rows = 0;
  for (const json& t : doc["tables"])
    if (t["id"] == "ring") rows = static_cast<int>(t["rows"].size());
  EXPECT_EQ(rows, 2 * 4 * 4);  // two versions, four ranks, four steps
  bool valid = false;
  const std::string schema = testing::validate_reports({rep}, valid);
  EXPECT_TRUE(valid) << schema;

  testing::expect_refused(
      {{"run --versions tiled --ranks 2", "--ranks sets how many ranks"},
       {"run --versions ring --ranks 0", "--ranks must be in 1..64"},
       {"run --versions ring --ranks 65", "--ranks must be in 1..64"},
       {"run --versions ring --ranks 8 -N 7", "R = 8 ranks need 16 query rows and keys"},
       {"run --versions ring --seqlens 5,9 --ranks 2", "a packed batch (--seqlens) runs sequence"},
       {"run --versions ring --Nq 1 --Nk 64 --page-size 16", "does not take a paged"}},
      " --backend cpu");
}

}  // namespace
}  // namespace flashlab
