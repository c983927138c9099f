// Lab "decode" — one generated token against a long K/V cache: the cost is reading the cache once,
// and the question is whether the GPU reads it at its full bandwidth. 32 query heads over 8 K/V
// heads, d = 128, bf16, one query row, caches of 1k to 256k keys, B x Hkv from 1 x 8 to 64 x 8.
//
// Counted (any machine): split-kv's schedule at its kernel's tile (16 packed rows, 64 keys) on the
// GPU's SMs (132 where no GPU answers): the workers a (K/V head, row block) grid gives without
// splitting, the splits the rule chooses, the bytes the cache holds and the bytes the splits'
// partials add (written by each split, read by the merge: the last split to finish merges them).
// Measured (a GPU): split-kv timed on inputs drawn on the device (cuda::run_generated: the biggest
// point's K and V are 64 GiB, beyond any host's fp64 copy), with the rule's splits and with none;
// bandwidth = the cache's bytes over the median time, against the read ceiling the machine's own
// micro-benchmark measures (cuda/ceilings.h, hbm_read), and against a plain read of the same
// bytes timed the same way (time_plain_read: what any kernel that reads that much pays for its
// launch and its ramp from a cold start); an empty kernel of split-kv's grid, timed the same way,
// is the launch alone. Correctness is the tests' and `flashlab run`'s: here every O must only be
// finite.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/device_api.h"
#include "cuda/ceilings.h"
#include "cuda/runner.h"
#include "labs/common/lab_util.h"
#include "labs/lab.h"
#include "run/registry.h"

namespace flashlab::lab {

namespace {

constexpr int64_t kH = 32, kHkv = 8, kD = 128;
constexpr int kBr = 16, kBc = 64;  // split-kv's CUDA tile (kernels/07_split_kv/split_launch.h)
constexpr int64_t kCaches[] = {1024, 4096, 16384, 65536, 262144};
constexpr int64_t kBatches[] = {1, 8, 64};
// The plain read of a point's bytes needs a buffer of that size beside nothing else: up to 4 GiB
// (the larger points read at the ceiling anyway).
constexpr double kPlainReadMost = 4.0 * (int64_t{1} << 30);
// split-kv's dynamic shared memory at d = 128 (split_kernel.cuh: Q and 3 stages of K and V).
constexpr int kSplitSmem = (kBr + 2 * 3 * kBc) * kD * 2;

Problem decode_problem(int64_t B, int64_t Nk) {
  Problem p;
  p.shape = Shape{B, kH, 1, Nk, kD};
  p.shape.Hkv = kHkv;
  p.dtype = DType::bf16;
  return p;
}

struct Point {
  int64_t B, Nk;
  int64_t units = 0, splits = 1;
  double kv_bytes = 0, partial_bytes = 0, total_bytes = 0;
  // Measured.
  bool measured = false;
  double ms = 0, ms_unsplit = 0;
  double ms_plain = 0;  // a plain read of kv_bytes; 0 when not measured (above kPlainReadMost)
  bool finite = true;
};

// Bytes a point moves: K and V once, Q read and O written, and with S > 1 the partials (fp32 O
// and LSE of every query row) written by the splits and read by the merge.
void count(Point& pt, const Problem& p) {
  const Shape& s = p.shape;
  pt.kv_bytes = 2.0 * s.B * s.kv_heads() * s.Nk * s.d * 2;
  const double rows = static_cast<double>(s.B) * s.H * s.Nq;
  pt.partial_bytes = pt.splits > 1 ? 2.0 * pt.splits * rows * (s.d + 1) * 4 : 0.0;
  pt.total_bytes = pt.kv_bytes + rows * s.d * 2 * 2 + rows * 4 + pt.partial_bytes;
}

}  // namespace

Report decode(const LabOptions& o) {
  Report r;
  r.command = "lab decode";
  r.version_ids = {"split-kv"};
  const VersionInfo& v = version("split-kv");
  const bool gpu = use_gpu(o);
  std::string why_not;
  if (gpu) {
    if (!v.cuda || !v.cuda->forward)
      why_not = v.cuda_absent && *v.cuda_absent ? v.cuda_absent
                                                : "split-kv has no CUDA kernel in this build";
    else
      why_not = cuda_unavailable(v);
  }
  const bool measure = gpu && why_not.empty();
  const cuda::DeviceInfo& dev = cuda::device_info();
  const int64_t sms = dev.present && dev.sms > 0 ? dev.sms : 132;
  r.config = {{"backend", measure ? "cuda" : "cpu"}, {"H", kH},     {"Hkv", kHkv},
              {"d", kD},   {"Nq", 1},  {"dtype", "bf16"}, {"caches", kCaches},
              {"batches", kBatches}, {"tile", {kBr, kBc}}, {"sms", sms}};

  // The read ceiling.
  double ceiling = 0;
  std::string ceiling_how;
  if (measure) {
    try {
      for (const cuda::Ceiling& c : cuda::measure_ceilings())
        if (c.key == "hbm_read" && c.why_not.empty() && c.check_ok) {
          ceiling = c.value;
          ceiling_how = c.how;
        }
    } catch (const std::exception& e) {
      ceiling_how = e.what();
    }
  }

  // The launch alone: an empty kernel of the 1 x 8 points' grid (128 blocks of 128 threads), with
  // no shared memory and with split-kv's.
  double empty_ms = 0, empty_smem_ms = 0;
  std::string empty_why;  // why the empty kernel was not timed, if it was not
  if (measure) {
    try {
      empty_ms = cuda::time_empty_kernel(128, 128, 0).ms;
      empty_smem_ms = cuda::time_empty_kernel(128, 128, kSplitSmem).ms;
    } catch (const std::exception& e) {
      empty_ms = empty_smem_ms = 0;
      empty_why = e.what();
    }
  }

  std::vector<Point> points;
  for (int64_t B : kBatches)
    for (int64_t Nk : kCaches) {
      Point pt{B, Nk};
      const Problem p = decode_problem(B, Nk);
      CpuOptions twin;
      twin.Br = kBr;
      twin.Bc = kBc;
      pt.units = B * kHkv * ((kH / kHkv + kBr - 1) / kBr);
      pt.splits = measure ? v.cuda->kv_splits(p, {}) : v.kv_splits(p, twin);
      count(pt, p);
      if (measure) {
        cuda::RunOptions ro;
        ro.warmup = 2;
        ro.repeats = 10;
        ro.bitwise_repeats = 0;
        const uint64_t seed = 1000 + static_cast<uint64_t>(B * 7 + Nk);
        const cuda::RunResult res = cuda::run_generated(*v.cuda, p, seed, ro);
        pt.ms = median(res.fwd_time.ms);
        for (double x : res.fwd.O) pt.finite = pt.finite && std::isfinite(x);
        pt.ms_unsplit = pt.ms;
        if (pt.splits > 1) {
          ro.launch.kv_splits = 1;
          pt.ms_unsplit = median(cuda::run_generated(*v.cuda, p, seed, ro).fwd_time.ms);
        }
        if (pt.kv_bytes <= kPlainReadMost) {
          try {
            pt.ms_plain = cuda::time_plain_read(static_cast<size_t>(pt.kv_bytes)).ms;
          } catch (const std::exception&) {
            pt.ms_plain = 0;  // the column stays empty; split-kv's own time still counts
          }
        }
        pt.measured = true;
      }
      points.push_back(pt);
    }

  Table t{"decode",
          tr(o, "Decoding: one query row, 32 query heads over 8 K/V heads, d = 128, bf16; ",
             "解码：一个查询行，32 个查询头共享 8 个 K/V 头，d = 128，bf16；") +
              (measure ? fmt::format("GPU ({}, {} SMs)", dev.name, sms)
                       : backend_note(o, false) + fmt::format(", {} SMs", sms)),
          {col("B_x_Hkv", "B × Hkv"), col("cache", tr(o, "cache (keys)", "缓存（键数）"), "", "count"),
           col("kv_bytes", tr(o, "K + V bytes", "K + V 字节"), "B", "bytes"),
           col("workers_unsplit", tr(o, "workers without splits", "不切分的 worker 数"), "", "count"),
           col("splits", tr(o, "splits S", "切分数 S"), "", "count"),
           col("workers", tr(o, "workers", "worker 数"), "", "count"),
           col("partials_share", tr(o, "partials' share of bytes", "部分结果占字节"), "ratio",
               "{:.4f}"),
           col("ms", tr(o, "time", "时间"), "ms", "{:.4f}"),
           col("tbps", tr(o, "bandwidth", "带宽"), "TB/s", "{:.2f}"),
           col("of_ceiling", tr(o, "of the read ceiling", "占读带宽上限"), "ratio", "{:.3f}"),
           col("ms_plain", tr(o, "a plain read of K + V", "单纯读一遍 K + V"), "ms", "{:.4f}"),
           col("of_plain", tr(o, "plain read / time", "单纯读取 / 时间"), "ratio", "{:.3f}"),
           col("ms_unsplit", tr(o, "time, S = 1", "时间（S = 1）"), "ms", "{:.4f}"),
           col("speedup", tr(o, "S = 1 / S", "S = 1 / S"), "ratio", "{:.2f}")},
          {}};
  bool all_finite = true;
  for (const Point& pt : points) {
    const json m = pt.measured ? json(pt.ms) : json(nullptr);
    const double tbps = pt.measured && pt.ms > 0 ? pt.kv_bytes / (pt.ms * 1e-3) / 1e12 : 0;
    t.rows.push_back(
        {fmt::format("{} × {}", pt.B, kHkv), pt.Nk, pt.kv_bytes, pt.units, pt.splits,
         pt.units * pt.splits, pt.partial_bytes / pt.total_bytes, m,
         pt.measured ? json(tbps) : json(nullptr),
         pt.measured && ceiling > 0 ? json(tbps * 1e12 / ceiling) : json(nullptr),
         pt.ms_plain > 0 ? json(pt.ms_plain) : json(nullptr),
         pt.ms_plain > 0 && pt.ms > 0 ? json(pt.ms_plain / pt.ms) : json(nullptr),
         pt.measured ? json(pt.ms_unsplit) : json(nullptr),
         pt.measured && pt.ms > 0 ? json(pt.ms_unsplit / pt.ms) : json(nullptr)});
    all_finite = all_finite && pt.finite;
    if (pt.measured)
      r.figures[fmt::format("tbps_B{}_Nk{}", pt.B, pt.Nk)] = {{"value", tbps}, {"unit", "TB/s"}};
  }
  r.tables.push_back(std::move(t));
  if (ceiling > 0) r.figures["read_ceiling_tbps"] = {{"value", ceiling / 1e12}, {"unit", "TB/s"}};
  if (empty_ms > 0) {
    r.figures["empty_kernel_us"] = {{"value", empty_ms * 1e3}, {"unit", "us"}};
    r.figures["empty_kernel_smem_us"] = {{"value", empty_smem_ms * 1e3}, {"unit", "us"}};
  }

  // Observations.
  const Point& small = points[3];  // B = 1, 64k keys
  r.observations.push_back(
      zh(o) ? fmt::format(
                  "生成一个 token 时每个查询头只有一行：B = 1 时按（K/V 头，行块）分块只有 {} 个 "
                  "worker，而 GPU 有 {} 个 SM。split-kv 把每个 K/V 头的键切成 S 段（规则见 "
                  "kernels/07_split_kv/README.md）：缓存 {} 键时 S = {}，{} 个 worker 一波跑完；"
                  "各段的部分 O 和 LSE 按 log-sum-exp 规则合起来（由最后完成的那一段就地合并，"
                  "不再另起一个内核），只多出 {:.2f}% 的字节。",
                  small.units, sms, small.Nk, small.splits, small.units * small.splits,
                  100 * small.partial_bytes / small.total_bytes)
            : fmt::format(
                  "A generated token is one query row per head: at B = 1 a grid of (K/V head, row "
                  "block) has {} workers for a GPU of {} SMs. split-kv cuts each K/V head's keys "
                  "into S splits (the rule: kernels/07_split_kv/README.md): with a {}-key cache "
                  "S = {}, {} workers in one wave; the splits' partial O and LSE are merged by "
                  "the log-sum-exp rule (by the last split to finish, in place: no second "
                  "kernel), which adds only {:.2f}% to the bytes moved.",
                  small.units, sms, small.Nk, small.splits, small.units * small.splits,
                  100 * small.partial_bytes / small.total_bytes));
  r.observations.push_back(
      zh(o) ? "分组头：32 个查询头共享 8 个 K/V 头，4 个查询头放进同一个 tile 的行里，K 和 V "
              "每个 K/V 头只读一次——读的字节是每个查询头各读一遍的 1/4。"
            : "Grouped heads: the 4 query heads that share a K/V head are the rows of one tile, "
              "so K and V are read once per K/V head, a quarter of the bytes that reading them "
              "once per query head would move.");
  if (measure) {
    double lo = 1e9, hi = 0;
    for (const Point& pt : points)
      if (pt.Nk >= 32768 && ceiling > 0) {
        const double f = pt.kv_bytes / (pt.ms * 1e-3) / ceiling;
        lo = std::min(lo, f);
        hi = std::max(hi, f);
      }
    const double gain = small.ms_unsplit / small.ms;
    r.observations.push_back(
        ceiling > 0
            ? (zh(o) ? fmt::format(
                           "实测：本机读带宽上限 {:.2f} TB/s（{}）。缓存 ≥ 32k 键时 split-kv 达到上限的 "
                           "{:.1f}%–{:.1f}%。B = 1、缓存 {} 键时，不切分要 {:.4f} ms，切成 {} 段要 "
                           "{:.4f} ms（快 {:.1f} 倍）。",
                           ceiling / 1e12, ceiling_how, 100 * lo, 100 * hi, small.Nk,
                           small.ms_unsplit, small.splits, small.ms, gain)
                     : fmt::format(
                           "Measured: this machine reads at most {:.2f} TB/s ({}). With caches of "
                           "32k keys and more split-kv reaches {:.1f}% to {:.1f}% of it. At B = 1 "
                           "with a {}-key cache one split takes {:.4f} ms and {} splits "
                           "{:.4f} ms ({:.1f}x faster).",
                           ceiling / 1e12, ceiling_how, 100 * lo, 100 * hi, small.Nk,
                           small.ms_unsplit, small.splits, small.ms, gain))
            : tr(o, "The read ceiling was not measured: ", "读带宽上限没有测到：") + ceiling_how);
    // A short read pays a fixed cost that a long one hides: the 1 x 8 row at 4096 keys against
    // the one at 262,144 keys.
    const Point& tiny = points[1];
    const Point& big = points[4];
    if (tiny.ms_plain > 0 && big.ms_plain > 0 && empty_ms > 0)
      r.observations.push_back(
          zh(o) ? fmt::format(
                      "固定开销：一个什么也不做的内核（128 个块，计时方式相同）要 {:.1f} µs，"
                      "每块带 split-kv 的 {} KiB 共享内存时 {:.1f} µs。单纯读一遍 {:.0f} MB 要 "
                      "{:.1f} µs（{:.2f} TB/s），读 {:.0f} MB 则达到 {:.2f} TB/s：读得越少，启动和从冷启动"
                      "爬升的固定时间占比越大，任何内核都一样。split-kv 在这两点分别是单纯读取时间的 "
                      "{:.2f} 倍和 {:.2f} 倍。",
                      empty_ms * 1e3, kSplitSmem / 1024, empty_smem_ms * 1e3,
                      tiny.kv_bytes / 1e6, tiny.ms_plain * 1e3,
                      tiny.kv_bytes / (tiny.ms_plain * 1e-3) / 1e12, big.kv_bytes / 1e6,
                      big.kv_bytes / (big.ms_plain * 1e-3) / 1e12, tiny.ms / tiny.ms_plain,
                      big.ms / big.ms_plain)
                : fmt::format(
                      "The fixed cost: a kernel that does nothing (128 blocks, timed the same way) "
                      "takes {:.1f} µs, {:.1f} µs with split-kv's {} KiB of shared memory a block. "
                      "A plain read of {:.0f} MB takes {:.1f} µs ({:.2f} TB/s), one of {:.0f} MB "
                      "reads {:.2f} TB/s: the less a pass reads, the larger the share of its launch "
                      "and of the ramp from a cold start, for any kernel. split-kv takes {:.2f}x and "
                      "{:.2f}x the plain read's time at these two points.",
                      empty_ms * 1e3, empty_smem_ms * 1e3, kSplitSmem / 1024,
                      tiny.kv_bytes / 1e6, tiny.ms_plain * 1e3,
                      tiny.kv_bytes / (tiny.ms_plain * 1e-3) / 1e12, big.kv_bytes / 1e6,
                      big.kv_bytes / (big.ms_plain * 1e-3) / 1e12, tiny.ms / tiny.ms_plain,
                      big.ms / big.ms_plain));
    if (!empty_why.empty())
      r.observations.push_back(tr(o, "The empty kernel was not timed: ", "空内核没有测到：") +
                               empty_why);
    if (!all_finite)
      r.observations.push_back(tr(o, "FAIL: some O held NaN or Inf.", "失败：有的 O 含 NaN 或 Inf。"));
  } else {
    r.observations.push_back(
        tr(o, "The measured half (time, bandwidth against the read ceiling) needs a GPU",
           "实测部分（时间、相对读带宽上限的带宽）需要 GPU") +
        (why_not.empty() ? std::string(".") : ": " + why_not + "."));
  }
  return r;
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "decode",
    .title_en = "Decoding: split the keys, read the cache once at the memory's speed",
    .title_zh = "解码：切分键，以内存带宽读一遍缓存",
    .run = flashlab::lab::decode,
    .tables = {"decode"},
});
