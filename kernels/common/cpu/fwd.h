// What the forward twins share (tiled, hopper): the tiles one worker keeps on chip, one step of
// the online softmax, and the last division by l. Each twin keeps its own schedule (which blocks,
// in which order, which ones masked); these are the steps every schedule takes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/cpu/tiles.h"
#include "core/dtype.h"

namespace flashlab::cpu {

// O and LSE sized for the problem (empty for a dry run, which writes nothing); no P.
inline void prepare_forward(const Problem& p, bool dry, Forward& out) {
  out.P.clear();
  if (dry) {
    out.O.clear();
    out.LSE.clear();
    return;
  }
  out.O.resize(static_cast<size_t>(p.shape.q_elems()));
  out.LSE.resize(static_cast<size_t>(p.shape.lse_elems()));
}

template <class T>
struct FwdTile {  // what one worker keeps on chip
  std::vector<T> Q, Kt, V, S, O, m, l;
  FwdTile(int64_t Br, int64_t Bc, int64_t d)
      : Q(Br * d), Kt(d * Bc), V(Bc * d), S(Br * Bc), O(Br * d), m(Br), l(Br) {}

  // Q_i arrives (rows x d); O, m and l start empty.
  void start(const double* q, int64_t rows, int64_t d) {
    load_rows(Q.data(), q, rows, d);
    std::fill(O.begin(), O.end(), T(0));
    std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
    std::fill(l.begin(), l.end(), T(0));
  }

  // K_j, V_j arrive (cols x d each) and S = Q_i K_j^T (unscaled, unmasked).
  void scores(const double* k, const double* v, int64_t rows, int64_t cols, int64_t d) {
    load_transposed(Kt.data(), k, cols, d);
    load_rows(V.data(), v, cols, d);
    std::fill(S.begin(), S.begin() + rows * cols, T(0));
    mm_nn(S.data(), cols, Q.data(), d, Kt.data(), cols, rows, cols, d);
  }
};

// Host bytes of every worker's FwdTile: Q, O; K^T, V; S; m, l.
inline int64_t fwd_tile_scratch_bytes(const Problem& p, const CpuOptions& o) {
  const int64_t Br = o.Br, Bc = o.Bc, d = p.shape.d;
  const int64_t tile = 2 * Br * d + 2 * Bc * d + Br * Bc + 2 * Br;
  return compute_bytes(p.dtype) * thread_count(o, p) * tile;
}

// The online softmax's rescaling: folds S (rows x cols, scaled and masked) into m and l, scales
// O by exp(m - m'), and leaves P = exp(S - m') in S, for the step's O += P V.
template <class T>
void online_softmax_rescale(FwdTile<T>& t, int64_t rows, int64_t cols, int64_t d) {
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
}

// One step of the online softmax: folds S (rows x cols, scaled and masked) into m, l and O.
template <class T>
void online_softmax_step(FwdTile<T>& t, int64_t rows, int64_t cols, int64_t d) {
  online_softmax_rescale(t, rows, cols, d);
  mm_nn(t.O.data(), d, t.S.data(), cols, t.V.data(), d, rows, d, cols);  // O_i += P V_j
}

// O_i = O_i / l (rounded to the dtype) and LSE_i = m + log l, into rows [r0, r0 + rows) of the
// outputs (o and lse point at the head's first row). A row that saw no key: O = 0, LSE = -inf.
template <class T>
void write_rows(const FwdTile<T>& t, DType dt, int64_t rows, int64_t d, double* o, double* lse) {
  for (int64_t r = 0; r < rows; ++r) {
    const bool saw_none = t.l[r] == T(0);
    for (int64_t k = 0; k < d; ++k)
      o[r * d + k] = saw_none ? 0.0 : round_to(dt, static_cast<double>(t.O[r * d + k] / t.l[r]));
    lse[r] = saw_none ? -std::numeric_limits<double>::infinity()
                      : static_cast<double>(t.m[r] + std::log(t.l[r]));
  }
}

}  // namespace flashlab::cpu
