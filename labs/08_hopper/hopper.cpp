// Lab "hopper" — what each Hopper idea buys, measured on the GPU in front of you. The hopper
// rung's forward is timed beside variants of the same kernel with one idea switched off each
// (compile-time switches, kernels/06_hopper/fwd_params.h), and beside the tiled rung (mma.sync
// and cp.async, none of the ideas), at the FA2 paper's setting: bf16, d = 128, B*N = 16k tokens,
// hidden 2048, N = 4096, causal and not. Each variant's O is compared with the rung's, and the
// rung's with tiled's, so that a variant that went wrong cannot pass for a slow one. A second table
// times the rung and tiled at d = 256, the head dim of the chapter's "~740 TFLOPs".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/device_api.h"
#include "core/rng.h"
#include "cuda/runner.h"
#include "labs/common/lab_util.h"
#include "labs/lab.h"
#include "run/registry.h"

namespace flashlab::lab {

namespace {

constexpr int64_t kN = 4096, kD = 128, kTokens = 16384, kHidden = 2048;

Problem ablation_problem(bool causal, int64_t N = kN, int64_t d = kD) {
  Problem p;
  p.shape = Shape{kTokens / N, kHidden / d, N, N, d};
  p.causal = causal;
  p.dtype = DType::bf16;
  return p;
}

// The head dim of the chapter's figure ("~740 TFLOPs", FA3's 756 on an H100: d = 256, N = 16k,
// non-causal): the rung's forward at d = 256 beside tiled's, at N = 4096 and 16384.
constexpr int64_t kD256 = 256;
constexpr int64_t kD256Ns[] = {4096, 16384};

double fwd_flops(const Problem& p) {
  const Shape& s = p.shape;
  return 4.0 * s.heads() * s.Nq * s.Nk * s.d / (p.causal ? 2 : 1);
}

double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return a.size() == b.size() ? m : INFINITY;
}

struct Timed {
  double tflops = 0;
  HostTensor O;
};

Timed time_forward(const cuda::Version& v, const Problem& p, const Inputs& in) {
  cuda::RunOptions ro;
  ro.warmup = 3;
  ro.repeats = 10;
  ro.bitwise_repeats = 0;
  cuda::RunResult r = cuda::run(v, p, in, nullptr, ro);
  return {fwd_flops(p) / (median(r.fwd_time.ms) * 1e-3) / 1e12, std::move(r.fwd.O)};
}

}  // namespace

Report hopper(const LabOptions& o) {
  Report r;
  r.command = "lab hopper";
  const bool gpu = use_gpu(o);
  const VersionInfo* rung = find_version("hopper");
  std::string why_not;
  if (!rung)
    why_not = tr(o, "this build has no hopper version", "这次构建没有 hopper 版本");
  else if (!gpu)
    why_not = tr(o, "no GPU in use", "没有使用 GPU");
  else if (!(why_not = cuda_unavailable(*rung)).empty()) {
  } else if (!rung->cuda->ablation)
    why_not = tr(o, "the hopper version offers no ablation", "hopper 版本没有消融实验");
  const bool measure = why_not.empty();
  const Problem p0 = ablation_problem(false);
  r.config = {{"backend", measure ? "cuda" : "none"},
              {"dtype", "bf16"},
              {"B", p0.shape.B},
              {"H", p0.shape.H},
              {"N", kN},
              {"d", kD},
              {"seed", o.seed}};

  Table t{
      "ablation",
      fmt::format(
          fmt::runtime(tr(o,
                          "The hopper forward with one idea switched off at a time "
                          "(bf16, d={}, B={}, H={}, N={}), {}",
                          "hopper 前向每次关掉一个想法（BF16，d={}，B={}，H={}，N={}），{}")),
          kD, p0.shape.B, p0.shape.H, kN,
          measure ? backend_note(o, true) : tr(o, "not measured", "未测量")),
      {col("idea", tr(o, "idea", "想法")), col("variant", tr(o, "variant", "变体")),
       col("what", tr(o, "what runs instead", "改成什么")),
       col("tflops", tr(o, "non-causal TFLOP/s", "非因果 TFLOP/s"), "TFLOP/s", "{:.1f}"),
       col("vs_rung", tr(o, "x the rung", "相对完整版"), "ratio", "{:.3f}"),
       col("tflops_causal", tr(o, "causal TFLOP/s", "因果 TFLOP/s"), "TFLOP/s", "{:.1f}"),
       col("vs_rung_causal", tr(o, "x the rung (causal)", "相对完整版（因果）"), "ratio", "{:.3f}"),
       col("max_diff", tr(o, "max |O - O_rung|", "max |O - O 完整版|"), "", "{:.1e}")},
      {}};

  if (!measure) {
    if (rung && rung->cuda && rung->cuda->ablation)
      for (const cuda::AblationVariant& v : rung->cuda->ablation())
        t.rows.push_back({v.idea, v.id, v.what, nullptr, nullptr, nullptr, nullptr, nullptr});
    else  // no kernels in this build to name: the rung's row says why nothing was measured
      t.rows.push_back({"", "hopper", why_not, nullptr, nullptr, nullptr, nullptr, nullptr});
    r.tables.push_back(std::move(t));
    r.observations.push_back(
        zh(o) ? fmt::format("这个实验要在 sm_90 GPU（H100、H200）上跑：{}。", why_not)
              : fmt::format("This lab measures on an sm_90 GPU (H100, H200) only: {}.", why_not));
    return r;
  }

  struct Row {
    const cuda::AblationVariant* v;
    double tf[2] = {0, 0};
    double diff = 0;
  };
  std::vector<Row> rows;
  for (const cuda::AblationVariant& v : rung->cuda->ablation()) rows.push_back({&v});
  double tiled_tf[2] = {0, 0}, tiled_diff = 0;
  bool ok = true;
  for (int c = 0; c < 2; ++c) {
    const Problem p = ablation_problem(c == 1);
    const Inputs in = make_inputs(p, o.seed);
    HostTensor rung_O;
    for (Row& row : rows) {
      Timed x = time_forward(row.v->version, p, in);
      row.tf[c] = x.tflops;
      if (rung_O.empty())
        rung_O = std::move(x.O);
      else
        row.diff = std::max(row.diff, max_abs_diff(x.O, rung_O));
    }
    Timed x = time_forward(*find_version("tiled")->cuda, p, in);
    tiled_tf[c] = x.tflops;
    tiled_diff = std::max(tiled_diff, max_abs_diff(x.O, rung_O));
  }
  // bf16 O of magnitude ~1: the rounding of one output is 2^-8; variants that agree to within a
  // few of those compute the same function (an order of additions may differ).
  constexpr double kAgree = 2e-2;
  for (const Row& row : rows) {
    ok = ok && row.diff <= kAgree;
    t.rows.push_back({row.v->idea, row.v->id, row.v->what, row.tf[0], row.tf[0] / rows[0].tf[0],
                      row.tf[1], row.tf[1] / rows[0].tf[1], row.diff});
    r.figures[std::string("tflops_") + row.v->id] = {{"value", row.tf[0]}, {"unit", "TFLOP/s"}};
    r.figures[std::string("tflops_causal_") + row.v->id] = {{"value", row.tf[1]},
                                                            {"unit", "TFLOP/s"}};
  }
  ok = ok && tiled_diff <= kAgree;
  t.rows.push_back({"-", "tiled",
                    tr(o, "the sm_80 rung: mma.sync, cp.async, no Hopper idea",
                       "sm_80 那一级：mma.sync、cp.async，没有 Hopper 的想法"),
                    tiled_tf[0], tiled_tf[0] / rows[0].tf[0], tiled_tf[1],
                    tiled_tf[1] / rows[0].tf[1], tiled_diff});
  r.tables.push_back(std::move(t));
  r.ok = ok;

  // Head dim 256: the rung and tiled (no variant: the ablation's kernels are built at d = 128).
  Table t256{"d256",
             fmt::format(fmt::runtime(tr(o,
                                         "The hopper forward at head dim 256 beside tiled "
                                         "(bf16, d=256, B*N={}, H={}), {}",
                                         "头维 256 时的 hopper 前向与 tiled（BF16，d=256，"
                                         "B*N={}，H={}），{}")),
                         kTokens, kHidden / kD256, backend_note(o, true)),
             {col("version", tr(o, "version", "版本")), col("N", "N"),
              col("tflops", tr(o, "non-causal TFLOP/s", "非因果 TFLOP/s"), "TFLOP/s", "{:.1f}"),
              col("tflops_causal", tr(o, "causal TFLOP/s", "因果 TFLOP/s"), "TFLOP/s", "{:.1f}"),
              col("max_diff", tr(o, "max |O - O_rung|", "max |O - O 完整版|"), "", "{:.1e}")},
             {}};
  double rung_256 = 0;  // non-causal, N = 16384
  for (int64_t n : kD256Ns) {
    double tf[2][2] = {}, diff = 0;  // [hopper, tiled][causal]
    for (int c = 0; c < 2; ++c) {
      const Problem p = ablation_problem(c == 1, n, kD256);
      const Inputs in = make_inputs(p, o.seed);
      Timed h = time_forward(*rung->cuda, p, in);
      Timed x = time_forward(*find_version("tiled")->cuda, p, in);
      tf[0][c] = h.tflops;
      tf[1][c] = x.tflops;
      diff = std::max(diff, max_abs_diff(x.O, h.O));
    }
    ok = ok && diff <= kAgree;
    t256.rows.push_back({"hopper", n, tf[0][0], tf[0][1], nullptr});
    t256.rows.push_back({"tiled", n, tf[1][0], tf[1][1], diff});
    r.figures[fmt::format("tflops_d256_n{}", n)] = {{"value", tf[0][0]}, {"unit", "TFLOP/s"}};
    r.figures[fmt::format("tflops_causal_d256_n{}", n)] = {{"value", tf[0][1]},
                                                          {"unit", "TFLOP/s"}};
    if (n == 16384) rung_256 = tf[0][0];
  }
  r.tables.push_back(std::move(t256));
  r.ok = ok;
  r.observations.push_back(
      zh(o) ? fmt::format("头维 256、非因果、N = 16384：完整版 {:.0f} TFLOP/s。本章说 FA3 约 740 TFLOP/s"
                          "（FA3 论文：H100 上 756，d = 256，N = 16k）：这就是那个数字在你这块 GPU 上的样子。",
                          rung_256)
            : fmt::format("Head dim 256, non-causal, N = 16384: the rung runs at {:.0f} TFLOP/s. "
                          "The chapter says FA3 runs at ~740 TFLOP/s (the FA3 paper: 756 on an "
                          "H100 at d = 256, N = 16k): this is that figure on your GPU.",
                          rung_256));

  // Which idea costs most when it is missing (the lowest ratio), per mask.
  for (int c = 0; c < 2; ++c) {
    const Row* worst = &rows[1];
    for (size_t i = 1; i < rows.size(); ++i)
      if (rows[i].tf[c] < worst->tf[c]) worst = &rows[i];
    const double loss = 1 - worst->tf[c] / rows[0].tf[c];
    r.observations.push_back(
        zh(o) ? fmt::format("{}：完整版 {:.0f} TFLOP/s；关掉想法 {}（{}）损失最大，慢了 {:.0f}%。",
                            c ? "因果" : "非因果", rows[0].tf[c], worst->v->idea, worst->v->id,
                            100 * loss)
              : fmt::format("{}: the rung runs at {:.0f} TFLOP/s; switching off idea {} ({}) "
                            "costs the most, {:.0f}% of its speed.",
                            c ? "Causal" : "Non-causal", rows[0].tf[c], worst->v->idea,
                            worst->v->id, 100 * loss));
  }
  r.observations.push_back(
      zh(o)
          ? fmt::format("tiled（sm_80 的 mma.sync 与 cp.async）只有完整版的 {:.2f} 倍（非因果）和 "
                        "{:.2f} 倍（因果）：这就是 Hopper "
                        "自己的硬件单元加起来的价值。每一行只关掉一个想法，"
                        "各行的损失不能相加：这些想法互相重叠，一个缺了，别的会部分补上。",
                        tiled_tf[0] / rows[0].tf[0], tiled_tf[1] / rows[0].tf[1])
          : fmt::format("tiled (sm_80's mma.sync and cp.async) reaches {:.2f}x the rung "
                        "(non-causal) and {:.2f}x (causal): what Hopper's own units are worth "
                        "together. Each row switches off one idea only, and the losses do not "
                        "add up: the ideas overlap work, and when one is missing the others "
                        "partly cover for it.",
                        tiled_tf[0] / rows[0].tf[0], tiled_tf[1] / rows[0].tf[1]));
  if (!ok)
    r.observations.push_back(tr(o,
                                "A variant's O differs from the rung's by more than 2e-2: "
                                "its speed does not count.",
                                "有变体的 O 与完整版相差超过 2e-2：它的速度不算数。"));
  return r;
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "hopper",
    .title_en = "The Hopper rung's ideas, each switched off in turn: what each buys on this GPU",
    .title_zh = "Hopper 这一级的各个想法逐个关掉：每个想法在这块 GPU 上值多少",
    .run = flashlab::lab::hopper,
    .tables = {"ablation", "d256"},
});
