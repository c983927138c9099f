// The io lab's tables: bytes per pass (model, floor, DRAM), kernel by kernel, the standard/FA
// ratio, the machine's ceilings, and the roofline at N = 4,096.
#include <fmt/format.h>

#include <cmath>

#include "io_report.h"
#include "labs/common/lab_util.h"

namespace flashlab::lab::io_report {

using io_model::model_bytes;
using namespace io_runs;

json num(std::optional<double> x) {
  return x && std::isfinite(*x) ? json(*x) : json(nullptr);
}

namespace {

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

}  // namespace

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

}  // namespace flashlab::lab::io_report
