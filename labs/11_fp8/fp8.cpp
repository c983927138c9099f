// Lab "fp8" — FA3's error table, live: what e4m3 costs in accuracy and what each remedy buys back,
// and what it gains in speed. Four forwards run on the same bf16 inputs and are compared with the
// fp64 reference on those inputs: the bf16 Hopper rung, and the FP8 rung with one scale per
// tensor, with block scales, and with block scales and incoherent processing (kernels/
// 08_hopper_fp8). Twice: on normal inputs and on inputs with FA3's outliers (N(0,1) plus N(0,100)
// on 0.1 % of the entries of Q, K and V). The error is ||O - O_ref|| / ||O_ref|| and the RMSE,
// sqrt(mean (O - O_ref)^2), FA3's measure.
//
// On a GPU that runs the four (sm_90a), the errors are the kernels' and each row is timed at FA3's
// speed shape (d = 128, non-causal, B = 1, H = 16, N = 16384: 16k tokens, hidden 2048) on inputs
// drawn on the device, the FP8 rows' quantization pass inside their time as in `flashlab run`;
// TFLOP/s by FA2's count, 4 N^2 d H. Elsewhere the CPU twins, which make every e4m3 rounding the
// kernels make, give the error table, and the speed table says why it is empty. Either way each
// row is held to the budget `flashlab run` holds its version to (fp8_check.h): a row over it, or
// not finite, is a FAIL line and the lab fails.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/packed.h"
#include "core/rng.h"
#include "cuda/runner.h"
#include "fp8_check.h"
#include "labs/common/lab_util.h"
#include "labs/lab.h"
#include "reference/attention.h"
#include "run/budget.h"
#include "run/compare.h"
#include "run/config.h"
#include "run/registry.h"

namespace flashlab::lab {

namespace {

// One head of d = 128, as FA3's table, N long enough that a scale block (128 rows of Q, 192 keys of
// K and V) holds a few outliers on average (0.1 % of 128 x 128 entries: 16; of 192 x 128: 25) and
// short enough for a laptop.
constexpr int64_t kN = 2048, kD = 128, kH = 1;

struct Row {
  const char* version;  // registry id
  DType dtype;
  const char* en;
  const char* zh;
};

const Row kRows[] = {
    {"hopper", DType::bf16, "bf16", "bf16"},
    {"hopper-fp8-per-tensor", DType::fp8, "fp8, one scale per tensor", "fp8，整张量一个缩放"},
    {"hopper-fp8-no-hadamard", DType::fp8, "fp8, block scales", "fp8，分块缩放"},
    {"hopper-fp8", DType::fp8, "fp8, block scales + incoherent processing",
     "fp8，分块缩放 + 非相干处理"},
};
constexpr int kRowCount = 4;
constexpr int kBf16 = 0, kPerTensor = 1, kBlock = 2, kIncoherent = 3;

// FA3's speed shape: d = 128, non-causal, B = 1, H = 16, N = 16384.
constexpr int64_t kSpeedB = 1, kSpeedH = 16, kSpeedN = 16384;

struct Error {
  double rel = 0, rmse = 0;
};

// One row on one kind of input: the error of O, and the verdict's figures.
struct Measured {
  Error err;
  fp8_check::RowResult check;
};

Error error_of(const HostTensor& x, const HostTensor& ref) {
  double e2 = 0, r2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e2 += (x[i] - ref[i]) * (x[i] - ref[i]);
    r2 += ref[i] * ref[i];
  }
  return {std::sqrt(e2 / r2), std::sqrt(e2 / static_cast<double>(x.size()))};
}

Problem lab_problem(DType t) {
  Problem p;
  p.shape = Shape{1, kH, kN, kN, kD};
  p.dtype = t;
  return p;
}

Problem speed_problem(DType t) {
  Problem p;
  p.shape = Shape{kSpeedB, kSpeedH, kSpeedN, kSpeedN, kD};
  p.dtype = t;
  return p;
}

// The four rows' errors on one kind of input, on the GPU or the CPU twins, each with the budget
// of its dtype (bf16 for the bf16 rung, fp8 for the others) on these inputs.
std::vector<Measured> errors_on(InputKind kind, const LabOptions& o, bool gpu) {
  const Inputs in = make_inputs(lab_problem(DType::fp8), o.seed, kind);  // bf16 values
  const Forward ref = reference::forward(lab_problem(DType::fp8), in, /*keep_P=*/false);
  const ErrorBudget bf16 = compute_budget(lab_problem(DType::bf16), in, ref, Gradients{}, false);
  const ErrorBudget fp8 = compute_budget(lab_problem(DType::fp8), in, ref, Gradients{}, false);
  const std::string where = (gpu ? std::string("GPU") : tr(o, "CPU twin", "CPU 孪生实现")) +
                            (kind == InputKind::normal ? tr(o, ", normal inputs", "，正态输入")
                                                       : tr(o, ", outlier inputs", "，离群值输入"));
  std::vector<Measured> out;
  for (const Row& row : kRows) {
    const VersionInfo& v = version(row.version);
    const Problem p = lab_problem(row.dtype);
    Forward f;
    if (gpu) {
      cuda::RunOptions ro;
      ro.warmup = 0;
      ro.repeats = 1;
      ro.bitwise_repeats = 0;
      ro.flush_l2 = false;
      f = cuda::run(*v.cuda, p, in, nullptr, ro).fwd;
    } else {
      Counters counted;
      cpu_forward(v, p, in, CpuOptions{}, f, counted);
    }
    const ErrorBudget& b = row.dtype == DType::fp8 ? fp8 : bf16;
    const ErrorStats eo = compare(f.O, ref.O), el = compare_lse(f.LSE, ref.LSE);
    Measured m;
    m.err = error_of(f.O, ref.O);
    m.check = {
        row.version,           where, eo.rel, el.rel, b.of("O").budget_rel, b.of("LSE").budget_rel,
        eo.finite && el.finite};
    out.push_back(m);
  }
  return out;
}

// Each row timed at the speed shape on inputs drawn on the device (its fp64 copy would take 1 GiB
// of host memory and is not needed: the error table is the check), O downloaded and checked finite.
struct Timed {
  double ms = 0, tflops = 0;
  bool finite = true;
};

Timed time_row(const Row& row, uint64_t seed) {
  const Problem p = speed_problem(row.dtype);
  cuda::RunOptions ro;
  ro.warmup = 3;
  ro.repeats = 10;
  ro.bitwise_repeats = 0;
  const cuda::RunResult r = cuda::run_generated(*version(row.version).cuda, p, seed, ro);
  Timed t;
  t.ms = median(r.fwd_time.ms);
  t.tflops = fwd_flops(p) / (t.ms * 1e-3) / 1e12;
  for (double x : r.fwd.O) t.finite = t.finite && std::isfinite(x);
  return t;
}

std::string x_of(double a, double b) {
  return fmt::format("{:.2f}", a / b);
}

}  // namespace

Report fp8(const LabOptions& o) {
  Report r;
  r.command = "lab fp8";
  std::vector<const VersionInfo*> used;
  for (const Row& row : kRows) used.push_back(&version(row.version));
  r.version_ids = ids_of(used);
  // The GPU half runs when the GPU is in use and runs all four rows; else why not.
  const bool gpu = use_gpu(o);
  std::string why_not;
  if (!gpu)
    why_not = tr(o, "it needs a GPU, and this run uses the ", "它需要 GPU，而这次用的是") +
              backend_note(o, false);
  for (const VersionInfo* v : used)
    if (why_not.empty())
      if (const std::string why = cuda_unavailable(*v); !why.empty())
        why_not = fmt::format("{}: {}", v->id, why);
  const bool measure = why_not.empty();
  const std::string ran = measure ? backend_note(o, true) : backend_note(o, false);
  r.config = {{"backend", measure ? "cuda" : "cpu"},
              {"B", 1},
              {"H", kH},
              {"N", kN},
              {"d", kD},
              {"causal", false},
              {"seed", o.seed},
              {"versions", ids_of(used)},
              {"speed_shape", {{"B", kSpeedB}, {"H", kSpeedH}, {"N", kSpeedN}, {"d", kD}}}};
  const std::vector<Measured> normal = errors_on(InputKind::normal, o, measure);
  const std::vector<Measured> outliers = errors_on(InputKind::outliers, o, measure);
  std::vector<std::string> failures;
  for (const std::vector<Measured>* ms : {&normal, &outliers})
    for (const Measured& m : *ms)
      if (std::string line = fp8_check::verdict(m.check, zh(o)); !line.empty())
        failures.push_back(std::move(line));

  Table t{"errors",
          fmt::format(fmt::runtime(tr(o,
                                      "O against the fp64 reference on the same bf16 inputs "
                                      "(B=1, H={}, N={}, d={}, non-causal, seed {}), {}",
                                      "O 与同一组 bf16 输入上的 fp64 参考结果比较（B=1，H={}，"
                                      "N={}，d={}，非因果，种子 {}），{}")),
                      kH, kN, kD, o.seed, ran),
          {col("row", tr(o, "forward", "前向")), col("version", tr(o, "version", "版本")),
           col("rel_normal", tr(o, "rel, normal", "相对误差，正态"), "", "{:.2e}"),
           col("rmse_normal", tr(o, "RMSE, normal", "RMSE，正态"), "", "{:.2e}"),
           col("budget_normal", tr(o, "budget, normal", "预算，正态"), "", "{:.2e}"),
           col("rel_outliers", tr(o, "rel, outliers", "相对误差，离群值"), "", "{:.2e}"),
           col("rmse_outliers", tr(o, "RMSE, outliers", "RMSE，离群值"), "", "{:.2e}"),
           col("budget_outliers", tr(o, "budget, outliers", "预算，离群值"), "", "{:.2e}")},
          {}};
  for (int i = 0; i < kRowCount; ++i) {
    t.rows.push_back({zh(o) ? kRows[i].zh : kRows[i].en, kRows[i].version, normal[i].err.rel,
                      normal[i].err.rmse, normal[i].check.o_budget, outliers[i].err.rel,
                      outliers[i].err.rmse, outliers[i].check.o_budget});
    const std::string id = kRows[i].version;
    r.figures["rel_normal_" + id] = {{"value", normal[i].err.rel}, {"unit", "ratio"}};
    r.figures["rel_outliers_" + id] = {{"value", outliers[i].err.rel}, {"unit", "ratio"}};
    r.figures["rmse_normal_" + id] = {{"value", normal[i].err.rmse}, {"unit", ""}};
    r.figures["rmse_outliers_" + id] = {{"value", outliers[i].err.rmse}, {"unit", ""}};
  }
  r.tables.push_back(std::move(t));

  // The speed half: each row at FA3's shape, where the GPU runs them.
  std::vector<Timed> timed;
  if (measure)
    for (const Row& row : kRows) {
      timed.push_back(time_row(row, o.seed));
      if (!timed.back().finite)
        failures.push_back(
            zh(o) ? fmt::format("FAIL {}（GPU，速度形状）：O 含 NaN 或 Inf。它的速度不算数。",
                                row.version)
                  : fmt::format("FAIL {} (GPU, the speed shape): O holds NaN or Inf. Its speed "
                                "does not count.",
                                row.version));
    }
  Table speed{
      "speed",
      fmt::format(fmt::runtime(tr(o,
                                  "Time and TFLOP/s of each forward (B={}, H={}, N={}, "
                                  "d={}, non-causal; FA2 FLOP convention, the FP8 rows' "
                                  "quantization pass included), {}",
                                  "各前向的时间与 TFLOP/s（B={}，H={}，N={}，d={}，非因果；"
                                  "FA2 的 FLOP 计法，FP8 各行含量化 pass），{}")),
                  kSpeedB, kSpeedH, kSpeedN, kD, measure ? ran : tr(o, "not measured", "未测量")),
      {col("row", tr(o, "forward", "前向")), col("version", tr(o, "version", "版本")),
       col("ms", tr(o, "time", "时间"), "ms", "{:.3f}"),
       col("tflops", "TFLOP/s", "TFLOP/s", "{:.1f}"),
       col("vs_bf16", tr(o, "x bf16", "相对 bf16"), "ratio", "{:.2f}"),
       col("why", tr(o, "not measured because", "未测量，因为"))},
      {}};
  for (int i = 0; i < kRowCount; ++i) {
    if (measure) {
      speed.rows.push_back({zh(o) ? kRows[i].zh : kRows[i].en, kRows[i].version, timed[i].ms,
                            timed[i].tflops, timed[i].tflops / timed[kBf16].tflops, nullptr});
      const std::string id = kRows[i].version;
      r.figures["ms_" + id] = {{"value", timed[i].ms}, {"unit", "ms"}};
      r.figures["tflops_" + id] = {{"value", timed[i].tflops}, {"unit", "TFLOP/s"}};
    } else {
      speed.rows.push_back({zh(o) ? kRows[i].zh : kRows[i].en, kRows[i].version, nullptr, nullptr,
                            nullptr, why_not});
    }
  }
  r.tables.push_back(std::move(speed));

  // Observations, from the numbers above.
  const std::string on =
      measure ? tr(o, "on the GPU", "在 GPU 上") : tr(o, "on the CPU twins", "在 CPU 孪生实现上");
  std::vector<int> order = {0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return normal[a].err.rel < normal[b].err.rel; });
  std::string ranking;
  for (int i : order)
    ranking += fmt::format("{}{} ({:.2e})", ranking.empty() ? "" : " < ",
                           zh(o) ? kRows[i].zh : kRows[i].en, normal[i].err.rel);
  double lo = normal[kPerTensor].err.rel, hi = lo;
  for (int i = kPerTensor; i < kRowCount; ++i) {
    lo = std::min(lo, normal[i].err.rel);
    hi = std::max(hi, normal[i].err.rel);
  }
  const bool alike = hi / lo < 1.25;  // the fp8 rows agree to within a quarter
  const bool bf16_first = order[0] == kBf16;
  r.figures["fp8_over_bf16_normal"] = {
      {"value", normal[kPerTensor].err.rel / normal[kBf16].err.rel}, {"unit", "ratio"}};
  r.observations.push_back(
      zh(o)
          ? fmt::format(
                "正态输入（{}），误差从小到大：{}。{}fp8 的误差是 bf16 的 {} 倍（e4m3 有 3 位尾数，"
                "bf16 有 7 位）；三种 fp8 做法彼此相差 {} 倍{}",
                on, ranking,
                bf16_first ? "bf16 排第一，符合预期；" : "bf16 不是最小的，与预期不符；",
                x_of(normal[kPerTensor].err.rel, normal[kBf16].err.rel), x_of(hi, lo),
                alike ? "：没有离群值时，分块缩放和非相干处理无可补救，误差来自 e4m3 本身，"
                        "三者的先后只是舍入的偶然。"
                      : "。")
          : fmt::format("Normal inputs ({}), from the smallest error: {}. {}fp8's error is {}x "
                        "bf16's (e4m3 keeps 3 mantissa bits, bf16 7); the three fp8 rows are "
                        "within {}x of one another{}",
                        on, ranking,
                        bf16_first ? "bf16 first, as expected; "
                                   : "bf16 is not first, against expectation; ",
                        x_of(normal[kPerTensor].err.rel, normal[kBf16].err.rel), x_of(hi, lo),
                        alike ? ": with no outliers there is little for block scales or "
                                "incoherent processing to win back, the error is e4m3's own and "
                                "their order is the roundings' chance."
                              : "."));
  const double block_gain = outliers[kPerTensor].err.rel / outliers[kBlock].err.rel;
  const double ip_gain = outliers[kBlock].err.rel / outliers[kIncoherent].err.rel;
  const double vs_plain = outliers[kPerTensor].err.rel / outliers[kIncoherent].err.rel;
  r.figures["incoherent_factor_outliers"] = {{"value", ip_gain}, {"unit", "ratio"}};
  r.figures["block_factor_outliers"] = {{"value", block_gain}, {"unit", "ratio"}};
  r.observations.push_back(
      zh(o) ? fmt::format("离群值输入（{}）：非相干处理把分块缩放 fp8 的误差降低 {:.2f} "
                          "倍，相对整张量 fp8 是 "
                          "{:.2f} 倍（FA3 论文报告 2.6 倍）。",
                          on, ip_gain, vs_plain)
            : fmt::format("Outlier inputs ({}): incoherent processing lowers block-scaled fp8's "
                          "error {:.2f}x, and {:.2f}x below per-tensor fp8 (the FA3 paper reports "
                          "2.6x).",
                          on, ip_gain, vs_plain));
  // e4m3 is a floating-point format: its relative precision is the same at every scale, so a
  // block's own scale buys precision only for values that would fall to subnormals otherwise.
  r.observations.push_back(
      block_gain >= 1.25
          ? (zh(o) ? fmt::format("分块缩放把整张量缩放的误差降低了 {:.2f} 倍。", block_gain)
                   : fmt::format("Block scales lower the per-tensor error {:.2f}x.", block_gain))
          : (zh(o)
                 ? fmt::format(
                       "分块缩放几乎没有帮助（整张量误差的 {:.2f} 倍）：e4m3 是浮点格式，"
                       "在任何缩放下相对精度都一样，块自己的缩放只对本会落入次正规数的小值有用。"
                       "离群值的害处在于它在 Q K^T 的点积里那一项的舍入误差太大；"
                       "非相干处理把它摊到 d 个分量上，各项大小相近，误差才降下来。",
                       1 / block_gain)
                 : fmt::format("Block scales barely help ({:.2f}x the per-tensor error): e4m3 is a "
                               "floating-point format, with the same relative precision at every "
                               "scale, so a block's own scale helps only values that would "
                               "otherwise fall to subnormals. What an outlier costs is the "
                               "rounding error of its one large term in a dot product of Q K^T; "
                               "incoherent processing spreads it over d terms of similar size, "
                               "and that is what lowers the error.",
                               1 / block_gain)));
  // What is left once Q and K are rotated: V (not rotated: its outliers still set its blocks'
  // scales) and P in e4m3, which incoherent processing does not touch.
  const double left = outliers[kIncoherent].err.rel / normal[kIncoherent].err.rel;
  if (ip_gain >= 2.0)
    r.observations.push_back(
        zh(o) ? fmt::format("非相干处理在离群值输入上把分块缩放 fp8 的误差降低了 {:.2f} 倍，达到 2 "
                            "倍的目标。",
                            ip_gain)
              : fmt::format("Incoherent processing lowers block-scaled fp8's error {:.2f}x on "
                            "outlier inputs: at least the 2x this rung aims for.",
                            ip_gain));
  else
    r.observations.push_back(
        zh(o) ? fmt::format(
                    "非相干处理只降低了 {:.2f} 倍，不到 2 倍的目标。旋转之后，离群值输入上的误差是"
                    "正态输入上的 {:.2f} 倍：Q、K 的离群值已被摊平，剩下的误差来自旋转管不到的"
                    "地方——V（不旋转，它的离群值仍决定所在块的缩放）和 e4m3 的 P。",
                    ip_gain, left)
              : fmt::format("Incoherent processing lowers the error only {:.2f}x, short of the 2x "
                            "this rung aims for. Once Q and K are rotated, the error on outlier "
                            "inputs is {:.2f}x the error on normal inputs: the outliers of Q and K "
                            "are spread out, and what is left comes from what the rotation does "
                            "not touch -- V (not rotated: its outliers still set its blocks' "
                            "scales) and P in e4m3.",
                            ip_gain, left));
  if (measure) {
    const double ip_cost = timed[kBlock].tflops / timed[kIncoherent].tflops;
    r.figures["fp8_speedup_over_bf16"] = {
        {"value", timed[kIncoherent].tflops / timed[kBf16].tflops}, {"unit", "ratio"}};
    r.observations.push_back(
        zh(o)
            ? fmt::format(
                  "速度（B={}，H={}，N={}，d={}，非因果，含量化 pass）：hopper-fp8 {:.0f} "
                  "TFLOP/s，是 bf16 hopper（{:.0f} TFLOP/s）的 {:.2f} 倍；整张量缩放 {:.0f}、"
                  "分块缩放 {:.0f} TFLOP/s；加上非相干处理的旋转后，速度是只用分块缩放时的 "
                  "{:.3f} 倍。",
                  kSpeedB, kSpeedH, kSpeedN, kD, timed[kIncoherent].tflops, timed[kBf16].tflops,
                  timed[kIncoherent].tflops / timed[kBf16].tflops, timed[kPerTensor].tflops,
                  timed[kBlock].tflops, 1 / ip_cost)
            : fmt::format("Speed (B={}, H={}, N={}, d={}, non-causal, the quantization pass "
                          "included): hopper-fp8 runs at {:.0f} TFLOP/s, {:.2f}x bf16 hopper's "
                          "{:.0f}; per-tensor scales {:.0f} and block scales {:.0f} TFLOP/s; with "
                          "the rotation of incoherent processing the rung runs at {:.3f}x block "
                          "scales' speed.",
                          kSpeedB, kSpeedH, kSpeedN, kD, timed[kIncoherent].tflops,
                          timed[kIncoherent].tflops / timed[kBf16].tflops, timed[kBf16].tflops,
                          timed[kPerTensor].tflops, timed[kBlock].tflops, 1 / ip_cost));
  } else {
    r.observations.push_back(
        zh(o) ? "速度那一半（各行在 GPU 上的时间和 TFLOP/s）没有测量：" + why_not + "。"
              : "The speed half (each row's time and TFLOP/s on the GPU) was not measured: " +
                    why_not + ".");
  }
  for (const std::string& line : failures) r.observations.push_back(line);
  r.ok = failures.empty();
  return r;
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "fp8",
    .title_en = "FP8: what e4m3 costs in accuracy, and what block scales and incoherent "
                "processing buy back",
    .title_zh = "FP8：e4m3 损失多少精度，分块缩放和非相干处理又挽回多少",
    .run = flashlab::lab::fp8,
    .tables = {"errors", "speed"},
});
