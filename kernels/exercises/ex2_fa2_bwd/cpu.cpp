// ex2-fa2-bwd — the chapter's exercise 2 (a starter): the §16.6 backward skeleton, written out. Its
// CPU twin here; the CUDA kernel in cuda.cu walks the same schedule:
//
//   preprocess   D = rowsum(O ∘ dO)                                            given
//   main         worker (h, K block j): K_j, V_j on chip, dK_j = dV_j = 0
//                  for each Q block i that sees block j:
//                    1-2  S = scale Q_i K_j^T,  P = exp(S − LSE_i)             given
//                    4    dV_j += P^T dO_i                                     step 4
//                    5    dP = dO_i V_j^T                                      step 5
//                    6    dS = P ∘ (dP − D_i)                                  step 6
//                    7    dQaccum[i] += dS K_j    (atomic adds: workers race)  step 7
//                    8    dK_j += dS^T Q_i                                     step 8
//                  write dK_j (× scale), dV_j
//   convert      dQ = scale · dQaccum                                         given
//
// The counters are those of atomic-dq's twin (the same schedule): 5 products a pair, Q_i, dO_i,
// LSE_i, D_i read a pair, one atomic read-modify-write of dQ_i a pair; they are given, so
// `flashlab lab bwd-ratio --versions ex2-fa2-bwd` can count FLOPs before the steps are written.
//
// The starter: write steps 4 to 8 where the FLASHLAB_TODO lines stand and delete those lines;
// until then `flashlab run --versions ex2-fa2-bwd` stops at the first one (exit status 1). The
// helpers are in kernels/common/cpu/tiles.h: mm_nn (C += A B) and mm_tn (C += A^T B), row-major
// with explicit leading dimensions; P is rows x cols, Q_i and dO_i are rows x d (q.Q, q.dO),
// K_j is cols x d (k.K) and V_j^T is d x cols (k.Vt).
#include <atomic>
#include <exception>
#include <vector>

#include "common/cpu/bwd.h"
#include "core/version.h"

namespace flashlab::cpu {

namespace {

template <class T>
void backward_t(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                Gradients& g, Counters& cnt) {
  const Shape& s = p.shape;
  const int64_t d = s.d;
  const Blocks qb{s.Nq, o.Br}, kb{s.Nk, o.Bc};
  const bool dry = o.dry_run;
  const T scale = static_cast<T>(p.softmax_scale());
  prepare_gradients(p, dry, g);
  const std::vector<T> D = preprocess_D<T>(p, in, fwd, o, cnt);
  std::vector<T> accum(dry ? 0 : static_cast<size_t>(s.q_elems()), T(0));
  Counters total;
  std::exception_ptr failure;  // an exception must not leave the parallel region

#pragma omp parallel num_threads(thread_count(o, p)) reduction(+ : total)
  {
    const int64_t Br = dry ? 0 : o.Br, Bc = dry ? 0 : o.Bc, dd = dry ? 0 : d;
    QBlock<T> q(Br, dd);
    KBlock<T> k(Bc, dd);
    std::vector<T> P(Br * Bc), dS(Br * Bc), dQ(Br * dd), dK(Bc * dd), dV(Bc * dd);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t h = 0; h < s.heads(); ++h)
      for (int64_t j = 0; j < kb.count(); ++j) {
        try {
          const int64_t c0 = kb.begin(j), cols = kb.size(j);
          total.elems_read += 2 * cols * d;  // K_j, V_j
          if (!dry) {
            k.load(p, in, h, c0, cols);
            std::fill(dK.begin(), dK.end(), T(0));
            std::fill(dV.begin(), dV.end(), T(0));
          }
          for (int64_t i = 0; i < qb.count(); ++i) {
            const int64_t r0 = qb.begin(i), rows = qb.size(i);
            const TileMask mask = tile_mask(p, r0, rows, c0, cols);
            if (!count_tile(total, mask)) continue;
            total.elems_read += 2 * rows * d + 2 * rows;  // Q_i, dO_i, LSE_i, D_i
            total.matmul_flops += 5 * 2 * rows * cols * d;
            total.elems_read += rows * d;     // the atomic adds read dQaccum_i ...
            total.elems_written += rows * d;  // ... and write it
            total.atomic_adds += rows * d;
            if (dry) continue;
            q.load(p, in, fwd.LSE, D, h, r0, rows);
            recompute_P(P.data(), q, k, rows, cols, p, mask, r0, c0);  // steps 1-2

            // Step 4: dV_j += P^T dO_i (dV is cols x d).
            FLASHLAB_TODO("step 4: dV_j += P^T dO_i");

            // Step 5: dP = dO_i V_j^T, rows x cols (write it into dS; step 6 overwrites it).
            FLASHLAB_TODO("step 5: dP = dO_i V_j^T");

            // Step 6: dS = P ∘ (dP − D_i); row r's D_i is q.D[r].
            FLASHLAB_TODO("step 6: dS = P * (dP - D_i)");

            // Step 7: dQaccum[i] += dS K_j. Compute the rows x d partial into dQ, then add each
            // element into accum[(h * s.Nq + r0) * d + e] with
            // std::atomic_ref<T>(...).fetch_add(..., std::memory_order_relaxed): other workers
            // add into the same rows at the same time.
            FLASHLAB_TODO("step 7: dQaccum[i] += dS K_j, by atomic adds");

            // Step 8: dK_j += dS^T Q_i (dK is cols x d).
            FLASHLAB_TODO("step 8: dK_j += dS^T Q_i");
          }
          total.elems_written += 2 * cols * d;  // dK_j, dV_j
          if (dry) continue;
          for (int64_t e = 0; e < cols * d; ++e) {
            g.dK[(h * s.Nk + c0) * d + e] = round_to(p.dtype, static_cast<double>(scale * dK[e]));
            g.dV[(h * s.Nk + c0) * d + e] = round_to(p.dtype, static_cast<double>(dV[e]));
          }
        } catch (...) {
#pragma omp critical
          if (!failure) failure = std::current_exception();
        }
      }
  }
  if (failure) std::rethrow_exception(failure);
  cnt += total;

  // Convert: read dQaccum, write dQ.
  cnt.elems_read += s.q_elems();
  cnt.elems_written += s.q_elems();
  if (dry) return;
  for (int64_t e = 0; e < s.q_elems(); ++e)
    g.dQ[e] = round_to(p.dtype, static_cast<double>(scale * accum[e]));
}

void backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
              Gradients& g, Counters& cnt) {
  check_problem(p, o, "ex2-fa2-bwd backward");
  if (!o.dry_run) check_backward(p, in, fwd, "ex2-fa2-bwd backward");
  with_compute_type(p.dtype, [&](auto zero) { backward_t<decltype(zero)>(p, in, fwd, o, g, cnt); });
}

// D and one fp32 dQ accumulator.
int64_t workspace_bytes(const Problem& p, const CpuOptions&) {
  return p.shape.lse_elems() * 4 + p.shape.q_elems() * 4;
}

// atomic-dq's: D, each thread's tiles of the outer-K pass, and the dQ accumulator.
int64_t scratch_bytes(const Problem& p, const CpuOptions& o) {
  return outer_k_scratch_bytes(p, o) + compute_bytes(p.dtype) * p.shape.q_elems();
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "ex2-fa2-bwd",
    .pass = Pass::bwd,
    .idea = "exercise 2: the chapter's 16.6 backward skeleton in plain CUDA (outer K, inner Q, "
            "D preprocess, atomic dQ) and its CPU twin; then time it with lab bwd-ratio",
    .deterministic = false,
    .workspace = "B*H*Nq*4 (D) + B*H*Nq*d*4 (fp32 dQ accumulator)",
    .workspace_bytes = cpu::workspace_bytes,
    .cpu_forward = nullptr,
    .cpu_backward = cpu::backward,
    .cpu_scratch_bytes = cpu::scratch_bytes,
});
