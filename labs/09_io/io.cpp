// Lab "io" — the lecture's open question (demo 3), measured. The cost lab counts IO the lecture's
// way: every tile read and written is HBM traffic. The lecture itself says that is too simple: the
// Q_i, dO_i and dQ_i tiles that many CTAs read again mostly hit in L2, and only a profiler on a
// real GPU can say how much. This lab puts, for every version, kernel by kernel:
//
//   modeled    the CPU twins' dry-run counters (io_model.h), 2 bytes an element
//   floor      each input read once, each output written once
//   measured   DRAM bytes read and written, L2 traffic and hit rates, tensor-pipe activity and
//              duration, from the hardware counters around each kernel (cuda/counters.h)
//
// at N = 512 ... 16,384, d = 128 and 64 (B*N = 16k tokens, hidden 2048, bf16, not causal), the
// standard/FA ratio both ways (standard = naive forward + backward, FA = tiled + atomic-dq, as in
// the cost lab), the machine's ceilings (cuda/ceilings.h) and, at N = 4096, each kernel on the
// measured roofline (`flashlab plot` draws it). Without a GPU, or without permission to read the
// counters, it prints the modeled half and one line saying why the rest is missing.
//
// io_model.h counts, io_runs.h measures, this file makes the tables and the observations.
#include "io.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "cuda/ceilings.h"
#include "cuda/counters.h"
#include "cuda/runner.h"
#include "io_model.h"
#include "io_runs.h"
#include "labs/common/lab_util.h"
#include "labs/lab.h"
#include "run/registry.h"

namespace flashlab::lab {

namespace {

using io_model::model_bytes;
using namespace io_runs;

// Within this fraction of the modeled ratio, the lecture's figure "holds" for DRAM traffic.
constexpr double kHoldsWithin = 0.2;

json num(std::optional<double> x) {
  return x && std::isfinite(*x) ? json(*x) : json(nullptr);
}

// The columns that say which pass a row is about, and its cells.
std::vector<Column> pass_columns(const LabOptions& o) {
  return {col("d", "d"), col("N", "N", "", "count"), col("version", tr(o, "version", "版本")),
          col("pass", "pass")};
}
std::vector<json> pass_cells(const PassRun& r) {
  return {r.p.shape.d, r.p.shape.Nq, r.version->id, r.pass()};
}
template <class T>
std::vector<T> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Table io_table(const LabOptions& o, const std::vector<PassRun>& all, const std::string& where) {
  Table t{"io",
          tr(o, "Bytes per pass: the lecture's count, the floor, and DRAM as measured; ",
             "每个 pass 的字节数：讲义的计数、下限、实测的显存读写；") +
              where,
          concat<Column>(
              pass_columns(o),
              {col("B", "B"), col("H", "H"),
               col("model_bytes", tr(o, "modeled (lecture)", "模型（讲义）"), "B", "bytes"),
               col("floor_bytes", tr(o, "floor", "下限"), "B", "bytes"),
               col("dram_bytes", tr(o, "DRAM (measured)", "显存（实测）"), "B", "bytes"),
               col("dram_over_model", tr(o, "DRAM / modeled", "显存 / 模型"), "ratio", "{:.3f}"),
               col("dram_over_floor", tr(o, "DRAM / floor", "显存 / 下限"), "ratio", "{:.2f}"),
               col("sm_read_bytes", tr(o, "SM reads at L2", "SM 向 L2 读"), "B", "bytes"),
               col("sm_read_hit_pct", tr(o, "of them L2 hits", "其中 L2 命中"), "%", "{:.1f}"),
               col("time_us", tr(o, "time (counters)", "耗时（计数器）"), "µs", "{:.1f}"),
               col("dram_tbps", tr(o, "DRAM bandwidth", "显存带宽"), "TB/s", "{:.2f}")}),
          {}};
  for (const PassRun& r : all) {
    const Shape& s = r.p.shape;
    const double model = model_bytes(r.model.total), floor = io_model::floor_bytes(r.backward, r.p);
    const auto dram = r.dram();
    const auto sec = r.seconds();
    t.rows.push_back(concat<json>(
        pass_cells(r),
        {s.B, s.H, model, floor, num(dram), num(ratio(dram, model)), num(ratio(dram, floor)),
         num(r.measured ? std::optional<double>(r.sum("l2_sm_read_sectors") * kSectorBytes)
                        : std::nullopt),
         num(r.sm_read_hit_pct()), num(sec ? std::optional<double>(*sec * 1e6) : std::nullopt),
         num(dram && sec && *sec > 0 ? std::optional<double>(*dram / *sec * 1e-12)
                                     : std::nullopt)}));
  }
  return t;
}

Table kernels_table(const LabOptions& o, const std::vector<PassRun>& all,
                    const std::string& where) {
  Table t{"kernels",
          tr(o, "Kernel by kernel: the lecture's count beside the hardware counters; ",
             "逐个内核：讲义的计数与硬件计数器；") +
              where,
          concat<Column>(
              pass_columns(o),
              {col("kernel", tr(o, "kernel", "内核")),
               col("model_bytes", tr(o, "modeled (lecture)", "模型（讲义）"), "B", "bytes"),
               col("dram_read_bytes", tr(o, "DRAM read", "显存读"), "B", "bytes"),
               col("dram_write_bytes", tr(o, "DRAM written", "显存写"), "B", "bytes"),
               col("dram_over_model", tr(o, "DRAM / modeled", "显存 / 模型"), "ratio", "{:.3f}"),
               col("l2_bytes", tr(o, "L2 traffic", "L2 流量"), "B", "bytes"),
               col("l2_hit_pct", tr(o, "L2 hit rate", "L2 命中率"), "%", "{:.1f}"),
               col("sm_read_hit_pct", tr(o, "SM-read hits", "SM 读命中"), "%", "{:.1f}"),
               col("tensor_pct", tr(o, "tensor pipe", "tensor 管线"), "%", "{:.1f}"),
               col("time_us", tr(o, "time", "耗时"), "µs", "{:.1f}"),
               col("tflops", tr(o, "achieved", "实际算力"), "TFLOP/s", "{:.1f}")}),
          {}};
  for (const PassRun& r : all) {
    if (!r.measured) {  // the modeled kernels only
      for (const KernelCount& k : r.model.kernels)
        t.rows.push_back(
            concat<json>(pass_cells(r), {k.kernel, model_bytes(k.counts), nullptr, nullptr, nullptr,
                                         nullptr, nullptr, nullptr, nullptr, nullptr, nullptr}));
      continue;
    }
    for (const Kernel& k : r.kernels) {
      const std::optional<double> model =
          k.model ? std::optional<double>(model_bytes(*k.model)) : std::nullopt;
      const auto sec = k.seconds(), fl = k.flops();
      t.rows.push_back(concat<json>(
          pass_cells(r),
          {k.name, num(model), num(k.get("dram_read_bytes")), num(k.get("dram_write_bytes")),
           num(ratio(k.dram(), model)), num(k.get("l2_bytes")), num(k.get("l2_hit_pct")),
           num(sm_read_hit_pct(k)), num(k.get("tensor_active_pct")),
           num(sec ? std::optional<double>(*sec * 1e6) : std::nullopt),
           num(fl && sec && *sec > 0 ? std::optional<double>(*fl / *sec * 1e-12) : std::nullopt)}));
    }
  }
  return t;
}

Table ratio_table(const LabOptions& o, const std::vector<Ratio>& rs) {
  Table t{"ratio",
          tr(o,
             "Standard (naive fwd + bwd) / FlashAttention (tiled + atomic-dq): the lecture's count "
             "and the GPU's DRAM and L2 traffic",
             "标准（naive 前向 + 反向）/ FlashAttention（tiled + atomic-dq）：讲义的计数与 GPU "
             "的显存、L2 流量"),
          {col("d", "d"), col("N", "N", "", "count"),
           col("std_model_bytes", tr(o, "standard, modeled", "标准，模型"), "B", "bytes"),
           col("fa_model_bytes", tr(o, "FA, modeled", "FA，模型"), "B", "bytes"),
           col("ratio_model", tr(o, "modeled ratio", "模型比值"), "ratio", "{:.2f}"),
           col("std_dram_bytes", tr(o, "standard, DRAM", "标准，显存"), "B", "bytes"),
           col("fa_dram_bytes", tr(o, "FA, DRAM", "FA，显存"), "B", "bytes"),
           col("ratio_dram", tr(o, "DRAM ratio", "显存比值"), "ratio", "{:.2f}"),
           col("ratio_l2", tr(o, "L2 traffic ratio", "L2 流量比值"), "ratio", "{:.2f}")},
          {}};
  for (const Ratio& r : rs)
    t.rows.push_back({r.d, r.N, r.std_model, r.fa_model, r.std_model / r.fa_model, num(r.std_dram),
                      num(r.fa_dram), num(ratio(r.std_dram, r.fa_dram)),
                      num(ratio(r.std_l2, r.fa_l2))});
  return t;
}

double tera(const cuda::Ceiling& c) {
  return c.value * 1e-12;
}

Table ceilings_table(const LabOptions& o, const std::vector<cuda::Ceiling>& cs,
                     const std::string& where) {
  Table t{"ceilings",
          tr(o, "The machine's ceilings, measured by micro-benchmarks; ",
             "本机的上限（微基准实测）；") +
              where,
          {col("key", "key"), col("name", tr(o, "what", "项目")),
           col("value", tr(o, "measured", "实测"), "", "{:.1f}"),
           col("unit", tr(o, "unit", "单位")), col("check_ok", tr(o, "check", "检查")),
           col("check", tr(o, "check result", "检查结果")), col("how", tr(o, "how", "方法"))},
          {}};
  for (const cuda::Ceiling& c : cs) {
    const bool ran = c.why_not.empty();
    t.rows.push_back({c.key, c.name, ran ? json(tera(c)) : json(nullptr),
                      c.unit == "B/s" ? "TB/s" : "TFLOP/s", ran ? json(c.check_ok) : json(nullptr),
                      ran ? c.check : c.why_not, c.how});
  }
  return t;
}

const cuda::Ceiling* ceiling(const std::vector<cuda::Ceiling>& cs, const char* key) {
  for (const cuda::Ceiling& c : cs)
    if (c.key == key && c.why_not.empty() && c.value > 0) return &c;
  return nullptr;
}

// Each measured kernel at N = kRooflineN: FLOPs from the counters (or the model), bytes from DRAM.
Table roofline_table(const LabOptions& o, const std::vector<PassRun>& all) {
  Table t{
      "roofline",
      tr(o, "The roofline at N = 4,096: each kernel by measured DRAM bytes and achieved FLOP/s",
         "N = 4,096 的 roofline：每个内核按实测显存字节与实际算力定位"),
      {col("d", "d"), col("version", tr(o, "version", "版本")), col("pass", "pass"),
       col("kernel", tr(o, "kernel", "内核")),
       col("flops", tr(o, "FLOPs", "FLOPs"), "FLOP", "{:.3g}"),
       col("dram_bytes", tr(o, "DRAM", "显存"), "B", "bytes"),
       col("intensity", tr(o, "intensity (DRAM)", "算术强度（显存）"), "FLOP/B", "{:.1f}"),
       col("model_intensity", tr(o, "intensity (lecture)", "算术强度（讲义）"), "FLOP/B", "{:.1f}"),
       col("achieved", tr(o, "achieved", "实际算力"), "FLOP/s", "{:.3g}")},
      {}};
  for (const PassRun& r : all) {
    if (!r.measured || r.p.shape.Nq != kRooflineN) continue;
    for (const Kernel& k : r.kernels) {
      const auto fl = k.flops(), dram = k.dram(), sec = k.seconds();
      if (!fl || !(*fl > 0) || !dram || !(*dram > 0) || !sec || !(*sec > 0)) continue;
      const double mi = k.model && k.model->io() > 0
                            ? double(k.model->matmul_flops) / model_bytes(*k.model)
                            : NAN;
      t.rows.push_back({r.p.shape.d, r.version->id, r.pass(), k.name, *fl, *dram, *fl / *dram,
                        std::isfinite(mi) ? json(mi) : json(nullptr), *fl / *sec});
    }
  }
  return t;
}

// min and max of a figure over the rows of one head dim.
struct Range {
  double lo = INFINITY, hi = -INFINITY;
  void add(double x) { lo = std::min(lo, x), hi = std::max(hi, x); }
  bool empty() const { return lo > hi; }
};

std::string range_text(const Range& r, const char* f = "{:.2f}") {
  const std::string lo = fmt::format(fmt::runtime(f), r.lo),
                    hi = fmt::format(fmt::runtime(f), r.hi);
  return lo == hi ? lo : lo + "–" + hi;
}

void model_observations(const LabOptions& o, Report& rep, const std::vector<Ratio>& rs,
                        const std::vector<PassRun>& all) {
  std::map<int64_t, Range> by_d;
  for (const Ratio& r : rs) by_d[r.d].add(r.std_model / r.fa_model);
  rep.observations.push_back(
      zh(o) ? fmt::format("按讲义的算法计数（CPU 孪生版本的计数器：每次块的读写都算显存流量，"
                          "每个元素 2 字节，块 128×128），标准 / FA 的读写比在 d = 128 时是 {}"
                          "（讲义演示 3 的设置：≈ 1.8，N 越大越接近 11/6），d = 64 时是 {}（接近 "
                          "11/3：FlashAttention 反复读写的块只有一半宽，而标准写法每个头的 N×N "
                          "矩阵不变）。",
                          range_text(by_d[128]), range_text(by_d[64]))
            : fmt::format("Counted the lecture's way (the CPU twins' counters: every tile read and "
                          "write is HBM traffic, 2 bytes an element, blocks 128x128), standard/FA "
                          "traffic is {} at d = 128 (demo 3's setting: the lecture's ≈ 1.8, "
                          "approaching 11/6 as N grows) and {} at d = 64 (approaching 11/3: the "
                          "tiles FlashAttention reads again are half as wide, while the standard "
                          "path's N x N matrices per head stay the same).",
                          range_text(by_d[128]), range_text(by_d[64])));
  rep.figures["model_ratio_d128_min"] = {{"value", by_d[128].lo}, {"unit", "ratio"}};
  rep.figures["model_ratio_d128_max"] = {{"value", by_d[128].hi}, {"unit", "ratio"}};

  const PassRun* fa = find(all, "atomic-dq", true, 128, kNs[5]);
  if (fa) {
    const double m = model_bytes(fa->model.total), f = io_model::floor_bytes(true, fa->p);
    rep.observations.push_back(
        zh(o) ? fmt::format("atomic-dq 反向在 N = 16,384、d = 128 时，讲义的计数是 {}，下限"
                            "（每个输入读一次、每个输出写一次）是 {}：{:.1f} 倍，多出来的几乎全是"
                            "每个 K 块都要重新读的 Q_i、dO_i 和 dQ_i。这些重复的读写到底有多少到了"
                            "显存，只有 GPU 上的计数器能回答。",
                            format_bytes(m), format_bytes(f), m / f)
              : fmt::format("For atomic-dq's backward at N = 16,384, d = 128 the lecture's count "
                            "is {} against a floor of {} (each input read once, each output "
                            "written once): {:.1f}x, almost all of it Q_i, dO_i and dQ_i read "
                            "again for every K block. How much of that reaches DRAM only the "
                            "GPU's counters can say.",
                            format_bytes(m), format_bytes(f), m / f));
  }
}

void measured_observations(const LabOptions& o, Report& rep, const std::vector<Ratio>& rs,
                           const std::vector<PassRun>& all, const std::vector<cuda::Ceiling>& cs,
                           const std::string& gpu) {
  // The ratio, at d = 128.
  Range model, dram;
  const Ratio* last = nullptr;
  for (const Ratio& r : rs)
    if (r.d == 128 && r.std_dram && r.fa_dram && *r.fa_dram > 0) {
      model.add(r.std_model / r.fa_model);
      dram.add(*r.std_dram / *r.fa_dram);
      last = &r;
    }
  if (last) {
    const double m = last->std_model / last->fa_model, d = *last->std_dram / *last->fa_dram;
    const bool holds = std::fabs(d / m - 1) <= kHoldsWithin;
    rep.figures["dram_ratio_d128_min"] = {{"value", dram.lo}, {"unit", "ratio"}};
    rep.figures["dram_ratio_d128_max"] = {{"value", dram.hi}, {"unit", "ratio"}};
    rep.figures["lecture_ratio_holds"] = {{"value", holds}, {"unit", ""}};
    const double fa_frac = *last->fa_dram / last->fa_model;
    const double std_frac = *last->std_dram / last->std_model;
    const PassRun* fb = find(all, "atomic-dq", true, 128, last->N);
    const double hit = fb ? fb->sm_read_hit_pct().value_or(NAN) : NAN;
    const bool has_hit = std::isfinite(hit);
    rep.observations.push_back(
        zh(o) ? fmt::format("在 {} 上实测（硬件计数器的显存读写字节，按 pass 把各内核加起来），d = "
                            "128 时标准 / FA 是 {}，模型是 {}：讲义的 ≈ 1.8 对这块 GPU 的显存流量"
                            "{}（N = {} 时实测是模型的 {:.1f} 倍）。",
                            gpu, range_text(dram), range_text(model), holds ? "成立" : "不成立",
                            format_thousands(double(last->N)), d / m)
              : fmt::format("Measured on {} (DRAM bytes from the hardware counters, summed over "
                            "each pass's kernels), standard/FA at d = 128 is {} against the "
                            "model's {}: the lecture's ≈ 1.8 {} for HBM traffic on this GPU (at "
                            "N = {} the measured ratio is {:.1f}x the modeled one).",
                            gpu, range_text(dram), range_text(model),
                            holds ? "holds" : "does not hold", format_thousands(double(last->N)),
                            d / m));
    // The lecture's explanation, when the counters bear it out: little of FlashAttention's
    // counted traffic reaches DRAM, and most of what its main kernel asks of L2 hits there.
    const bool reuse = has_hit && fa_frac < 0.5 && hit > 50;
    const std::string hit_en =
        has_hit ? fmt::format("{:.1f}%", hit) : std::string("an unmeasured share");
    const std::string hit_zh = has_hit ? fmt::format("{:.1f}%", hit) : std::string("未测到的比例");
    rep.observations.push_back(
        zh(o)
            ? fmt::format("FlashAttention 有模型字节的 {:.1f}% 真正经过显存（N = {} 时 {} / {}），"
                          "atomic-dq 主内核向 L2 读的数据 {} 命中{}。标准写法有模型字节的 {:.0f}% "
                          "经过显存（它的 N×N 矩阵在这里是 fp32，4 字节，模型按 2 字节算）。",
                          100 * fa_frac, format_thousands(double(last->N)),
                          format_bytes(*last->fa_dram), format_bytes(last->fa_model), hit_zh,
                          reuse ? "：这就是讲义说的——Q_i、dO_i 块和 dQ_i 累加器被同时运行的各个 "
                                  "K 块 CTA 共享，重复的读写大多停在 L2"
                                : "",
                          100 * std_frac)
            : fmt::format("FlashAttention moves {:.1f}% of its modeled bytes through DRAM ({} "
                          "of {} at N = {}), and {} of what atomic-dq's main kernel reads from "
                          "L2 hits there{}. The standard path moves {:.0f}% of its modeled "
                          "bytes (its N x N matrices are fp32 here: 4 bytes, the model counts "
                          "2).",
                          100 * fa_frac, format_bytes(*last->fa_dram), format_bytes(last->fa_model),
                          format_thousands(double(last->N)), hit_en,
                          reuse ? ": what the lecture expected -- the Q_i, dO_i tiles and the "
                                  "dQ_i accumulator are shared by the K-block CTAs running at the "
                                  "same time, and their re-reads stay in L2"
                                : "",
                          100 * std_frac));
    if (has_hit) rep.figures["fa_bwd_sm_read_l2_hit_pct"] = {{"value", hit}, {"unit", "%"}};
    rep.figures["fa_dram_over_model"] = {{"value", fa_frac}, {"unit", "ratio"}};
    rep.figures["standard_dram_over_model"] = {{"value", std_frac}, {"unit", "ratio"}};
  }

  // Kernel by kernel, atomic-dq at d = 128 and the largest N.
  const PassRun* fb = find(all, "atomic-dq", true, 128, kNs[5]);
  const Kernel *pre = find_kernel(fb, "preprocess_kernel"),
               *main = find_kernel(fb, "outer_k_kernel"),
               *conv = find_kernel(fb, "convert_dq_kernel");
  auto over = [](const Kernel* k) {
    return k && k->model ? ratio(k->dram(), model_bytes(*k->model)) : std::nullopt;
  };
  if (over(pre) && over(main) && over(conv)) {
    // Streaming kernels read and write each element once: the lecture's count is about their
    // DRAM traffic (LSE2, D and the dQ accumulator are fp32 where the model counts 2 bytes).
    const bool streaming =
        *over(pre) > 0.8 && *over(pre) < 2.5 && *over(conv) > 0.8 && *over(conv) < 2.5;
    rep.observations.push_back(
        zh(o) ? fmt::format("逐个内核看（atomic-dq，d = 128，N = 16,384）：preprocess 的显存字节是"
                            "模型的 {:.2f} 倍、convert 是 {:.2f} 倍，主内核是 {:.3f} 倍{}。",
                            *over(pre), *over(conv), *over(main),
                            streaming ? "：流式内核每个元素只读写一次，模型数的大致就是显存搬的"
                                        "（LSE2、D 和 dQ 累加器是 fp32，模型按 2 字节算），"
                                        "差别全在主内核"
                                      : "")
              : fmt::format("Kernel by kernel (atomic-dq, d = 128, N = 16,384): preprocess moves "
                            "{:.2f}x its modeled bytes through DRAM, convert {:.2f}x, the main "
                            "kernel {:.3f}x{}.",
                            *over(pre), *over(conv), *over(main),
                            streaming ? ": streaming kernels touch each element once, so the "
                                        "model is about what DRAM moves (LSE2, D and the dQ "
                                        "accumulator are fp32 where it counts 2 bytes); the "
                                        "difference is all in the main kernel"
                                      : ""));
  }

  // The roofline.
  const cuda::Ceiling *bw = ceiling(cs, "hbm_copy"), *mma = ceiling(cs, "mma_sync_bf16"),
                      *wg = ceiling(cs, "wgmma_bf16");
  const PassRun* rf = find(all, "atomic-dq", true, 128, kRooflineN);
  const Kernel* rk = find_kernel(rf, "outer_k_kernel");
  if (bw && mma) {
    const double ridge = mma->value / bw->value;
    std::string en = fmt::format(
        "Measured ceilings: HBM copy {:.2f} TB/s, mma.sync {:.0f} TFLOP/s{}; the mma.sync ridge "
        "is at {:.0f} FLOP/B.",
        tera(*bw), tera(*mma), wg ? fmt::format(", wgmma {:.0f} TFLOP/s", tera(*wg)) : "", ridge);
    std::string zh_text = fmt::format(
        "实测上限：显存拷贝 {:.2f} TB/s，mma.sync {:.0f} TFLOP/s{}；mma.sync 的拐点在 {:.0f} "
        "FLOP/B。",
        tera(*bw), tera(*mma), wg ? fmt::format("，wgmma {:.0f} TFLOP/s", tera(*wg)) : "", ridge);
    const auto fl = rk ? rk->flops() : std::nullopt;
    const auto dr = rk ? rk->dram() : std::nullopt;
    const auto sec = rk ? rk->seconds() : std::nullopt;
    if (fl && dr && sec && *dr > 0 && *sec > 0 && rk->model) {
      const double I = *fl / *dr, Im = double(rk->model->matmul_flops) / model_bytes(*rk->model);
      const double achieved = *fl / *sec;
      en += fmt::format(
          " With measured DRAM bytes, atomic-dq's main kernel (d = 128, N = 4,096) sits at {:.0f} "
          "FLOP/B, {} the ridge, and reaches {:.0f} TFLOP/s ({:.0f}% of mma.sync); the lecture's "
          "count would put it at {:.0f} FLOP/B, {} it.",
          I, I >= ridge ? "right of" : "left of", achieved * 1e-12, 100 * achieved / mma->value, Im,
          Im >= ridge ? "right of" : "left of");
      zh_text += fmt::format(
          "按实测显存字节，atomic-dq 主内核（d = 128，N = 4,096）的算术强度是 {:.0f} "
          "FLOP/B，在拐点"
          "{}，达到 {:.0f} TFLOP/s（mma.sync 的 {:.0f}%）；按讲义的计数它会在 {:.0f} "
          "FLOP/B，拐点{}。",
          I, I >= ridge ? "右边" : "左边", achieved * 1e-12, 100 * achieved / mma->value, Im,
          Im >= ridge ? "右边" : "左边");
      rep.figures["fa_main_intensity_dram"] = {{"value", I}, {"unit", "FLOP/B"}};
      rep.figures["fa_main_intensity_model"] = {{"value", Im}, {"unit", "FLOP/B"}};
    }
    rep.observations.push_back(zh(o) ? zh_text : en);
  }
  for (const cuda::Ceiling& c : cs)
    if (c.why_not.empty() && !c.check_ok)
      rep.observations.push_back(
          zh(o) ? fmt::format("上限 {} 的自检没有通过：{}。", c.name, c.check)
                : fmt::format("The {} benchmark failed its own check: {}.", c.name, c.check));

  // What could not be measured.
  int failed = 0;
  std::string first;
  for (const PassRun& r : all)
    if (!r.measured) {
      ++failed;
      if (first.empty())
        first = fmt::format("{} {} d={} N={}: {}", r.version->id, r.pass(), r.p.shape.d,
                            r.p.shape.Nq, r.why_not.empty() ? "no kernel recorded" : r.why_not);
    }
  if (failed)
    rep.observations.push_back(
        zh(o) ? fmt::format("{} 个 pass 没有测到（第一个：{}）。", failed, first)
              : fmt::format("{} passes were not measured (the first: {}).", failed, first));
  for (const PassRun& r : all)
    if (!r.note.empty()) {
      rep.observations.push_back(
          zh(o) ? fmt::format("计数器备注（{} {}）：{}", r.version->id, r.pass(), r.note)
                : fmt::format("Counter note ({} {}): {}", r.version->id, r.pass(), r.note));
      break;
    }
}

}  // namespace

Report io_lab(const LabOptions& o, const IoSetup& setup) {
  Report rep;
  rep.command = "lab io";
  const bool gpu = setup.gpu;
  const bool measure = gpu && setup.counters.available && setup.run;
  const std::string where = gpu ? fmt::format("GPU ({})", setup.gpu_name) : backend_note(o, false);

  std::vector<cuda::Ceiling> cs;
  std::string ceilings_error;
  if (gpu && setup.ceilings) {
    try {
      cs = setup.ceilings();
    } catch (const std::exception& e) {
      ceilings_error = e.what();
    }
  }
  const std::vector<PassRun> all = collect(measure ? &setup.run : nullptr);
  const std::vector<Ratio> rs = ratios(all);

  rep.config = {{"backend", gpu ? "cuda" : "cpu"},
                {"tokens", io_model::kTokens},
                {"hidden", io_model::kHidden},
                {"N", kNs},
                {"d", kDs},
                {"dtype", "bf16"},
                {"causal", false},
                {"model_blocks", io_model::kBlock},
                {"model_bytes_per_element", io_model::kModelBytesPerElement},
                {"standard", "naive forward + naive backward"},
                {"flashattention", "tiled forward + atomic-dq backward"},
                {"roofline_N", kRooflineN},
                {"seed", o.seed}};
  if (gpu) {
    const cuda::CounterStatus& c = setup.counters;
    rep.config["counters"] = {{"available", c.available},
                              {"why_not", c.why_not},
                              {"library", c.library},
                              {"chip", c.chip},
                              {"metrics", c.metrics},
                              {"missing", c.missing},
                              {"replay_passes", c.replay_passes}};
  }

  rep.tables.push_back(io_table(o, all, where));
  rep.tables.push_back(kernels_table(o, all, where));
  rep.tables.push_back(ratio_table(o, rs));
  if (!cs.empty()) rep.tables.push_back(ceilings_table(o, cs, where));
  if (measure) {
    Table rt = roofline_table(o, all);
    if (!rt.rows.empty()) rep.tables.push_back(std::move(rt));
  }

  model_observations(o, rep, rs, all);
  if (measure) {
    measured_observations(o, rep, rs, all, cs, setup.gpu_name);
  } else {
    const std::string why = gpu ? setup.counters.why_not : setup.why_no_gpu;
    rep.observations.push_back(
        zh(o) ? "没有实测：" + why +
                    "。实测的一半（每个内核的显存和 L2 计数器、本机的上限、roofline）需要一块 "
                    "NVIDIA GPU 和 CUPTI（flashlab lab io --backend cuda）。"
              : "Not measured: " + why +
                    ". The measured half (DRAM and L2 counters per kernel, the machine's ceilings, "
                    "the roofline) needs an NVIDIA GPU with CUPTI (flashlab lab io --backend "
                    "cuda).");
  }
  if (!ceilings_error.empty())
    rep.observations.push_back(zh(o) ? "上限没有测到：" + ceilings_error
                                     : "The ceilings were not measured: " + ceilings_error);
  return rep;
}

Report io(const LabOptions& o) {
  IoSetup s;
  s.gpu = use_gpu(o);
  const cuda::DeviceInfo& dev = cuda::device_info();
  if (s.gpu) {
    s.gpu_name = dev.name;
    s.counters = cuda::counter_status();
    s.ceilings = cuda::measure_ceilings;
    s.run = io_runs::gpu_runner(o.seed);
  } else {
    s.why_no_gpu = dev.present ? "--backend cpu was asked for" : dev.why_absent;
  }
  return io_lab(o, s);
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "io",
    .title_en =
        "The lecture's open question, measured: HBM traffic, L2 hits and the roofline, kernel "
        "by kernel",
    .title_zh = "讲义留下的问题，实测：显存流量、L2 命中与 roofline，逐个内核",
    .run = flashlab::lab::io,
    .tables = {"io", "kernels", "ratio", "ceilings", "roofline"},
});
