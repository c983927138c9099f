// deterministic-dq: atomic-dq's schedule, but no two workers ever add into the same memory.
// K-block worker j writes its dQ partials into its own split (a [B,H,Nq,d] buffer per K block);
// the convert pass sums the splits of each Q block in a fixed order, j = 0, 1, ..., Tc-1:
//
//   main      worker (h, j): for every Q block i:  split[j][h][i] = dS K_j   (plain writes)
//   convert   dQ_i = round(scale * (split[0][i] + split[1][i] + ...))   (visited pairs only)
//
// Same arithmetic in the same order on every run and for any thread count: dQ is bitwise
// reproducible. The price is Tc splits of workspace and reading them all back.
#include <vector>

#include "common/cpu/bwd.h"
#include "common/cpu/kernel_counts.h"
#include "core/version.h"

namespace flashlab::cpu {

namespace {

template <class T>
struct SplitDQ {
  static constexpr bool computes_dq = true;
  std::vector<T>& splits;  // [Tc][heads][Nq][d]
  int64_t heads, Nq, d;
  void count(Counters& c, int64_t rows, int64_t dd) const { c.elems_written += rows * dd; }
  void add(int64_t h, int64_t j, int64_t r0, int64_t rows, const T* partial) {
    std::copy(partial, partial + rows * d, &splits[((j * heads + h) * Nq + r0) * d]);
  }
};

template <class T>
void deterministic_dq(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
                      Gradients& g, Counters& cnt) {
  const Shape& s = p.shape;
  const int64_t d = s.d;
  const Blocks qb{s.Nq, o.Br}, kb{s.Nk, o.Bc};
  const bool dry = o.dry_run;
  prepare_gradients(p, dry, g);
  const std::vector<T> D = preprocess_D<T>(p, in, fwd, o, cnt);
  std::vector<T> splits(dry ? 0 : static_cast<size_t>(kb.count() * s.q_elems()));
  SplitDQ<T> dq{splits, s.heads(), s.Nq, d};
  outer_k_pass(p, in, fwd.LSE, D, o, g, cnt, dq);

  // Convert: per Q block, read the splits of the visited pairs in order j = 0..Tc-1; write dQ_i.
  const T scale = static_cast<T>(p.softmax_scale());
  Counters total;
#pragma omp parallel num_threads(thread_count(o, p)) reduction(+ : total)
  {
    std::vector<T> sum(dry ? 0 : o.Br * d);
#pragma omp for collapse(2)
    for (int64_t h = 0; h < s.heads(); ++h)
      for (int64_t i = 0; i < qb.count(); ++i) {
        const int64_t r0 = qb.begin(i), rows = qb.size(i);
        if (!dry) std::fill(sum.begin(), sum.end(), T(0));
        for (int64_t j = 0; j < kb.count(); ++j) {
          if (tile_mask(p, r0, rows, kb.begin(j), kb.size(j)) == TileMask::full) continue;
          total.elems_read += rows * d;
          if (dry) continue;
          const T* split = &splits[((j * s.heads() + h) * s.Nq + r0) * d];
          for (int64_t e = 0; e < rows * d; ++e) sum[e] += split[e];
        }
        total.elems_written += rows * d;
        if (dry) continue;
        for (int64_t e = 0; e < rows * d; ++e)
          g.dQ[(h * s.Nq + r0) * d + e] = round_to(p.dtype, static_cast<double>(scale * sum[e]));
      }
  }
  cnt += total;
}

// D, the outer-K pass's tiles (the convert pass's sums are fewer) and one dQ split per K block.
int64_t deterministic_dq_scratch_bytes(const Problem& p, const CpuOptions& o) {
  const int64_t splits = Blocks{p.shape.Nk, o.Bc}.count();
  return outer_k_scratch_bytes(p, o) + compute_bytes(p.dtype) * splits * p.shape.q_elems();
}

void deterministic_dq_backward(const Problem& p, const Inputs& in, const Forward& fwd,
                               const CpuOptions& o, Gradients& g, Counters& cnt) {
  check_problem(p, o, "deterministic_dq_backward");
  if (!o.dry_run) check_backward(p, in, fwd, "deterministic_dq_backward");
  with_compute_type(p.dtype,
                    [&](auto zero) { deterministic_dq<decltype(zero)>(p, in, fwd, o, g, cnt); });
}

// D and LSE * log2(e) plus one fp32 dQ split per K block: the CPU twin's layout, and the upper
// bound of the CUDA version, which keeps only nsplits <= ceil(Nk/Bc) splits (a few per head, enough
// to fill the GPU; its workspace_bytes gives the exact figure for the device it runs on).
int64_t deterministic_dq_workspace(const Problem& p, const CpuOptions& o) {
  const int64_t splits = (p.shape.Nk + o.Bc - 1) / o.Bc;
  return 2 * p.shape.lse_elems() * 4 + splits * p.shape.q_elems() * 4;
}

// Its CUDA kernels: preprocess, the outer-K pass, the convert that sums the written splits.
std::vector<KernelCount> kernels(const Problem& p, const CpuOptions& o, bool backward,
                                 const Counters& total) {
  if (!backward) return {};
  return one_pass_backward_kernels(p, o, total, /*per_k_block_splits=*/true);
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "deterministic-dq",
    .pass = Pass::bwd,
    .idea = "like atomic-dq, but each K-block worker adds into its own dQ split; the convert pass "
            "sums splits in a fixed order, so dQ is bitwise reproducible",
    .deterministic = true,
    .workspace = "2*B*H*Nq*4 (D, LSE*log2e) + S*B*H*Nq*d*4 (fp32 dQ splits; S = ceil(Nk/Bc) on "
                 "the CPU, CUDA bounds S to a few per head that fill the GPU)",
    .workspace_bytes = cpu::deterministic_dq_workspace,
    .cpu_forward = nullptr,
    .cpu_backward = cpu::deterministic_dq_backward,
    .cpu_scratch_bytes = cpu::deterministic_dq_scratch_bytes,
    .kernel_counts = cpu::kernels,
    .axes = kGroupedHeads | kWindow,
});
