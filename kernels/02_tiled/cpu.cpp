// tiled: the FA2 forward. One worker per (head, Q block i) -- a thread block on the GPU -- keeps
// Q_i, the running row max m, the running sum l and the unnormalised O_i on chip, and streams
// the K, V blocks past them:
//
//   for j in K blocks:            (causal: blocks wholly above the diagonal are skipped)
//     S    = scale Q_i K_j^T      masked inside a diagonal block
//     m'   = max(m, rowmax S)
//     P    = exp(S - m')
//     l    = exp(m - m') l + rowsum P
//     O_i  = exp(m - m') O_i + P V_j
//   O_i = O_i / l,  LSE_i = m + log l      (a row that saw no key: O = 0, LSE = -inf)
#include <cmath>
#include <limits>
#include <vector>

#include "common/cpu_tiles.h"
#include "core/dtype.h"
#include "version_folder.h"

namespace flashlab::cpu {

namespace {

template <class T>
struct Tile {  // what one worker keeps on chip
  std::vector<T> Q, Kt, V, S, O, m, l;
  Tile(int64_t Br, int64_t Bc, int64_t d)
      : Q(Br * d), Kt(d * Bc), V(Bc * d), S(Br * Bc), O(Br * d), m(Br), l(Br) {}
};

// One step of the online softmax: folds S (rows x cols, scaled and masked) into m, l and O.
template <class T>
void online_softmax_step(Tile<T>& t, int64_t rows, int64_t cols, int64_t d) {
  for (int64_t r = 0; r < rows; ++r) {
    T* s = &t.S[r * cols];
    T m_new = t.m[r];
    for (int64_t c = 0; c < cols; ++c) m_new = std::max(m_new, s[c]);
    if (m_new == -std::numeric_limits<T>::infinity()) {  // nothing seen yet: P row is 0
      std::fill(s, s + cols, T(0));
      continue;
    }
    const T alpha = std::exp(t.m[r] - m_new);  // exp(-inf) = 0 on the first visible tile
    exp_shifted(s, cols, m_new);
    T sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += s[c];
    t.l[r] = alpha * t.l[r] + sum;
    t.m[r] = m_new;
    T* o = &t.O[r * d];
    for (int64_t k = 0; k < d; ++k) o[k] *= alpha;
  }
  mm_nn(t.O.data(), d, t.S.data(), cols, t.V.data(), d, rows, d, cols);  // O_i += P V_j
}

template <class T>
void tiled(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out, Counters& cnt) {
  const Shape& s = p.shape;
  const int64_t d = s.d;
  const Blocks qb{s.Nq, o.Br}, kb{s.Nk, o.Bc};
  const bool dry = o.dry_run;
  const T scale = static_cast<T>(p.softmax_scale());
  out.P.clear();
  if (dry) {
    out.O.clear();
    out.LSE.clear();
  } else {
    out.O.resize(static_cast<size_t>(s.q_elems()));
    out.LSE.resize(static_cast<size_t>(s.lse_elems()));
  }
  Counters total;

#pragma omp parallel num_threads(thread_count(o, p)) reduction(+ : total)
  {
    Tile<T> t(dry ? 0 : o.Br, dry ? 0 : o.Bc, dry ? 0 : d);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t h = 0; h < s.heads(); ++h)
      for (int64_t i = 0; i < qb.count(); ++i) {
        const int64_t r0 = qb.begin(i), rows = qb.size(i);
        total.elems_read += rows * d;  // Q_i
        if (!dry) {
          load_rows(t.Q.data(), &in.Q[(h * s.Nq + r0) * d], rows, d);
          std::fill(t.O.begin(), t.O.end(), T(0));
          std::fill(t.m.begin(), t.m.end(), -std::numeric_limits<T>::infinity());
          std::fill(t.l.begin(), t.l.end(), T(0));
        }
        for (int64_t j = 0; j < kb.count(); ++j) {
          const int64_t c0 = kb.begin(j), cols = kb.size(j);
          const TileMask mask = tile_mask(p, r0, rows, c0, cols);
          if (!count_tile(total, mask)) continue;
          total.elems_read += 2 * cols * d;                 // K_j, V_j
          total.matmul_flops += 2 * (2 * rows * cols * d);  // Q K^T and P V
          if (dry) continue;
          load_transposed(t.Kt.data(), &in.K[(h * s.Nk + c0) * d], cols, d);
          load_rows(t.V.data(), &in.V[(h * s.Nk + c0) * d], cols, d);
          std::fill(t.S.begin(), t.S.begin() + rows * cols, T(0));
          mm_nn(t.S.data(), cols, t.Q.data(), d, t.Kt.data(), cols, rows, cols, d);
          scale_and_mask(t.S.data(), rows, cols, scale, mask, p, r0, c0);
          online_softmax_step(t, rows, cols, d);
        }
        total.elems_written += rows * d + rows;  // O_i, LSE_i
        if (dry) continue;
        for (int64_t r = 0; r < rows; ++r) {
          const bool saw_none = t.l[r] == T(0);
          for (int64_t k = 0; k < d; ++k)
            out.O[(h * s.Nq + r0 + r) * d + k] =
                saw_none ? 0.0 : round_to(p.dtype, static_cast<double>(t.O[r * d + k] / t.l[r]));
          out.LSE[h * s.Nq + r0 + r] = saw_none ? -std::numeric_limits<double>::infinity()
                                                : static_cast<double>(t.m[r] + std::log(t.l[r]));
        }
      }
  }
  cnt += total;
}

// Each thread's Tile.
int64_t tiled_scratch_bytes(const Problem& p, const CpuOptions& o) {
  const int64_t Br = o.Br, Bc = o.Bc, d = p.shape.d;
  const int64_t tile = 2 * Br * d + 2 * Bc * d + Br * Bc + 2 * Br;  // Q, O; K^T, V; S; m, l
  return compute_bytes(p.dtype) * thread_count(o, p) * tile;
}

void tiled_forward(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out,
                   Counters& cnt) {
  check_problem(p, o, "tiled_forward");
  if (!o.dry_run) check_inputs(p, in, "tiled_forward");
  with_compute_type(p.dtype, [&](auto zero) { tiled<decltype(zero)>(p, in, o, out, cnt); });
}

int64_t no_workspace(const Problem&, const CpuOptions&) {
  return 0;
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "tiled",
    .pass = Pass::fwd,
    .idea = "FA2 forward: outer loop over Q blocks, online softmax, writes O and LSE only",
    .deterministic = true,
    .workspace = "0",
    .workspace_bytes = cpu::no_workspace,
    .cpu_forward = cpu::tiled_forward,
    .cpu_backward = nullptr,
    .cpu_scratch_bytes = cpu::tiled_scratch_bytes,
});
