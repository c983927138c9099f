// What every CPU twin shares: the block grid over a sequence, the mask test of a tile, tile
// loads from the host tensors ("HBM") into local arrays ("on chip"), and the two tile products.
//
//            K block j (Bc keys)
//          +-----+-----+---+
//  Q block | S_ij| ... |   |   rows [i*Br, i*Br + rows), cols [j*Bc, j*Bc + cols);
//  i (Br)  +-----+-----+---+   the last block in each direction may be short (ragged N).
//          | ... |     |   |
//
// The products are written as row updates along contiguous memory (c[j] += a * b[j]) so that the
// compiler vectorises them without reassociating sums: results do not depend on the thread count.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/problem.h"

namespace flashlab::cpu {

// Per-thread counters are summed at the end of a parallel region, so totals are exact.
#pragma omp declare reduction(+ : Counters : omp_out += omp_in)

// A length n cut into blocks of b; the last block may be shorter.
struct Blocks {
  int64_t n, b;
  int64_t count() const { return (n + b - 1) / b; }
  int64_t begin(int64_t t) const { return t * b; }
  int64_t size(int64_t t) const { return std::min(b, n - t * b); }
};

// How the mask (causal, window) meets a tile: not at all, across it, or over all of it.
enum class TileMask { none, partial, full };

// Row by row (rows are few): full when no row sees any key of the tile, none when every row sees
// all of them (Problem::first_key and last_key say which keys a row sees).
inline TileMask tile_mask(const Problem& p, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  if (!p.causal && !p.windowed()) return TileMask::none;
  const int64_t c1 = c0 + cols - 1;
  bool any = false, all = true;
  for (int64_t r = r0; r < r0 + rows; ++r) {
    const int64_t lo = p.first_key(r), hi = p.last_key(r);
    any = any || (std::max(lo, c0) <= std::min(hi, c1));
    all = all && lo <= c0 && hi >= c1;
  }
  return !any ? TileMask::full : all ? TileMask::none : TileMask::partial;
}

// Counts a tile of the loop as skipped (the mask covers all of it) or computed; true when the
// tile has to be computed.
inline bool count_tile(Counters& c, TileMask mask) {
  if (mask == TileMask::full) {
    ++c.tiles_skipped;
    return false;
  }
  ++c.tiles_computed;
  return true;
}

// Threads for a twin's parallel loops: options.threads when set; otherwise OpenMP's default,
// except for dry runs and small problems, where waking threads costs more than the work.
inline int thread_count(const CpuOptions& o, const Problem& p) {
  if (o.threads > 0) return o.threads;
  const Shape& s = p.shape;
  const double work = static_cast<double>(s.heads()) * s.Nq * s.Nk * s.d;
  return o.dry_run || work < (1 << 20) ? 1 : omp_get_max_threads();
}

// The checks every twin makes before it allocates anything.
inline void check_problem(const Problem& p, const CpuOptions& o, const char* who) {
  const Shape& s = p.shape;
  if (s.packed())  // a twin sees one sequence at a time: core/packed.h cuts the batch
    throw std::invalid_argument(
        std::string(who) + ": a packed batch runs sequence by sequence (flashlab::cpu_forward)");
  if (s.B < 1 || s.H < 1 || s.Nq < 1 || s.Nk < 1 || s.d < 1)
    throw std::invalid_argument(std::string(who) + ": every dimension must be at least 1");
  if (s.kv_heads() < 1 || s.H % s.kv_heads() != 0)
    throw std::invalid_argument(std::string(who) + ": the K/V heads must divide the query heads");
  if (o.Br < 1 || o.Bc < 1)
    throw std::invalid_argument(std::string(who) + ": tile sizes Br and Bc must be at least 1");
}

inline void check_inputs(const Problem& p, const Inputs& in, const char* who) {
  const Shape& s = p.shape;
  const auto q = static_cast<size_t>(s.q_elems()), kv = static_cast<size_t>(s.kv_elems());
  if (in.Q.size() != q || in.K.size() != kv || in.V.size() != kv)
    throw std::invalid_argument(std::string(who) + ": Q, K, V do not match the problem's shape");
}

// fp64 problems are computed in double, every other dtype in float.
template <class F>
void with_compute_type(DType t, F&& f) {
  if (t == DType::f64)
    f(double{});
  else
    f(float{});
}

// Bytes of one element of the type with_compute_type picks: what a twin's own buffers hold.
inline int64_t compute_bytes(DType t) {
  return t == DType::f64 ? sizeof(double) : sizeof(float);
}

// rows x d block of a host tensor -> local array (row-major, d wide).
template <class T>
void load_rows(T* __restrict dst, const double* __restrict src, int64_t rows, int64_t d) {
  for (int64_t e = 0; e < rows * d; ++e) dst[e] = static_cast<T>(src[e]);
}

// rows x d block of a host tensor -> its transpose, d x rows.
template <class T>
void load_transposed(T* __restrict dst, const double* __restrict src, int64_t rows, int64_t d) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < d; ++k) dst[k * rows + r] = static_cast<T>(src[r * d + k]);
}

// The one tile product every twin uses: C (m x n) += A (m x k) * B (k x n), where A is read
// through two strides, a(i, p) = A[i * ars + p * acs], so that the same loop also gives A^T * B.
// C is cut into R x W micro-tiles held in registers (W = two AVX2 vectors) while p runs over k:
//
//        W columns of B (contiguous)             each a(i, p) is one broadcast scalar,
//   p -> [b b b b ... b]                          each B row chunk is loaded once for R rows,
//   acc[r][:] += a(i + r, p) * b[:]  r < R        and acc stays in registers until the end.
//
// Every element of C sums its k products in the order p = 0, 1, ...: the result depends only on
// the shapes, never on threads.
// Four lanes of double or eight of float: one AVX2 register (GCC/Clang vector extension).
template <class T>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(32)));
};
template <class T>
using Vec = typename VecOf<T>::type;

template <class T>
inline Vec<T> load_vec(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <int R, class T>
inline void gemm_micro(T* __restrict C, int64_t ldc, const T* __restrict A, int64_t ars,
                       int64_t acs, const T* __restrict B, int64_t ldb, int64_t k) {
  constexpr int L = sizeof(Vec<T>) / sizeof(T);
  Vec<T> acc[R][2] = {};
  for (int64_t p = 0; p < k; ++p) {
    const Vec<T> b0 = load_vec(B + p * ldb), b1 = load_vec(B + p * ldb + L);
    for (int r = 0; r < R; ++r) {
      const T a = A[r * ars + p * acs];
      acc[r][0] += a * b0;
      acc[r][1] += a * b1;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) {
      Vec<T> c = load_vec(C + r * ldc + h * L) + acc[r][h];
      std::memcpy(C + r * ldc + h * L, &c, sizeof c);
    }
}

template <class T>
void gemm(T* __restrict C, int64_t ldc, const T* __restrict A, int64_t ars, int64_t acs,
          const T* __restrict B, int64_t ldb, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t W = 2 * sizeof(Vec<T>) / sizeof(T), R = 4;
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    int64_t i = 0;
    for (; i + R <= m; i += R)
      gemm_micro<R>(C + i * ldc + j, ldc, A + i * ars, ars, acs, B + j, ldb, k);
    for (; i < m; ++i) gemm_micro<1>(C + i * ldc + j, ldc, A + i * ars, ars, acs, B + j, ldb, k);
  }
  if (j == n) return;
  for (int64_t i = 0; i < m; ++i)  // the last n % W columns
    for (int64_t jj = j; jj < n; ++jj) {
      T sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += A[i * ars + p * acs] * B[p * ldb + jj];
      C[i * ldc + jj] += sum;
    }
}

// C (m x n) += A (m x k) * B (k x n); each with its own row stride (ld).
template <class T>
void mm_nn(T* C, int64_t ldc, const T* A, int64_t lda, const T* B, int64_t ldb, int64_t m,
           int64_t n, int64_t k) {
  gemm(C, ldc, A, lda, 1, B, ldb, m, n, k);
}

// C (n x k) += A^T * B with A (m x n), B (m x k): dV += P^T dO and dK += dS^T Q.
template <class T>
void mm_tn(T* C, int64_t ldc, const T* A, int64_t lda, const T* B, int64_t ldb, int64_t m,
           int64_t n, int64_t k) {
  gemm(C, ldc, A, 1, lda, B, ldb, n, k, m);
}

// x[c] = exp(x[c] - shift) along a row: the softmax's exponentials. Double rows use std::exp.
// Float rows use a vectorised expf (Cody-Waite reduction x = n ln2 + r, a degree-6 polynomial for
// e^r, 2^n from the exponent bits), within 2 ulp of std::exp, and exactly 0 below -87.3 (so -inf,
// the mask, gives 0).
inline void exp_shifted(double* x, int64_t n, double shift) {
  for (int64_t c = 0; c < n; ++c) x[c] = std::exp(x[c] - shift);
}

inline void exp_shifted(float* x, int64_t n, float shift) {
  using V = Vec<float>;
  typedef int32_t VI __attribute__((vector_size(32)));
  constexpr int L = 8;
  int64_t c = 0;
  for (; c + L <= n; c += L) {
    V v = load_vec(x + c) - shift;
    const VI dead = v < -87.3f;       // e^v underflows (or v = -inf): result 0
    v = dead ? V{} : v;               // keep the arithmetic below finite
    const V big = V{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const V k = (v * 1.44269504088896341f + big) - big;       // n = round(v / ln 2)
    const V r = (v - k * 0.693359375f) + k * 2.12194440e-4f;  // v - n ln2, in two parts
    V p = V{} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const VI bits = (__builtin_convertvector(k, VI) + 127) << 23;  // 2^n
    V two_n;
    std::memcpy(&two_n, &bits, sizeof two_n);
    const V e = dead ? V{} : p * two_n;
    std::memcpy(x + c, &e, sizeof e);
  }
  for (; c < n; ++c) x[c] = std::exp(x[c] - shift);
}

// Multiplies S by the softmax scale and sets the keys a row may not see to -inf.
template <class T>
void scale_and_mask(T* S, int64_t rows, int64_t cols, T scale, TileMask mask, const Problem& p,
                    int64_t r0, int64_t c0) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    T* s = S + r * cols;
    for (int64_t c = 0; c < cols; ++c) s[c] *= scale;
    if (mask == TileMask::partial) {  // the row sees columns [lo, hi] of the tile
      const int64_t lo = std::clamp<int64_t>(p.first_key(r0 + r) - c0, 0, cols);
      const int64_t hi = std::clamp<int64_t>(p.last_key(r0 + r) - c0 + 1, lo, cols);
      for (int64_t c = 0; c < lo; ++c) s[c] = neg_inf;
      for (int64_t c = hi; c < cols; ++c) s[c] = neg_inf;
    }
  }
}

}  // namespace flashlab::cpu
