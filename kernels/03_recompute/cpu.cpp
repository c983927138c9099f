// recompute: the backward without any N x N matrix in memory, and without atomics. S and P are
// rebuilt on chip from LSE; the price is that S = scale Q K^T and dP = dO V^T are computed twice,
// once in each of two passes (7 products per pair instead of 5):
//
//   preprocess   D = rowsum(O * dO)
//   pass 1       outer loop over K blocks j (one worker each):       S, P, dP, dS; dV_j, dK_j
//   pass 2       outer loop over Q blocks i (one worker each):       S, P, dP, dS; dQ_i += dS K_j
//
// Every output block has exactly one owner, so nothing is added concurrently: deterministic.
#include <vector>

#include "common/cpu/bwd.h"
#include "common/cpu/kernel_counts.h"
#include "core/version.h"

namespace flashlab::cpu {

namespace {

template <class T>
void recompute(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
               Gradients& g, Counters& cnt) {
  prepare_gradients(p, o.dry_run, g);
  const std::vector<T> D = preprocess_D<T>(p, in, fwd, o, cnt);
  NoDQ<T> no_dq;
  outer_k_pass(p, in, fwd.LSE, D, o, g, cnt, no_dq);
  outer_q_dq_pass(p, in, fwd.LSE, D, o, g, cnt);
}

// D and the outer-K pass's tiles (the outer-Q pass, which runs after it, keeps fewer).
int64_t recompute_scratch_bytes(const Problem& p, const CpuOptions& o) {
  return outer_k_scratch_bytes(p, o);
}

void recompute_backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                        Gradients& g, Counters& cnt) {
  check_problem(p, o, "recompute_backward");
  if (!o.dry_run) check_backward(p, in, fwd, "recompute_backward");
  with_compute_type(p.dtype, [&](auto zero) { recompute<decltype(zero)>(p, in, fwd, o, g, cnt); });
}

// D = rowsum(O * dO), fp32, one per query row.
int64_t recompute_workspace(const Problem& p, const CpuOptions&) {
  return p.shape.lse_elems() * 4;
}

// Its CUDA kernels: preprocess, the outer-K pass without dQ, and the outer-Q dQ pass, which moves
// the rest of the twin's count.
std::vector<KernelCount> kernels(const Problem& p, const CpuOptions& o, bool backward,
                                 const Counters& total) {
  if (!backward) return {};
  const Counters pre = preprocess_counts(p, o), outer_k = outer_k_counts_without_dq(p, o);
  return {{"preprocess_kernel", pre},
          {"outer_k_kernel", outer_k},
          {"dq_outer_q_kernel", minus(minus(total, pre), outer_k)}};
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "recompute",
    .pass = Pass::bwd,
    .idea = "no N x N storage: D = rowsum(O*dO) first, S and P recomputed from LSE; dK,dV by an "
            "outer-K pass and dQ by a separate outer-Q pass (no atomics, 7 matmuls)",
    .deterministic = true,
    .workspace = "2*B*H*Nq*4 (D, LSE*log2e)",
    .workspace_bytes = cpu::recompute_workspace,
    .cpu_forward = nullptr,
    .cpu_backward = cpu::recompute_backward,
    .cpu_scratch_bytes = cpu::recompute_scratch_bytes,
    .kernel_counts = cpu::kernels,
    .axes = kGroupedHeads | kWindow,
});
