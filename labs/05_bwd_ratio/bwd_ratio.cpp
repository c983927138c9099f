// Lab "bwd-ratio" — the chapter's exercise 2: time the backward against the forward and compare
// with the 2.5x FLOP ratio (5 matmuls against 2) and the book's ~2.9x estimate (2.5 x 73/63, the
// FA2 paper's best forward and backward utilisation on A100). On a GPU: the tiled forward and the
// atomic-dq backward through the CUDA runner; otherwise the CPU twins at modest sizes. With
// --versions, another backward is timed instead (a student's ex2-fa2-bwd, for one). Without
// --versions, on a GPU that runs the Hopper rung, a second table times hopper's forward and
// backward and hopper-deterministic's backward (fed hopper's forward) at the same shapes;
// elsewhere an observation says why it is absent (hopper_pair.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/packed.h"
#include "core/rng.h"
#include "cuda/runner.h"
#include "labs/common/hopper_pair.h"
#include "labs/common/lab_util.h"
#include "labs/lab.h"
#include "run/registry.h"
#include "run/runner.h"
#include "util/error.h"
#include "util/progress.h"

namespace flashlab::lab {

namespace {

constexpr double kFlopRatio = 2.5;
constexpr double kBookEstimate = 2.5 * 73.0 / 63.0;

struct Measured {
  Problem p;
  double fwd_s, bwd_s;  // GPU: median of the runner's repeats; CPU: best of a few runs
  double flop_ratio;    // from the CPU twins' counters
};

// Matmul FLOPs of the forward (tiled's unless given) and the backward, from their dry-run counters.
double counted_flop_ratio(const VersionInfo& bwd, const Problem& p, const CpuOptions& opt,
                          const VersionInfo& fwd_version = version("tiled")) {
  Forward f;
  Gradients g;
  Counters cf, cb;
  cpu_forward(fwd_version, p, Inputs{}, blocks(opt.Br, opt.Bc), f, cf);
  cpu_backward(bwd, p, Inputs{}, f, blocks(opt.Br, opt.Bc), g, cb);
  return double(cb.matmul_flops) / cf.matmul_flops;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One thread, best of `repeats`: the ratio of what the two schedules cost, as little disturbed by
// other work on the machine as a CPU allows.
Measured time_cpu(const VersionInfo& bwd, const Problem& p, uint64_t seed, int repeats) {
  const Inputs in = make_inputs(p, seed);
  CpuOptions opt = blocks(64, 64, false);
  opt.threads = 1;
  std::vector<double> tf, tb;
  Forward fwd;
  for (int r = 0; r < repeats + 1; ++r) {  // the first run warms up and is not kept
    Forward f;
    Gradients g;
    Counters c;
    auto t0 = std::chrono::steady_clock::now();
    cpu_forward(version("tiled"), p, in, opt, f, c);
    const double a = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    cpu_backward(bwd, p, in, f, opt, g, c);
    const double b = seconds_since(t0);
    if (r > 0) tf.push_back(a), tb.push_back(b);
  }
  return {p, *std::min_element(tf.begin(), tf.end()), *std::min_element(tb.begin(), tb.end()),
          counted_flop_ratio(bwd, p, opt)};
}

Measured time_gpu(const VersionInfo& bwd, const Problem& p, uint64_t seed) {
  const Inputs in = make_inputs(p, seed);
  cuda::RunOptions ro;
  ro.bitwise_repeats = 0;
  const cuda::RunResult f = cuda::run(*version("tiled").cuda, p, in, nullptr, ro);
  const cuda::RunResult b = cuda::run(*bwd.cuda, p, in, &f.fwd, ro);
  return {p, median(f.fwd_time.ms) * 1e-3, median(b.bwd_time.ms) * 1e-3,
          counted_flop_ratio(bwd, p, blocks(128, 128))};
}

// The Hopper rung: hopper's forward and backward in one run, then hopper-deterministic's backward
// fed hopper's forward; both ratios are against hopper's forward time.
std::pair<Measured, Measured> time_gpu_hopper(const Problem& p, uint64_t seed) {
  const VersionInfo& h = version(kHopper);
  const VersionInfo& hd = version(kHopperDeterministic);
  const Inputs in = make_inputs(p, seed);
  cuda::RunOptions ro;
  ro.bitwise_repeats = 0;
  const cuda::RunResult a = cuda::run(*h.cuda, p, in, nullptr, ro);
  const cuda::RunResult b = cuda::run(*hd.cuda, p, in, &a.fwd, ro);
  const double fwd_s = median(a.fwd_time.ms) * 1e-3;
  return {Measured{p, fwd_s, median(a.bwd_time.ms) * 1e-3,
                   counted_flop_ratio(h, p, blocks(128, 128), h)},
          Measured{p, fwd_s, median(b.bwd_time.ms) * 1e-3,
                   counted_flop_ratio(hd, p, blocks(128, 128), h)}};
}

// (FA2's FLOP convention, forward 4*B*H*Nq*Nk*d halved when causal: fwd_flops of run/config.h.)

}  // namespace

Report bwd_ratio(const LabOptions& o) {
  Report r;
  r.command = "lab bwd-ratio";
  const bool gpu = use_gpu(o);
  if (o.versions.size() > 1) throw UsageError("lab bwd-ratio times one backward at a time");
  const VersionInfo& bwd = o.versions.empty() ? version("atomic-dq") : *o.versions.front();
  if (bwd.pass != Pass::bwd)
    throw UsageError(fmt::format(
        "lab bwd-ratio times a backward-only version fed by tiled's forward; '{}' is {}", bwd.id,
        to_string(bwd.pass)));
  if (gpu) {
    const std::string why = cuda_unavailable(bwd);
    if (!why.empty())
      throw UsageError(fmt::format("version '{}' cannot run on cuda: {}", bwd.id, why));
  }
  r.version_ids = {"tiled", bwd.id};
  // The Hopper table belongs to the lab's default run; with --versions the student times one
  // backward of their choosing.
  const bool hopper_asked = o.versions.empty();
  const std::string hopper_why = hopper_asked ? hopper_pair_absent(o, gpu) : "";
  const bool with_hopper = hopper_asked && hopper_why.empty();
  if (with_hopper)
    for (const char* id : {kHopper, kHopperDeterministic}) r.version_ids.push_back(id);
  std::vector<Measured> ms;
  std::vector<std::pair<Measured, Measured>> hs;  // (hopper, hopper-deterministic) per shape
  if (gpu) {
    // 8k tokens per batch, 16 heads, d = 128, fp16.
    for (auto [N, causal] :
         {std::pair<int64_t, bool>{1024, false}, {4096, false}, {4096, true}, {8192, false}}) {
      Problem p;
      p.shape = Shape{8192 / N, 16, N, N, 128};
      p.causal = causal;
      p.dtype = DType::f16;
      ms.push_back(time_gpu(bwd, p, o.seed));
      if (with_hopper) hs.push_back(time_gpu_hopper(p, o.seed));
    }
  } else {
    // Small enough that `lab all` stays fast on two cores.
    for (auto [N, causal] : {std::pair<int64_t, bool>{256, false}, {512, false}, {512, true}}) {
      Problem p = make_problem(1, N, 64, causal, DType::f32);
      ms.push_back(time_cpu(bwd, p, o.seed, 5));
    }
  }
  r.config = {{"backend", gpu ? "cuda" : "cpu"},
              {"timing", gpu ? "median of the runner's repeats (CUDA events)"
                             : "best of 5 single-threaded runs after one warm-up"},
              {"forward", "tiled"},
              {"backward", bwd.id},
              {"dtype", gpu ? "fp16" : "fp32"},
              {"flop_ratio", kFlopRatio},
              {"book_estimate", kBookEstimate}};

  const std::string unit_rate = gpu ? "TFLOP/s" : "GFLOP/s";
  const double rate_scale = gpu ? 1e-12 : 1e-9;
  Table t{
      "bwd_ratio",
      tr(o, "Backward / forward time, ", "反向 / 前向耗时比，") + backend_note(o, gpu),
      {col("B", "B"), col("H", "H"), col("N", "N", "", "count"), col("d", "d"),
       col("causal", "causal"),
       col("fwd_time", tr(o, "forward (tiled)", "前向（tiled）"), "ms", "{:.3f}"),
       col("bwd_time", fmt::format("{} ({})", tr(o, "backward", "反向"), bwd.id), "ms", "{:.3f}"),
       col("time_ratio", tr(o, "time: bwd / fwd", "耗时：反向 / 前向"), "ratio", "{:.2f}"),
       col("flop_ratio", tr(o, "FLOPs: bwd / fwd (counters)", "FLOPs：反向 / 前向（计数）"),
           "ratio", "{:.2f}"),
       col("fwd_rate", tr(o, "forward rate", "前向算力"), unit_rate.c_str(), "{:.1f}"),
       col("bwd_rate", tr(o, "backward rate", "反向算力"), unit_rate.c_str(), "{:.1f}")},
      {}};
  double lo = 1e9, hi = 0;
  for (const Measured& m : ms) {
    const Shape& s = m.p.shape;
    const double ratio = m.bwd_s / m.fwd_s;
    lo = std::min(lo, ratio), hi = std::max(hi, ratio);
    const double ff = fwd_flops(m.p);
    t.rows.push_back({s.B, s.H, s.Nq, s.d, m.p.causal, m.fwd_s * 1e3, m.bwd_s * 1e3, ratio,
                      m.flop_ratio, ff / m.fwd_s * rate_scale,
                      kFlopRatio * ff / m.bwd_s * rate_scale});
  }
  r.tables.push_back(std::move(t));
  r.figures["time_ratio_min"] = {{"value", lo}, {"unit", "ratio"}};
  // A student's backward is timed only if it is right: its gradients are checked against the fp64
  // reference and the error budget first (CPU, fp32, causal and not), as `flashlab run` would.
  if (!o.versions.empty()) {
    const std::string fail = wrong_backward(bwd, o, "A wrong backward's time means nothing.",
                                            "错的反向的耗时没有意义。");
    if (!fail.empty()) {
      r.observations.push_back(fail);
      r.ok = false;
    }
  }
  r.figures["time_ratio_max"] = {{"value", hi}, {"unit", "ratio"}};

  double hlo = 1e9, hhi = 0, dlo = 1e9, dhi = 0;  // hopper's and hopper-deterministic's ratios
  if (with_hopper) {
    Table h{"bwd_ratio_hopper",
            tr(o, "The Hopper rung: backward / forward time (forward: hopper), ",
               "Hopper 这一级：反向 / 前向耗时比（前向：hopper），") +
                backend_note(o, gpu),
            {col("B", "B"), col("H", "H"), col("N", "N", "", "count"), col("d", "d"),
             col("causal", "causal"), col("backward", tr(o, "backward", "反向")),
             col("fwd_time", tr(o, "forward (hopper)", "前向（hopper）"), "ms", "{:.3f}"),
             col("bwd_time", tr(o, "backward", "反向"), "ms", "{:.3f}"),
             col("time_ratio", tr(o, "time: bwd / fwd", "耗时：反向 / 前向"), "ratio", "{:.2f}"),
             col("flop_ratio", tr(o, "FLOPs: bwd / fwd (counters)", "FLOPs：反向 / 前向（计数）"),
                 "ratio", "{:.2f}"),
             col("fwd_rate", tr(o, "forward rate", "前向算力"), unit_rate.c_str(), "{:.1f}"),
             col("bwd_rate", tr(o, "backward rate", "反向算力"), unit_rate.c_str(), "{:.1f}")},
            {}};
    for (const auto& [a, b] : hs)
      for (const Measured* m : {&a, &b}) {
        const Shape& s = m->p.shape;
        const double ratio = m->bwd_s / m->fwd_s;
        double& mn = m == &a ? hlo : dlo;
        double& mx = m == &a ? hhi : dhi;
        mn = std::min(mn, ratio), mx = std::max(mx, ratio);
        const double ff = fwd_flops(m->p);
        h.rows.push_back({s.B, s.H, s.Nq, s.d, m->p.causal,
                          m == &a ? kHopper : kHopperDeterministic, m->fwd_s * 1e3, m->bwd_s * 1e3,
                          ratio, m->flop_ratio, ff / m->fwd_s * rate_scale,
                          kFlopRatio * ff / m->bwd_s * rate_scale});
      }
    r.tables.push_back(std::move(h));
    r.figures["hopper_time_ratio_min"] = {{"value", hlo}, {"unit", "ratio"}};
    r.figures["hopper_time_ratio_max"] = {{"value", hhi}, {"unit", "ratio"}};
    r.figures["hopper_deterministic_time_ratio_min"] = {{"value", dlo}, {"unit", "ratio"}};
    r.figures["hopper_deterministic_time_ratio_max"] = {{"value", dhi}, {"unit", "ratio"}};
  }

  const std::string where = backend_note(o, gpu);
  r.observations.push_back(
      zh(o) ? fmt::format("{}：测得的反向 / 前向耗时比是 {:.2f}–{:.2f}；计数给出的 FLOPs 比是 "
                          "{:.2f}（反向 5 次矩阵乘法，前向 2 次），"
                          "书里按 FA2 论文的利用率（前向 73%、反向 63%）估计约 {:.1f}。",
                          where, lo, hi, ms.front().flop_ratio, kBookEstimate)
            : fmt::format(
                  "Measured on {}: backward / forward time is {:.2f}–{:.2f}; the counters give a "
                  "FLOP ratio of {:.2f} (5 matmuls against 2), and the book estimates about "
                  "{:.1f} from the FA2 paper's utilisation (73% forward, 63% backward).",
                  where, lo, hi, ms.front().flop_ratio, kBookEstimate));
  std::string verdict_en, verdict_zh;
  if (lo > kBookEstimate) {
    verdict_en = fmt::format(
        "Every measured ratio is above even the book's {:.1f}: the backward "
        "reaches a lower FLOP rate than the forward by more than the paper's "
        "73/63.",
        kBookEstimate);
    verdict_zh = fmt::format(
        "每个实测比值都高于书里的 {:.1f}：反向的单位算力比前向低得比论文的 73/63 还多。",
        kBookEstimate);
  } else if (lo >= kFlopRatio && hi <= kBookEstimate) {
    verdict_en = fmt::format(
        "The ratios sit between the FLOP ratio {:.1f} and the book's {:.1f}, as the "
        "book expects: the backward runs at a somewhat lower FLOP rate.",
        kFlopRatio, kBookEstimate);
    verdict_zh = fmt::format(
        "比值落在 FLOPs 比 {:.1f} 和书里的 {:.1f} 之间，和书的预期一致：反向的单位算力稍低。",
        kFlopRatio, kBookEstimate);
  } else if (hi < kFlopRatio) {
    verdict_en = fmt::format(
        "Every ratio is below the FLOP ratio {:.1f}, which contradicts the book's "
        "estimate: here the backward reaches a higher FLOP rate than the forward.",
        kFlopRatio);
    verdict_zh = fmt::format(
        "每个比值都低于 FLOPs 比 {:.1f}，和书里的估计相反：这里反向的单位算力反而比前向高。",
        kFlopRatio);
  } else {
    verdict_en = fmt::format(
        "The ratios straddle the FLOP ratio {:.1f} and the book's {:.1f}: the "
        "backward's FLOP rate relative to the forward changes with the shape.",
        kFlopRatio, kBookEstimate);
    verdict_zh = fmt::format(
        "比值跨过了 FLOPs 比 {:.1f} 和书里的 {:.1f}：反向相对前向的单位算力随形状而变。",
        kFlopRatio, kBookEstimate);
  }
  r.observations.push_back(zh(o) ? verdict_zh : verdict_en);
  if (with_hopper)
    r.observations.push_back(
        zh(o) ? fmt::format(
                    "Hopper 这一级（都以 hopper 的前向为分母）：hopper 的反向 / 前向耗时比是 "
                    "{:.2f}–{:.2f}，hopper-deterministic 的是 {:.2f}–{:.2f}；"
                    "和 FLOPs 比 {:.1f} 对照：高于它，说明反向的单位算力比前向低；低于它则更高。",
                    hlo, hhi, dlo, dhi, kFlopRatio)
              : fmt::format("The Hopper rung (both against hopper's forward): hopper's backward / "
                            "forward time is {:.2f}–{:.2f}, hopper-deterministic's {:.2f}–{:.2f}; "
                            "set beside the FLOP ratio {:.1f}: above it the backward reaches a "
                            "lower FLOP rate than the forward, below it a higher one.",
                            hlo, hhi, dlo, dhi, kFlopRatio));
  else if (hopper_asked)
    r.observations.push_back(hopper_pair_absent_note(o, hopper_why));
  if (!gpu)
    r.observations.push_back(
        zh(o) ? "CPU 孪生版本是按块的普通循环，没有 tensor core 也没有 L2 上的 "
                "atomic，这里的比值说明的是同一份调度在 CPU 上的代价，"
                "不能代替 GPU 上的测量。"
              : "The CPU twins are plain loops over tiles, with no tensor cores and no L2 atomics: "
                "this ratio is what the same schedule costs on a CPU, not a stand-in for a GPU "
                "measurement.");
  return r;
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "bwd-ratio",
    .title_en = "Exercise 2: measured backward/forward time vs the 2.5x FLOP ratio",
    .title_zh = "练习 2：实测反向 / 前向耗时比 vs 2.5 倍的 FLOPs 比",
    .run = flashlab::lab::bwd_ratio,
    .tables = {"bwd_ratio", "bwd_ratio_hopper"},
    .versions_help = "the backward to time (default: atomic-dq)",
});
