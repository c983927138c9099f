// Standard attention, written the textbook way: whole rows of S and P, no tiling, no online
// softmax. The same code runs in fp64 (the reference) and in float with the storage dtype's
// rounding applied where a plain implementation stores a matrix (the error budget).
//
// Rows are processed in small blocks (kRowBlock) so a row of K^T or of V, once loaded, serves
// several query rows; the inner loops run along contiguous memory so the compiler vectorises them.
#include "reference/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/fp8.h"
#include "core/packed.h"
#include "core/paged.h"

namespace flashlab::reference {

namespace {

constexpr int64_t kRowBlock = 8;   // query rows that share one pass over K^T / V
constexpr int64_t kKeyBlock = 16;  // key rows per worker in the dK, dV pass

// Small problems run on one thread: waking a team costs more than the work.
bool worth_threads(const Problem& p) {
  const Shape& s = p.shape;
  return static_cast<double>(s.heads()) * s.Nq * s.Nk * s.d >= (1 << 20);
}

void check(const Problem& p, const Inputs& in, const char* who) {
  const Shape& s = p.shape;
  if (s.packed() && (static_cast<int64_t>(s.lens_q.size()) != s.B ||
                     static_cast<int64_t>(s.lens_k.size()) != s.B))
    throw std::invalid_argument(std::string(who) + ": a packed batch has B lengths of each kind");
  if (s.B < 1 || s.H < 1 || s.Nq < 1 || s.Nk < 1 || s.d < 1)
    throw std::invalid_argument(std::string(who) + ": every dimension must be at least 1");
  if (s.kv_heads() < 1 || s.H % s.kv_heads() != 0)
    throw std::invalid_argument(std::string(who) + ": the K/V heads must divide the query heads");
  if (s.paged() && s.packed())
    throw std::invalid_argument(std::string(who) + ": a paged cache holds a dense batch");
  const auto q = static_cast<size_t>(s.q_elems()), kv = static_cast<size_t>(s.kv_elems());
  if (in.Q.size() != q || in.K.size() != kv || in.V.size() != kv)
    throw std::invalid_argument(std::string(who) + ": Q, K, V do not match the problem's shape");
  if (s.paged()) check_block_table(s, in.block_table, who);
}

// Gradients of the contiguous problem laid out in the pool of a paged cache: dK and dV of the
// slots that hold no key are 0 (nothing reads them).
Gradients grads_to_pages(const Problem& p, const std::vector<int32_t>& table, Gradients g) {
  g.dK = to_pages(p.shape, g.dK, table, 0.0);
  g.dV = to_pages(p.shape, g.dV, table, 0.0);
  return g;
}

// The plain FP8 forward's P: exp(S - m) (unnormalised, at most 1) times 2^8 is what it rounds to
// e4m3, as an FP8 kernel does (kernels/08_hopper_fp8 says why 2^8); l is summed before rounding.
constexpr double kFp8PShift = 256.0;

// x with each value rounded to e4m3 at one scale for the whole tensor (its largest magnitude on
// 448, e4m3's largest) and scaled back: what the products of a per-tensor FP8 forward see.
HostTensor per_tensor_e4m3(const HostTensor& x) {
  double amax = 0;
  for (double v : x) amax = std::max(amax, std::fabs(v));
  const double scale = amax > 0 ? amax / kE4m3Max : 1.0;
  HostTensor q(x.size());
  for (size_t i = 0; i < x.size(); ++i) q[i] = round_to_e4m3(x[i] / scale) * scale;
  return q;
}

// Rounds a value computed in Acc to the dtype a plain implementation would store it in.
template <class Acc>
Acc stored(DType t, Acc x) {
  return static_cast<Acc>(round_to(t, static_cast<double>(x)));
}

// [heads][rows][d] (double) -> [heads][d][rows] (Acc): K^T and V^T, so that S = Q K^T and
// dP = dO V^T become row updates along contiguous keys.
template <class Acc>
std::vector<Acc> transpose_heads(const HostTensor& x, int64_t heads, int64_t rows, int64_t d,
                                 bool parallel) {
  std::vector<Acc> t(x.size());
#pragma omp parallel for if (parallel)
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < d; ++k)
        t[(h * d + k) * rows + r] = static_cast<Acc>(x[(h * rows + r) * d + k]);
  return t;
}

template <class Acc>
std::vector<Acc> convert(const HostTensor& x) {
  return std::vector<Acc>(x.begin(), x.end());
}

// out[rr][c] = sum_k a[rr][k] * bt[k][c] for a block of rows (a: double rows of length d).
template <class Acc>
void rows_times(Acc* __restrict out, const double* __restrict a, const Acc* __restrict bt,
                int64_t nrows, int64_t ncols, int64_t d) {
  std::fill(out, out + nrows * ncols, Acc(0));
  for (int64_t k = 0; k < d; ++k) {
    const Acc* b = bt + k * ncols;
    for (int64_t rr = 0; rr < nrows; ++rr) {
      const Acc x = static_cast<Acc>(a[rr * d + k]);
      Acc* o = out + rr * ncols;
      for (int64_t c = 0; c < ncols; ++c) o[c] += x * b[c];
    }
  }
}

// out[rr][:] = sum_c w[rr][c] * m[c][:] (w: nrows x ncols, m: ncols x d).
template <class Acc>
void weights_times(Acc* __restrict out, const Acc* __restrict w, const Acc* __restrict m,
                   int64_t nrows, int64_t ncols, int64_t d) {
  std::fill(out, out + nrows * d, Acc(0));
  for (int64_t c = 0; c < ncols; ++c) {
    const Acc* mc = m + c * d;
    for (int64_t rr = 0; rr < nrows; ++rr) {
      const Acc x = w[rr * ncols + c];
      Acc* o = out + rr * d;
      for (int64_t k = 0; k < d; ++k) o[k] += x * mc[k];
    }
  }
}

// Forward in Acc arithmetic; P (when kept) and O rounded to `store`.
template <class Acc>
Forward forward_in(const Problem& p, const Inputs& in, bool keep_P, DType store) {
  const Shape& s = p.shape;
  const int64_t Nq = s.Nq, Nk = s.Nk, d = s.d;
  const Acc scale = static_cast<Acc>(p.softmax_scale());
  const std::vector<Acc> Kt =
      transpose_heads<Acc>(in.K, s.kv_head_count(), Nk, d, worth_threads(p));
  const std::vector<Acc> V = convert<Acc>(in.V);
  Forward f;
  f.O.assign(static_cast<size_t>(s.q_elems()), 0.0);
  f.LSE.assign(static_cast<size_t>(s.lse_elems()), 0.0);
  if (keep_P) f.P.assign(static_cast<size_t>(s.heads() * Nq * Nk), 0.0);
  const int64_t blocks = (Nq + kRowBlock - 1) / kRowBlock;

#pragma omp parallel if (worth_threads(p))
  {
    std::vector<Acc> S(kRowBlock * Nk), O(kRowBlock * d);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t h = 0; h < s.heads(); ++h)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t r0 = b * kRowBlock, nr = std::min(kRowBlock, Nq - r0);
        const int64_t kh = s.kv_of(h);  // the K/V head this query head reads
        rows_times(S.data(), &in.Q[(h * Nq + r0) * d], &Kt[kh * d * Nk], nr, Nk, d);
        for (int64_t rr = 0; rr < nr; ++rr) {
          const int64_t r = r0 + rr, first = p.first_key(r), last = p.last_key(r);
          Acc* srow = &S[rr * Nk];
          double& lse = f.LSE[h * Nq + r];
          if (first > last) {  // sees no key: P row 0, O row 0, LSE -inf
            std::fill(srow, srow + Nk, Acc(0));
            lse = -std::numeric_limits<double>::infinity();
            continue;
          }
          Acc m = -std::numeric_limits<Acc>::infinity();
          for (int64_t c = first; c <= last; ++c) m = std::max(m, srow[c] * scale);
          Acc l = 0;
          for (int64_t c = first; c <= last; ++c) {
            srow[c] = std::exp(srow[c] * scale - m);
            l += srow[c];
          }
          if (store == DType::fp8)  // P unnormalised (its largest is 1) times 2^8, in e4m3
            for (int64_t c = first; c <= last; ++c)
              srow[c] = static_cast<Acc>(round_to_e4m3(kFp8PShift * srow[c])) / (kFp8PShift * l);
          else
            for (int64_t c = first; c <= last; ++c) srow[c] = stored(store, srow[c] / l);
          std::fill(srow, srow + first, Acc(0));
          std::fill(srow + last + 1, srow + Nk, Acc(0));
          lse = static_cast<double>(m + std::log(l));
        }
        weights_times(O.data(), S.data(), &V[kh * Nk * d], nr, Nk, d);
        for (int64_t e = 0; e < nr * d; ++e)
          f.O[(h * Nq + r0) * d + e] = round_to(store, static_cast<double>(O[e]));
        if (keep_P) std::copy(S.begin(), S.begin() + nr * Nk, f.P.begin() + (h * Nq + r0) * Nk);
      }
  }
  return f;
}

// Backward from stored P in Acc arithmetic; dS and the gradients rounded to `store`. dK and dV of
// a K/V head are summed over the query heads of its group in Acc, then rounded once. with_D false
// leaves D out of dS (dS = P * dP): the half of dS that the other half, P * D, cancels.
template <class Acc>
Gradients backward_in(const Problem& p, const Inputs& in, const Forward& fwd, DType store,
                      bool with_D = true) {
  const Shape& s = p.shape;
  const int64_t Nq = s.Nq, Nk = s.Nk, d = s.d;
  if (in.dO.size() != static_cast<size_t>(s.q_elems()))
    throw std::invalid_argument("reference backward: dO does not match the problem's shape");
  if (fwd.P.size() != static_cast<size_t>(s.heads() * Nq * Nk))
    throw std::invalid_argument("reference backward: needs the forward's P (keep_P)");
  const Acc scale = static_cast<Acc>(p.softmax_scale());
  const std::vector<Acc> Vt =
      transpose_heads<Acc>(in.V, s.kv_head_count(), Nk, d, worth_threads(p));
  const std::vector<Acc> K = convert<Acc>(in.K), Q = convert<Acc>(in.Q), dO = convert<Acc>(in.dO);
  Gradients g;
  g.dQ.assign(static_cast<size_t>(s.q_elems()), 0.0);
  g.dK.assign(static_cast<size_t>(s.kv_elems()), 0.0);
  g.dV.assign(static_cast<size_t>(s.kv_elems()), 0.0);
  std::vector<Acc> P(static_cast<size_t>(Nq * Nk)), dS(static_cast<size_t>(Nq * Nk));
  std::vector<Acc> dK_acc(static_cast<size_t>(Nk * d)), dV_acc(static_cast<size_t>(Nk * d));
  const int64_t row_blocks = (Nq + kRowBlock - 1) / kRowBlock;
  const int64_t key_blocks = (Nk + kKeyBlock - 1) / kKeyBlock;

  for (int64_t kh = 0; kh < s.kv_head_count(); ++kh) {
    std::fill(dK_acc.begin(), dK_acc.end(), Acc(0));
    std::fill(dV_acc.begin(), dV_acc.end(), Acc(0));
    for (int64_t h = s.first_q_of(kh); h < s.first_q_of(kh) + s.group(); ++h) {
      std::copy(fwd.P.begin() + h * Nq * Nk, fwd.P.begin() + (h + 1) * Nq * Nk, P.begin());
      // dP = dO V^T, D = rowsum(P * dP), dS = P * (dP - D), dQ = scale dS K: by query rows.
#pragma omp parallel if (worth_threads(p))
      {
        std::vector<Acc> dQ(kRowBlock * d);
#pragma omp for schedule(dynamic)
        for (int64_t b = 0; b < row_blocks; ++b) {
          const int64_t r0 = b * kRowBlock, nr = std::min(kRowBlock, Nq - r0);
          Acc* dSb = &dS[r0 * Nk];
          rows_times(dSb, &in.dO[(h * Nq + r0) * d], &Vt[kh * d * Nk], nr, Nk, d);  // dP
          for (int64_t rr = 0; rr < nr; ++rr) {
            const Acc* prow = &P[(r0 + rr) * Nk];
            Acc* row = dSb + rr * Nk;
            Acc D = 0;
            if (with_D)
              for (int64_t c = 0; c < Nk; ++c) D += prow[c] * row[c];
            for (int64_t c = 0; c < Nk; ++c) row[c] = stored(store, prow[c] * (row[c] - D));
          }
          weights_times(dQ.data(), dSb, &K[kh * Nk * d], nr, Nk, d);
          for (int64_t e = 0; e < nr * d; ++e)
            g.dQ[(h * Nq + r0) * d + e] = round_to(store, static_cast<double>(scale * dQ[e]));
        }
        // dV += P^T dO, dK += dS^T Q: by key rows, so no two workers add into the same row.
#pragma omp for schedule(dynamic)
        for (int64_t b = 0; b < key_blocks; ++b) {
          const int64_t c0 = b * kKeyBlock, nc = std::min(kKeyBlock, Nk - c0);
          for (int64_t r = 0; r < Nq; ++r) {
            const Acc* dOr = &dO[(h * Nq + r) * d];
            const Acc* Qr = &Q[(h * Nq + r) * d];
            for (int64_t cc = 0; cc < nc; ++cc) {
              const Acc pw = P[r * Nk + c0 + cc], sw = dS[r * Nk + c0 + cc];
              Acc* v = &dV_acc[(c0 + cc) * d];
              Acc* k = &dK_acc[(c0 + cc) * d];
              for (int64_t e = 0; e < d; ++e) v[e] += pw * dOr[e];
              for (int64_t e = 0; e < d; ++e) k[e] += sw * Qr[e];
            }
          }
        }
      }
    }
    for (int64_t e = 0; e < Nk * d; ++e) {
      g.dV[kh * Nk * d + e] = round_to(store, static_cast<double>(dV_acc[e]));
      g.dK[kh * Nk * d + e] = round_to(store, static_cast<double>(scale * dK_acc[e]));
    }
  }
  return g;
}

}  // namespace

// A packed batch runs sequence by sequence (core/packed.h), each a dense problem of its own; a
// paged cache on K and V gathered to the contiguous layout (core/paged.h).
Forward forward(const Problem& p, const Inputs& in, bool keep_P) {
  check(p, in, "reference forward");
  if (p.shape.paged()) return forward(contiguous_problem(p), contiguous_inputs(p, in), keep_P);
  Forward f;
  if (p.shape.packed()) {
    forward_by_sequence(p, in, f, [&](const Problem& one, const Inputs& in1, Forward& out) {
      out = forward_in<double>(one, in1, keep_P, DType::f64);
    });
    return f;
  }
  return forward_in<double>(p, in, keep_P, DType::f64);
}

namespace {

Gradients backward_f64(const Problem& p, const Inputs& in, const Forward& fwd, bool with_D) {
  if (p.shape.paged())
    return grads_to_pages(
        p, in.block_table,
        backward_f64(contiguous_problem(p), contiguous_inputs(p, in), fwd, with_D));
  Gradients g;
  if (p.shape.packed()) {
    backward_by_sequence(
        p, in, fwd, g,
        [&](const Problem& one, const Inputs& in1, const Forward& f, Gradients& out) {
          out = backward_in<double>(one, in1, f, DType::f64, with_D);
        });
    return g;
  }
  return backward_in<double>(p, in, fwd, DType::f64, with_D);
}

}  // namespace

Gradients backward(const Problem& p, const Inputs& in, const Forward& fwd) {
  check(p, in, "reference backward");
  return backward_f64(p, in, fwd, /*with_D=*/true);
}

Gradients cancelled_terms(const Problem& p, const Inputs& in, const Forward& fwd) {
  check(p, in, "reference cancelled terms");
  return backward_f64(p, in, fwd, /*with_D=*/false);
}

Forward lowp_forward(const Problem& p, const Inputs& in, bool keep_P) {
  check(p, in, "lowp forward");
  if (p.shape.paged())
    return lowp_forward(contiguous_problem(p), contiguous_inputs(p, in), keep_P);
  // fp8: the plain FP8 forward reads e4m3 copies of Q, K and V, one scale per tensor.
  Inputs q8;
  if (p.dtype == DType::fp8)
    q8 = Inputs{per_tensor_e4m3(in.Q), per_tensor_e4m3(in.K), per_tensor_e4m3(in.V), {}, {}};
  const Inputs& x = p.dtype == DType::fp8 ? q8 : in;
  const auto dense = [keep_P](const Problem& q, const Inputs& xs) {
    if (q.dtype == DType::f64) return forward_in<double>(q, xs, keep_P, DType::f64);
    return forward_in<float>(q, xs, keep_P, q.dtype);
  };
  if (!p.shape.packed()) return dense(p, x);
  Forward f;
  forward_by_sequence(p, x, f, [&](const Problem& one, const Inputs& in1, Forward& out) {
    out = dense(one, in1);
  });
  return f;
}

Gradients lowp_backward(const Problem& p, const Inputs& in, const Forward& lowp_fwd) {
  check(p, in, "lowp backward");
  if (p.shape.paged())
    return grads_to_pages(p, in.block_table,
                          lowp_backward(contiguous_problem(p), contiguous_inputs(p, in), lowp_fwd));
  const auto dense = [](const Problem& q, const Inputs& x, const Forward& f) {
    if (q.dtype == DType::f64) return backward_in<double>(q, x, f, DType::f64);
    return backward_in<float>(q, x, f, q.dtype);
  };
  if (!p.shape.packed()) return dense(p, in, lowp_fwd);
  Gradients g;
  backward_by_sequence(p, in, lowp_fwd, g,
                       [&](const Problem& one, const Inputs& in1, const Forward& f,
                           Gradients& out) { out = dense(one, in1, f); });
  return g;
}

namespace {

// A packed batch holds its packed outputs (and P) for the whole run, and one sequence's gathered
// inputs and dense work at a time: the largest.
template <class F>
int64_t packed_peak(const Problem& p, int64_t whole, F&& one_peak) {
  int64_t most = 0;
  for_each_sequence(p, [&](const Sequence& q) {
    if (q.empty()) return;
    const Shape& o = q.problem.shape;
    most = std::max(most, 8 * (2 * o.q_elems() + 2 * o.kv_elems()) + one_peak(q.problem));
  });
  return whole + most;
}

// A paged cache: the inputs gathered to the contiguous layout, beside the contiguous problem's
// work (and, for the backward, dK and dV laid out in the pool again).
int64_t gathered_bytes(const Problem& p) {
  const Shape& s = p.shape;
  return 8 * (2 * s.q_elems() + 2 * s.B * s.kv_heads() * s.Nk * s.d);
}

}  // namespace

int64_t forward_peak_bytes(const Problem& p, int acc_bytes, bool keep_P) {
  const Shape& s = p.shape;
  if (s.paged())
    return gathered_bytes(p) + forward_peak_bytes(contiguous_problem(p), acc_bytes, keep_P);
  if (s.packed())
    return packed_peak(
        p, 8 * (s.q_elems() + s.lse_elems()) + (keep_P ? 8 * packed_p_elems(s) : 0),
        [&](const Problem& one) { return forward_peak_bytes(one, acc_bytes, keep_P); });
  const int64_t threads = worth_threads(p) ? omp_get_max_threads() : 1;
  int64_t bytes = 8 * (s.q_elems() + s.lse_elems());                    // O, LSE
  if (keep_P) bytes += 8 * s.heads() * s.Nq * s.Nk;                     // P
  bytes += acc_bytes * 2 * s.kv_elems();                                // K^T, V
  bytes += threads * acc_bytes * (kRowBlock * s.Nk + kRowBlock * s.d);  // S, O of a row block
  return bytes;
}

int64_t backward_peak_bytes(const Problem& p, int acc_bytes) {
  const Shape& s = p.shape;
  if (s.paged())
    return gathered_bytes(p) + backward_peak_bytes(contiguous_problem(p), acc_bytes) +
           8 * 2 * s.kv_elems();
  if (s.packed())
    return packed_peak(p, 8 * (s.q_elems() + 2 * s.kv_elems()), [&](const Problem& one) {
      return backward_peak_bytes(one, acc_bytes) +
             8 * one.shape.heads() * one.shape.Nq * one.shape.Nk;  // its slice of P
    });
  const int64_t threads = worth_threads(p) ? omp_get_max_threads() : 1;
  int64_t bytes = 8 * (s.q_elems() + 2 * s.kv_elems());       // dQ, dK, dV
  bytes += acc_bytes * (2 * s.kv_elems() + 2 * s.q_elems());  // V^T, K, Q, dO
  bytes += acc_bytes * 2 * s.Nq * s.Nk;                       // P, dS of one head
  bytes += acc_bytes * 2 * s.Nk * s.d;                        // dK, dV sums of one K/V head
  bytes += threads * acc_bytes * kRowBlock * s.d;             // dQ of a row block
  return bytes;
}

// Only the query heads that read the element change (one for an element of Q; the H / Hkv heads
// of the group for one of K or V), so only those heads are run, twice each. The loss difference is
// summed element by element, sum((O+ - O-) * dO), which cancels far less than subtracting two
// large sums.
double finite_difference(const Problem& p, const Inputs& in, char which, int64_t index,
                         double eps) {
  check(p, in, "finite_difference");
  const Shape& s = p.shape;
  if (s.paged()) {  // an element of the pool: the key its slot holds, or none (nothing reads it)
    int64_t contiguous = index;
    if (which == 'K' || which == 'V') {
      if (index < 0 || index >= s.kv_elems())
        throw std::invalid_argument("finite_difference: index out of range");
      const PoolRow at = pool_row(s, index / s.d);
      int64_t b = 0, j = 0;
      if (!key_of_slot(s, in.block_table, at.page, at.slot, b, j)) return 0.0;
      contiguous = ((b * s.kv_heads() + at.kvh) * s.Nk + j) * s.d + index % s.d;
    }
    return finite_difference(contiguous_problem(p), contiguous_inputs(p, in), which, contiguous,
                             eps);
  }
  if (s.packed()) {  // the element's sequence, and its place in that sequence's dense layout
    const int64_t heads = which == 'Q' ? s.H : s.kv_heads();
    const int64_t token = index / (heads * s.d), h = (index / s.d) % heads, c = index % s.d;
    std::optional<Sequence> at;  // the sequence that holds the token (one of length 0 holds none)
    for_each_sequence(p, [&](const Sequence& q) {
      const int64_t start = which == 'Q' ? q.q0 : q.k0, len = which == 'Q' ? q.len_q() : q.len_k();
      if (!at && token >= start && token < start + len) at = q;
    });
    if (index < 0 || !at) throw std::invalid_argument("finite_difference: index out of range");
    if (at->empty()) return 0.0;  // nothing reads it
    const int64_t r = token - (which == 'Q' ? at->q0 : at->k0);
    const int64_t len = which == 'Q' ? at->len_q() : at->len_k();
    return finite_difference(at->problem, sequence_inputs(p, in, *at), which,
                             (h * len + r) * s.d + c, eps);
  }
  const int64_t q_head = s.Nq * s.d, kv_head = s.Nk * s.d;
  const HostTensor* target = which == 'Q'   ? &in.Q
                             : which == 'K' ? &in.K
                             : which == 'V' ? &in.V
                                            : nullptr;
  if (target == nullptr) throw std::invalid_argument("finite_difference: which must be Q, K or V");
  if (index < 0 || index >= static_cast<int64_t>(target->size()))
    throw std::invalid_argument("finite_difference: index out of range");
  const int64_t head = index / (which == 'Q' ? q_head : kv_head);
  const int64_t local = index - head * (which == 'Q' ? q_head : kv_head);
  const int64_t first = which == 'Q' ? head : s.first_q_of(head);
  const int64_t count = which == 'Q' ? 1 : s.group();

  Problem one = p;
  one.shape.B = one.shape.H = 1;
  one.shape.Hkv = 0;
  double diff = 0;
  for (int64_t h = first; h < first + count; ++h) {
    const int64_t kh = s.kv_of(h);
    Inputs in1;
    in1.Q.assign(in.Q.begin() + h * q_head, in.Q.begin() + (h + 1) * q_head);
    in1.K.assign(in.K.begin() + kh * kv_head, in.K.begin() + (kh + 1) * kv_head);
    in1.V.assign(in.V.begin() + kh * kv_head, in.V.begin() + (kh + 1) * kv_head);
    HostTensor& x = which == 'Q' ? in1.Q : which == 'K' ? in1.K : in1.V;
    const double x0 = x[local];
    x[local] = x0 + eps;
    const HostTensor plus = forward(one, in1, false).O;
    x[local] = x0 - eps;
    const HostTensor minus = forward(one, in1, false).O;
    for (int64_t e = 0; e < q_head; ++e) diff += (plus[e] - minus[e]) * in.dO[h * q_head + e];
  }
  return diff / (2 * eps);
}

HostTensor rowsum_o_do(const Problem& p, const Inputs& in, const Forward& fwd) {
  const Shape& s = p.shape;
  HostTensor D(static_cast<size_t>(s.lse_elems()), 0.0);
  if (s.packed()) {  // O, dO [total, H, d]; D [H, total]
    const int64_t total = s.total_q();
    for (int64_t t = 0; t < total; ++t)
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t k = 0; k < s.d; ++k)
          D[h * total + t] += fwd.O[(t * s.H + h) * s.d + k] * in.dO[(t * s.H + h) * s.d + k];
    return D;
  }
  for (int64_t r = 0; r < s.lse_elems(); ++r)
    for (int64_t k = 0; k < s.d; ++k) D[r] += fwd.O[r * s.d + k] * in.dO[r * s.d + k];
  return D;
}

HostTensor rowsum_p_dp(const Problem& p, const Inputs& in, const Forward& fwd) {
  const Shape& s = p.shape;
  if (s.paged()) return rowsum_p_dp(contiguous_problem(p), contiguous_inputs(p, in), fwd);
  if (s.packed()) {
    HostTensor D(static_cast<size_t>(s.lse_elems()), 0.0);
    const int64_t total = s.total_q();
    for_each_sequence(p, [&](const Sequence& q) {
      if (q.empty()) return;
      Forward f;
      f.P.assign(fwd.P.begin() + q.p0, fwd.P.begin() + q.p0 + s.H * q.len_q() * q.len_k());
      scatter_lse(rowsum_p_dp(q.problem, sequence_inputs(p, in, q), f), total, q.q0, q.len_q(), s.H,
                  D);
    });
    return D;
  }
  if (fwd.P.size() != static_cast<size_t>(s.heads() * s.Nq * s.Nk))
    throw std::invalid_argument("rowsum_p_dp: needs the forward's P (keep_P)");
  HostTensor D(static_cast<size_t>(s.lse_elems()), 0.0);
#pragma omp parallel for if (worth_threads(p))
  for (int64_t row = 0; row < s.lse_elems(); ++row) {
    const int64_t kh = s.kv_of(row / s.Nq);
    const double* dOr = &in.dO[row * s.d];
    for (int64_t c = 0; c < s.Nk; ++c) {
      const double* v = &in.V[(kh * s.Nk + c) * s.d];
      double dP = 0;
      for (int64_t k = 0; k < s.d; ++k) dP += dOr[k] * v[k];
      D[row] += fwd.P[row * s.Nk + c] * dP;
    }
  }
  return D;
}

}  // namespace flashlab::reference
