// naive: the textbook schedule. Every N x N matrix goes through memory, one kernel per step:
//
//   forward   S = scale Q K^T        (writes S, Nq x Nk)
//             P = softmax(S), LSE    (reads S, writes P)
//             O = P V                (reads P)
//   backward  dV = P^T dO            (reads the stored P)
//             dP = dO V^T            (writes dP)
//             dS = P * (dP - D)      (reads P, dP; D = rowsum(P * dP) fused in; writes dS)
//             dQ = scale dS K,  dK = scale dS^T Q   (each reads dS)
//
// Each kernel walks Br x Bc tiles of its output in parallel, but its counts are those of the whole
// matrices it reads and writes: the point of this rung is the N x N traffic. The mask (causal,
// window) is applied in the softmax; nothing is skipped. Grouped heads: each query head reads its
// K/V head, and dK, dV of a K/V head are summed over its group before they are rounded.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "common/cpu/tiles.h"
#include "core/dtype.h"
#include "core/version.h"

namespace flashlab::cpu {

namespace {

// The counts of the three forward kernels for one head (and of the tile grid S is cut into).
void count_forward(const Problem& p, const CpuOptions& o, Counters& c) {
  const Shape& s = p.shape;
  const int64_t NN = s.Nq * s.Nk, qd = s.Nq * s.d, kd = s.Nk * s.d;
  c.tiles_computed += Blocks{s.Nq, o.Br}.count() * Blocks{s.Nk, o.Bc}.count();
  c.elems_read += qd + kd, c.elems_written += NN, c.matmul_flops += 2 * NN * s.d;  // S = Q K^T
  c.elems_read += NN, c.elems_written += NN + s.Nq;                                // softmax
  c.elems_read += NN + kd, c.elems_written += qd, c.matmul_flops += 2 * NN * s.d;  // O = P V
}

void count_backward(const Problem& p, const CpuOptions& o, Counters& c) {
  const Shape& s = p.shape;
  const int64_t NN = s.Nq * s.Nk, qd = s.Nq * s.d, kd = s.Nk * s.d;
  c.tiles_computed += Blocks{s.Nq, o.Br}.count() * Blocks{s.Nk, o.Bc}.count();
  c.elems_read += NN + qd, c.elems_written += kd, c.matmul_flops += 2 * NN * s.d;  // dV
  c.elems_read += qd + kd, c.elems_written += NN, c.matmul_flops += 2 * NN * s.d;  // dP
  c.elems_read += 2 * NN, c.elems_written += NN;                                   // dS
  c.elems_read += NN + kd, c.elems_written += qd, c.matmul_flops += 2 * NN * s.d;  // dQ
  c.elems_read += NN + qd, c.elems_written += kd, c.matmul_flops += 2 * NN * s.d;  // dK
}

// Threads for the loops inside one head. A head with little work runs on one thread: every
// parallel loop wakes its threads and waits for them, and with many tiny heads (a sweep at N = 1
// has 65536 of them at d = 1) that costs a hundred times the work.
int head_threads(const CpuOptions& o, const Problem& p) {
  const Shape& s = p.shape;
  return s.Nq * s.Nk * s.d < (1 << 16) ? 1 : thread_count(o, p);
}

template <class T>
void forward_head(const Problem& p, const Inputs& in, const CpuOptions& o, int64_t h,
                  Forward& out) {
  const Shape& s = p.shape;
  const int64_t Nq = s.Nq, Nk = s.Nk, d = s.d;
  const Blocks qb{Nq, o.Br}, kb{Nk, o.Bc};
  const T scale = static_cast<T>(p.softmax_scale());
  std::vector<T> Q(Nq * d), Kt(d * Nk), V(Nk * d), S(Nq * Nk, T(0));
  const int64_t kh = s.kv_of(h);  // the K/V head this query head reads
  load_rows(Q.data(), &in.Q[h * Nq * d], Nq, d);
  load_transposed(Kt.data(), &in.K[kh * Nk * d], Nk, d);
  load_rows(V.data(), &in.V[kh * Nk * d], Nk, d);
  const int threads = head_threads(o, p);

  // S = scale Q K^T, tile by tile.
#pragma omp parallel for collapse(2) num_threads(threads)
  for (int64_t i = 0; i < qb.count(); ++i)
    for (int64_t j = 0; j < kb.count(); ++j) {
      T* Sij = &S[qb.begin(i) * Nk + kb.begin(j)];
      mm_nn(Sij, Nk, &Q[qb.begin(i) * d], d, &Kt[kb.begin(j)], Nk, qb.size(i), kb.size(j), d);
      for (int64_t r = 0; r < qb.size(i); ++r)
        for (int64_t c = 0; c < kb.size(j); ++c) Sij[r * Nk + c] *= scale;
    }

    // P = softmax(S) row by row, in place; keys a row may not see get P = 0.
#pragma omp parallel for num_threads(threads)
  for (int64_t r = 0; r < Nq; ++r) {
    T* row = &S[r * Nk];
    const int64_t first = p.first_key(r), end = std::min(p.last_key(r) + 1, Nk);  // [first, end)
    double& lse = out.LSE[h * Nq + r];
    if (first >= end) {
      std::fill(row, row + Nk, T(0));
      lse = -std::numeric_limits<double>::infinity();
      continue;
    }
    T m = -std::numeric_limits<T>::infinity(), l = 0;
    for (int64_t c = first; c < end; ++c) m = std::max(m, row[c]);
    exp_shifted(row + first, end - first, m);
    for (int64_t c = first; c < end; ++c) l += row[c];
    for (int64_t c = first; c < end; ++c) row[c] /= l;
    std::fill(row, row + first, T(0));
    std::fill(row + end, row + Nk, T(0));
    lse = static_cast<double>(m + std::log(l));
  }

  // O = P V, by Q blocks, streaming V block by block.
#pragma omp parallel for num_threads(threads)
  for (int64_t i = 0; i < qb.count(); ++i) {
    std::vector<T> acc(qb.size(i) * d, T(0));
    for (int64_t j = 0; j < kb.count(); ++j)
      mm_nn(acc.data(), d, &S[qb.begin(i) * Nk + kb.begin(j)], Nk, &V[kb.begin(j) * d], d,
            qb.size(i), d, kb.size(j));
    for (int64_t e = 0; e < qb.size(i) * d; ++e)
      out.O[(h * Nq + qb.begin(i)) * d + e] = round_to(p.dtype, static_cast<double>(acc[e]));
  }
  std::copy(S.begin(), S.end(), out.P.begin() + h * Nq * Nk);
}

// One query head's dQ, and its share of dK and dV added into dK_sum, dV_sum (its K/V head's,
// summed over the query heads of the group before they are rounded).
template <class T>
void backward_head(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                   int64_t h, Gradients& g, std::vector<T>& dK_sum, std::vector<T>& dV_sum) {
  const Shape& s = p.shape;
  const int64_t Nq = s.Nq, Nk = s.Nk, d = s.d;
  const Blocks qb{Nq, o.Br}, kb{Nk, o.Bc};
  const T scale = static_cast<T>(p.softmax_scale());
  std::vector<T> P(Nq * Nk), dS(Nq * Nk, T(0)), Q(Nq * d), dO(Nq * d), K(Nk * d), Vt(d * Nk);
  load_rows(P.data(), &fwd.P[h * Nq * Nk], Nq, Nk);
  load_rows(Q.data(), &in.Q[h * Nq * d], Nq, d);
  load_rows(dO.data(), &in.dO[h * Nq * d], Nq, d);
  const int64_t kh = s.kv_of(h);
  load_rows(K.data(), &in.K[kh * Nk * d], Nk, d);
  load_transposed(Vt.data(), &in.V[kh * Nk * d], Nk, d);
  const int threads = head_threads(o, p);

#pragma omp parallel num_threads(threads)
  {
    // dV = P^T dO, by K blocks.
#pragma omp for
    for (int64_t j = 0; j < kb.count(); ++j) {
      std::vector<T> acc(kb.size(j) * d, T(0));
      mm_tn(acc.data(), d, &P[kb.begin(j)], Nk, dO.data(), d, Nq, kb.size(j), d);
      for (int64_t e = 0; e < kb.size(j) * d; ++e) dV_sum[kb.begin(j) * d + e] += acc[e];
    }
    // dP = dO V^T, tile by tile (into the dS buffer).
#pragma omp for collapse(2)
    for (int64_t i = 0; i < qb.count(); ++i)
      for (int64_t j = 0; j < kb.count(); ++j)
        mm_nn(&dS[qb.begin(i) * Nk + kb.begin(j)], Nk, &dO[qb.begin(i) * d], d, &Vt[kb.begin(j)],
              Nk, qb.size(i), kb.size(j), d);
        // dS = P * (dP - D) with D = rowsum(P * dP), row by row.
#pragma omp for
    for (int64_t r = 0; r < Nq; ++r) {
      const T* prow = &P[r * Nk];
      T* row = &dS[r * Nk];
      T D = 0;
      for (int64_t c = 0; c < Nk; ++c) D += prow[c] * row[c];
      for (int64_t c = 0; c < Nk; ++c) row[c] = prow[c] * (row[c] - D);
    }
    // dQ = scale dS K, by Q blocks.
#pragma omp for nowait
    for (int64_t i = 0; i < qb.count(); ++i) {
      std::vector<T> acc(qb.size(i) * d, T(0));
      for (int64_t j = 0; j < kb.count(); ++j)
        mm_nn(acc.data(), d, &dS[qb.begin(i) * Nk + kb.begin(j)], Nk, &K[kb.begin(j) * d], d,
              qb.size(i), d, kb.size(j));
      for (int64_t e = 0; e < qb.size(i) * d; ++e)
        g.dQ[(h * Nq + qb.begin(i)) * d + e] =
            round_to(p.dtype, static_cast<double>(scale * acc[e]));
    }
    // dK = scale dS^T Q, by K blocks.
#pragma omp for
    for (int64_t j = 0; j < kb.count(); ++j) {
      std::vector<T> acc(kb.size(j) * d, T(0));
      mm_tn(acc.data(), d, &dS[kb.begin(j)], Nk, Q.data(), d, Nq, kb.size(j), d);
      for (int64_t e = 0; e < kb.size(j) * d; ++e) dK_sum[kb.begin(j) * d + e] += acc[e];
    }
  }
}

// One head at a time: the forward's Q, K^T, V and S, or the backward's P, dS, Q, dO, K, V^T and the
// dK, dV sums of its K/V head; and each thread's accumulator of one block.
int64_t naive_scratch_bytes(const Problem& p, const CpuOptions& o) {
  const Shape& s = p.shape;
  const int64_t nn = s.Nq * s.Nk, qd = s.Nq * s.d, kd = s.Nk * s.d;
  const int64_t fwd = qd + 2 * kd + nn, bwd = 2 * nn + 2 * qd + 2 * kd;
  const int64_t block = std::max(std::min<int64_t>(o.Br, s.Nq), std::min<int64_t>(o.Bc, s.Nk));
  return compute_bytes(p.dtype) * (std::max(fwd, bwd) + 2 * kd + thread_count(o, p) * block * s.d);
}

void naive_forward(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out,
                   Counters& cnt) {
  check_problem(p, o, "naive_forward");
  const Shape& s = p.shape;
  if (o.dry_run) {
    out = Forward{};
    for (int64_t h = 0; h < s.heads(); ++h) count_forward(p, o, cnt);
    return;
  }
  check_inputs(p, in, "naive_forward");
  out.O.resize(static_cast<size_t>(s.q_elems()));
  out.LSE.resize(static_cast<size_t>(s.lse_elems()));
  out.P.resize(static_cast<size_t>(s.heads() * s.Nq * s.Nk));
  for (int64_t h = 0; h < s.heads(); ++h) {
    with_compute_type(p.dtype, [&](auto zero) { forward_head<decltype(zero)>(p, in, o, h, out); });
    count_forward(p, o, cnt);
  }
}

void naive_backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                    Gradients& g, Counters& cnt) {
  check_problem(p, o, "naive_backward");
  const Shape& s = p.shape;
  if (o.dry_run) {
    g = Gradients{};
    for (int64_t h = 0; h < s.heads(); ++h) count_backward(p, o, cnt);
    return;
  }
  check_inputs(p, in, "naive_backward");
  if (in.dO.size() != static_cast<size_t>(s.q_elems()))
    throw std::invalid_argument("naive_backward: dO does not match the problem's shape");
  if (fwd.P.size() != static_cast<size_t>(s.heads() * s.Nq * s.Nk))
    throw std::invalid_argument("naive_backward: needs the stored P of naive_forward");
  g.dQ.resize(static_cast<size_t>(s.q_elems()));
  g.dK.resize(static_cast<size_t>(s.kv_elems()));
  g.dV.resize(static_cast<size_t>(s.kv_elems()));
  with_compute_type(p.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T scale = static_cast<T>(p.softmax_scale());
    const int64_t kd = s.Nk * s.d;
    std::vector<T> dK_sum(kd), dV_sum(kd);
    for (int64_t kh = 0; kh < s.kv_head_count(); ++kh) {
      std::fill(dK_sum.begin(), dK_sum.end(), T(0));
      std::fill(dV_sum.begin(), dV_sum.end(), T(0));
      for (int64_t h = s.first_q_of(kh); h < s.first_q_of(kh) + s.group(); ++h) {
        backward_head<T>(p, in, fwd, o, h, g, dK_sum, dV_sum);
        count_backward(p, o, cnt);
      }
      for (int64_t e = 0; e < kd; ++e) {
        g.dK[kh * kd + e] = round_to(p.dtype, static_cast<double>(scale * dK_sum[e]));
        g.dV[kh * kd + e] = round_to(p.dtype, static_cast<double>(dV_sum[e]));
      }
    }
  });
}

// S and P, one fp32 N x N matrix each per head, plus D.
int64_t naive_workspace(const Problem& p, const CpuOptions&) {
  const Shape& s = p.shape;
  return 2 * s.heads() * s.Nq * s.Nk * 4 + s.lse_elems() * 4;
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "naive",
    .pass = Pass::both,
    .idea = "S and P materialised in memory (N x N per head); the textbook backward from stored P",
    .deterministic = false,
    .workspace = "2*B*H*Nq*Nk*4 (S, P fp32) + B*H*Nq*4 (D)",
    .workspace_bytes = cpu::naive_workspace,
    .cpu_forward = cpu::naive_forward,
    .cpu_backward = cpu::naive_backward,
    .cpu_scratch_bytes = cpu::naive_scratch_bytes,
    .stores_p = true,
    .axes = kGroupedHeads | kWindow,
});
