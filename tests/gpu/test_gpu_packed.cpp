// Packed batches (FlashAttention's varlen layout, core/problem.h) on every CUDA version that takes
// them (its Version::axes has kPacked), against the fp64 reference, sequence by sequence.
//
// Within sequence b a packed batch is exactly a dense B = 1 problem of its own lengths, so the
// expected outputs are built here from the dense reference of each sequence (its inputs sliced out
// of the token-major tensors, its outputs scattered back), independently of the CPU side's packed
// code; a sequence with no keys expects O = 0, LSE = -inf, dQ = 0, one with no queries dK = dV = 0.
// The error budget is gpu_check.h's, over the whole packed tensor. The runner poisons every output
// with NaN, so an element that a kernel never writes fails, and one it writes outside its
// sequence fails the neighbour's values. The loop over the versions is gpu_check.h's
// (check_every_version), shared with test_gpu_versions.cpp.
//
// Matrix: lengths from {0, 1, 17, 128, 1000, 4097} mixed in one batch, Nq != Nk per sequence,
// H / Hkv in {1, 4, 8, H}, windows (64, 0) and (256, 256), each shape for fp16 and bf16, d = 64 and
// 128, causal and not; and three of the shapes at d = 256, where the versions that do not take that
// head dim are left out but tiled and the three FA2 backward rungs must run. Deterministic
// versions are run twice more and must repeat bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "gpu_check.h"
#include "reference/attention.h"

namespace flashlab {
namespace {

struct PackedCase {
  DType dtype;
  int64_t d;
  bool causal;
  std::vector<int64_t> lens_q, lens_k;
  int64_t H, Hkv;
  int64_t window_left = -1, window_right = -1;
};

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += '_';
    s += std::to_string(v[i]);
  }
  return s;
}

std::string case_name(const PackedCase& c) {
  std::string name = to_string(c.dtype) + "_d" + std::to_string(c.d) +
                     (c.causal ? "_causal" : "_full") + "_H" + std::to_string(c.H) + "Hkv" +
                     std::to_string(c.Hkv) + "_q" + join(c.lens_q);
  if (c.lens_k != c.lens_q) name += "_k" + join(c.lens_k);
  if (c.window_left >= 0 || c.window_right >= 0)
    name += "_w" + (c.window_left >= 0 ? std::to_string(c.window_left) : std::string("inf")) + "_" +
            (c.window_right >= 0 ? std::to_string(c.window_right) : std::string("inf"));
  return name;
}

// gtest prints a parameter with this rather than as raw bytes.
void PrintTo(const PackedCase& c, std::ostream* os) {
  *os << case_name(c);
}

Problem problem_of(const PackedCase& c) {
  Problem p;
  p.shape.H = c.H;
  p.shape.Hkv = c.Hkv;
  p.shape.d = c.d;
  set_packed(p.shape, c.lens_q, c.lens_k);  // B, Nq and Nk follow the lengths
  p.causal = c.causal;
  p.dtype = c.dtype;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  return p;
}

struct PackedShape {
  std::vector<int64_t> lens_q, lens_k;  // lens_k empty: the same as lens_q
  int64_t H, Hkv;
  int64_t window_left = -1, window_right = -1;
};

const std::vector<PackedShape>& packed_shapes() {
  static const std::vector<PackedShape> shapes = {
      // Every length of the dense matrix in one batch, and an empty sequence; MHA.
      {{1, 17, 128, 0, 1000, 4097}, {}, 1, 1},
      // Nq != Nk in each sequence, one with no keys and one with no queries; 4 query heads per
      // K/V head.
      {{17, 1000, 0, 128, 1}, {1000, 17, 128, 0, 1}, 8, 2},
      // One K/V head for all 8 query heads (H / Hkv = 8 = H).
      {{1000, 1, 128, 17}, {}, 8, 1},
      // Windows: (256, 256) over a long and short sequences, (64, 0) with H / Hkv = 4 = H.
      {{128, 4097, 17}, {}, 2, 2, 256, 256},
      {{1000, 17, 1, 128}, {1000, 128, 17, 1}, 4, 1, 64, 0},
      // One sequence (B = 1) over an odd number of heads, and a batch whose last sequence is
      // empty (the backward's padding rows after it run to the end of LSE2 and D).
      {{300}, {}, 3, 1},
      {{5, 130, 0}, {}, 4, 2},
  };
  return shapes;
}

// Every shape of `shapes` for fp16 and bf16, the head dims given, without and with the causal mask.
std::vector<PackedCase> cases_of(const std::vector<PackedShape>& shapes,
                                 std::initializer_list<int64_t> dims) {
  std::vector<PackedCase> cases;
  for (DType t : {DType::f16, DType::bf16})
    for (int64_t d : dims)
      for (bool causal : {false, true})
        for (const PackedShape& s : shapes)
          cases.push_back({t, d, causal, s.lens_q, s.lens_k.empty() ? s.lens_q : s.lens_k, s.H,
                           s.Hkv, s.window_left, s.window_right});
  return cases;
}

std::vector<PackedCase> all_cases() {
  return cases_of(packed_shapes(), {64, 128});
}

// d = 256: Nq != Nk with empty sequences and grouped heads, one K/V head for all, and both
// windows (the first shape's 4097-row sequence is left to d = 64 and 128: the reference's time).
std::vector<PackedCase> d256_cases() {
  const std::vector<PackedShape>& s = packed_shapes();
  return cases_of({s[1], s[2], s[3], s[4]}, {256});
}

// The expected outputs of a packed problem, from the dense problem of each sequence: the fp64
// reference and the plain low-precision computation (for the budget).
gpu_test::Expected expected_of(const Problem& p, const Inputs& in) {
  const Shape& s = p.shape;
  const int64_t H = s.H, Hkv = s.kv_heads(), d = s.d, tq = s.total_q();
  gpu_test::Expected e;
  for (Forward* f : {&e.ref, &e.low}) {
    f->O.assign(s.q_elems(), 0.0);
    f->LSE.assign(s.lse_elems(), -INFINITY);
  }
  for (Gradients* g : {&e.gref, &e.glow}) {
    g->dQ.assign(s.q_elems(), 0.0);
    g->dK.assign(s.kv_elems(), 0.0);
    g->dV.assign(s.kv_elems(), 0.0);
  }
  for (int64_t b = 0; b < s.B; ++b) {
    const int64_t lq = s.len_q(b), lk = s.len_k(b), q0 = s.q_start(b), k0 = s.k_start(b);
    if (lq == 0 || lk == 0) continue;  // O = 0, LSE = -inf, dQ = 0; dK = dV = 0: as filled
    Problem pb = p;
    pb.shape = Shape{1, H, lq, lk, d};
    pb.shape.Hkv = s.Hkv;
    // Dense [1, H, N, d] row (h, r) <-> packed token q0 + r, head h.
    auto q_at = [&](int64_t h, int64_t r) { return ((q0 + r) * H + h) * d; };
    auto k_at = [&](int64_t h, int64_t r) { return ((k0 + r) * Hkv + h) * d; };
    Inputs ib;
    ib.Q.resize(pb.shape.q_elems());
    ib.dO.resize(pb.shape.q_elems());
    ib.K.resize(pb.shape.kv_elems());
    ib.V.resize(pb.shape.kv_elems());
    for (int64_t h = 0; h < H; ++h)
      for (int64_t r = 0; r < lq; ++r)
        for (int64_t c = 0; c < d; ++c) {
          ib.Q[(h * lq + r) * d + c] = in.Q[q_at(h, r) + c];
          ib.dO[(h * lq + r) * d + c] = in.dO[q_at(h, r) + c];
        }
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t r = 0; r < lk; ++r)
        for (int64_t c = 0; c < d; ++c) {
          ib.K[(h * lk + r) * d + c] = in.K[k_at(h, r) + c];
          ib.V[(h * lk + r) * d + c] = in.V[k_at(h, r) + c];
        }
    const Forward ref = reference::forward(pb, ib, true);  // its backward needs P
    const Gradients gref = reference::backward(pb, ib, ref);
    const Forward low = reference::lowp_forward(pb, ib);
    const Gradients glow = reference::lowp_backward(pb, ib, low);
    auto scatter = [&](const Forward& f, const Gradients& g, Forward& F, Gradients& G) {
      for (int64_t h = 0; h < H; ++h)
        for (int64_t r = 0; r < lq; ++r) {
          F.LSE[h * tq + q0 + r] = f.LSE[h * lq + r];
          for (int64_t c = 0; c < d; ++c) {
            F.O[q_at(h, r) + c] = f.O[(h * lq + r) * d + c];
            G.dQ[q_at(h, r) + c] = g.dQ[(h * lq + r) * d + c];
          }
        }
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t r = 0; r < lk; ++r)
          for (int64_t c = 0; c < d; ++c) {
            G.dK[k_at(h, r) + c] = g.dK[(h * lk + r) * d + c];
            G.dV[k_at(h, r) + c] = g.dV[(h * lk + r) * d + c];
          }
    };
    scatter(ref, gref, e.ref, e.gref);
    scatter(low, glow, e.low, e.glow);
  }
  return e;
}

// may_refuse and must_run: as in test_gpu_versions.cpp (a refusal naming may_refuse leaves a
// version out; the versions of must_run may not be left out).
void match_reference(const PackedCase& c, const char* may_refuse = nullptr,
                     std::initializer_list<const char*> must_run = {}) {
  const Problem p = problem_of(c);
  uint64_t seed = 7000 + static_cast<uint64_t>(c.d + c.causal + c.H * 17 + c.Hkv * 19 +
                                               c.window_left * 23 + c.window_right * 29);
  for (size_t b = 0; b < c.lens_q.size(); ++b)
    seed += static_cast<uint64_t>(c.lens_q[b] * 7 + c.lens_k[b] * 13) * (b + 1);
  const Inputs in = make_inputs(p, seed);
  const gpu_test::Expected e = expected_of(p, in);

  const gpu_test::VersionLoop loop{.matrix = "packed matrix",
                                   .no_feed = "no CUDA tiled forward for packed batches to feed ",
                                   .feed_axes = kPacked,
                                   .deterministic_repeats = 2,
                                   .log_repeatable = true,
                                   .may_refuse = may_refuse};
  int tested = 0;
  std::vector<std::string> ran;
  gpu_test::check_every_version(p, in, e, case_name(c), loop, tested, &ran);
  if (::testing::Test::HasFatalFailure()) return;
  gpu_test::expect_ran(ran, must_run, case_name(c));
  // Until a version takes packed batches there is nothing to test (each says so above).
  if (tested == 0) std::cout << "no CUDA version takes packed batches yet\n";
}

class CudaPacked : public ::testing::TestWithParam<PackedCase> {};

TEST_P(CudaPacked, MatchPerSequenceReferenceWithinBudget) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  match_reference(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Packed, CudaPacked, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<PackedCase>& i) {
                           return case_name(i.param);
                         });

class CudaPackedD256 : public ::testing::TestWithParam<PackedCase> {};

TEST_P(CudaPackedD256, MatchPerSequenceReferenceWithinBudget) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  match_reference(GetParam(), "head dim",
                  {"tiled", "recompute", "atomic-dq", "deterministic-dq", "hopper",
                   "hopper-deterministic"});
}

INSTANTIATE_TEST_SUITE_P(HeadDim256, CudaPackedD256, ::testing::ValuesIn(d256_cases()),
                         [](const ::testing::TestParamInfo<PackedCase>& i) {
                           return case_name(i.param);
                         });

}  // namespace
}  // namespace flashlab
