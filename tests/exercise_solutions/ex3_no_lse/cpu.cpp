// ex3-no-lse — the chapter's exercise 3: the backward without a stored LSE. What must be
// recomputed, and what does it cost? P = exp(S − LSE) needs each row's LSE = m + log l; without
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
// Solution kept with the tests.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "common/cpu/bwd.h"
#include "core/version.h"

namespace flashlab::cpu {

namespace {

template <class T>
void rebuild_lse(const Problem& p, const Inputs& in, const CpuOptions& o, HostTensor& LSE,
                 Counters& cnt) {
  const Shape& s = p.shape;
  const int64_t d = s.d;
  const Blocks qb{s.Nq, o.Br}, kb{s.Nk, o.Bc};
  const bool dry = o.dry_run;
  const T scale = static_cast<T>(p.softmax_scale());
  const T neg_inf = -std::numeric_limits<T>::infinity();
  if (!dry) LSE.resize(static_cast<size_t>(s.lse_elems()));
  Counters total;

#pragma omp parallel num_threads(thread_count(o, p)) reduction(+ : total)
  {
    const int64_t Br = dry ? 0 : o.Br, Bc = dry ? 0 : o.Bc, dd = dry ? 0 : d;
    std::vector<T> Q(Br * dd), Kt(dd * Bc), S(Br * Bc), m(Br), l(Br);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t h = 0; h < s.heads(); ++h)
      for (int64_t i = 0; i < qb.count(); ++i) {
        const int64_t r0 = qb.begin(i), rows = qb.size(i);
        total.elems_read += rows * d;  // Q_i
        if (!dry) {
          load_rows(Q.data(), &in.Q[(h * s.Nq + r0) * d], rows, d);
          std::fill(m.begin(), m.end(), neg_inf);
          std::fill(l.begin(), l.end(), T(0));
        }
        for (int64_t j = 0; j < kb.count(); ++j) {
          const int64_t c0 = kb.begin(j), cols = kb.size(j);
          const TileMask mask = tile_mask(p, r0, rows, c0, cols);
          if (!count_tile(total, mask)) continue;
          total.elems_read += cols * d;  // K_j
          total.matmul_flops += 2 * rows * cols * d;
          if (dry) continue;
          load_transposed(Kt.data(), &in.K[(h * s.Nk + c0) * d], cols, d);
          std::fill(S.begin(), S.end(), T(0));
          mm_nn(S.data(), cols, Q.data(), d, Kt.data(), cols, rows, cols, d);
          scale_and_mask(S.data(), rows, cols, scale, mask, p, r0, c0);
          for (int64_t r = 0; r < rows; ++r) {
            T* srow = &S[r * cols];
            T m_new = m[r];
            for (int64_t c = 0; c < cols; ++c) m_new = std::max(m_new, srow[c]);
            if (m_new == neg_inf) continue;
            exp_shifted(srow, cols, m_new);
            T sum = 0;
            for (int64_t c = 0; c < cols; ++c) sum += srow[c];
            l[r] = std::exp(m[r] - m_new) * l[r] + sum;
            m[r] = m_new;
          }
        }
        total.elems_written += rows;  // LSE_i
        if (dry) continue;
        for (int64_t r = 0; r < rows; ++r)
          LSE[h * s.Nq + r0 + r] = l[r] == T(0) ? -std::numeric_limits<double>::infinity()
                                                : static_cast<double>(m[r] + std::log(l[r]));
      }
  }
  cnt += total;
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
