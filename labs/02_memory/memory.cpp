// Lab "memory" — the lecture's demo 2: what the backward needs kept from the forward. The standard
// backward keeps P (N x N per head, fp16); FlashAttention keeps one fp32 LSE per row. Then the
// extra memory each backward version allocates (the registry's workspace formulas), and on a GPU
// the naive version's measured peak device memory.
#include <fmt/format.h>

#include <cmath>
#include <exception>

#include "core/rng.h"
#include "cuda/runner.h"
#include "labs/common/lab_util.h"
#include "labs/lab.h"
#include "run/registry.h"

namespace flashlab::lab {

namespace {

constexpr int64_t kHeads = 32;  // batch x heads, as in the lecture
constexpr double kGpu80GB = 80e9;

// P and LSE bytes for the lecture's 32 attention matrices at length N.
struct Kept {
  int64_t N, p_bytes, lse_bytes;
};

Kept kept_for_backward(int64_t N) {
  const Shape s{1, kHeads, N, N, 64};
  return {N, s.heads() * s.Nq * s.Nk * dtype_bytes(DType::f16), s.lse_elems() * 4};
}

Table demo2_table(const LabOptions& o, const std::vector<Kept>& rows) {
  Table t{
      "kept",
      tr(o, "What is kept for backward (per layer; batch x heads = 32 attention matrices, fp16)",
         "为了反向传播要存什么（每层；批 × 头 = 32 个注意力矩阵，FP16）"),
      {col("N", tr(o, "sequence length N", "序列长度 N"), "", "count"),
       col("P_bytes", tr(o, "standard: keep P (N x N)", "标准：存 P（N×N）"), "B", "bytes"),
       col("LSE_bytes",
           tr(o, "FlashAttention: keep L (N x fp32)", "FlashAttention：存 L（N 个 FP32）"), "B",
           "bytes"),
       col("ratio", tr(o, "P / L", "倍数"), "ratio", "count")},
      {}};
  for (const Kept& k : rows)
    t.rows.push_back({k.N, k.p_bytes, k.lse_bytes, k.p_bytes / k.lse_bytes});
  return t;
}

// K and V of one layer with grouped heads: 32 query heads of d = 128 in bf16 (a Llama-3-8B layer)
// over 32 (multi-head), 8 (grouped-query) and 1 (multi-query) K/V heads. The bytes a decoding step
// reads, and the cache a long context keeps.
Table kv_table(const LabOptions& o, std::vector<std::string>& notes) {
  Table t{"kv",
          tr(o,
             "K and V of one layer with grouped heads (32 query heads, d = 128, bf16; "
             "--heads-kv HKV)",
             "分组头下一层的 K 与 V（32 个查询头，d = 128，BF16；--heads-kv HKV）"),
          {col("N", tr(o, "sequence length N", "序列长度 N"), "", "count"),
           col("Hkv", tr(o, "K/V heads", "K/V 头数"), "", "count"),
           col("kv_bytes", tr(o, "K + V", "K + V"), "B", "bytes"),
           col("vs_mha", tr(o, "x multi-head", "相对多头"), "ratio", "{:.4g}")},
          {}};
  for (int64_t N : {4096, 32768, 131072}) {
    Shape mha{1, 32, 1, N, 128};
    const double mha_bytes = 2.0 * mha.kv_elems() * dtype_bytes(DType::bf16);
    for (int64_t Hkv : {32, 8, 1}) {
      Shape s = mha;
      s.Hkv = Hkv;
      const double bytes = 2.0 * s.kv_elems() * dtype_bytes(DType::bf16);
      t.rows.push_back({N, Hkv, bytes, bytes / mha_bytes});
    }
  }
  notes.push_back(
      zh(o) ? "分组查询注意力（Llama 3、Mistral、Qwen）让 H / HKV 个查询头共用一个 K/V 头：K、V "
              "与它们的缓存缩小 "
              "H / HKV 倍（32 个查询头配 8 个 K/V 头时是 1/4，多查询 HKV = 1 时是 1/32），而 FLOPs "
              "不变——每个查询头仍与全部键做乘积。解码时每个新 token "
              "都要把整个缓存读一遍，所以读的字节也缩小同样的倍数。"
            : "Grouped-query attention (Llama 3, Mistral, Qwen) lets H / HKV query heads share one "
              "K/V "
              "head: K, V and their cache shrink by H / HKV (a quarter with 8 K/V heads under 32 "
              "query heads, 1/32 for multi-query, HKV = 1), while the FLOPs stay: every query head "
              "still multiplies against every key. A decoding step reads the whole cache, so the "
              "bytes it reads shrink by the same factor.");
  return t;
}

// The workspace shape: a training-sized step, B = 4, H = 16, N = 4096, d = 128, fp16, Bc = 128.
Problem workspace_problem() {
  Problem p;
  p.shape = Shape{4, 16, 4096, 4096, 128};
  p.dtype = DType::f16;
  return p;
}

Table workspace_table(const LabOptions& o, const Problem& p, const CpuOptions& opt) {
  const double q_bytes = static_cast<double>(p.shape.q_elems()) * dtype_bytes(p.dtype);
  Table t{"workspace",
          fmt::format(
              fmt::runtime(tr(
                  o, "Extra memory of each backward version (B={}, H={}, N={}, d={}, fp16, Bc={})",
                  "各反向版本额外申请的显存（B={}，H={}，N={}，d={}，FP16，Bc={}）")),
              p.shape.B, p.shape.H, p.shape.Nq, p.shape.d, opt.Bc),
          {col("version", tr(o, "version", "版本")),
           col("formula", tr(o, "workspace (formula)", "工作区（公式）")),
           col("bytes", tr(o, "bytes", "字节"), "B", "bytes"),
           col("vs_Q", tr(o, "x the fp16 Q tensor", "相当于几个 FP16 的 Q"), "ratio", "{:.3g}")},
          {}};
  for (const VersionInfo& v : versions()) {
    if (!v.cpu_backward || v.exercise) continue;
    const int64_t b = v.workspace_bytes(p, opt);
    t.rows.push_back({v.id, v.workspace, b, b / q_bytes});
  }
  return t;
}

// Naive on the GPU: run it once per N and read the runner's peak device memory.
Table naive_peak_table(const LabOptions& o) {
  Table t{
      "naive_peak",
      tr(o, "naive on the GPU: peak device memory of a run (B=1, H=32, d=64, fp16)",
         "naive 在 GPU 上运行时的显存峰值（B=1，H=32，d=64，FP16）"),
      {col("N", "N", "", "count"),
       col("P_fp32_bytes", tr(o, "S and P, fp32 (formula)", "S 和 P，FP32（公式）"), "B", "bytes"),
       col("peak_bytes", tr(o, "peak device memory of the run", "这次运行的显存峰值"), "B",
           "bytes")},
      {}};
  const VersionInfo* naive = find_version("naive");
  cuda::RunOptions ro;
  ro.warmup = 0;
  ro.repeats = 1;
  ro.flush_l2 = false;
  ro.bitwise_repeats = 0;
  for (int64_t N : {1024, 2048, 4096}) {
    Problem p;
    p.shape = Shape{1, 32, N, N, 64};
    p.dtype = DType::f16;
    const Inputs in = make_inputs(p, o.seed);
    const cuda::RunResult r = cuda::run(*naive->cuda, p, in, nullptr, ro);
    t.rows.push_back({N, 2 * p.shape.heads() * N * N * 4, r.peak_device_bytes});
    if (cuda::device_info().free_bytes > 0 &&
        4 * r.peak_device_bytes > cuda::device_info().free_bytes)
      break;  // the next N needs four times as much
  }
  return t;
}

}  // namespace

Report memory(const LabOptions& o) {
  Report r;
  r.command = "lab memory";
  for (const VersionInfo& v : versions())
    if (v.cpu_backward && !v.exercise) r.version_ids.push_back(v.id);
  std::vector<Kept> kept;
  for (int64_t N : {2048, 8192, 32768, 131072}) kept.push_back(kept_for_backward(N));
  r.tables.push_back(demo2_table(o, kept));

  const Problem wp = workspace_problem();
  const CpuOptions wopt = blocks(128, 128);
  r.tables.push_back(workspace_table(o, wp, wopt));
  std::vector<std::string> kv_notes;
  r.tables.push_back(kv_table(o, kv_notes));
  r.config = {{"heads", kHeads},
              {"P_dtype", "fp16"},
              {"LSE_dtype", "fp32"},
              {"N", {2048, 8192, 32768, 131072}},
              {"workspace_shape",
               {{"B", wp.shape.B},
                {"H", wp.shape.H},
                {"N", wp.shape.Nq},
                {"d", wp.shape.d},
                {"dtype", "fp16"},
                {"Bc", wopt.Bc}}}};

  // Observations from the figures above.
  const Kept& k32 = kept[2];
  const Kept& last = kept.back();
  r.observations.push_back(
      zh(o)
          ? fmt::format(
                "标准写法为反向存下的 P 随 N² 增长：N = {} 时每层 {}，占一块 80 GB GPU 的 {:.0f}%，"
                "只是一层；N = {} 时要 {}。FlashAttention 只存 L，随 N 线性增长（N = {} 时 {}），"
                "两者之比正好是 N/2（FP16 的一行 P 是 2N 字节，L 是 4 字节）。",
                format_thousands(k32.N), format_bytes(k32.p_bytes), 100.0 * k32.p_bytes / kGpu80GB,
                format_thousands(last.N), format_bytes(last.p_bytes), format_thousands(last.N),
                format_bytes(last.lse_bytes))
          : fmt::format(
                "The P kept by the standard backward grows as N²: at N = {} it takes {} per "
                "layer, {:.0f}% of an 80 GB GPU for a single layer; at N = {} it takes {}. "
                "FlashAttention keeps only L, linear in N ({} at N = {}); the ratio is exactly "
                "N/2 (a row of fp16 P is 2N bytes, its L is 4 bytes).",
                format_thousands(k32.N), format_bytes(k32.p_bytes), 100.0 * k32.p_bytes / kGpu80GB,
                format_thousands(last.N), format_bytes(last.p_bytes), format_bytes(last.lse_bytes),
                format_thousands(last.N)));

  const int64_t atomic = find_version("atomic-dq")->workspace_bytes(wp, wopt);
  const int64_t determ = find_version("deterministic-dq")->workspace_bytes(wp, wopt);
  const int64_t naive = find_version("naive")->workspace_bytes(wp, wopt);
  const int64_t splits = (wp.shape.Nk + wopt.Bc - 1) / wopt.Bc;
  const double q16 = static_cast<double>(wp.shape.q_elems()) * dtype_bytes(DType::f16);
  r.observations.push_back(
      zh(o)
          ? fmt::format("FlashAttention 的反向也要一点工作区：atomic-dq 的工作区（主要是 FP32 的 "
                        "dQ 累加缓冲）共 {}（FP16 dQ 的 {:.2f} 倍）；"
                        "deterministic-dq 给每个 K 块一份自己的 dQ（{} 份），共 {}，是 atomic-dq "
                        "的 {:.1f} 倍——"
                        "这就是可重现的梯度要付的显存（这是 CPU 孪生版本的上界；CUDA 版本像 FA2 "
                        "一样把分片数限制在每个头几份，每个 CTA 依次处理几个 K 块）。naive 存 FP32 "
                        "的 S 和 P，要 {}。",
                        format_bytes(atomic), atomic / q16, splits, format_bytes(determ),
                        static_cast<double>(determ) / atomic, format_bytes(naive))
          : fmt::format(
                "The FlashAttention backward needs some workspace too: atomic-dq's, mostly its "
                "fp32 dQ accumulator, is {} ({:.2f}x the fp16 dQ); deterministic-dq gives "
                "every K block its own dQ split ({} splits), {} in all, {:.1f}x atomic-dq's: "
                "the memory price of reproducible gradients (this is the CPU twin's upper bound; "
                "the CUDA version, like FA2, bounds the splits to a few per head, each CTA "
                "walking several K blocks in a fixed order). naive keeps S and P in fp32: {}.",
                format_bytes(atomic), atomic / q16, splits, format_bytes(determ),
                static_cast<double>(determ) / atomic, format_bytes(naive)));

  if (use_gpu(o)) {
    Table t = naive_peak_table(o);
    const auto& row = t.rows.back();
    const double sp = row[1].get<double>(), peak = row[2].get<double>();
    r.observations.push_back(
        zh(o)
            ? fmt::format("在 {} 上实测：N = {} 时 naive 的显存峰值是 {}，其中 FP32 的 S 和 P 占 "
                          "{}（{:.0f}%）。",
                          cuda::device_info().name, format_thousands(row[0].get<int64_t>()),
                          format_bytes(peak), format_bytes(sp), 100.0 * sp / peak)
            : fmt::format("Measured on {}: at N = {} naive peaks at {} of device memory, of which "
                          "the fp32 S and P take {} ({:.0f}%).",
                          cuda::device_info().name, format_thousands(row[0].get<int64_t>()),
                          format_bytes(peak), format_bytes(sp), 100.0 * sp / peak));
    r.tables.push_back(std::move(t));
  } else {
    r.observations.push_back(zh(o) ? std::string("没有 GPU：naive 的显存峰值没有实测") +
                                         (cuda_built()
                                              ? "（" + cuda::device_info().why_absent + "）。"
                                              : "（这个 flashlab 构建时没有打开 CUDA）。")
                                   : "No GPU: naive's peak device memory is not measured; " +
                                         cuda::device_info().why_absent + ".");
  }

  for (const Kept& k : kept) {
    r.figures[fmt::format("P_bytes_N{}", k.N)] = {{"value", k.p_bytes}, {"unit", "B"}};
    r.figures[fmt::format("LSE_bytes_N{}", k.N)] = {{"value", k.lse_bytes}, {"unit", "B"}};
  }
  r.figures["atomic_dq_workspace"] = {{"value", atomic}, {"unit", "B"}};
  r.figures["deterministic_dq_workspace"] = {{"value", determ}, {"unit", "B"}};
  for (std::string& n : kv_notes) r.observations.push_back(std::move(n));
  return r;
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "memory",
    .title_en = "What is kept for backward: P (N x N) vs LSE (N), and the backward workspaces",
    .title_zh = "为了反向传播要存什么：P（N×N）vs LSE（N），以及各反向版本的工作区",
    .run = flashlab::lab::memory,
    .tables = {"kept", "workspace", "kv", "naive_peak"},
});
