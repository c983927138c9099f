#include "registry.h"

#include <array>

#include "cpu_versions.h"

namespace flashlab {

namespace {

int64_t no_workspace(const Problem&, const CpuOptions&) { return 0; }

// S and P, one fp32 N x N matrix each per head, plus D.
int64_t naive_workspace(const Problem& p, const CpuOptions&) {
  const Shape& s = p.shape;
  return 2 * s.heads() * s.Nq * s.Nk * 4 + s.lse_elems() * 4;
}

// D = rowsum(O * dO), fp32, one per query row.
int64_t recompute_workspace(const Problem& p, const CpuOptions&) {
  return p.shape.lse_elems() * 4;
}

// D plus one fp32 dQ accumulator.
int64_t atomic_dq_workspace(const Problem& p, const CpuOptions&) {
  return p.shape.lse_elems() * 4 + p.shape.q_elems() * 4;
}

// D and LSE * log2(e) plus one fp32 dQ split per K block: the CPU twin's layout, and the upper
// bound of the CUDA version, which keeps only nsplits <= ceil(Nk/Bc) splits (a few per head, enough
// to fill the GPU; its workspace_bytes gives the exact figure for the device it runs on).
int64_t deterministic_dq_workspace(const Problem& p, const CpuOptions& o) {
  const int64_t splits = (p.shape.Nk + o.Bc - 1) / o.Bc;
  return 2 * p.shape.lse_elems() * 4 + splits * p.shape.q_elems() * 4;
}

#ifdef FLASHLAB_HAVE_CUDA
#define CUDA_ENTRY(x) (&cuda::x)
#else
#define CUDA_ENTRY(x) nullptr
#endif

const std::array<VersionInfo, 5> kVersions = {{
    {"naive", "01_naive", Pass::both,
     "S and P materialised in memory (N x N per head); the textbook backward from stored P", false,
     "2*B*H*Nq*Nk*4 (S, P fp32) + B*H*Nq*4 (D)", naive_workspace, cpu::naive_forward,
     cpu::naive_backward, CUDA_ENTRY(naive), cpu::naive_scratch_bytes},
    {"tiled", "02_tiled", Pass::fwd,
     "FA2 forward: outer loop over Q blocks, online softmax, writes O and LSE only", true, "0",
     no_workspace, cpu::tiled_forward, nullptr, CUDA_ENTRY(tiled), cpu::tiled_scratch_bytes},
    {"recompute", "03_recompute", Pass::bwd,
     "no N x N storage: D = rowsum(O*dO) first, S and P recomputed from LSE; dK,dV by an outer-K "
     "pass and dQ by a separate outer-Q pass (no atomics, 7 matmuls)",
     true, "2*B*H*Nq*4 (D, LSE*log2e)", recompute_workspace, nullptr, cpu::recompute_backward,
     CUDA_ENTRY(recompute), cpu::recompute_scratch_bytes},
    {"atomic-dq", "04_atomic_dq", Pass::bwd,
     "FA2's single outer-K pass (5 matmuls): dQ partials atomically added into an fp32 buffer, "
     "then a convert pass scales and casts",
     false, "2*B*H*Nq*4 (D, LSE*log2e) + B*H*Nq*d*4 (fp32 dQ accumulator)", atomic_dq_workspace,
     nullptr, cpu::atomic_dq_backward, CUDA_ENTRY(atomic_dq), cpu::atomic_dq_scratch_bytes},
    {"deterministic-dq", "05_deterministic_dq", Pass::bwd,
     "like atomic-dq, but each K-block worker adds into its own dQ split; the convert pass sums "
     "splits in a fixed order, so dQ is bitwise reproducible",
     true,
     "2*B*H*Nq*4 (D, LSE*log2e) + S*B*H*Nq*d*4 (fp32 dQ splits; S = ceil(Nk/Bc) on the CPU, "
     "CUDA bounds S to a few per head that fill the GPU)",
     deterministic_dq_workspace, nullptr, cpu::deterministic_dq_backward,
     CUDA_ENTRY(deterministic_dq), cpu::deterministic_dq_scratch_bytes},
}};

}  // namespace

std::span<const VersionInfo> versions() { return kVersions; }

const VersionInfo* find_version(const std::string& id) {
  for (const VersionInfo& v : kVersions)
    if (id == v.id) return &v;
  return nullptr;
}

std::string to_string(Pass p) {
  switch (p) {
    case Pass::fwd: return "fwd";
    case Pass::bwd: return "bwd";
    case Pass::both: return "fwd+bwd";
  }
  return "?";
}

bool cuda_built() {
#ifdef FLASHLAB_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace flashlab
