// ex1-ds — the chapter's exercise 1 (a starter): derive dS = P ∘ (dP − D) and check that D's two
// definitions agree. A backward written row by row, as the derivation reads, without tiles:
//
//   for each head h, each query row i:
//     P_i  = exp(scale q_i K^T − LSE_i)     (0 on keys the row does not see)       given
//     dP_i = dO_i V^T                                                               given
//     D_i  = Σ_j P_ij dP_ij                 D by its definition                     step 1
//     D'_i = Σ_k dO_ik O_ik                 D by the identity O_i = Σ_j P_ij v_j    step 2
//     |D_i − D'_i| small, or the run stops                                          given
//     dS_ij = P_ij (dP_ij − D_i)            the softmax backward                    step 3
//     dQ_i = scale dS_i K,  dK += scale dS_i^T q_i,  dV += P_i^T dO_i              given
//
// The derivation, to write out on paper before the code (the chapter's 16.1):
//   (a) with p = softmax(s), ∂p_j/∂s_k = p_j (δ_jk − p_k);
//   (b) dS_k = Σ_j dP_j ∂p_j/∂s_k = p_k dP_k − p_k Σ_j p_j dP_j = p_k (dP_k − D) with
//       D = Σ_j p_j dP_j;
//   (c) dP_j = dO · v_j, so D = Σ_j p_j (dO · v_j) = dO · (Σ_j p_j v_j) = dO · o: the second
//       definition, which needs one row of O and dO and no row of P.
//
// Runs in fp64 (or fp32), one head at a time; deterministic. Write the three steps where the
// FLASHLAB_TODO lines stand and delete those lines; until then `flashlab run --versions ex1-ds`
// stops at the first one and says where (exit status 1). Then check it:
//   flashlab run --versions ex1-ds --dtype fp64 -N 200 -d 32 --causal
//   flashlab gradcheck --versions ex1-ds
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "common/cpu/tiles.h"
#include "core/dtype.h"
#include "core/version.h"

namespace flashlab::cpu {

namespace {

// The unit roundoff of the storage dtype: the O that D's identity reads was rounded to it once.
double storage_roundoff(DType t) {
  switch (t) {
    case DType::f16:
      return 0x1p-11;
    case DType::bf16:
      return 0x1p-8;
    case DType::f32:
      return 0x1p-24;
    default:
      return 0x1p-53;
  }
}

// The two definitions of D must agree to a few ulps of the larger |D| terms of the row, in the
// compute type, plus what rounding O to the storage dtype moves D's identity by.
template <class T>
void check_D(T D_def, T D_id, T scale_of_terms, double storage_u, int64_t h, int64_t i) {
  const double tol = (64 * static_cast<double>(std::numeric_limits<T>::epsilon()) + 4 * storage_u) *
                     (static_cast<double>(scale_of_terms) + 1e-30);
  const double gap = std::abs(static_cast<double>(D_def) - static_cast<double>(D_id));
  if (!(gap <= tol))
    throw std::runtime_error(fmt::format(
        "ex1-ds: the two definitions of D disagree at head {}, row {}: sum_j P dP = {:.9g}, "
        "sum_k dO O = {:.9g}, |difference| {:.3g} > tolerance {:.3g}",
        h, i, static_cast<double>(D_def), static_cast<double>(D_id), gap, tol));
}

template <class T>
void backward_rows(const Problem& p, const Inputs& in, const Forward& fwd, Gradients& g) {
  const Shape& s = p.shape;
  const int64_t d = s.d, Nq = s.Nq, Nk = s.Nk;
  const T scale = static_cast<T>(p.softmax_scale());
  std::vector<T> P(Nk), dP(Nk), dS(Nk), dK(Nk * d), dV(Nk * d);
  for (int64_t h = 0; h < s.heads(); ++h) {
    std::fill(dK.begin(), dK.end(), T(0));
    std::fill(dV.begin(), dV.end(), T(0));
    const double* Q = &in.Q[h * Nq * d];
    const double* K = &in.K[h * Nk * d];
    const double* V = &in.V[h * Nk * d];
    const double* dO = &in.dO[h * Nq * d];
    [[maybe_unused]] const double* O = &fwd.O[h * Nq * d];  // the forward's O, for step 2
    for (int64_t i = 0; i < Nq; ++i) {
      const double lse = fwd.LSE[h * Nq + i];
      const int64_t last = p.causal ? std::min(Nk - 1, i + p.causal_offset()) : Nk - 1;
      for (int64_t j = 0; j < Nk; ++j) {
        T S = 0, dp = 0;
        for (int64_t k = 0; k < d; ++k) {
          S += static_cast<T>(Q[i * d + k]) * static_cast<T>(K[j * d + k]);
          dp += static_cast<T>(dO[i * d + k]) * static_cast<T>(V[j * d + k]);
        }
        const bool seen = j <= last && lse != -std::numeric_limits<double>::infinity();
        P[j] = seen ? std::exp(scale * S - static_cast<T>(lse)) : T(0);
        dP[j] = dp;
      }

      // Step 1: D by its definition, D_i = Σ_j P_ij dP_ij. Add |P_ij dP_ij| into `terms` too:
      // it sets how closely the two definitions must agree.
      T D_def = 0, terms = 0;
      FLASHLAB_TODO("step 1: D_i = sum_j P_ij dP_ij, D by its definition");

      // Step 2: D by the identity, D_i = Σ_k dO_ik O_ik (add |dO_ik O_ik| into `terms`).
      T D_id = 0;
      FLASHLAB_TODO("step 2: D_i = sum_k dO_ik O_ik, D by the identity");
      check_D(D_def, D_id, terms, storage_roundoff(p.dtype), h, i);

      // Step 3: the softmax backward, dS_ij = P_ij (dP_ij - D_i), into dS[j].
      FLASHLAB_TODO("step 3: dS_ij = P_ij (dP_ij - D_i)");

      for (int64_t k = 0; k < d; ++k) {
        T acc = 0;
        for (int64_t j = 0; j < Nk; ++j) acc += dS[j] * static_cast<T>(K[j * d + k]);
        g.dQ[(h * Nq + i) * d + k] = round_to(p.dtype, static_cast<double>(scale * acc));
      }
      for (int64_t j = 0; j < Nk; ++j)
        for (int64_t k = 0; k < d; ++k) {
          dK[j * d + k] += dS[j] * static_cast<T>(Q[i * d + k]);
          dV[j * d + k] += P[j] * static_cast<T>(dO[i * d + k]);
        }
    }
    for (int64_t e = 0; e < Nk * d; ++e) {
      g.dK[h * Nk * d + e] = round_to(p.dtype, static_cast<double>(scale * dK[e]));
      g.dV[h * Nk * d + e] = round_to(p.dtype, static_cast<double>(dV[e]));
    }
  }
}

// Counts: five products over every (row, key) pair, and every tensor read once per head except
// K and V, which each row reads whole (nothing is tiled here).
void count(const Problem& p, Counters& c) {
  const Shape& s = p.shape;
  const int64_t pairs = s.heads() * s.Nq * s.Nk;
  c.matmul_flops += 5 * 2 * pairs * s.d;
  c.elems_read += 3 * s.q_elems() + s.lse_elems() + 2 * pairs * s.d;  // Q, dO, O, LSE; K, V
  c.elems_written += s.q_elems() + 2 * s.kv_elems();                  // dQ, dK, dV
}

void backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
              Gradients& g, Counters& cnt) {
  check_problem(p, o, "ex1-ds backward");
  count(p, cnt);
  if (o.dry_run) {
    g = Gradients{};
    return;
  }
  check_inputs(p, in, "ex1-ds backward");
  const Shape& s = p.shape;
  if (in.dO.size() != static_cast<size_t>(s.q_elems()) ||
      fwd.O.size() != static_cast<size_t>(s.q_elems()) ||
      fwd.LSE.size() != static_cast<size_t>(s.lse_elems()))
    throw std::invalid_argument("ex1-ds backward: needs dO and the forward's O and LSE");
  g.dQ.resize(static_cast<size_t>(s.q_elems()));
  g.dK.resize(static_cast<size_t>(s.kv_elems()));
  g.dV.resize(static_cast<size_t>(s.kv_elems()));
  with_compute_type(p.dtype, [&](auto zero) { backward_rows<decltype(zero)>(p, in, fwd, g); });
}

int64_t no_workspace(const Problem&, const CpuOptions&) {
  return 0;
}

// What the row loop holds besides the outputs: P, dP, dS of one row and dK, dV of one head.
int64_t scratch_bytes(const Problem& p, const CpuOptions&) {
  const Shape& s = p.shape;
  return compute_bytes(p.dtype) * (3 * s.Nk + 2 * s.Nk * s.d);
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "ex1-ds",
    .pass = Pass::bwd,
    .idea = "exercise 1: derive dS = P * (dP - D) and compute D both ways (sum_j P_ij dP_ij and "
            "rowsum(O * dO)), row by row on the CPU",
    .deterministic = true,
    .workspace = "0",
    .workspace_bytes = cpu::no_workspace,
    .cpu_forward = nullptr,
    .cpu_backward = cpu::backward,
    .cpu_scratch_bytes = cpu::scratch_bytes,
});
