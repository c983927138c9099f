// Lab "determinism" — atomic-dq against deterministic-dq. In atomic-dq every K-block worker adds
// its dQ partials into one fp32 buffer, so the order of the additions (and the rounding) depends on
// which worker gets there first; deterministic-dq gives each worker its own split and sums the
// splits in a fixed order. Both run 20 times on the same inputs; we count the runs whose dQ differs
// bitwise from the first run, the largest difference, the extra memory and the time. On a GPU that
// runs the Hopper rung, the same pair again in Hopper form: hopper (dQ partials by bulk reduce-adds
// that race at L2) against hopper-deterministic (K-block workers take turns on each dQ tile), both
// fed hopper's forward. Elsewhere an observation says why that pair is absent (hopper_pair.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "core/packed.h"
#include "core/rng.h"
#include "cuda/runner.h"
#include "labs/common/hopper_pair.h"
#include "labs/common/lab_util.h"
#include "labs/lab.h"
#include "run/registry.h"

namespace flashlab::lab {

namespace {

constexpr int kRuns = 20;

struct Spread {
  std::string id;
  int differing = 0;      // runs whose dQ is not bitwise equal to the first run's
  double max_diff = 0;    // largest |dQ_run - dQ_first|
  double max_abs = 0;     // largest |dQ|, to put max_diff in proportion
  bool dkdv_same = true;  // dK and dV bitwise equal in every run
  double median_s = 0;
  int64_t workspace = 0;
};

bool same_bits(const HostTensor& a, const HostTensor& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// Folds run k's gradients into the spread against the first run's.
void compare(Spread& s, const Gradients& first, const Gradients& g) {
  if (!same_bits(first.dQ, g.dQ)) ++s.differing;
  for (size_t i = 0; i < g.dQ.size(); ++i) {
    s.max_diff = std::max(s.max_diff, std::fabs(g.dQ[i] - first.dQ[i]));
    s.max_abs = std::max(s.max_abs, std::fabs(g.dQ[i]));
  }
  s.dkdv_same = s.dkdv_same && same_bits(first.dK, g.dK) && same_bits(first.dV, g.dV);
}

// The figures of one pair, a version whose dQ adds race (`racing`) and its deterministic twin
// (`fixed`): how many runs differed, the racing one's largest difference, and the twin's price
// (time and workspace, as ratios to the racing one's, named `ratios` + "time_ratio" and
// + "workspace_ratio"). Returns the two ratios.
std::pair<double, double> pair_figures(Report& r, const Spread& racing, const Spread& fixed,
                                       const std::string& racing_id, const std::string& fixed_id,
                                       const std::string& ratios) {
  const double time = fixed.median_s / racing.median_s;
  const double mem = racing.workspace > 0 ? double(fixed.workspace) / racing.workspace : 0.0;
  r.figures[racing_id + "_runs_differing"] = {{"value", racing.differing}, {"unit", "runs"}};
  r.figures[fixed_id + "_runs_differing"] = {{"value", fixed.differing}, {"unit", "runs"}};
  r.figures[racing_id + "_max_diff"] = {{"value", racing.max_diff}, {"unit", ""}};
  r.figures[ratios + "time_ratio"] = {{"value", time}, {"unit", "ratio"}};
  r.figures[ratios + "workspace_ratio"] = {{"value", mem}, {"unit", "ratio"}};
  return {time, mem};
}

// What the deterministic version of a pair costs beside the one whose dQ races: "det: dQ bitwise
// identical over 20 runs, and dK, dV identical too. The price: ...". `how_en`/`how_zh` say where its extra
// workspace goes; `mem_digits` the digits of the workspace ratio.
std::string price_note(const LabOptions& o, const Spread& det, const Spread& base, double mem_ratio,
                       int mem_digits, double time_ratio, const char* how_en, const char* how_zh) {
  if (zh(o))
    return fmt::format(
        "{} 的 {} 次运行 dQ {}，dK、dV {}。代价：工作区 {}，是 {}（{}）的 {:.{}f} 倍"
        "（{}）；耗时是 {} 的 {:.2f} 倍。",
        det.id, kRuns, det.differing == 0 ? "逐位相同" : fmt::format("有 {} 次不同", det.differing),
        det.dkdv_same ? "也逐位相同" : "却有不同", format_bytes(det.workspace), base.id,
        format_bytes(base.workspace), mem_ratio, mem_digits, how_zh, base.id, time_ratio);
  return fmt::format(
      "{}: dQ {} over {} runs, and dK, dV {}. The price: a workspace of {}, {:.{}f}x {}'s {} ({}), "
      "and {:.2f}x {}'s time.",
      det.id,
      det.differing == 0 ? "bitwise identical" : fmt::format("differed in {} runs", det.differing),
      kRuns, det.dkdv_same ? "identical too" : "not identical", format_bytes(det.workspace),
      mem_ratio, mem_digits, base.id, format_bytes(base.workspace), how_en, time_ratio, base.id);
}

Spread repeat_cpu(const VersionInfo& v, const Problem& p, const Inputs& in, const Forward& fwd,
                  const CpuOptions& opt) {
  Spread s{v.id};
  s.workspace = v.workspace_bytes(p, opt);
  Gradients first;
  std::vector<double> times;
  for (int k = 0; k < kRuns; ++k) {
    Gradients g;
    Counters c;
    const auto t0 = std::chrono::steady_clock::now();
    cpu_backward(v, p, in, fwd, opt, g, c);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (k == 0)
      first = std::move(g);
    else
      compare(s, first, g);
  }
  s.median_s = median(times);
  return s;
}

// `fwd` feeds a backward-only version; a fwd+bwd one (hopper) runs its own forward every time,
// which has no atomics, so a difference in dQ still comes from the backward alone.
Spread repeat_gpu(const VersionInfo& v, const Problem& p, const Inputs& in, const Forward& fwd) {
  Spread s{v.id};
  cuda::RunOptions ro;
  ro.warmup = 1;
  ro.repeats = 1;
  ro.bitwise_repeats = 0;
  Gradients first;
  std::vector<double> times;
  for (int k = 0; k < kRuns; ++k) {
    cuda::RunResult r = cuda::run(*v.cuda, p, in, &fwd, ro);
    s.workspace = r.workspace_bytes;
    times.push_back(median(r.bwd_time.ms) * 1e-3);
    if (k == 0)
      first = std::move(r.grads);
    else
      compare(s, first, r.grads);
  }
  s.median_s = median(times);
  return s;
}

}  // namespace

Report determinism(const LabOptions& o) {
  Report r;
  r.command = "lab determinism";
  r.version_ids = {"tiled", "atomic-dq", "deterministic-dq"};
  const bool gpu = use_gpu(o);
  const std::string hopper_why = hopper_pair_absent(o, gpu);
  const bool with_hopper = hopper_why.empty();
  if (with_hopper)
    for (const char* id : {kHopper, kHopperDeterministic}) r.version_ids.push_back(id);

  Problem p;
  CpuOptions opt = blocks(32, 32, false);
  opt.threads = 4;  // more workers than cores: more interleavings of the dQ additions
  if (gpu) {
    p.shape = Shape{1, 16, 4096, 4096, 128};
    p.dtype = DType::f16;
  } else {
    p = make_problem(2, 128, 32, false, DType::f32);
  }
  const Inputs in = make_inputs(p, o.seed);
  std::vector<Spread> spreads;
  if (gpu) {
    cuda::RunOptions ro;
    ro.bitwise_repeats = 0;
    ro.repeats = 1;
    const Forward fwd = cuda::run(*find_version("tiled")->cuda, p, in, nullptr, ro).fwd;
    for (const char* id : {"atomic-dq", "deterministic-dq"})
      spreads.push_back(repeat_gpu(*find_version(id), p, in, fwd));
    if (with_hopper) {
      const VersionInfo& h = version(kHopper);
      const Forward hfwd = cuda::run(*h.cuda, p, in, nullptr, ro).fwd;
      spreads.push_back(repeat_gpu(h, p, in, hfwd));
      spreads.push_back(repeat_gpu(version(kHopperDeterministic), p, in, hfwd));
    }
  } else {
    Forward fwd;
    Counters c;
    cpu_forward(version("tiled"), p, in, opt, fwd, c);
    for (const char* id : {"atomic-dq", "deterministic-dq"})
      spreads.push_back(repeat_cpu(*find_version(id), p, in, fwd, opt));
  }
  const Shape& s = p.shape;
  r.config = {{"backend", gpu ? "cuda" : "cpu"},
              {"runs", kRuns},
              {"B", s.B},
              {"H", s.H},
              {"N", s.Nq},
              {"d", s.d},
              {"dtype", to_string(p.dtype)},
              {"seed", o.seed}};
  if (!gpu) r.config["threads"] = opt.threads, r.config["Br"] = opt.Br, r.config["Bc"] = opt.Bc;

  Table t{"determinism",
          fmt::format(fmt::runtime(tr(o, "dQ over {} runs (B={}, H={}, N={}, d={}, {}), {}",
                                      "dQ 重复 {} 次（B={}，H={}，N={}，d={}，{}），{}")),
                      kRuns, s.B, s.H, s.Nq, s.d, to_string(p.dtype), backend_note(o, gpu)),
          {col("version", tr(o, "version", "版本")),
           col("runs_differing", tr(o, "runs whose dQ differs", "dQ 不同的次数"), "runs"),
           col("max_diff", tr(o, "largest run-to-run |ΔdQ|", "多次运行间最大 |ΔdQ|"), "", "{:.2e}"),
           col("rel_diff", tr(o, "relative to max |dQ|", "相对 max |dQ|"), "ratio", "{:.2e}"),
           col("dkdv_identical", tr(o, "dK, dV bitwise identical", "dK、dV 逐位相同")),
           col("workspace", tr(o, "workspace", "工作区"), "B", "bytes"),
           col("time", tr(o, "median time", "耗时中位数"), "ms", "{:.3f}")},
          {}};
  for (const Spread& x : spreads)
    t.rows.push_back({x.id, x.differing, x.max_diff, x.max_abs > 0 ? x.max_diff / x.max_abs : 0.0,
                      x.dkdv_same, x.workspace, x.median_s * 1e3});
  r.tables.push_back(std::move(t));

  const Spread& a = spreads[0];
  const Spread& d = spreads[1];
  const auto [time_ratio, mem_ratio] = pair_figures(r, a, d, "atomic", "deterministic", "");
  r.ok = d.differing == 0 && d.dkdv_same;

  if (a.differing > 0)
    r.observations.push_back(
        zh(o) ? fmt::format("atomic-dq 第一次之后的 {} 次运行里有 {} 次 dQ 和第一次不同，最大差 "
                            "{:.2e}（相对 {:.1e}）："
                            "各个 K 块的 worker 往同一块 FP32 "
                            "缓冲里加，谁先加到取决于调度，浮点加法的顺序一变，舍入就变。",
                            kRuns - 1, a.differing, a.max_diff, a.max_diff / a.max_abs)
              : fmt::format("atomic-dq: {} of the {} runs after the first gave a dQ that differs "
                            "from it, by at "
                            "most {:.2e} ({:.1e} relative): the K-block workers add into one fp32 "
                            "buffer, whoever gets there first adds first, and a different order of "
                            "floating-point additions rounds differently.",
                            a.differing, kRuns - 1, a.max_diff, a.max_diff / a.max_abs));
  else
    r.observations.push_back(
        zh(o)
            ? fmt::format("这次 atomic-dq 的 {} 次运行 dQ "
                          "恰好逐位相同：加法顺序取决于调度，这次的调度没有交错出不同的顺序——"
                          "没有保证，换个机器或线程数就可能不同。",
                          kRuns)
            : fmt::format("This time all {} atomic-dq runs happened to give bitwise identical dQ: "
                          "the order of the additions depends on scheduling, and this run's "
                          "scheduling did not interleave them differently. Nothing guarantees it.",
                          kRuns));
  r.observations.push_back(
      price_note(o, d, a, mem_ratio, 1, time_ratio, "its fp32 dQ splits", "几份 FP32 dQ 分片"));
  if (!with_hopper) {
    r.observations.push_back(hopper_pair_absent_note(o, hopper_why));
    return r;
  }
  const Spread& ha = spreads[2];
  const Spread& hd = spreads[3];
  const auto [h_time_ratio, h_mem_ratio] =
      pair_figures(r, ha, hd, "hopper", "hopper_deterministic", "hopper_");
  r.ok = r.ok && hd.differing == 0 && hd.dkdv_same;

  const std::string h_dkdv_en = ha.dkdv_same ? "dK and dV were bitwise identical in every run, as "
                                               "they are written once, by the worker that owns them"
                                             : "dK and dV differed too, which they should not";
  const std::string h_dkdv_zh = ha.dkdv_same
                                    ? "dK、dV 每次都逐位相同：它们只由负责它的 worker 写一次"
                                    : "dK、dV 也有不同，这本不该发生";
  if (ha.differing > 0)
    r.observations.push_back(
        zh(o)
            ? fmt::format("hopper 第一次之后的 {} 次运行里有 {} 次 dQ 和第一次不同，最大差 "
                          "{:.2e}（相对 {:.1e}）：dQ 的部分和由 bulk reduce-add 加进同一块 FP32 "
                          "缓冲，在 L2 上和 atomic-dq 的 atomic 一样抢先后；{}。",
                          kRuns - 1, ha.differing, ha.max_diff, ha.max_diff / ha.max_abs, h_dkdv_zh)
            : fmt::format(
                  "hopper: {} of the {} runs after the first gave a dQ that differs from "
                  "it, by at most {:.2e} ({:.1e} relative): its dQ partials go into one "
                  "fp32 buffer by bulk reduce-adds, which race at L2 as atomic-dq's atomics "
                  "do; {}.",
                  ha.differing, kRuns - 1, ha.max_diff, ha.max_diff / ha.max_abs, h_dkdv_en));
  else
    r.observations.push_back(
        zh(o) ? fmt::format("这次 hopper 的 {} 次运行 dQ 恰好逐位相同：bulk reduce-add "
                            "的先后取决于调度，没有保证；{}。",
                            kRuns, h_dkdv_zh)
              : fmt::format("This time all {} hopper runs happened to give bitwise identical dQ: "
                            "the order of its bulk reduce-adds depends on scheduling, and nothing "
                            "guarantees it; {}.",
                            kRuns, h_dkdv_en));
  r.observations.push_back(price_note(
      o, hd, ha, h_mem_ratio, 2, h_time_ratio,
      "two fp32 dQ splits and a counter per (head, Q block, split), so that the K-block workers "
      "of a split add into dQ one after another, in the order of j",
      "两份 FP32 dQ 分片，每个 (head, Q 块, 分片) 一个计数器，同一分片的 K 块 worker 按 j "
      "的顺序依次往 dQ 上加"));
  return r;
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "determinism",
    .title_en = "Atomic dQ vs deterministic dQ: run-to-run spread, memory, time",
    .title_zh = "atomic dQ vs 确定性 dQ：多次运行的差异、显存、耗时",
    .run = flashlab::lab::determinism,
    .tables = {"determinism"},
});
