// Acceptance 4, determinism: deterministic-dq gives bitwise identical gradients across 20 runs and
// across 1 and 2 threads; atomic-dq (whose workers really race on the dQ accumulator) agrees with
// it to fp32 accuracy.
#include <gtest/gtest.h>

#include "core/rng.h"
#include "test_cpu_util.h"

namespace flashlab {
namespace {

using testing::bitwise_equal;
using testing::bwd_of;
using testing::fwd_of;
using testing::make_problem;
using testing::max_abs;
using testing::max_abs_error;
using testing::poison;

using CpuBackwardFn = void (*)(const Problem&, const Inputs&, const Forward&, const CpuOptions&,
                               Gradients&, Counters&);

struct Twin {
  Problem p;
  Inputs in;
  Forward fwd;
};

Twin prepare(bool causal) {
  Twin s{make_problem(1, 2, 160, 140, 64, causal, DType::f32), {}, {}};
  s.in = make_inputs(s.p, 31);
  Counters c;
  fwd_of("tiled")(s.p, s.in, CpuOptions{}, s.fwd, c);
  return s;
}

Gradients run(CpuBackwardFn fn, const Twin& s, int threads) {
  CpuOptions o;
  o.Br = 32;
  o.Bc = 16;
  o.threads = threads;
  Gradients g;
  poison(g, s.p);
  Counters c;
  fn(s.p, s.in, s.fwd, o, g, c);
  return g;
}

TEST(CpuDeterminism, DeterministicDqIsBitwiseReproducible) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    const Twin s = prepare(causal);
    const Gradients first = run(bwd_of("deterministic-dq"), s, 2);
    for (int n = 1; n < 20; ++n) {
      const Gradients again = run(bwd_of("deterministic-dq"), s, 2);
      ASSERT_TRUE(bitwise_equal(again.dQ, first.dQ)) << "run " << n;
      ASSERT_TRUE(bitwise_equal(again.dK, first.dK)) << "run " << n;
      ASSERT_TRUE(bitwise_equal(again.dV, first.dV)) << "run " << n;
    }
    const Gradients one = run(bwd_of("deterministic-dq"), s, 1);
    EXPECT_TRUE(bitwise_equal(one.dQ, first.dQ));
    EXPECT_TRUE(bitwise_equal(one.dK, first.dK));
    EXPECT_TRUE(bitwise_equal(one.dV, first.dV));
  }
}

// atomic-dq's dK, dV have one owner each, so they are reproducible; its dQ may differ in the last
// bits run to run (the order of the atomic adds), but never by more than fp32 accumulation error.
TEST(CpuDeterminism, AtomicDqAgreesToFp32Accuracy) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    const Twin s = prepare(causal);
    const Gradients det = run(bwd_of("deterministic-dq"), s, 2);
    for (int n = 0; n < 5; ++n) {
      const Gradients at = run(bwd_of("atomic-dq"), s, 2);
      EXPECT_TRUE(bitwise_equal(at.dK, det.dK));
      EXPECT_TRUE(bitwise_equal(at.dV, det.dV));
      EXPECT_LE(max_abs_error(at.dQ, det.dQ), 64 * unit_roundoff(DType::f32) * max_abs(det.dQ));
    }
  }
}

}  // namespace
}  // namespace flashlab
