// The list of labs: `flashlab lab list`, `lab all` and the help text are generated from it.
#include <array>

#include "all_labs.h"

namespace flashlab {

namespace {

const std::array<LabInfo, 9> kLabs = {{
    {"gradcheck",
     "Gradient check: FlashAttention backward = standard backward = finite differences",
     "梯度检查：FlashAttention 的反向 = 标准反向 = 有限差分",
     lab::gradcheck,
     {"gradcheck"},
     "the backward versions to check (default: every ladder backward)"},
    {"memory",
     "What is kept for backward: P (N x N) vs LSE (N), and the backward workspaces",
     "为了反向传播要存什么：P（N×N）vs LSE（N），以及各反向版本的工作区",
     lab::memory,
     {"kept", "workspace", "naive_peak"},
     nullptr},
    {"cost",
     "Forward + backward FLOPs and IO, standard vs FlashAttention, roofline time",
     "前向 + 反向的运算量与读写：标准 vs FlashAttention，roofline 时间",
     lab::cost,
     {"cost"},
     nullptr},
    {"causal",
     "Causal masking: fully masked blocks are skipped",
     "因果掩码：整块被掩码的块直接跳过",
     lab::causal,
     {"causal"},
     nullptr},
    {"bwd-ratio",
     "Exercise 2: measured backward/forward time vs the 2.5x FLOP ratio",
     "练习 2：实测反向 / 前向耗时比 vs 2.5 倍的 FLOPs 比",
     lab::bwd_ratio,
     {"bwd_ratio", "bwd_ratio_hopper"},
     "the backward to time (default: atomic-dq)"},
    {"no-lse",
     "Exercise 3: what the backward costs without a stored LSE",
     "练习 3：不存 LSE 时反向要多花多少",
     lab::no_lse,
     {"no_lse"},
     "the backward without LSE to count (default: the lab's own)"},
    {"determinism",
     "Atomic dQ vs deterministic dQ: run-to-run spread, memory, time",
     "atomic dQ vs 确定性 dQ：多次运行的差异、显存、耗时",
     lab::determinism,
     {"determinism"},
     nullptr},
    {"hopper",
     "The Hopper rung's ideas, each switched off in turn: what each buys on this GPU",
     "Hopper 这一级的各个想法逐个关掉：每个想法在这块 GPU 上值多少",
     lab::hopper,
     {"ablation"},
     nullptr},
    {"io",
     "The lecture's open question, measured: HBM traffic, L2 hits and the roofline, kernel by "
     "kernel",
     "讲义留下的问题，实测：显存流量、L2 命中与 roofline，逐个内核",
     lab::io,
     {"io", "kernels", "ratio", "ceilings", "roofline"},
     nullptr},
}};

}  // namespace

std::span<const LabInfo> labs() {
  return kLabs;
}

const LabInfo* find_lab(const std::string& name) {
  for (const LabInfo& l : kLabs)
    if (name == l.name) return &l;
  return nullptr;
}

}  // namespace flashlab
