// Lab "no-lse" — the chapter's exercise 3: what the backward costs if the forward did not store
// LSE. Without it, P = exp(S - LSE) cannot be recomputed directly: every Q block must first run the
// online softmax over all K blocks again to rebuild m and l (the statistics pass), then the
// backward runs as before. One head, d = 128, blocks 128 x 128, not causal, so every block pair is
// visited and the pass's cost has a closed form:
//
//   per Q block i (r rows):   read Q_i                          r d elements
//   per pair (i, j):          read K_j, S = scale Q_i K_j^T     c d elements, 2 r c d FLOPs
//   per Q block i:            write LSE_i                       r elements
//
// The backward with LSE is atomic-dq's, counted by its twin (dry run); without LSE it is the same
// plus that pass. With --versions, a student's own backward without LSE (the starter ex3-no-lse,
// once solved) is counted instead, and the lab fails unless its count is exactly that.
#include <fmt/format.h>

#include "core/packed.h"
#include "labs/common/lab_util.h"
#include "labs/lab.h"
#include "util/error.h"

namespace flashlab::lab {

namespace {

constexpr int64_t kD = 128;
constexpr int kBlock = 128;
constexpr double kBytesPerElem = 2;

// The statistics pass of a non-causal problem, counted from its schedule (see above).
Counters statistics_pass(const Problem& p, int64_t Br) {
  const Shape& s = p.shape;
  const int64_t q_blocks = (s.Nq + Br - 1) / Br;
  Counters c;
  c.matmul_flops = 2 * s.heads() * s.Nq * s.Nk * s.d;
  c.elems_read = s.heads() * (s.Nq * s.d + q_blocks * s.Nk * s.d);
  c.elems_written = s.heads() * s.Nq;
  return c;
}

struct Row {
  int64_t N;
  Counters with_lse, without;
  Counters expected;  // with_lse plus the statistics pass
  int64_t extra_flops() const { return without.matmul_flops - with_lse.matmul_flops; }
  int64_t extra_io() const { return without.io() - with_lse.io(); }
  bool as_expected() const {
    return without.matmul_flops == expected.matmul_flops &&
           without.elems_read == expected.elems_read &&
           without.elems_written == expected.elems_written;
  }
};

// `without_lse` null: the backward with LSE plus the statistics pass.
Row count(int64_t N, CpuBackwardFn without_lse) {
  const Problem p = make_problem(1, N, kD, false);
  const CpuOptions opt = blocks(kBlock, kBlock);
  Row r{N, {}, {}, {}};
  Forward f;
  Gradients g;
  cpu_backward(version("atomic-dq"), p, Inputs{}, f, opt, g, r.with_lse);
  r.expected = r.with_lse;
  r.expected += statistics_pass(p, kBlock);
  if (without_lse)
    without_lse(p, Inputs{}, f, opt, g, r.without);
  else
    r.without = r.expected;
  return r;
}

}  // namespace

Report no_lse(const LabOptions& o) {
  Report r;
  r.command = "lab no-lse";
  if (o.versions.size() > 1)
    throw UsageError("lab no-lse counts one backward without LSE at a time");
  const VersionInfo* mine = o.versions.empty() ? nullptr : o.versions.front();
  if (mine && !mine->cpu_backward)
    throw UsageError(fmt::format("version '{}' has no backward", mine->id));
  const std::string without_name =
      mine ? fmt::format("{} (dry run)", mine->id)
           : std::string("atomic-dq backward (dry run) + the statistics pass (counted)");
  r.version_ids = {"atomic-dq"};
  if (mine) r.version_ids.push_back(mine->id);
  r.config = {{"B", 1},
              {"H", 1},
              {"d", kD},
              {"Br", kBlock},
              {"Bc", kBlock},
              {"bytes_per_element", kBytesPerElem},
              {"with_lse", "atomic-dq backward (dry run)"},
              {"without_lse", without_name}};

  std::vector<Row> rows;
  for (int64_t N : {512, 1024, 2048, 4096, 8192})
    rows.push_back(count(N, mine ? mine->cpu_backward : nullptr));

  Table t{
      "no_lse",
      tr(o,
         "Backward without a stored LSE (one head, d = 128, blocks 128x128, 2 bytes per element)",
         "不存 LSE 的反向（一个头，d = 128，块 128×128，每个元素 2 字节）"),
      {col("N", "N", "", "count"),
       col("flops_lse", tr(o, "FLOPs with LSE", "FLOPs：存 LSE"), "FLOP", "{:.3g}"),
       col("flops_no_lse", tr(o, "FLOPs without", "FLOPs：不存"), "FLOP", "{:.3g}"),
       col("extra_flops", tr(o, "extra FLOPs", "多出的 FLOPs"), "%", "{:+.1f}%"),
       col("io_lse", tr(o, "IO with LSE", "读写：存 LSE"), "B", "bytes"),
       col("io_no_lse", tr(o, "IO without", "读写：不存"), "B", "bytes"),
       col("extra_io_bytes", tr(o, "extra IO", "多出的读写"), "B", "bytes"),
       col("extra_io", tr(o, "extra IO (share)", "多出的读写（比例）"), "%", "{:+.1f}%"),
       col("lse_bytes", tr(o, "LSE stored (fp32)", "LSE 本身（FP32）"), "B", "bytes")},
      {}};
  for (const Row& w : rows) {
    t.rows.push_back({w.N, w.with_lse.matmul_flops, w.without.matmul_flops,
                      100.0 * w.extra_flops() / w.with_lse.matmul_flops,
                      double(w.with_lse.io()) * kBytesPerElem,
                      double(w.without.io()) * kBytesPerElem, double(w.extra_io()) * kBytesPerElem,
                      100.0 * w.extra_io() / w.with_lse.io(), w.N * 4});
    r.figures[fmt::format("extra_flops_N{}", w.N)] = {{"value", w.extra_flops()}, {"unit", "FLOP"}};
    r.figures[fmt::format("extra_io_N{}", w.N)] = {{"value", w.extra_io()}, {"unit", "elements"}};
  }
  r.tables.push_back(std::move(t));
  if (mine) {
    // Its numbers first, as `flashlab run` would check them: right counts of a wrong backward do
    // not make it a backward without LSE.
    const std::string fail = wrong_backward(*mine, o, "Its counts below are of a wrong backward.",
                                            "下面的计数属于一个错的反向。");
    if (!fail.empty()) r.observations.push_back(fail);
    const Row* wrong = nullptr;
    for (const Row& w : rows)
      if (!wrong && !w.as_expected()) wrong = &w;
    r.ok = wrong == nullptr && fail.empty();
    if (!wrong)
      r.observations.push_back(
          zh(o) ? fmt::format("不存 LSE 的一列由 {} 的反向计数（dry run），存 LSE 的一列由 "
                              "atomic-dq 计数；每个 N 上都正好等于 atomic-dq 加上统计遍的计数。",
                              mine->id)
                : fmt::format("The columns without LSE are counted with {}'s backward (dry run), "
                              "those with LSE with atomic-dq's; at every N they are exactly "
                              "atomic-dq's count plus the statistics pass's.",
                              mine->id));
    else
      r.observations.push_back(
          zh(o) ? fmt::format("FAIL {}：N = {} 时它的计数是 {} FLOPs、读 {}、写 {} 个元素，"
                              "atomic-dq 加上统计遍应为 {} FLOPs、读 {}、写 {}。",
                              mine->id, wrong->N, wrong->without.matmul_flops,
                              wrong->without.elems_read, wrong->without.elems_written,
                              wrong->expected.matmul_flops, wrong->expected.elems_read,
                              wrong->expected.elems_written)
                : fmt::format("FAIL {}: at N = {} it counts {} FLOPs, {} elements read and {} "
                              "written; atomic-dq plus the statistics pass make {} FLOPs, {} "
                              "read and {} written.",
                              mine->id, wrong->N, wrong->without.matmul_flops,
                              wrong->without.elems_read, wrong->without.elems_written,
                              wrong->expected.matmul_flops, wrong->expected.elems_read,
                              wrong->expected.elems_written));
  }

  const Row& big = rows.back();
  const double n2d = double(big.N) * big.N * kD;
  const double extra_bytes = double(big.extra_io()) * kBytesPerElem;
  // K read once more per Q block: ceil(N / Br) * N * d elements.
  const double k_reread = double((big.N + kBlock - 1) / kBlock) * big.N * kD;
  const double k_share = 100.0 * k_reread / big.extra_io();
  r.observations.push_back(
      zh(o)
          ? fmt::format("不存 LSE，反向要先对每个 Q 块把所有 K 块再过一遍 online "
                        "softmax，重建每行的 m 和 l——多一次完整的 K 维度遍历。"
                        "N = {} 时多出 {:.3g} 次矩阵乘法 FLOPs，即 {:.1f}·N²d，是反向原有运算的 "
                        "{:.0f}%（多算一次 S = QKᵀ）。",
                        format_thousands(big.N), double(big.extra_flops()), big.extra_flops() / n2d,
                        100.0 * big.extra_flops() / big.with_lse.matmul_flops)
          : fmt::format(
                "Without LSE the backward must first run the online softmax again over all K "
                "blocks for every Q block to rebuild each row's m and l: one more full pass "
                "over K. At N = {} that is {:.3g} extra matmul FLOPs, {:.1f}·N²d, {:.0f}% on "
                "top of the backward (S = QKᵀ computed once more).",
                format_thousands(big.N), double(big.extra_flops()), big.extra_flops() / n2d,
                100.0 * big.extra_flops() / big.with_lse.matmul_flops));
  r.observations.push_back(
      zh(o) ? fmt::format("多出的读写主要是每个 Q 块重读一遍全部 K：N²d/Br 个元素，N = {} "
                          "时占多出部分的 {:.0f}%，随 N² 增长——N = {} 时多 {}（+{:.0f}%），"
                          "N = {} 时多 {}（+{:.0f}%）。而存 LSE 只要每行 4 字节：N = {} 时 {}，"
                          "省下的读写是它的 {} 倍。所以前向顺手写出 LSE 几乎是免费的。",
                          format_thousands(big.N), k_share, format_thousands(rows.front().N),
                          format_bytes(double(rows.front().extra_io()) * kBytesPerElem),
                          100.0 * rows.front().extra_io() / rows.front().with_lse.io(),
                          format_thousands(big.N), format_bytes(extra_bytes),
                          100.0 * big.extra_io() / big.with_lse.io(), format_thousands(big.N),
                          format_bytes(big.N * 4.0),
                          format_thousands(int64_t(extra_bytes / (big.N * 4.0))))
            : fmt::format(
                  "The extra traffic is mostly K read once more per Q block, N²d/Br elements "
                  "({:.0f}% of the extra at N = {}), growing as N²: {} more at N = {} (+{:.0f}%), "
                  "{} more at N = {} "
                  "(+{:.0f}%). Storing LSE costs 4 bytes per row: {} at N = {}, and it saves "
                  "{}x its own size in traffic. Writing LSE in the forward is nearly free.",
                  k_share, format_thousands(big.N),
                  format_bytes(double(rows.front().extra_io()) * kBytesPerElem),
                  format_thousands(rows.front().N),
                  100.0 * rows.front().extra_io() / rows.front().with_lse.io(),
                  format_bytes(extra_bytes), format_thousands(big.N),
                  100.0 * big.extra_io() / big.with_lse.io(), format_bytes(big.N * 4.0),
                  format_thousands(big.N), format_thousands(int64_t(extra_bytes / (big.N * 4.0)))));
  return r;
}

}  // namespace flashlab::lab

FLASHLAB_LAB({
    .name = "no-lse",
    .title_en = "Exercise 3: what the backward costs without a stored LSE",
    .title_zh = "练习 3：不存 LSE 时反向要多花多少",
    .run = flashlab::lab::no_lse,
    .tables = {"no_lse"},
    .versions_help = "the backward without LSE to count and check (default: atomic-dq's and the "
                     "statistics pass, counted)",
});
