// The pieces of the FlashAttention backward the CPU twins share (paper notation):
//
//   preprocess    D_i = rowsum(O_i * dO_i)                      once, before the main pass
//   per pair      S   = scale Q_i K_j^T        (masked on the diagonal)
//   (i, j)        P   = exp(S - LSE_i)         (0 where masked, 0 for a row that sees no key)
//                 dV_j += P^T dO_i
//                 dP  = dO_i V_j^T
//                 dS  = P * (dP - D_i)
//                 dQ_i += dS K_j               (unscaled; the dQ pass or convert scales it)
//                 dK_j += dS^T Q_i             (scaled when dK_j is written)
//
// outer_k_pass() is FA2's main loop: one worker per (K/V head, K block j) -- a thread block on the
// GPU -- keeps K_j, V_j, dK_j, dV_j on chip and walks every Q block i of every query head that
// reads this K/V head (one head; H / Hkv heads with grouped heads, whose dK_j and dV_j it sums on
// chip, so K and V are read once per K/V head and dK, dV written once). What happens to each dQ
// partial is the only thing the versions disagree on, so it is a policy (the DQ parameter).
// The checks, the gradients' sizes and D's preprocess, which every backward shares, are in
// bwd_prep.h.
#pragma once

#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cpu/bwd_prep.h"
#include "common/cpu/tiles.h"
#include "core/dtype.h"

namespace flashlab::cpu {

// A Q block on chip: Q_i, dO_i, LSE_i, D_i.
template <class T>
struct QBlock {
  std::vector<T> Q, dO, lse, D;
  QBlock(int64_t Br, int64_t d) : Q(Br * d), dO(Br * d), lse(Br), D(Br) {}
  void load(const Problem& p, const Inputs& in, const HostTensor& LSE, const std::vector<T>& Dall,
            int64_t h, int64_t r0, int64_t rows) {
    const int64_t d = p.shape.d, row0 = h * p.shape.Nq + r0;
    load_rows(Q.data(), &in.Q[row0 * d], rows, d);
    load_rows(dO.data(), &in.dO[row0 * d], rows, d);
    load_rows(lse.data(), &LSE[row0], rows, 1);
    std::copy(Dall.begin() + row0, Dall.begin() + row0 + rows, D.begin());
  }
};

// A K block on chip: K_j (for dQ), K_j^T (for S) and V_j^T (for dP), of K/V head kh.
template <class T>
struct KBlock {
  std::vector<T> K, Kt, Vt;
  KBlock(int64_t Bc, int64_t d) : K(Bc * d), Kt(d * Bc), Vt(d * Bc) {}
  void load(const Problem& p, const Inputs& in, int64_t kh, int64_t c0, int64_t cols) {
    const int64_t d = p.shape.d, row0 = kh * p.shape.Nk + c0;
    load_rows(K.data(), &in.K[row0 * d], cols, d);
    load_transposed(Kt.data(), &in.K[row0 * d], cols, d);
    load_transposed(Vt.data(), &in.V[row0 * d], cols, d);
  }
};

// Host bytes the backward twins allocate besides their outputs: D, and what each thread of
// outer_k_pass keeps (a QBlock, a KBlock, P, dS, dQ, dK, dV), in the twin's compute type.
inline int64_t outer_k_scratch_bytes(const Problem& p, const CpuOptions& o) {
  const int64_t Br = o.Br, Bc = o.Bc, d = p.shape.d;
  const int64_t per_thread = (2 * Br * d + 2 * Br) + 3 * Bc * d + 2 * Br * Bc + Br * d + 2 * Bc * d;
  return compute_bytes(p.dtype) * (p.shape.lse_elems() + thread_count(o, p) * per_thread);
}

// P = exp(scale Q_i K_j^T - LSE_i) for a rows x cols pair.
template <class T>
void recompute_P(T* P, const QBlock<T>& q, const KBlock<T>& k, int64_t rows, int64_t cols,
                 const Problem& p, TileMask mask, int64_t r0, int64_t c0) {
  const int64_t d = p.shape.d;
  std::fill(P, P + rows * cols, T(0));
  mm_nn(P, cols, q.Q.data(), d, k.Kt.data(), cols, rows, cols, d);
  scale_and_mask(P, rows, cols, static_cast<T>(p.softmax_scale()), mask, p, r0, c0);
  for (int64_t r = 0; r < rows; ++r) {
    T* row = P + r * cols;
    if (q.lse[r] == -std::numeric_limits<T>::infinity()) {  // sees no key at all
      std::fill(row, row + cols, T(0));
      continue;
    }
    exp_shifted(row, cols, q.lse[r]);
  }
}

// dS = P * (dO_i V_j^T - D_i).
template <class T>
void compute_dS(T* dS, const T* P, const QBlock<T>& q, const KBlock<T>& k, int64_t rows,
                int64_t cols, int64_t d) {
  std::fill(dS, dS + rows * cols, T(0));
  mm_nn(dS, cols, q.dO.data(), d, k.Vt.data(), cols, rows, cols, d);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      dS[r * cols + c] = P[r * cols + c] * (dS[r * cols + c] - q.D[r]);
}

// A dQ policy for outer_k_pass that computes no dQ (recompute's dK,dV pass: 4 products a pair).
template <class T>
struct NoDQ {
  static constexpr bool computes_dq = false;
  void count(Counters&, int64_t, int64_t) const {}
  void add(int64_t, int64_t, int64_t, int64_t, const T*) {}
};

// A dQ policy that adds each rows x d partial into one accumulator with atomic adds (atomic-dq,
// hopper): the workers really race, so the order in which partials reach an element, and dQ's
// last bits, change from run to run. An atomic add reads and writes its element.
template <class T>
struct AtomicAddDQ {
  static constexpr bool computes_dq = true;
  std::vector<T>& accum;
  int64_t Nq, d;
  void count(Counters& c, int64_t rows, int64_t dd) const {
    c.elems_read += rows * dd;
    c.elems_written += rows * dd;
    c.atomic_adds += rows * dd;
  }
  void add(int64_t h, int64_t, int64_t r0, int64_t rows, const T* partial) {
    T* base = &accum[(h * Nq + r0) * d];
    for (int64_t e = 0; e < rows * d; ++e)
      std::atomic_ref<T>(base[e]).fetch_add(partial[e], std::memory_order_relaxed);
  }
};

// Whether a dQ policy wants each worker to walk its Q blocks downwards (`static constexpr bool
// q_down = true;`, hopper-deterministic's turns); upwards otherwise.
template <class DQ>
constexpr bool walks_q_down() {
  if constexpr (requires { DQ::q_down; })
    return DQ::q_down;
  else
    return false;
}

// FA2's outer-K pass. Per K block: read K_j, V_j; per visited pair (of every query head of the
// group): read Q_i, dO_i, LSE_i, D_i, 2*m*n*k FLOPs per product, and whatever the dQ policy moves;
// per K block at the end: write dK_j, dV_j. The policy DQ offers count(counters, rows, d) and
// add(h, j, r0, rows, partial), h the query head.
template <class T, class DQ>
void outer_k_pass(const Problem& p, const Inputs& in, const HostTensor& LSE,
                  const std::vector<T>& D, const CpuOptions& o, Gradients& g, Counters& cnt,
                  DQ& dq) {
  const Shape& s = p.shape;
  const int64_t d = s.d;
  const Blocks qb{s.Nq, o.Br}, kb{s.Nk, o.Bc};
  const bool dry = o.dry_run;
  const T scale = static_cast<T>(p.softmax_scale());
  const int64_t products = DQ::computes_dq ? 5 : 4;
  Counters total;

#pragma omp parallel num_threads(thread_count(o, p)) reduction(+ : total)
  {
    const int64_t Br = dry ? 0 : o.Br, Bc = dry ? 0 : o.Bc, dd = dry ? 0 : d;
    QBlock<T> q(Br, dd);
    KBlock<T> k(Bc, dd);
    std::vector<T> P(Br * Bc), dS(Br * Bc), dQ(Br * dd), dK(Bc * dd), dV(Bc * dd);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t kh = 0; kh < s.kv_head_count(); ++kh)
      for (int64_t j = 0; j < kb.count(); ++j) {
        const int64_t c0 = kb.begin(j), cols = kb.size(j);
        total.elems_read += 2 * cols * d;  // K_j, V_j
        if (!dry) {
          k.load(p, in, kh, c0, cols);
          std::fill(dK.begin(), dK.end(), T(0));
          std::fill(dV.begin(), dV.end(), T(0));
        }
        for (int64_t n = 0; n < s.group() * qb.count(); ++n) {  // the group's heads, one by one
          const int64_t h = s.first_q_of(kh) + n / qb.count(), n_in_head = n % qb.count();
          const int64_t i = walks_q_down<DQ>() ? qb.count() - 1 - n_in_head : n_in_head;
          const int64_t r0 = qb.begin(i), rows = qb.size(i);
          const TileMask mask = tile_mask(p, r0, rows, c0, cols);
          if (!count_tile(total, mask)) continue;
          total.elems_read += 2 * rows * d + 2 * rows;  // Q_i, dO_i, LSE_i, D_i
          total.matmul_flops += products * 2 * rows * cols * d;
          dq.count(total, rows, d);
          if (dry) continue;
          q.load(p, in, LSE, D, h, r0, rows);
          recompute_P(P.data(), q, k, rows, cols, p, mask, r0, c0);
          mm_tn(dV.data(), d, P.data(), cols, q.dO.data(), d, rows, cols, d);  // dV_j += P^T dO_i
          compute_dS(dS.data(), P.data(), q, k, rows, cols, d);
          if constexpr (DQ::computes_dq) {
            std::fill(dQ.begin(), dQ.end(), T(0));
            mm_nn(dQ.data(), d, dS.data(), cols, k.K.data(), d, rows, d, cols);  // dS K_j
            dq.add(h, j, r0, rows, dQ.data());
          }
          mm_tn(dK.data(), d, dS.data(), cols, q.Q.data(), d, rows, cols, d);  // dK_j += dS^T Q_i
        }
        total.elems_written += 2 * cols * d;  // dK_j, dV_j
        if (dry) continue;
        for (int64_t e = 0; e < cols * d; ++e) {
          g.dK[(kh * s.Nk + c0) * d + e] = round_to(p.dtype, static_cast<double>(scale * dK[e]));
          g.dV[(kh * s.Nk + c0) * d + e] = round_to(p.dtype, static_cast<double>(dV[e]));
        }
      }
  }
  cnt += total;
}

// The outer-Q dQ pass (recompute's second pass; hopper's at d = 256): per Q block read Q_i, dO_i,
// LSE_i, D_i; per visited K block read K_j, V_j and do 3 products (S, dP, dS K_j); write dQ_i
// once.
template <class T>
void outer_q_dq_pass(const Problem& p, const Inputs& in, const HostTensor& LSE,
                     const std::vector<T>& D, const CpuOptions& o, Gradients& g, Counters& cnt) {
  const Shape& s = p.shape;
  const int64_t d = s.d;
  const Blocks qb{s.Nq, o.Br}, kb{s.Nk, o.Bc};
  const bool dry = o.dry_run;
  const T scale = static_cast<T>(p.softmax_scale());
  Counters total;

#pragma omp parallel num_threads(thread_count(o, p)) reduction(+ : total)
  {
    const int64_t Br = dry ? 0 : o.Br, Bc = dry ? 0 : o.Bc, dd = dry ? 0 : d;
    QBlock<T> q(Br, dd);
    KBlock<T> k(Bc, dd);
    std::vector<T> P(Br * Bc), dS(Br * Bc), dQ(Br * dd);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t h = 0; h < s.heads(); ++h)
      for (int64_t i = 0; i < qb.count(); ++i) {
        const int64_t r0 = qb.begin(i), rows = qb.size(i);
        total.elems_read += 2 * rows * d + 2 * rows;  // Q_i, dO_i, LSE_i, D_i
        if (!dry) {
          q.load(p, in, LSE, D, h, r0, rows);
          std::fill(dQ.begin(), dQ.end(), T(0));
        }
        for (int64_t j = 0; j < kb.count(); ++j) {
          const int64_t c0 = kb.begin(j), cols = kb.size(j);
          const TileMask mask = tile_mask(p, r0, rows, c0, cols);
          if (!count_tile(total, mask)) continue;
          total.elems_read += 2 * cols * d;  // K_j, V_j
          total.matmul_flops += 3 * 2 * rows * cols * d;
          if (dry) continue;
          k.load(p, in, s.kv_of(h), c0, cols);
          recompute_P(P.data(), q, k, rows, cols, p, mask, r0, c0);
          compute_dS(dS.data(), P.data(), q, k, rows, cols, d);
          mm_nn(dQ.data(), d, dS.data(), cols, k.K.data(), d, rows, d, cols);
        }
        total.elems_written += rows * d;  // dQ_i
        if (dry) continue;
        for (int64_t e = 0; e < rows * d; ++e)
          g.dQ[(h * s.Nq + r0) * d + e] = round_to(p.dtype, static_cast<double>(scale * dQ[e]));
      }
  }
  cnt += total;
}

// The convert pass after a single accumulator: read it, write dQ = round(scale * accum).
template <class T>
void convert_dq(const Problem& p, const CpuOptions& o, const std::vector<T>& accum, Gradients& g,
                Counters& cnt) {
  const int64_t n = p.shape.q_elems();
  cnt.elems_read += n;
  cnt.elems_written += n;
  if (o.dry_run) return;
  const T scale = static_cast<T>(p.softmax_scale());
#pragma omp parallel for num_threads(thread_count(o, p))
  for (int64_t e = 0; e < n; ++e)
    g.dQ[e] = round_to(p.dtype, static_cast<double>(scale * accum[e]));
}

// FA2's backward with one atomically added dQ accumulator (atomic-dq's twin): preprocess D, the
// outer-K pass adding every dQ partial into the accumulator, convert. Exercise 3 runs it unchanged
// on an LSE it rebuilt itself.
template <class T>
void atomic_dq_backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                        Gradients& g, Counters& cnt) {
  prepare_gradients(p, o.dry_run, g);
  const std::vector<T> D = preprocess_D<T>(p, in, fwd, o, cnt);
  std::vector<T> accum(o.dry_run ? 0 : static_cast<size_t>(p.shape.q_elems()), T(0));
  AtomicAddDQ<T> dq{accum, p.shape.Nq, p.shape.d};
  outer_k_pass(p, in, fwd.LSE, D, o, g, cnt, dq);
  convert_dq(p, o, accum, g, cnt);
}

// Its scratch: D, the outer-K pass's tiles and the dQ accumulator.
inline int64_t atomic_dq_scratch_bytes(const Problem& p, const CpuOptions& o) {
  return outer_k_scratch_bytes(p, o) + compute_bytes(p.dtype) * p.shape.q_elems();
}

}  // namespace flashlab::cpu
