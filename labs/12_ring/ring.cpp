// lab ring: context parallelism counted. One causal attention problem over R ranks (the issue's:
// bf16, d = 128, 8192 tokens per rank), its K/V shards passed round a ring (kernels/09_ring). From
// the twin's schedule, walked without the arithmetic:
//
//   per rank and step   the matmul FLOPs of the tiles it computes, the bytes it sends, and its
//                       idle time: the step's busiest rank's compute minus its own (a step ends
//                       when its slowest rank is done and the next block has arrived)
//   per R and sharding  the idle fraction (idle / (R x the steps' longest)) and the scaling
//                       efficiency it implies, W_1 / (R x sum over steps of the longest), W_1 the
//                       FLOPs of the whole problem on one rank
//
// Contiguous shards leave the ranks holding early rows idle under the causal mask; zigzag shards
// (rank r: chunks r and 2R-1-r) give every rank the same work at every step. The transfer of a
// step hides behind its compute when the step's FLOPs per byte sent exceed the machine's ratio of
// compute rate to link bandwidth: the lab prints both sides. The measured half (NCCL on several
// GPUs) needs GPUs.
#include <fmt/format.h>

#include <algorithm>

#include "labs/common/lab_util.h"
#include "labs/lab.h"
#include "run/registry.h"

namespace flashlab::lab {

namespace {

constexpr int64_t kPerRank = 8192, kD = 128;
constexpr int kTile = 128;
constexpr int kStepRanks = 4;  // the per-step table's ring
constexpr int kRanks[] = {2, 4, 8};
// The rates the observations compare with (order of magnitude, stated where used): attention's
// sustained rate on one H100/H200 (FA3 reaches 600-750 TFLOP/s in bf16), NVLink 4's bandwidth one
// way, and one 400 Gb/s InfiniBand port per GPU between nodes.
constexpr double kFlopRate = 600e12, kNvlink = 450e9, kNetwork = 50e9;

Problem ring_problem(int R) {
  Problem p = make_problem(1, kPerRank * R, kD, true, DType::bf16);
  return p;
}

struct PassSpan {
  double work = 0, span = 0;  // FLOPs of every rank, and the sum over steps of the longest step
};

PassSpan pass_of(const PerRankStep& flops) {
  PassSpan p;
  const size_t R = flops.size();
  for (size_t t = 0; t < R; ++t) {
    int64_t most = 0;
    for (size_t r = 0; r < R; ++r) {
      most = std::max(most, flops[r][t]);
      p.work += static_cast<double>(flops[r][t]);
    }
    p.span += static_cast<double>(most);
  }
  return p;
}

struct Point {
  int R;
  const char* sharding;
  double idle_fwd = 0, idle_both = 0, eff_fwd = 0, eff_both = 0, step_bytes = 0, step_flops = 0;
};

}  // namespace

Report ring_lab(const LabOptions& o) {
  Report r;
  r.command = "lab ring";
  const VersionInfo& zig = version("ring");
  const VersionInfo& flat = version("ring-contiguous");
  r.version_ids = {zig.id, flat.id};
  r.config = {{"backend", "cpu"},       {"H", 1},         {"d", kD},
              {"dtype", "bf16"},        {"causal", true}, {"tokens_per_rank", kPerRank},
              {"tile", {kTile, kTile}}, {"ranks", kRanks}};
  const CpuOptions tiles = blocks(kTile, kTile);

  // Per rank and step, on kStepRanks ranks.
  Table steps{"ring_steps",
              zh(o)
                  ? fmt::format("{} 个 rank 的环，每个 rank 每一步（因果，bf16，d = {}，每 rank {} "
                                "个 token，计数）",
                                kStepRanks, kD, kPerRank)
                  : fmt::format("A ring of {} ranks, each rank at each step (causal, bf16, d = "
                                "{}, {} tokens per rank; counted)",
                                kStepRanks, kD, kPerRank),
              {col("sharding", tr(o, "sharding", "切分")), col("rank", "rank"),
               col("step", tr(o, "step", "步")),
               col("fwd_gflop", tr(o, "fwd compute", "前向计算"), "GFLOP", "{:.2f}"),
               col("bwd_gflop", tr(o, "bwd compute", "反向计算"), "GFLOP", "{:.2f}"),
               col("fwd_bytes", tr(o, "fwd sent", "前向发送"), "B", "bytes"),
               col("bwd_bytes", tr(o, "bwd sent", "反向发送"), "B", "bytes"),
               col("idle_gflop", tr(o, "idle (fwd+bwd)", "空闲（前向+反向）"), "GFLOP", "{:.2f}")},
              {}};
  for (const VersionInfo* v : {&flat, &zig}) {
    CpuOptions t = tiles;
    t.ranks = kStepRanks;
    const RingCounts c = v->ring->counts(ring_problem(kStepRanks), t);
    for (int step = 0; step < kStepRanks; ++step) {
      int64_t most = 0;
      for (int k = 0; k < kStepRanks; ++k)
        most = std::max(most, c.fwd_flops[k][step] + c.bwd_flops[k][step]);
      for (int k = 0; k < kStepRanks; ++k)
        steps.rows.push_back({c.sharding, k, step, c.fwd_flops[k][step] / 1e9,
                              c.bwd_flops[k][step] / 1e9, c.fwd_bytes[k][step],
                              c.bwd_kv_bytes[k][step] + c.bwd_grad_bytes[k][step],
                              (most - c.fwd_flops[k][step] - c.bwd_flops[k][step]) / 1e9});
    }
  }

  // Per R and sharding: idle fraction and efficiency.
  Table scaling{
      "ring_scaling",
      tr(o,
         "Idle fraction and the scaling efficiency the counts imply (compute only: "
         "each transfer hidden behind its step)",
         "空闲比例与计数所蕴含的扩展效率（只算计算：每次传输都藏在该步的计算之后）"),
      {col("ranks", "R"), col("sharding", tr(o, "sharding", "切分")),
       col("idle_fwd", tr(o, "idle fwd", "前向空闲"), "%", "{:.1f}"),
       col("idle_both", tr(o, "idle fwd+bwd", "前向+反向空闲"), "%", "{:.1f}"),
       col("efficiency_fwd", tr(o, "efficiency fwd", "前向效率"), "%", "{:.1f}"),
       col("efficiency_both", tr(o, "efficiency fwd+bwd", "前向+反向效率"), "%", "{:.1f}"),
       col("step_bytes", tr(o, "fwd bytes a step", "前向每步字节"), "B", "bytes"),
       col("flop_per_byte", tr(o, "fwd FLOP per byte", "前向每字节 FLOP"), "FLOP/B", "{:.0f}")},
      {}};
  std::vector<Point> points;
  for (int R : kRanks) {
    const Problem p = ring_problem(R);
    CpuOptions one = tiles;
    one.ranks = 1;
    const RingCounts single = zig.ring->counts(p, one);  // the whole problem on one rank
    const double w_fwd = pass_of(single.fwd_flops).work;
    const double w_both = w_fwd + pass_of(single.bwd_flops).work;
    for (const VersionInfo* v : {&flat, &zig}) {
      CpuOptions t = tiles;
      t.ranks = R;
      const RingCounts c = v->ring->counts(p, t);
      const PassSpan f = pass_of(c.fwd_flops), b = pass_of(c.bwd_flops);
      Point pt{R, c.sharding};
      pt.idle_fwd = 1 - f.work / (R * f.span);
      pt.idle_both = 1 - (f.work + b.work) / (R * (f.span + b.span));
      pt.eff_fwd = w_fwd / (R * f.span);
      pt.eff_both = w_both / (R * (f.span + b.span));
      pt.step_bytes = static_cast<double>(c.fwd_bytes[0][0]);
      pt.step_flops = f.work / (static_cast<double>(R) * R);  // a rank's mean step
      points.push_back(pt);
      scaling.rows.push_back({R, c.sharding, 100 * pt.idle_fwd, 100 * pt.idle_both,
                              100 * pt.eff_fwd, 100 * pt.eff_both, pt.step_bytes,
                              pt.step_flops / pt.step_bytes});
    }
  }
  r.tables = {steps, scaling};

  const Point& c8 = points[points.size() - 2];
  const Point& z8 = points.back();
  r.observations.push_back(
      zh(o)
          ? fmt::format(
                "因果注意力下，连续切分让持有前面行的 rank 空等：R = {} 时前向+反向有 {:.0f}% "
                "的时间空闲，"
                "计数所蕴含的扩展效率为 {:.0f}%（ring-flash-attention 报告朴素环为 52–54%）。"
                "zigzag 切分（rank r 持有第 r 块和第 2R−1−r 块）让每一步每个 rank 的工作相同："
                "空闲 {:.1f}%，效率 "
                "{:.0f}%"
                "（计数以整块为单位；实测还会加上计数不含的部分：启动、合并、未能藏住的传输）。",
                z8.R, 100 * c8.idle_both, 100 * c8.eff_both, 100 * z8.idle_both, 100 * z8.eff_both)
          : fmt::format(
                "Under the causal mask contiguous shards leave the ranks holding early rows "
                "idle: at R = {} they idle {:.0f} % of the forward + backward, and the counts "
                "imply a scaling efficiency of {:.0f} % (ring-flash-attention reports 52-54 % for "
                "the naive ring). Zigzag shards (rank r: chunks r and 2R-1-r) give every rank "
                "the same work at every step: {:.1f} % idle, {:.0f} % efficiency (counted in whole "
                "tiles; a measured run adds what the counts leave out: launches, the merges, "
                "transfers that do not hide).",
                z8.R, 100 * c8.idle_both, 100 * c8.eff_both, 100 * z8.idle_both,
                100 * z8.eff_both));
  const double intensity = z8.step_flops / z8.step_bytes;
  r.observations.push_back(
      zh(o) ? fmt::format("每一步，一个 rank 前向平均计算 {:.1f} GFLOP，发送 {}：每字节 {:.0f} "
                          "FLOP，与 R 无关"
                          "（每 rank 的 token 数固定）。按 {:.0f} TFLOP/s 的注意力速率，NVLink "
                          "单向 {:.0f} GB/s "
                          "时传输只需计算时间的 {:.0f}%，可完全藏在计算之后；跨节点每 GPU {:.0f} "
                          "GB/s 时则需 {:.1f} "
                          "倍计算时间，每 rank 的 token 数要增至约 {:.0f}k 才能藏住。",
                          z8.step_flops / 1e9, format_bytes(z8.step_bytes), intensity,
                          kFlopRate / 1e12, kNvlink / 1e9,
                          100 * (z8.step_bytes / kNvlink) / (z8.step_flops / kFlopRate),
                          kNetwork / 1e9, (z8.step_bytes / kNetwork) / (z8.step_flops / kFlopRate),
                          kPerRank / 1e3 * (z8.step_bytes / kNetwork) / (z8.step_flops / kFlopRate))
            : fmt::format(
                  "At each step a rank computes {:.1f} GFLOP of the forward on average and sends "
                  "{}: {:.0f} FLOP per byte, whatever R (the tokens per rank are fixed). At an "
                  "attention rate of {:.0f} TFLOP/s the transfer over NVLink ({:.0f} GB/s one "
                  "way) takes {:.0f} % of the compute and hides behind it; between nodes at "
                  "{:.0f} GB/s per GPU it takes {:.1f}x the compute, and the tokens per rank "
                  "would have to grow to about {:.0f}k to hide it.",
                  z8.step_flops / 1e9, format_bytes(z8.step_bytes), intensity, kFlopRate / 1e12,
                  kNvlink / 1e9, 100 * (z8.step_bytes / kNvlink) / (z8.step_flops / kFlopRate),
                  kNetwork / 1e9, (z8.step_bytes / kNetwork) / (z8.step_flops / kFlopRate),
                  kPerRank / 1e3 * (z8.step_bytes / kNetwork) / (z8.step_flops / kFlopRate)));
  r.observations.push_back(
      tr(o,
         "The bytes every rank sends equal the closed form of kernels/09_ring/README.md: "
         "forward 2 B Hkv d e (Nk - n_next), backward that plus 2 B Hkv d e_acc Nk for the dK, "
         "dV that travel with their shard and go home.",
         "每个 rank 发送的字节数等于 kernels/09_ring/README.md 的闭式：前向 2 B Hkv d e (Nk − "
         "n_next)，反向再加上随分片流转并送回原主的 dK、dV 的 2 B Hkv d e_acc Nk。"));
  r.observations.push_back(
      tr(o,
         "The measured half (compute and NCCL transfer time per rank and step, the measured "
         "scaling efficiency) needs several GPUs and the ring's NCCL side, which this build "
         "does not have yet: the figures above are counted.",
         "实测部分（每个 rank 每一步的计算与 NCCL 传输时间、实测扩展效率）需要多块 GPU 和环的 NCCL "
         "实现，本构建尚无：以上数字均为计数。"));
  return r;
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "ring",
    .title_en = "Context parallelism: a ring of ranks, zigzag shards for the causal mask",
    .title_zh = "上下文并行：rank 组成的环，因果掩码下的 zigzag 切分",
    .run = flashlab::lab::ring_lab,
    .tables = {"ring_steps", "ring_scaling"},
});
