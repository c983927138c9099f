// deterministic-dq, CUDA: atomic-dq with a reproducible dQ (chapter 16.3.1, "确定性可选").
//
// What it changes from atomic-dq: the outer-K kernel is the same template with DqMode::split.
// Instead of one CTA per K block adding into one shared fp32 buffer, each head gets nsplits CTAs
// (a small number that fills the GPU, bwd_dq_splits) and CTA s walks K blocks s, ..., one after
// another in a fixed order, summing their dQ partials into its own fp32 split s: the first K block
// stores, the later ones add, and each split element is only touched by one thread, in program
// order. The convert kernel then sums, for each dQ element, split 0 + split 1 + ... in that fixed
// order -- the same additions in the same order on every run, so dQ, dK, dV are bitwise identical
// run to run on a given GPU (nsplits depends on the SM count: another model may give other bits).
//
//        CTA s=0: K blocks 0, 5, 6    CTA 1: 1, 4, 7 ...      splits (fp32, nsplits x B*H*Nq*d)
//        +------+------+------+      +------+------+         +---------+---------+---------+
//        | j=0  | j=5  | j=6  |      | j=1  | j=4  | ...     | split 0 | split 1 | split 2 |
//        +--+---+--+---+--+---+      +--+---+--+---+         +---------+---------+---------+
//           +store +add   +add --------------------------->     ^         ^
//                                       +store +add ------------|---------+
//                                         convert: dQ = scale * (split 0 + split 1 + ...)
//
// Causal: CTA s's first K block (j = s) writes every Q block it meets, its later K blocks subsets
// of them; with a window's left side a later K block may be the first to meet a Q block, and then
// it stores. The convert kernel asks the same functions (common/band.h) which splits a row has,
// so unwritten splits are never read and nothing is zeroed.
//
// Limits: as atomic-dq, plus the memory: nsplits fp32 copies of dQ (bf16, d = 128, B = 1,
// H = 16, N = 16384 on 132 SMs: 8 splits, 1.1 GB), where one split per K block would need 128.
#include <cuda_runtime.h>

#include <string>

#include "common/dispatch.cuh"
#include "common/fa2_bwd/params.h"
#include "core/device_api.h"

namespace flashlab::cuda {

namespace {

// Its kernels are the shared FA2 backward's (common/fa2_bwd), and so are its limits (packed
// batches too: params.h).
std::string deterministic_check(const Problem& p) {
  std::string why = shape_check(p, "deterministic-dq", kFa2BwdLimits);
  return why.empty() ? bwd_packed_check(p, "deterministic-dq") : why;
}

// The same count for the workspace and the launch: a pure function of the problem and the GPU.
int64_t split_count(const Problem& p) {
  return bwd_dq_splits(p, device_info().sms, outer_k_bc(static_cast<int>(p.shape.d)));
}

size_t deterministic_workspace(const Problem& p, const LaunchOptions&) {
  return bwd_workspace_bytes(p, split_count(p));
}

void deterministic_backward(const DeviceTensors& t) {
  BwdParams p = bwd_make_params(t);
  const int64_t splits = split_count(t.problem);
  p.dq_splits = static_cast<int>(splits);
  dispatch_dtype_head_dims<64, 128, 256>(t.problem, [&]<class T, int kD>() {
    launch_bwd_preprocess<T, kD>(p, t.stream);
    launch_bwd_outer_k<T, kD, DqMode::split>(p, t.stream);
    launch_bwd_convert_dq<T, kD>(p, DqMode::split, splits, t.stream);
  });
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = deterministic_check,
                       .workspace_bytes = deterministic_workspace,
                       .backward = deterministic_backward,
                       .axes = kGroupedHeads | kWindow | kPacked});
