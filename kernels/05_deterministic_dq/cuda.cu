// deterministic-dq, CUDA: atomic-dq with a reproducible dQ (chapter 16.3.1, "确定性可选").
//
// What it changes from atomic-dq: the outer-K kernel is the same template with DqMode::split.
// Instead of adding into one shared fp32 buffer, the CTA of K block j stores its partial
// dS K_j into its own fp32 split j; for a given (Q block, K block) pair exactly one CTA writes,
// once, with plain stores. The convert kernel then sums, for each dQ element, split 0 + split 1 +
// ... in that fixed order -- the same additions in the same order on every run, so dQ, dK, dV are
// bitwise identical run to run.
//
//        K block j=0     j=1     j=2 ...           splits (fp32, ceil(Nk/Bc) x B*H*Nq*d)
//        +------+      +------+                   +---------+---------+---------+
//        | CTA  |      | CTA  |      ...          | split 0 | split 1 | split 2 |
//        +--+---+      +--+---+                   +---------+---------+---------+
//           +-- store ----|---------------------->    ^         ^
//                         +-- store ------------------|---------+
//                                         convert: dQ = scale * (split 0 + split 1 + ...)
//
// Causal: K block j writes only the Q blocks from first_q_block(j) on; the convert kernel asks the
// same function which splits a row has, so unwritten splits are never read and nothing is zeroed.
//
// Limits: as atomic-dq, plus the memory: ceil(Nk/128) fp32 copies of dQ (a 4096-key problem keeps
// 32 of them), written and read once each -- that extra traffic is this rung's price.
#include <cuda_runtime.h>

#include "common/bwd_dispatch.cuh"
#include "common/bwd_outer_k.cuh"
#include "common/bwd_params.h"
#include "cuda/device_api.h"

namespace flashlab::cuda {

namespace {

int64_t split_count(const Problem& p) {
  constexpr int Bc = bwd::OuterKTraits<64>::Bc;
  static_assert(Bc == bwd::OuterKTraits<128>::Bc, "one split per K block for every head dim");
  return (p.shape.Nk + Bc - 1) / Bc;
}

size_t deterministic_workspace(const Problem& p) {
  return bwd_workspace_bytes(p, split_count(p));
}

void deterministic_backward(const DeviceTensors& t) {
  const BwdParams p = bwd_make_params(t);
  const int64_t splits = split_count(t.problem);
  bwd_dispatch(t.problem, [&]<class T, int kD>() {
    launch_bwd_preprocess<T, kD>(p, t.stream);
    launch_bwd_outer_k<T, kD, DqMode::split>(p, t.stream);
    launch_bwd_convert_dq<T, kD>(p, DqMode::split, splits, t.stream);
  });
}

}  // namespace

const Version deterministic_dq{.check = bwd_check,
                               .workspace_bytes = deterministic_workspace,
                               .forward = nullptr,
                               .backward = deterministic_backward};

}  // namespace flashlab::cuda
