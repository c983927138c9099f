// The no-lse lab's own answer to the chapter's exercise 3: atomic-dq's backward as it would have to
// run if the forward had not stored LSE. Before the main pass, every Q block re-runs the online
// softmax over all the K blocks it sees, to rebuild m and l (and so LSE = m + log l):
//
//   stats pass   worker (h, i): read Q_i; for each visited K block: read K_j, S = scale Q_i K_j^T,
//                m' = max(m, rowmax S), l = exp(m - m') l + rowsum exp(S - m'); write LSE_i
//   then         the atomic-dq backward, reading the rebuilt LSE
//
// The extra cost is one more Q K^T product per pair (2 Nq Nk d FLOPs, halved-ish when causal) and
// reading K once per Q block: Nq d + Tr Nk d + Nq elements.
#include "no_lse_backward.h"

#include <cmath>
#include <limits>
#include <vector>

#include "common/cpu_bwd.h"
#include "lab_util.h"

namespace flashlab::lab {

using namespace cpu;  // the CPU twins' tile helpers (kernels/common)

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

}  // namespace

void no_lse_backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                     Gradients& g, Counters& cnt) {
  check_problem(p, o, "no_lse_backward");
  Forward rebuilt;  // the forward's O, with an LSE of our own making
  if (!o.dry_run) {
    check_inputs(p, in, "no_lse_backward");
    if (fwd.O.size() != static_cast<size_t>(p.shape.q_elems()))
      throw std::invalid_argument("no_lse_backward: needs the forward's O");
    rebuilt.O = fwd.O;
  }
  with_compute_type(p.dtype,
                    [&](auto zero) { rebuild_lse<decltype(zero)>(p, in, o, rebuilt.LSE, cnt); });
  version("atomic-dq").cpu_backward(p, in, rebuilt, o, g, cnt);
}

}  // namespace flashlab::lab
