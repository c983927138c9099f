// Lab "gradcheck" — the lecture's demo 1 (N = 48, d = 16, blocks 16 x 12, fp64, causal and not,
// grouped heads with a window, and a packed batch of grouped heads): the tiled forward's O against the reference, every CPU
// backward against the standard backward from stored P, and all of them against central finite
// differences on 18 random elements.
// The numbers come from run_gradcheck (gradcheck_run.h); this file judges them and writes the
// report.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "gradcheck_run.h"
#include "labs/common/lab_util.h"
#include "labs/lab.h"
#include "reference/attention.h"
#include "util/error.h"

namespace flashlab::lab {

namespace {

// Bounds of acceptance: fp64 tile loops against the fp64 reference, and central differences with
// eps = 1e-6 (truncation ~eps^2, rounding ~1e-16/eps).
constexpr double kFwdBound = 1e-14, kBwdBound = 1e-13, kFdBound = 1e-7;

// max |rowsum(O*dO) - rowsum(P*dP)| over the rows: the identity that lets D be computed first.
double d_identity_gap(const GradcheckConfig& c, bool causal) {
  Problem p = make_problem(1, c.N, c.d, causal, DType::f64);
  const Inputs in = make_inputs(p, c.seed);
  const Forward f = reference::forward(p, in, true);
  const HostTensor a = reference::rowsum_o_do(p, in, f), b = reference::rowsum_p_dp(p, in, f);
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

Report gradcheck(const LabOptions& o) {
  GradcheckConfig c;
  c.seed = o.seed;
  const std::vector<const VersionInfo*> chosen =
      o.versions.empty() ? backward_versions() : o.versions;
  for (const VersionInfo* v : chosen)
    if (!v->cpu_backward)
      throw UsageError(fmt::format("version '{}' has no backward to check", v->id));
  const std::vector<GradcheckCase> cases = run_gradcheck(c, chosen);

  Report r;
  r.command = "lab gradcheck";
  r.config = {
      {"N", c.N},
      {"d", c.d},
      {"Br", c.Br},
      {"Bc", c.Bc},
      {"dtype", "fp64"},
      {"seed", c.seed},
      {"fd_elements", 3 * c.per_tensor},
      {"versions", ids_of(chosen)},
      {"eps", c.eps},
      {"grouped", {{"H", c.H}, {"Hkv", c.Hkv}, {"window", {c.window_left, c.window_right}}}},
      {"packed", {{"H", c.H}, {"Hkv", c.Hkv}, {"seqlens", c.seqlens}}},
      {"bounds", {{"forward_O", kFwdBound}, {"vs_standard", kBwdBound}, {"vs_fd", kFdBound}}}};

  Table t{
      "gradcheck",
      zh(o) ? fmt::format("梯度检查（N = {}，d = {}，块 {}×{}，FP64）", c.N, c.d, c.Br, c.Bc)
            : fmt::format("Gradient check (N = {}, d = {}, blocks {}×{}, fp64)", c.N, c.d, c.Br,
                          c.Bc),
      {col("causal", "causal"),
       col("problem",
           tr(o, "heads (H/Hkv), window or packed lengths", "头（H/Hkv）、窗口或打包长度")),
       col("version", tr(o, "backward", "反向版本")),
       col("fwd_O", tr(o, "forward O vs reference", "前向 O 的差"), "", "{:.1e}"),
       col("vs_standard",
           tr(o, "vs standard backward (max over dQ, dK, dV)", "vs 标准反向（dQ、dK、dV 最大差）"),
           "", "{:.1e}"),
       col("vs_fd",
           zh(o) ? fmt::format("vs 有限差分（{} 个随机元素）", 3 * c.per_tensor)
                 : fmt::format("vs finite differences ({} random elements)", 3 * c.per_tensor),
           "", "{:.1e}"),
       col("within_bounds", tr(o, "within bounds", "在界内"))},
      {}};

  double worst_fwd = 0, worst_std = 0, worst_fd = 0;
  std::vector<std::string> failures, unfinished;
  for (const GradcheckCase& k : cases) {
    const bool fwd_ok = k.fwd_max_abs <= kFwdBound;
    worst_fwd = std::max(worst_fwd, k.fwd_max_abs);
    worst_fd = std::max(worst_fd, k.standard_vs_fd);
    const std::string where =
        fmt::format("causal={}{}", k.causal, k.problem.empty() ? "" : ", " + k.problem);
    t.rows.push_back({k.causal, k.problem, "standard", k.fwd_max_abs, nullptr, k.standard_vs_fd,
                      fwd_ok && k.standard_vs_fd <= kFdBound});
    if (!fwd_ok) failures.push_back(fmt::format("forward O ({}): {:.1e}", where, k.fwd_max_abs));
    if (k.standard_vs_fd > kFdBound)
      failures.push_back(fmt::format("standard vs FD ({}): {:.1e}", where, k.standard_vs_fd));
    for (const GradcheckVersion& v : k.versions) {
      if (!v.not_implemented.empty()) {
        t.rows.push_back({k.causal, k.problem, v.id, k.fwd_max_abs, nullptr, nullptr, false});
        const std::string line = fmt::format("FAIL {}: {}", v.id, v.not_implemented);
        if (std::find(unfinished.begin(), unfinished.end(), line) == unfinished.end())
          unfinished.push_back(line);
        continue;
      }
      const bool ok = fwd_ok && v.max_vs_standard <= kBwdBound && v.max_vs_fd <= kFdBound;
      t.rows.push_back(
          {k.causal, k.problem, v.id, k.fwd_max_abs, v.max_vs_standard, v.max_vs_fd, ok});
      worst_std = std::max(worst_std, v.max_vs_standard);
      worst_fd = std::max(worst_fd, v.max_vs_fd);
      if (v.max_vs_standard > kBwdBound)
        failures.push_back(
            fmt::format("{} vs standard ({}): {:.1e}", v.id, where, v.max_vs_standard));
      if (v.max_vs_fd > kFdBound)
        failures.push_back(fmt::format("{} vs FD ({}): {:.1e}", v.id, where, v.max_vs_fd));
    }
  }
  r.tables.push_back(std::move(t));
  r.ok = failures.empty() && unfinished.empty();
  r.version_ids = {"tiled"};
  for (const VersionInfo* v : chosen) r.version_ids.push_back(v->id);
  r.figures["forward_O_max"] = {{"value", worst_fwd}, {"unit", ""}};
  r.figures["bwd_vs_standard_max"] = {{"value", worst_std}, {"unit", ""}};
  r.figures["vs_fd_max"] = {{"value", worst_fd}, {"unit", ""}};

  const double gap = std::max(d_identity_gap(c, false), d_identity_gap(c, true));
  r.figures["D_identity_gap"] = {{"value", gap}, {"unit", ""}};

  // What the table shows, said only when it shows it: agreement claims follow the verdict.
  bool std_ok = worst_std <= kBwdBound && worst_fwd <= kFwdBound, fd_ok = worst_fd <= kFdBound;
  for (const std::string& f : failures) {
    std_ok = std_ok && f.find("vs standard") == std::string::npos;
    fd_ok = fd_ok && f.find("vs FD") == std::string::npos;
  }
  if (std_ok && unfinished.empty())
    r.observations.push_back(
        zh(o) ? fmt::format("FlashAttention 的反向只用了 Q、K、V、O、dO 和每行一个 L = m + log "
                            "l：P_ij = exp(S_ij − L_i) 在片上重算出来，"
                            "和标准写法存下的 P 一样，所以梯度也一样：各版本和标准反向的最大差 "
                            "{:.1e}（界 {:.0e}），前向 O 的差 {:.1e}。",
                            worst_std, kBwdBound, worst_fwd)
              : fmt::format(
                    "FlashAttention's backward uses only Q, K, V, O, dO and one L = m + log l per "
                    "row: P_ij = exp(S_ij − L_i) recomputed on chip is the P the standard path "
                    "stored, so the gradients agree: every version is within {:.1e} of the "
                    "standard backward (bound {:.0e}), the forward O within {:.1e}.",
                    worst_std, kBwdBound, worst_fwd));
  else if (!std_ok)
    r.observations.push_back(
        zh(o) ? fmt::format("有版本的梯度和标准反向不一致（最大差 {:.1e}，界 {:.0e}）：见下面的"
                            "“超出界限”。",
                            worst_std, kBwdBound)
              : fmt::format("Some version's gradients disagree with the standard backward (up to "
                            "{:.1e}, bound {:.0e}): see OUT OF BOUNDS below.",
                            worst_std, kBwdBound));
  if (fd_ok && unfinished.empty())
    r.observations.push_back(
        zh(o) ? fmt::format("有限差分的误差最大 {:.1e}（中心差分的截断误差 + 舍入，步长 {:.0e}；界 "
                            "{:.0e}），说明反向的公式本身是对的。",
                            worst_fd, c.eps, kFdBound)
              : fmt::format(
                    "Finite differences agree to {:.1e} at most (truncation of the central "
                    "difference plus rounding, step {:.0e}; bound {:.0e}): the backward formulas "
                    "themselves are right.",
                    worst_fd, c.eps, kFdBound));
  else if (!fd_ok)
    r.observations.push_back(
        zh(o) ? fmt::format("有限差分和反向的差最大 {:.1e}，超过界 {:.0e}：反向的公式有错，"
                            "见下面的“超出界限”。",
                            worst_fd, kFdBound)
              : fmt::format("Finite differences disagree with a backward by up to {:.1e} "
                            "(bound {:.0e}): its formulas are wrong; see OUT OF BOUNDS below.",
                            worst_fd, kFdBound));
  r.observations.push_back(
      zh(o)
          ? fmt::format(
                "关键的一步是 dS = P ∘ (dP − D)，D_i = Σ_j dP_ij P_ij。直接算 D 要用整行 "
                "P；FlashAttention 用恒等式 "
                "D_i = Σ dO_i ∘ O_i，只需要 O 和 dO 的一行——这样 D 可以在反向开始前一次算好。"
                "两种算法在这里的最大差 {:.1e}。",
                gap)
          : fmt::format("The key step is dS = P ∘ (dP − D) with D_i = Σ_j dP_ij P_ij. Computing D "
                        "directly needs a whole row of P; FlashAttention uses the identity D_i = Σ "
                        "dO_i ∘ O_i, which needs one row of O and dO, so D is computed once before "
                        "the backward starts. The two agree here to {:.1e}.",
                        gap));
  if (std_ok && fd_ok && unfinished.empty())
    r.observations.push_back(
        zh(o) ? fmt::format("第三组是 {} 个查询头共享 {} 个 K/V 头、窗口 ({}, {}) "
                            "加因果掩码：dK、dV 是同组各查询头的"
                            "梯度之和，窗口外的键 P = 0；有限差分在这里同样吻合。",
                            c.H, c.Hkv, c.window_left, c.window_right)
              : fmt::format(
                    "The third case has {} query heads over {} K/V heads and a window ({}, {}) "
                    "under the causal mask: dK and dV sum over each group's query heads, and "
                    "keys outside the window have P = 0; finite differences agree there too.",
                    c.H, c.Hkv, c.window_left, c.window_right));
  if (std_ok && fd_ok && unfinished.empty()) {
    const std::string lens = fmt::format("{}", fmt::join(c.seqlens, ", "));
    r.observations.push_back(
        zh(o) ? fmt::format("第四组是一个打包批次（长度 {}，张量按 token 排列 [tokens, H, d]），"
                            "同样是分组头加因果掩码：每条序列的掩码对齐到它自己的最后一个键，"
                            "长度为 0 的序列没有梯度；有限差分同样吻合。",
                            lens)
              : fmt::format("The fourth case is a packed batch (lengths {}, tensors laid out by "
                            "token, [tokens, H, d]) with the same grouped heads under the causal "
                            "mask: each sequence's mask is aligned to its own last key, and a "
                            "sequence of length 0 has no gradient; finite differences agree there "
                            "too.",
                            lens));
  }
  for (const std::string& f : failures)
    r.observations.push_back((zh(o) ? "超出界限：" : "OUT OF BOUNDS: ") + f);
  for (const std::string& f : unfinished) r.observations.push_back(f);
  return r;
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "gradcheck",
    .title_en = "Gradient check: FlashAttention backward = standard backward = finite differences",
    .title_zh = "梯度检查：FlashAttention 的反向 = 标准反向 = 有限差分",
    .run = flashlab::lab::gradcheck,
    .tables = {"gradcheck"},
    .versions_help = "the backward versions to check (default: every ladder backward)",
});
