// atomic-dq: FA2's backward. One pass, outer loop over K blocks (5 products per pair); the dQ_i
// partials of different K-block workers land on the same rows, so they are added atomically into
// one accumulator, and a last pass scales and casts it:
//
//   preprocess   D = rowsum(O * dO)
//   main         worker (h, j): for every Q block i:  ... dQaccum[i] += dS K_j   (atomic adds)
//                                                    write dK_j, dV_j at the end
//   convert      dQ = round(scale * dQaccum)
//
// The accumulator is float (double for fp64 problems). The workers really race: the order in
// which partials reach an element changes from run to run, and so do dQ's last bits.
#include "common/cpu/bwd.h"
#include "common/cpu/kernel_counts.h"
#include "core/version.h"

namespace flashlab::cpu {

namespace {

void backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
              Gradients& g, Counters& cnt) {
  check_problem(p, o, "atomic_dq_backward");
  if (!o.dry_run) check_backward(p, in, fwd, "atomic_dq_backward");
  with_compute_type(
      p.dtype, [&](auto zero) { cpu::atomic_dq_backward<decltype(zero)>(p, in, fwd, o, g, cnt); });
}

// D plus one fp32 dQ accumulator.
int64_t workspace(const Problem& p, const CpuOptions&) {
  return p.shape.lse_elems() * 4 + p.shape.q_elems() * 4;
}

// Its CUDA kernels: preprocess, the outer-K pass, the convert of the one accumulator.
std::vector<KernelCount> kernels(const Problem& p, const CpuOptions& o, bool backward,
                                 const Counters& total) {
  if (!backward) return {};
  return one_pass_backward_kernels(p, o, total, /*per_k_block_splits=*/false);
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "atomic-dq",
    .pass = Pass::bwd,
    .idea = "FA2's single outer-K pass (5 matmuls): dQ partials atomically added into an fp32 "
            "buffer, then a convert pass scales and casts",
    .deterministic = false,
    .workspace = "2*B*H*Nq*4 (D, LSE*log2e) + B*H*Nq*d*4 (fp32 dQ accumulator)",
    .workspace_bytes = cpu::workspace,
    .cpu_forward = nullptr,
    .cpu_backward = cpu::backward,
    .cpu_scratch_bytes = cpu::atomic_dq_scratch_bytes,
    .kernel_counts = cpu::kernels,
    .axes = kGroupedHeads | kWindow,
});
