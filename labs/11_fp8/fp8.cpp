// Lab "fp8" — FA3's error table, live: what e4m3 costs in accuracy and what each remedy buys back.
// Four forwards run on the same bf16 inputs and are compared with the fp64 reference on those
// inputs: the bf16 Hopper rung, and the FP8 rung with one scale per tensor, with block scales, and
// with block scales and incoherent processing (kernels/08_hopper_fp8). Twice: on normal inputs and
// on inputs with FA3's outliers (N(0,1) plus N(0,100) on 0.1 % of the entries of Q, K and V).
// The error is ||O - O_ref|| / ||O_ref|| and the RMSE, sqrt(mean (O - O_ref)^2), FA3's measure.
//
// The CPU twins make every e4m3 rounding the kernel will, so the error table is the GPU's; the
// speed half (time and TFLOP/s of each row on the GPU) needs the FP8 CUDA kernel, and says so
// until it exists.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/packed.h"
#include "core/rng.h"
#include "labs/common/lab_util.h"
#include "labs/lab.h"
#include "reference/attention.h"
#include "run/registry.h"

namespace flashlab::lab {

namespace {

// One head of d = 128, as FA3's table, N long enough that a block of 128 rows holds a few outliers
// on average (0.1 % of 128 x 128 entries: 16) and short enough for a laptop.
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

struct Error {
  double rel = 0, rmse = 0;
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

// The four rows' errors on one kind of input.
std::vector<Error> errors_on(InputKind kind, uint64_t seed) {
  const Inputs in = make_inputs(lab_problem(DType::fp8), seed, kind);  // bf16 values, both dtypes
  const Forward ref = reference::forward(lab_problem(DType::fp8), in, /*keep_P=*/false);
  std::vector<Error> out;
  for (const Row& row : kRows) {
    Forward f;
    Counters counted;
    cpu_forward(version(row.version), lab_problem(row.dtype), in, CpuOptions{}, f, counted);
    out.push_back(error_of(f.O, ref.O));
  }
  return out;
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
  r.config = {{"backend", "cpu"}, {"B", 1},          {"H", kH},
              {"N", kN},          {"d", kD},         {"causal", false},
              {"seed", o.seed},   {"versions", ids_of(used)}};
  const std::vector<Error> normal = errors_on(InputKind::normal, o.seed);
  const std::vector<Error> outliers = errors_on(InputKind::outliers, o.seed);

  Table t{"errors",
          fmt::format(fmt::runtime(tr(o,
                                      "O against the fp64 reference on the same bf16 inputs "
                                      "(B=1, H={}, N={}, d={}, non-causal, seed {}), CPU twins",
                                      "O 与同一组 bf16 输入上的 fp64 参考结果比较（B=1，H={}，"
                                      "N={}，d={}，非因果，种子 {}），CPU 孪生实现")),
                      kH, kN, kD, o.seed),
          {col("row", tr(o, "forward", "前向")), col("version", tr(o, "version", "版本")),
           col("rel_normal", tr(o, "rel, normal", "相对误差，正态"), "", "{:.2e}"),
           col("rmse_normal", tr(o, "RMSE, normal", "RMSE，正态"), "", "{:.2e}"),
           col("rel_outliers", tr(o, "rel, outliers", "相对误差，离群值"), "", "{:.2e}"),
           col("rmse_outliers", tr(o, "RMSE, outliers", "RMSE，离群值"), "", "{:.2e}")},
          {}};
  for (int i = 0; i < kRowCount; ++i) {
    t.rows.push_back({zh(o) ? kRows[i].zh : kRows[i].en, kRows[i].version, normal[i].rel,
                      normal[i].rmse, outliers[i].rel, outliers[i].rmse});
    const std::string id = kRows[i].version;
    r.figures["rel_normal_" + id] = {{"value", normal[i].rel}, {"unit", "ratio"}};
    r.figures["rel_outliers_" + id] = {{"value", outliers[i].rel}, {"unit", "ratio"}};
    r.figures["rmse_normal_" + id] = {{"value", normal[i].rmse}, {"unit", ""}};
    r.figures["rmse_outliers_" + id] = {{"value", outliers[i].rmse}, {"unit", ""}};
  }
  r.tables.push_back(std::move(t));

  // The speed half: each row on the GPU, once the FP8 kernel exists.
  const VersionInfo& rung = version("hopper-fp8");
  std::string why = cuda_unavailable(rung);
  if (why.empty()) why = tr(o, "measured by `run --backend cuda`", "用 `run --backend cuda` 测量");
  Table speed{"speed",
              tr(o, "Time and TFLOP/s of each forward on the GPU (FA2 FLOP convention)",
                 "各前向在 GPU 上的时间与 TFLOP/s（FA2 的 FLOP 计法）"),
              {col("row", tr(o, "forward", "前向")), col("version", tr(o, "version", "版本")),
               col("ms", tr(o, "time", "时间"), "ms", "{:.3f}"),
               col("tflops", "TFLOP/s", "TFLOP/s", "{:.1f}"),
               col("why", tr(o, "not measured because", "未测量，因为"))},
              {}};
  for (const Row& row : kRows)
    speed.rows.push_back({zh(o) ? row.zh : row.en, row.version, nullptr, nullptr,
                          std::string(row.dtype == DType::fp8
                                          ? tr(o, "needs the CUDA kernel: ", "需要 CUDA 内核：") + why
                                          : tr(o, "timed beside the FP8 rows, once they run",
                                               "等 FP8 各行能跑时一起计时"))});
  r.tables.push_back(std::move(speed));

  // Observations, from the numbers above.
  double lo = normal[kPerTensor].rel, hi = lo;
  for (int i = kPerTensor; i < kRowCount; ++i) {
    lo = std::min(lo, normal[i].rel);
    hi = std::max(hi, normal[i].rel);
  }
  const bool alike = hi / lo < 1.25;  // the fp8 rows agree to within a quarter
  r.observations.push_back(
      zh(o) ? fmt::format("正态输入：fp8 的误差是 bf16 的 {} 倍（e4m3 有 3 位尾数，bf16 有 7 位）；"
                          "三种 fp8 做法彼此相差 {} 倍{}",
                          x_of(normal[kPerTensor].rel, normal[kBf16].rel), x_of(hi, lo),
                          alike ? "：没有离群值时，分块缩放和非相干处理无可补救，误差来自 e4m3 本身。"
                                : "。")
            : fmt::format("Normal inputs: fp8's error is {}x bf16's (e4m3 keeps 3 mantissa bits, "
                          "bf16 7); the three fp8 rows are within {}x of one another{}",
                          x_of(normal[kPerTensor].rel, normal[kBf16].rel), x_of(hi, lo),
                          alike ? ": with no outliers there is little for block scales or "
                                  "incoherent processing to win back, the error is e4m3's own."
                                : "."));
  const double block_gain = outliers[kPerTensor].rel / outliers[kBlock].rel;
  const double ip_gain = outliers[kBlock].rel / outliers[kIncoherent].rel;
  const double vs_plain = outliers[kPerTensor].rel / outliers[kIncoherent].rel;
  r.figures["incoherent_factor_outliers"] = {{"value", ip_gain}, {"unit", "ratio"}};
  r.figures["block_factor_outliers"] = {{"value", block_gain}, {"unit", "ratio"}};
  r.observations.push_back(
      zh(o) ? fmt::format("离群值输入：非相干处理把分块缩放 fp8 的误差降低 {:.2f} 倍，相对整张量 fp8 是 "
                          "{:.2f} 倍（FA3 论文报告 2.6 倍）。",
                          ip_gain, vs_plain)
            : fmt::format("Outlier inputs: incoherent processing lowers block-scaled fp8's error "
                          "{:.2f}x, and {:.2f}x below per-tensor fp8 (the FA3 paper reports 2.6x).",
                          ip_gain, vs_plain));
  // e4m3 is a floating-point format: its relative precision is the same at every scale, so a
  // block's own scale buys precision only for values that would fall to subnormals otherwise.
  r.observations.push_back(
      block_gain >= 1.25
          ? (zh(o) ? fmt::format("分块缩放把整张量缩放的误差降低了 {:.2f} 倍。", block_gain)
                   : fmt::format("Block scales lower the per-tensor error {:.2f}x.", block_gain))
          : (zh(o) ? fmt::format("分块缩放几乎没有帮助（整张量误差的 {:.2f} 倍）：e4m3 是浮点格式，在任何缩放下"
                                 "相对精度都一样，块自己的缩放只对本会落入次正规数的小值有用。离群值的害处在于"
                                 "它在 Q K^T 的点积里那一项的舍入误差太大；非相干处理把它摊到 d 个分量上，"
                                 "各项大小相近，误差才降下来。",
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
  const double left = outliers[kIncoherent].rel / normal[kIncoherent].rel;
  if (ip_gain >= 2.0)
    r.observations.push_back(
        zh(o) ? fmt::format("非相干处理在离群值输入上把分块缩放 fp8 的误差降低了 {:.2f} 倍，达到 2 倍的目标。",
                            ip_gain)
              : fmt::format("Incoherent processing lowers block-scaled fp8's error {:.2f}x on "
                            "outlier inputs: at least the 2x this rung aims for.",
                            ip_gain));
  else
    r.observations.push_back(
        zh(o) ? fmt::format("非相干处理只降低了 {:.2f} 倍，不到 2 倍的目标。旋转之后，离群值输入上的误差是"
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
  r.observations.push_back(
      zh(o) ? "速度那一半（GPU 上各行的时间和 TFLOP/s）需要 FP8 的 CUDA 内核：" + why + "。"
            : "The speed half (each row's time and TFLOP/s on the GPU) needs the FP8 CUDA kernel: " +
                  why + ".");
  r.ok = true;
  for (int i = 0; i < kRowCount; ++i)
    r.ok = r.ok && std::isfinite(normal[i].rel) && std::isfinite(outliers[i].rel);
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
