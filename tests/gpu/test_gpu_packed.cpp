// Packed batches (FlashAttention's varlen layout, core/problem.h) on every CUDA version that takes
// them (its Version::axes has kPacked), against the fp64 reference, sequence by sequence.
//
// Within sequence b a packed batch is exactly a dense B = 1 problem of its own lengths, so the
// expected outputs are built here from the dense reference of each sequence (its inputs sliced out
// of the token-major tensors, its outputs scattered back), independently of the CPU side's packed
// code; a sequence with no keys expects O = 0, LSE = -inf, dQ = 0, one with no queries dK = dV = 0.
// The error budget is gpu_check.h's, over the whole packed tensor. The runner poisons every output
// with NaN, so an element that a kernel never writes fails, and one it writes outside its
// sequence fails the neighbour's values.
//
// Matrix: lengths from {0, 1, 17, 128, 1000, 4097} mixed in one batch, Nq != Nk per sequence,
// H / Hkv in {1, 4, 8, H}, windows (64, 0) and (256, 256), each shape for fp16 and bf16, d = 64 and
// 128, causal and not. Deterministic versions are run twice more and must repeat bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "gpu_check.h"
#include "reference/attention.h"
#include "run/registry.h"

namespace flashlab {
namespace {

using gpu_test::expect_within;

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
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "_" : "") + std::to_string(v[i]);
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

std::vector<PackedCase> all_cases() {
  const std::vector<PackedShape> shapes = {
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
  };
  std::vector<PackedCase> cases;
  for (DType t : {DType::f16, DType::bf16})
    for (int64_t d : {64, 128})
      for (bool causal : {false, true})
        for (const PackedShape& s : shapes)
          cases.push_back({t, d, causal, s.lens_q, s.lens_k.empty() ? s.lens_q : s.lens_k, s.H,
                           s.Hkv, s.window_left, s.window_right});
  return cases;
}

// The expected outputs of a packed problem, from the dense problem of each sequence: the fp64
// reference and the plain low-precision computation (for the budget).
struct Expected {
  Forward ref, low;
  Gradients gref, glow;
};

Expected expected_of(const Problem& p, const Inputs& in) {
  const Shape& s = p.shape;
  const int64_t H = s.H, Hkv = s.kv_heads(), d = s.d, tq = s.total_q();
  Expected e;
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

void match_reference(const PackedCase& c) {
  const Problem p = problem_of(c);
  uint64_t seed = 7000 + static_cast<uint64_t>(c.d + c.causal + c.H * 17 + c.Hkv * 19 +
                                               c.window_left * 23 + c.window_right * 29);
  for (size_t b = 0; b < c.lens_q.size(); ++b)
    seed += static_cast<uint64_t>(c.lens_q[b] * 7 + c.lens_k[b] * 13) * (b + 1);
  const Inputs in = make_inputs(p, seed);
  const Expected e = expected_of(p, in);

  const cuda::RunOptions opt = gpu_test::once();
  std::optional<Forward> tiled_fwd;  // O and LSE for the backward-only versions
  auto forward_for_backward = [&]() -> const Forward* {
    if (!tiled_fwd) {
      const VersionInfo* t = find_version("tiled");
      if (!t || !t->cuda || !t->cuda->forward || !(t->cuda->axes & kPacked)) return nullptr;
      tiled_fwd = cuda::run(*t->cuda, p, in, nullptr, opt).fwd;
    }
    return &*tiled_fwd;
  };

  int tested = 0;
  for (const VersionInfo& v : versions()) {
    if (v.exercise) continue;
    if (!v.cuda || (!v.cuda->forward && !v.cuda->backward)) continue;
    if (const std::string why = cuda_unavailable(v); !why.empty()) {
      std::cout << "[" << v.id << "] not on this GPU: " << why << "\n";
      continue;
    }
    SCOPED_TRACE(std::string("version ") + v.id + ", case " + case_name(c));
    if (const unsigned missing = p.axes() & ~v.cuda->axes) {
      std::cout << "[" << v.id << "] " << case_name(c) << ": does not take " << axis_name(missing)
                << " on cuda yet\n";
      continue;
    }
    if (v.cuda->check) {
      const std::string why = v.cuda->check(p);
      EXPECT_TRUE(why.empty()) << v.id << " rejects a shape of the packed matrix: " << why;
      if (!why.empty()) continue;
    }
    const bool fwd = v.cuda->forward != nullptr, bwd = v.cuda->backward != nullptr;
    const Forward* fwd_in = (bwd && !fwd) ? forward_for_backward() : nullptr;
    if (bwd && !fwd) {
      ASSERT_NE(fwd_in, nullptr) << "no CUDA tiled forward for packed batches to feed " << v.id;
    }
    cuda::RunOptions o = opt;
    o.bitwise_repeats = v.deterministic ? 2 : 0;
    const cuda::RunResult r = cuda::run(*v.cuda, p, in, fwd_in, o);
    std::string log = std::string("[") + v.id + "] " + case_name(c);
    if (fwd) {
      log += "\n    " + expect_within("O  ", c.dtype, r.fwd.O, e.ref.O, e.low.O);
      log += "\n    " + expect_within("LSE", DType::f32, r.fwd.LSE, e.ref.LSE, e.low.LSE);
    }
    if (bwd) {
      log += "\n    " + expect_within("dQ ", c.dtype, r.grads.dQ, e.gref.dQ, e.glow.dQ);
      log += "\n    " + expect_within("dK ", c.dtype, r.grads.dK, e.gref.dK, e.glow.dK);
      log += "\n    " + expect_within("dV ", c.dtype, r.grads.dV, e.gref.dV, e.glow.dV);
    }
    if (v.deterministic) {
      EXPECT_TRUE(r.bitwise_repeatable) << v.id << " promised bitwise repeats";
      log += r.bitwise_repeatable ? "\n    bitwise repeatable" : "\n    NOT bitwise repeatable";
    }
    std::cout << log << "\n";
    ++tested;
  }
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

}  // namespace
}  // namespace flashlab
