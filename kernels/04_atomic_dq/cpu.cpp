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
#include <vector>

#include "common/cpu_bwd.h"
#include "version_folder.h"

namespace flashlab::cpu {

namespace {

template <class T>
void atomic_dq(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
               Gradients& g, Counters& cnt) {
  const Shape& s = p.shape;
  prepare_gradients(p, o.dry_run, g);
  const std::vector<T> D = preprocess_D<T>(p, in, fwd, o, cnt);
  std::vector<T> accum(o.dry_run ? 0 : static_cast<size_t>(s.q_elems()), T(0));
  AtomicAddDQ<T> dq{accum, s.Nq, s.d};
  outer_k_pass(p, in, fwd.LSE, D, o, g, cnt, dq);
  convert_dq(p, o, accum, g, cnt);
}

// D, the outer-K pass's tiles and the dQ accumulator.
int64_t atomic_dq_scratch_bytes(const Problem& p, const CpuOptions& o) {
  return outer_k_scratch_bytes(p, o) + compute_bytes(p.dtype) * p.shape.q_elems();
}

void atomic_dq_backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                        Gradients& g, Counters& cnt) {
  check_problem(p, o, "atomic_dq_backward");
  if (!o.dry_run) check_backward(p, in, fwd, "atomic_dq_backward");
  with_compute_type(p.dtype, [&](auto zero) { atomic_dq<decltype(zero)>(p, in, fwd, o, g, cnt); });
}

// D plus one fp32 dQ accumulator.
int64_t atomic_dq_workspace(const Problem& p, const CpuOptions&) {
  return p.shape.lse_elems() * 4 + p.shape.q_elems() * 4;
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
    .workspace_bytes = cpu::atomic_dq_workspace,
    .cpu_forward = nullptr,
    .cpu_backward = cpu::atomic_dq_backward,
    .cpu_scratch_bytes = cpu::atomic_dq_scratch_bytes,
});
