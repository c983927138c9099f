// ex3-no-lse — the chapter's exercise 3 (a starter): the backward without a stored LSE. What must
// be recomputed, and what does it cost? P = exp(S − LSE) needs each row's LSE = m + log l; without
// it, every Q block runs the online softmax over the K blocks it sees once more, before the
// backward, to rebuild m and l:
//
//   stats pass   worker (h, Q block i): read Q_i; for each K block j it sees: read K_j,
//                S = scale Q_i K_j^T, m' = max(m, rowmax S), l = exp(m − m') l + rowsum exp(S −
//                m'); write LSE_i = m + log l (−inf for a row that sees no key)
//   then         atomic-dq's backward, unchanged, reading the rebuilt LSE
//
// The forward's LSE is never read here. Count what the stats pass computes, reads and writes:
// `flashlab lab no-lse --versions ex3-no-lse` sets it against the backward with a stored LSE.
// Write rebuild_lse() below (delete its FLASHLAB_TODO line); until then `flashlab run
// --versions ex3-no-lse` stops there and says so (exit status 1).
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "common/cpu/bwd.h"
#include "core/version.h"

namespace flashlab::cpu {

namespace {

// The stats pass (yours): for every head h and Q block i (o.Br rows), read Q_i, walk the K blocks
// j (o.Bc keys) the block sees (tile_mask and count_tile skip the wholly masked ones), compute
// S = scale Q_i K_j^T (mm_nn on load_rows / load_transposed tiles, scale_and_mask), update each
// row's m and l by the recurrence above, and write LSE[h * Nq + row] = m + log l, or -inf for a
// row that saw no key. Count into `cnt` what it costs:
// matmul_flops += 2 rows cols d per product, elems_read += the Q and K elements it loads,
// elems_written += the LSE it writes. With o.dry_run, count only (LSE stays empty).
template <class T>
void rebuild_lse([[maybe_unused]] const Problem& p, [[maybe_unused]] const Inputs& in,
                 [[maybe_unused]] const CpuOptions& o, [[maybe_unused]] HostTensor& LSE,
                 [[maybe_unused]] Counters& cnt) {
  FLASHLAB_TODO("the stats pass: rebuild LSE by a second online softmax over K, and count it");
}

void backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
              Gradients& g, Counters& cnt) {
  check_problem(p, o, "ex3-no-lse backward");
  Forward rebuilt;  // the forward's O, and an LSE of our own making
  if (!o.dry_run) {
    check_inputs(p, in, "ex3-no-lse backward");
    if (fwd.O.size() != static_cast<size_t>(p.shape.q_elems()))
      throw std::invalid_argument("ex3-no-lse backward: needs the forward's O");
    rebuilt.O = fwd.O;
  }
  with_compute_type(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    rebuild_lse<T>(p, in, o, rebuilt.LSE, cnt);
    if (!o.dry_run) check_backward(p, in, rebuilt, "ex3-no-lse backward");
    atomic_dq_backward<T>(p, in, rebuilt, o, g, cnt);  // atomic-dq's, unchanged (common/cpu/bwd.h)
  });
}

// LSE rebuilt (fp32) on top of atomic-dq's D and dQ accumulator.
int64_t workspace_bytes(const Problem& p, const CpuOptions&) {
  return 2 * p.shape.lse_elems() * 4 + p.shape.q_elems() * 4;
}

// The copy of O and the rebuilt LSE (doubles), each thread's tiles of the stats pass (Q_i, K_j^T,
// S, m, l), and then atomic-dq's own buffers.
int64_t scratch_bytes(const Problem& p, const CpuOptions& o) {
  const Shape& s = p.shape;
  const int64_t per_thread = o.Br * s.d + s.d * o.Bc + o.Br * o.Bc + 2 * o.Br;
  return 8 * (s.q_elems() + s.lse_elems()) +
         compute_bytes(p.dtype) * (thread_count(o, p) * per_thread + s.q_elems()) +
         outer_k_scratch_bytes(p, o);
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "ex3-no-lse",
    .pass = Pass::bwd,
    .idea = "exercise 3: the backward without a stored LSE: rebuild it by a second online "
            "softmax over K, count the extra FLOPs and traffic (lab no-lse)",
    .deterministic = false,
    .workspace = "B*H*Nq*4 (rebuilt LSE) + atomic-dq's",
    .workspace_bytes = cpu::workspace_bytes,
    .cpu_forward = nullptr,
    .cpu_backward = cpu::backward,
    .cpu_scratch_bytes = cpu::scratch_bytes,
});
