// ex2-fa2-bwd — the chapter's exercise 2: the §16.6 backward skeleton, written out. Its CPU twin
// here: the CUDA kernel of cuda.cu on the CPU, with the same tiles under the same names,
// so that each step you write here is the loop you then write in the kernel:
//
//   preprocess   D = rowsum(O ∘ dO)                                            given
//   main         worker (h, K block j) = one thread block of outer_k_kernel:
//                K_j, V_j in its tiles, dK_j = dV_j = 0
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
// The workers of a head run as the GPU runs its thread blocks: side by side, all at Q block i at
// once (kernels/common/cpu/lockstep.h). So in step 7 they add into the same rows of dQaccum at
// the same time, and dQaccum gives you atomic_add(e, x) for that: a plain dQaccum[e] += x is a
// read and a write, and loses the other workers' adds, here as on the GPU.
//
// The counters are those of atomic-dq's twin (the same schedule): 5 products a pair, Q_i, dO_i,
// LSE_i, D_i read a pair, one atomic read-modify-write of dQ_i a pair; they are given, so
// `flashlab lab bwd-ratio --versions ex2-fa2-bwd` can count FLOPs before the steps are written.
//
// Solution kept with the tests.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/cpu/bwd_prep.h"
#include "common/cpu/lockstep.h"
#include "common/cpu/tiles.h"
#include "core/dtype.h"
#include "core/version.h"

namespace flashlab::cpu {

namespace {

// One thread block of cuda.cu's outer_k_kernel: K block j of head h. Its tiles are the block's
// shared memory, row-major, with the kernel's names (Br x Bc from the options, where the kernel
// has 32 x 32); rows past the end of a block are 0:
//
//   sK, sV, sdK, sdV   Bc x d    K_j, V_j and the sums dK_j, dV_j (rows c < cols are keys)
//   sQ, sdO            Br x d    Q_i, dO_i of the Q block being visited (rows r < rows)
//   sP, sdS            Br x Bc   P and dS of the pair (i, j): element (r, c) at r * Bc + c
//   sLSE, sD           Br        LSE_i (-inf past the block) and D_i
template <class T>
struct KBlockWorker {
  const Problem& p;
  const Inputs& in;
  const Forward& fwd;
  const std::vector<T>& D;
  const CpuOptions& o;
  int64_t h, j;                   // the head and the K block
  int64_t Br = 0, Bc = 0, d = 0;  // the tiles' sizes
  int64_t c0 = 0, cols = 0;       // the block's first key and its number of keys
  bool dry = false;               // a dry run counts and computes nothing (its tiles are empty)
  std::vector<T> sK, sV, sdK, sdV, sQ, sdO, sP, sdS, sLSE, sD;
  Counters cnt;

  // K_j, V_j into the tiles; dK_j = dV_j = 0.
  KBlockWorker(const Problem& p_, const Inputs& in_, const Forward& fwd_, const std::vector<T>& D_,
               const CpuOptions& o_, int64_t h_, int64_t j_)
      : p(p_), in(in_), fwd(fwd_), D(D_), o(o_), h(h_), j(j_) {
    Br = o.Br, Bc = o.Bc, d = p.shape.d, dry = o.dry_run;
    c0 = j * Bc, cols = std::min(Bc, p.shape.Nk - c0);
    cnt.elems_read += 2 * cols * d;  // K_j, V_j
    if (dry) return;
    for (std::vector<T>* t : {&sK, &sV, &sdK, &sdV}) t->assign(Bc * d, T(0));
    for (std::vector<T>* t : {&sQ, &sdO}) t->assign(Br * d, T(0));
    for (std::vector<T>* t : {&sP, &sdS}) t->assign(Br * Bc, T(0));
    for (std::vector<T>* t : {&sLSE, &sD}) t->assign(Br, T(0));
    const int64_t k_base = h * p.shape.Nk;
    for (int64_t e = 0; e < cols * d; ++e) {
      sK[e] = static_cast<T>(in.K[(k_base + c0) * d + e]);
      sV[e] = static_cast<T>(in.V[(k_base + c0) * d + e]);
    }
  }

  // The pair (i, j): Q block i, as the lockstep calls it, in order of i.
  void visit(int64_t i, typename DQAccumulator<T>::Worker dQaccum) {
    const Shape& s = p.shape;
    const int64_t r0 = i * Br, rows = std::min(Br, s.Nq - r0);
    if (!count_tile(cnt, tile_mask(p, r0, rows, c0, cols))) return;  // no row sees block j

    cnt.elems_read += 2 * rows * d + 2 * rows;  // Q_i, dO_i, LSE_i, D_i
    cnt.matmul_flops += 5 * 2 * rows * cols * d;
    cnt.elems_read += rows * d;     // the atomic adds read dQaccum_i ...
    cnt.elems_written += rows * d;  // ... and write it
    cnt.atomic_adds += rows * d;
    if (dry) return;

    // Q_i, dO_i, LSE_i, D_i into the tiles.
    constexpr T neg_inf = -std::numeric_limits<T>::infinity();
    const int64_t q_base = h * s.Nq;  // the head's first row of Q, dO, LSE, D and dQaccum
    for (int64_t e = 0; e < Br * d; ++e) {
      const int64_t r = e / d, x = e % d;
      sQ[e] = r < rows ? static_cast<T>(in.Q[(q_base + r0 + r) * d + x]) : T(0);
      sdO[e] = r < rows ? static_cast<T>(in.dO[(q_base + r0 + r) * d + x]) : T(0);
    }
    for (int64_t r = 0; r < Br; ++r) {
      sLSE[r] = r < rows ? static_cast<T>(fwd.LSE[q_base + r0 + r]) : neg_inf;
      sD[r] = r < rows ? D[q_base + r0 + r] : T(0);
    }

    // Steps 1-2: S = scale Q_i K_j^T and P = exp(S - LSE_i); 0 where masked, past the ends, or on
    // a row that sees no key.
    const T scale = static_cast<T>(p.softmax_scale());
    for (int64_t e = 0; e < Br * Bc; ++e) {
      const int64_t r = e / Bc, c = e % Bc;
      const bool seen = r < rows && c < cols && sLSE[r] != neg_inf &&
                        p.first_key(r0 + r) <= c0 + c && c0 + c <= p.last_key(r0 + r);
      T P = 0;
      if (seen) {
        T S = 0;
        for (int64_t x = 0; x < d; ++x) S += sQ[r * d + x] * sK[c * d + x];
        P = std::exp(S * scale - sLSE[r]);
      }
      sP[e] = P;
    }

    // Step 4: dV_j += P^T dO_i.
    for (int64_t e = 0; e < Bc * d; ++e) {
      const int64_t c = e / d, x = e % d;
      T acc = 0;
      for (int64_t r = 0; r < Br; ++r) acc += sP[r * Bc + c] * sdO[r * d + x];
      sdV[e] += acc;
    }

    // Step 5: dP = dO_i V_j^T, into sdS.
    for (int64_t e = 0; e < Br * Bc; ++e) {
      const int64_t r = e / Bc, c = e % Bc;
      T dP = 0;
      for (int64_t x = 0; x < d; ++x) dP += sdO[r * d + x] * sV[c * d + x];
      sdS[e] = dP;
    }

    // Step 6: dS = P ∘ (dP − D_i).
    for (int64_t e = 0; e < Br * Bc; ++e) sdS[e] = sP[e] * (sdS[e] - sD[e / Bc]);

    // Step 7: dQaccum[i] += dS K_j, one atomic add per element: other workers add into these rows.
    for (int64_t e = 0; e < rows * d; ++e) {
      const int64_t r = e / d, x = e % d;
      T acc = 0;
      for (int64_t c = 0; c < cols; ++c) acc += sdS[r * Bc + c] * sK[c * d + x];
      dQaccum.atomic_add((q_base + r0 + r) * d + x, acc);
    }

    // Step 8: dK_j += dS^T Q_i.
    for (int64_t e = 0; e < Bc * d; ++e) {
      const int64_t c = e / d, x = e % d;
      T acc = 0;
      for (int64_t r = 0; r < Br; ++r) acc += sdS[r * Bc + c] * sQ[r * d + x];
      sdK[e] += acc;
    }
  }

  // dK_j (times the scale: S was scaled) and dV_j.
  void write(Gradients& g) {
    cnt.elems_written += 2 * cols * d;
    if (dry) return;
    const T scale = static_cast<T>(p.softmax_scale());
    const int64_t k_base = h * p.shape.Nk;
    for (int64_t e = 0; e < cols * d; ++e) {
      g.dK[(k_base + c0) * d + e] = round_to(p.dtype, static_cast<double>(scale * sdK[e]));
      g.dV[(k_base + c0) * d + e] = round_to(p.dtype, static_cast<double>(sdV[e]));
    }
  }
};

template <class T>
void backward_t(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                Gradients& g, Counters& cnt) {
  const Shape& s = p.shape;
  const Blocks qb{s.Nq, o.Br}, kb{s.Nk, o.Bc};
  prepare_gradients(p, o.dry_run, g);
  const std::vector<T> D = preprocess_D<T>(p, in, fwd, o, cnt);

  // Main: the K-block workers of one head at a time, in lockstep over its Q blocks.
  DQAccumulator<T> dQaccum(o.dry_run ? 0 : s.q_elems(), kb.count());
  for (int64_t h = 0; h < s.heads(); ++h) {
    std::vector<KBlockWorker<T>> workers;
    workers.reserve(static_cast<size_t>(kb.count()));
    for (int64_t j = 0; j < kb.count(); ++j) workers.emplace_back(p, in, fwd, D, o, h, j);
    run_in_lockstep(workers, qb.count(), dQaccum, thread_count(o, p));
    for (KBlockWorker<T>& w : workers) {
      w.write(g);
      cnt += w.cnt;
    }
  }

  // Convert: read dQaccum, write dQ.
  cnt.elems_read += s.q_elems();
  cnt.elems_written += s.q_elems();
  if (o.dry_run) return;
  const T scale = static_cast<T>(p.softmax_scale());
  const std::vector<T>& accum = dQaccum.values();
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

// D, the dQ accumulator, and the tiles of one head's workers (4 Bc d + 2 Br d + 2 Br Bc + 2 Br
// each). A plain += would also hold each worker's writes of a round; atomic adds hold nothing.
int64_t scratch_bytes(const Problem& p, const CpuOptions& o) {
  const Shape& s = p.shape;
  const int64_t Br = o.Br, Bc = o.Bc, d = s.d, workers = (s.Nk + Bc - 1) / Bc;
  const int64_t tiles = 4 * Bc * d + 2 * Br * d + 2 * Br * Bc + 2 * Br;
  return compute_bytes(p.dtype) * (s.lse_elems() + s.q_elems() + workers * tiles);
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
