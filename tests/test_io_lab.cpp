// The io lab without a GPU: the modeled half against closed forms of the twins' counters, the
// per-kernel split against the twins' totals, the line that says why the measured half is missing
// (no GPU, and a GPU whose counters may not be read), and its figure rendered by rsvg-convert.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cuda/runner.h"
#include "labs/09_io/io.h"
#include "labs/09_io/io_model.h"
#include "plot/plot.h"
#include "report/json_doc.h"
#include "run/registry.h"
#include "test_cli_helpers.h"

namespace flashlab {

namespace {

using lab::io_model::model_bytes;

const Table& table(const Report& r, const std::string& id) {
  for (const Table& t : r.tables)
    if (t.id == id) return t;
  throw std::runtime_error("no table " + id);
}

size_t col(const Table& t, const std::string& key) {
  for (size_t i = 0; i < t.columns.size(); ++i)
    if (t.columns[i].key == key) return i;
  throw std::runtime_error("no column " + key);
}

const json& cell(const Table& t, size_t row, const std::string& key) {
  return t.rows.at(row).at(col(t, key));
}

Report modeled_only(const std::string& lang = "en") {
  LabOptions o;
  o.lang = lang;
  o.backend = "cpu";
  lab::IoSetup s;
  s.why_no_gpu = "no CUDA device in this test";
  return lab::io_lab(o, s);
}

// What a GPU whose counters cannot be read looks like to the lab: CUPTI's answer in words, and
// ceilings that did run (the micro-benchmarks need no counters).
lab::IoSetup gpu_without_counters() {
  lab::IoSetup s;
  s.gpu = true;
  s.gpu_name = "Test GPU";
  s.counters.why_not = cuda::describe_cupti_error(35, "cuptiProfilerGetCounterAvailability",
                                                  "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
  s.ceilings = [] {
    std::vector<cuda::Ceiling> cs(3);
    cs[0].key = "hbm_copy", cs[0].name = "HBM (copy kernel)", cs[0].unit = "B/s";
    cs[0].value = 4.1e12, cs[0].check_ok = true, cs[0].check = "0 words differ";
    cs[1].key = "mma_sync_bf16", cs[1].name = "mma.sync", cs[1].unit = "FLOP/s";
    cs[1].value = 6.1e14, cs[1].check_ok = true;
    cs[2].key = "wgmma_bf16", cs[2].name = "wgmma", cs[2].unit = "FLOP/s";
    cs[2].why_not = "this build has no sm_90a code";
    return cs;
  };
  return s;
}

int count_lines_starting(const Report& r, const std::string& prefix) {
  int n = 0;
  for (const std::string& o : r.observations) n += o.rfind(prefix, 0) == 0;
  return n;
}

}  // namespace

// Per head, N a multiple of the 128-wide blocks, T = N / 128 (the cost lab's closed forms):
//   naive fwd 4N^2 + 4Nd + N, naive bwd 7N^2 + 8Nd, tiled 2Nd + N + T*2Nd,
//   atomic-dq (and hopper) bwd 8Nd + N + T*(4Nd + 2N) elements; 2 bytes each, times B*H heads.
TEST(IoLab, ModeledBytesMatchClosedForms) {
  const Report r = modeled_only();
  const Table& t = table(r, "io");
  // d x N x every pass of every version (naive and hopper have two).
  size_t passes = 0;
  for (const VersionInfo& v : versions())
    if (!v.exercise && !v.fp8) passes += v.pass == Pass::both ? 2 : 1;  // lab fp8 has the FP8 rung
  ASSERT_EQ(t.rows.size(), 2u * 6 * passes);
  int checked = 0;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const double d = cell(t, i, "d").get<double>(), N = cell(t, i, "N").get<double>();
    const double heads = cell(t, i, "B").get<double>() * cell(t, i, "H").get<double>();
    EXPECT_EQ(cell(t, i, "B").get<double>() * N, 16384);
    EXPECT_EQ(cell(t, i, "H").get<double>() * d, 2048);
    const double T = N / 128;
    const std::string v = cell(t, i, "version"), pass = cell(t, i, "pass");
    double per_head = -1;
    if (v == "naive" && pass == "fwd") per_head = 4 * N * N + 4 * N * d + N;
    if (v == "naive" && pass == "bwd") per_head = 7 * N * N + 8 * N * d;
    if ((v == "tiled" || v == "hopper") && pass == "fwd") per_head = 2 * N * d + N + T * 2 * N * d;
    // hopper's backward is atomic-dq's schedule (the same outer-K pass and dQ adds).
    if ((v == "atomic-dq" || v == "hopper") && pass == "bwd")
      per_head = 8 * N * d + N + T * (4 * N * d + 2 * N);
    if (per_head >= 0) {
      EXPECT_EQ(cell(t, i, "model_bytes").get<double>(), 2 * heads * per_head) << v << " " << N;
      ++checked;
    }
    // The floor: inputs once, outputs once; LSE in fp32.
    const double q = heads * N * d;
    EXPECT_EQ(cell(t, i, "floor_bytes").get<double>(),
              pass == "fwd" ? 2 * 4 * q + 4 * heads * N : 2 * 8 * q + 4 * heads * N);
    EXPECT_GT(cell(t, i, "model_bytes").get<double>(), cell(t, i, "floor_bytes").get<double>());
    for (const char* measured : {"dram_bytes", "dram_over_model", "sm_read_hit_pct", "time_us"})
      EXPECT_TRUE(cell(t, i, measured).is_null()) << measured;
  }
  EXPECT_EQ(checked, 2 * 6 * 6);  // naive fwd, bwd; tiled; hopper fwd, bwd; atomic-dq
}

// The ratio at d = 128 is the cost lab's (same counters, more heads) and tends to 11/6; at d = 64
// to 11/3.
TEST(IoLab, RatioIsTheCostLabsAndTendsToItsLimit) {
  const Report r = modeled_only();
  const Table& t = table(r, "ratio");
  ASSERT_EQ(t.rows.size(), 12u);
  LabOptions o;
  o.backend = "cpu";
  const Report cost = find_lab("cost")->run(o);
  const Table& c = table(cost, "cost");
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const double d = cell(t, i, "d").get<double>(), N = cell(t, i, "N").get<double>();
    const double ratio = cell(t, i, "ratio_model").get<double>();
    EXPECT_NEAR(
        ratio,
        cell(t, i, "std_model_bytes").get<double>() / cell(t, i, "fa_model_bytes").get<double>(),
        1e-12);
    if (d == 128)
      for (size_t k = 0; k < c.rows.size(); ++k)
        if (c.rows[k][col(c, "N")].get<double>() == N) {
          EXPECT_NEAR(ratio, c.rows[k][col(c, "io_ratio")].get<double>(), 1e-12) << N;
        }
    if (N == 16384) {
      const double limit = d == 128 ? 11.0 / 6 : 11.0 / 3;
      EXPECT_LT(ratio, limit) << d;
      EXPECT_GT(ratio, limit - 0.06) << d;
    }
    EXPECT_TRUE(cell(t, i, "ratio_dram").is_null());
  }
}

// The kernels' models add up to the twin's count of the pass, for every shape the twins take
// (causal, ragged, Nq != Nk), and equal their closed forms where there is one.
TEST(IoLab, KernelModelsAddUpToTheTwinsTotals) {
  std::vector<Problem> problems;
  for (bool causal : {false, true})
    for (auto [Nq, Nk] : {std::pair<int64_t, int64_t>{1024, 1024}, {1000, 333}, {130, 700}}) {
      Problem p = lab::io_model::problem(1024, 64);
      p.shape.B = 2, p.shape.H = 3, p.shape.Nq = Nq, p.shape.Nk = Nk, p.causal = causal;
      problems.push_back(p);
    }
  int split = 0;
  for (const Problem& p : problems)
    for (const VersionInfo& v : versions())
      for (bool bwd : {false, true}) {
        if (v.exercise || v.fp8) continue;  // lab fp8 has the FP8 rung
        if (!(bwd ? v.cpu_backward != nullptr : v.cpu_forward != nullptr)) continue;
        const lab::io_model::PassModel m = lab::io_model::model_pass(v, bwd, p);
        if (m.kernels.empty()) continue;
        ++split;
        Counters sum;
        for (const auto& k : m.kernels) {
          EXPECT_GE(k.counts.elems_read, 0) << v.id << " " << k.kernel;
          EXPECT_GE(k.counts.elems_written, 0) << v.id << " " << k.kernel;
          EXPECT_GE(k.counts.matmul_flops, 0) << v.id << " " << k.kernel;
          sum += k.counts;
        }
        EXPECT_EQ(sum, m.total) << v.id << (bwd ? " bwd" : " fwd");
      }
  EXPECT_EQ(split, 6 * 4);  // tiled, recompute, atomic-dq, deterministic-dq at every shape

  // Non-causal, N = 1024 (T = 8 blocks), per head: the light kernels and the dQ traffic.
  const Problem p = lab::io_model::problem(1024, 128);
  const double heads = double(p.shape.heads()), N = 1024, d = 128, T = 8;
  const auto kernel = [&](const char* id, const char* name) {
    for (const auto& k : lab::io_model::model_pass(*find_version(id), true, p).kernels)
      if (k.kernel == name) return k.counts;
    throw std::runtime_error(std::string("no kernel ") + name);
  };
  const Counters pre = kernel("atomic-dq", "preprocess_kernel");
  EXPECT_EQ(pre.elems_read, heads * 2 * N * d);  // O, dO
  EXPECT_EQ(pre.elems_written, heads * N);       // D
  const Counters conv = kernel("atomic-dq", "convert_dq_kernel");
  EXPECT_EQ(conv.elems_read, heads * N * d);
  EXPECT_EQ(kernel("deterministic-dq", "convert_dq_kernel").elems_read, heads * T * N * d);
  // The outer-K kernels differ by their dQ traffic only: atomic-dq reads and writes each partial,
  // deterministic-dq writes it into its split, recompute has none.
  const Counters none = kernel("recompute", "outer_k_kernel");
  const Counters atomic = kernel("atomic-dq", "outer_k_kernel");
  const Counters split_k = kernel("deterministic-dq", "outer_k_kernel");
  EXPECT_EQ(none.elems_read, heads * (2 * N * d + T * (2 * N * d + 2 * N)));
  EXPECT_EQ(none.elems_written, heads * 2 * N * d);
  EXPECT_EQ(atomic.elems_read - none.elems_read, heads * T * N * d);
  EXPECT_EQ(atomic.elems_written - none.elems_written, heads * T * N * d);
  EXPECT_EQ(split_k.elems_read, none.elems_read);
  EXPECT_EQ(split_k.elems_written - none.elems_written, heads * T * N * d);
  EXPECT_EQ(kernel("recompute", "dq_outer_q_kernel").matmul_flops, heads * 3 * 2 * N * N * d);
}

// No GPU: the modeled half and exactly one line saying why the measured half is missing.
TEST(IoLab, WithoutAGpuSaysWhyInOneLine) {
  for (const std::string lang : {"en", "zh"}) {
    const Report r = modeled_only(lang);
    EXPECT_TRUE(r.ok);
    const std::string prefix = lang == "zh" ? "没有实测：" : "Not measured: ";
    EXPECT_EQ(count_lines_starting(r, prefix), 1) << lang;
    bool said = false;
    for (const std::string& o : r.observations)
      said = said || o.find("no CUDA device in this test") != std::string::npos;
    EXPECT_TRUE(said);
    for (const Table& t : r.tables) EXPECT_NE(t.id, "roofline");
    for (const Table& t : r.tables) EXPECT_NE(t.id, "ceilings");
  }
}

// A GPU without permission to read counters: the modeled half, the ceilings (they need no
// counters), and one line with CUPTI's reason and what to do about it.
TEST(IoLab, WithoutCounterPermissionSaysSoAndKeepsTheModeledHalf) {
  LabOptions o;
  o.backend = "cuda";
  const Report r = lab::io_lab(o, gpu_without_counters());
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(count_lines_starting(r,
                                 "Not measured: no permission to read the GPU's performance "
                                 "counters"),
            1);
  bool how = false;
  for (const std::string& s : r.observations)
    how = how || (s.find("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES") != std::string::npos &&
                  s.find("NVreg_RestrictProfilingToAdminUsers=0") != std::string::npos);
  EXPECT_TRUE(how);
  const Table& c = table(r, "ceilings");
  ASSERT_EQ(c.rows.size(), 3u);
  EXPECT_NEAR(cell(c, 0, "value").get<double>(), 4.1, 1e-12);  // TB/s
  EXPECT_EQ(cell(c, 0, "unit"), "TB/s");
  EXPECT_TRUE(cell(c, 2, "value").is_null());
  EXPECT_EQ(cell(c, 2, "check"), "this build has no sm_90a code");
  EXPECT_EQ(r.config["counters"]["available"], false);
  EXPECT_FALSE(table(r, "io").rows.empty());
  for (const Table& t : r.tables) EXPECT_NE(t.id, "roofline");
}

// The CLI: exit 0, the modeled tables, the one line, a report the schema accepts. Without a GPU
// FLASHLAB_COUNTERS=off changes nothing: the reason stays the missing device.
TEST(IoLab, CommandExitsZeroWithTheModeledHalf) {
  if (cuda::device_info().present) GTEST_SKIP() << "a GPU is present: the lab would measure";
  testing::ScratchDir dir;
  std::vector<std::string> files;
  for (const bool off : {false, true}) {
    if (off)
      setenv("FLASHLAB_COUNTERS", "off", 1);
    else
      unsetenv("FLASHLAB_COUNTERS");
    const std::string path = dir / (off ? "io_off.json" : "io.json");
    const testing::CliResult r = testing::run_cli("lab io --json '" + path + "'");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("Not measured: " + cuda::device_info().why_absent), std::string::npos);
    const json doc = json::parse(testing::slurp(path));
    int lines = 0;
    for (const json& o : doc["observations"])
      lines += o.get<std::string>().rfind("Not measured: ", 0) == 0;
    EXPECT_EQ(lines, 1);
    files.push_back(path);
  }
  unsetenv("FLASHLAB_COUNTERS");
  bool ok = false;
  const std::string why = testing::validate_reports(files, ok);
  EXPECT_TRUE(ok) << why;
}

// A GPU faked from the model, so that the measured half's arithmetic can be checked here: each
// pass of the standard path moves `std_share` of its modeled bytes through DRAM, FlashAttention's
// `fa_share`; the SMs ask L2 for the modeled bytes and the rest of them hit; the tensor cores do
// the modeled FLOPs. naive's kernels split its pass evenly.
struct FakeGpu {
  double std_share, fa_share;
  std::string fail_id;   // this version "cannot run"
  bool unnamed = false;  // the launch callbacks gave no names

  cuda::PassCounters counters(const VersionInfo& v, bool bwd, const Problem& p) const {
    const lab::io_model::PassModel m = lab::io_model::model_pass(v, bwd, p);
    std::vector<std::pair<std::string, Counters>> ks;
    for (const auto& k : m.kernels) ks.push_back({k.kernel, k.counts});
    if (ks.empty()) {
      const std::vector<std::string> names =
          bwd ? std::vector<std::string>{"matmul_kernel", "matmul_kernel", "softmax_grad_rows",
                                         "matmul_kernel", "matmul_kernel"}
              : std::vector<std::string>{"matmul_kernel", "softmax_rows", "matmul_kernel"};
      for (const std::string& n : names) {
        Counters c;
        c.elems_read = m.total.elems_read / int64_t(names.size());
        c.elems_written = m.total.elems_written / int64_t(names.size());
        c.matmul_flops = m.total.matmul_flops / int64_t(names.size());
        ks.push_back({n, c});
      }
    }
    const double share = std::string(v.id) == "naive" ? std_share : fa_share;
    cuda::PassCounters pc;
    pc.replay_passes = 3;
    for (const auto& [name, c] : ks) {
      const double bytes = model_bytes(c);
      cuda::KernelCounters k;
      k.name = unnamed ? "kernel " + std::to_string(pc.kernels.size() + 1) : name;
      pc.named = !unnamed;
      k.values = {{"dram_read_bytes", 0.75 * share * bytes},
                  {"dram_write_bytes", 0.25 * share * bytes},
                  {"time_ns", bytes / 3e12 * 1e9 + 1000},
                  {"l2_bytes", bytes},
                  {"l2_sm_read_sectors", bytes / 32},
                  {"l2_sm_read_hit_sectors", (1 - share) * bytes / 32},
                  {"hmma_inst", double(c.matmul_flops) / 4096},
                  {"tensor_active_pct", 40}};
      pc.kernels.push_back(k);
    }
    return pc;
  }

  lab::IoSetup setup() const {
    lab::IoSetup s = gpu_without_counters();
    s.counters.available = true;
    s.counters.why_not.clear();
    const FakeGpu self = *this;
    s.run = [self](const VersionInfo& v, const Problem& p, const Forward* tiled) {
      if (v.id == self.fail_id) throw std::runtime_error("needs 99.0 GiB of device memory");
      if (v.pass == Pass::bwd && !tiled) throw std::logic_error("no O and LSE given");
      cuda::RunResult r;
      if (v.cpu_forward) r.fwd_counters = self.counters(v, false, p);
      if (v.cpu_backward) r.bwd_counters = self.counters(v, true, p);
      return r;
    };
    return s;
  }
};

// The measured half on the fake GPU: every figure follows from the fake's shares, the verdict on
// the lecture's 1.8 follows the measured ratio, a version that cannot run is named.
TEST(IoLab, MeasuredHalfFollowsTheCounters) {
  LabOptions o;
  o.backend = "cuda";
  const FakeGpu fake{1.0, 0.1, "deterministic-dq"};
  const Report r = lab::io_lab(o, fake.setup());
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(count_lines_starting(r, "Not measured: "), 0);

  const Table& io = table(r, "io");
  int measured = 0;
  for (size_t i = 0; i < io.rows.size(); ++i) {
    const std::string v = cell(io, i, "version");
    if (v == "deterministic-dq") {
      EXPECT_TRUE(cell(io, i, "dram_bytes").is_null());
      continue;
    }
    const double share = v == "naive" ? 1.0 : 0.1;
    EXPECT_NEAR(cell(io, i, "dram_over_model").get<double>(), share, 1e-3) << v;
    EXPECT_NEAR(cell(io, i, "sm_read_hit_pct").get<double>(), 100 * (1 - share), 1e-3) << v;
    EXPECT_GT(cell(io, i, "time_us").get<double>(), 0);
    ++measured;
  }
  size_t passes = 0;  // every pass of every version but deterministic-dq's
  for (const VersionInfo& v : versions())
    if (!v.exercise && !v.fp8) passes += v.pass == Pass::both ? 2 : 1;
  EXPECT_EQ(measured, static_cast<int>(12 * (passes - 1)));

  const Table& k = table(r, "kernels");
  bool numbered = false, paired = false;
  for (size_t i = 0; i < k.rows.size(); ++i) {
    numbered = numbered || cell(k, i, "kernel") == "matmul_kernel #4";
    if (cell(k, i, "kernel") == "outer_k_kernel" && cell(k, i, "version") == "atomic-dq") {
      EXPECT_NEAR(cell(k, i, "dram_over_model").get<double>(), 0.1, 1e-9);
      paired = true;
    }
  }
  EXPECT_TRUE(numbered) << "naive's backward launches matmul_kernel four times";
  EXPECT_TRUE(paired) << "each measured kernel meets its modeled count";

  const Table& rt = table(r, "ratio");
  for (size_t i = 0; i < rt.rows.size(); ++i)
    EXPECT_NEAR(cell(rt, i, "ratio_dram").get<double>(),
                10 * cell(rt, i, "ratio_model").get<double>(), 1e-6);

  const Table& roof = table(r, "roofline");
  ASSERT_FALSE(roof.rows.empty());
  for (size_t i = 0; i < roof.rows.size(); ++i) {
    EXPECT_NEAR(cell(roof, i, "intensity").get<double>(),
                cell(roof, i, "flops").get<double>() / cell(roof, i, "dram_bytes").get<double>(),
                1e-9);
    EXPECT_NE(cell(roof, i, "version"), "deterministic-dq");
  }

  EXPECT_EQ(r.figures.at("lecture_ratio_holds").at("value"), false);
  EXPECT_NEAR(r.figures.at("fa_dram_over_model").at("value").get<double>(), 0.1, 1e-9);
  bool verdict = false, why = false, failed = false, roofline = false;
  for (const std::string& s : r.observations) {
    verdict = verdict || s.find("does not hold for HBM traffic on this GPU") != std::string::npos;
    why = why ||
          s.find("90.0% of what atomic-dq's main kernel reads from L2 hits") != std::string::npos;
    failed = failed || s.find(
                           "12 passes were not measured (the first: deterministic-dq bwd d=128 "
                           "N=512: needs 99.0 GiB") != std::string::npos;
    roofline = roofline ||
               s.find("With measured DRAM bytes, atomic-dq's main kernel") != std::string::npos;
  }
  EXPECT_TRUE(verdict);
  EXPECT_TRUE(why);
  EXPECT_TRUE(failed);
  EXPECT_TRUE(roofline);

  // Launches the callbacks could not name take the model's kernel names in launch order; naive's
  // (no model per kernel) keep their numbers.
  const Report unnamed = lab::io_lab(o, FakeGpu{1.0, 0.1, "", true}.setup());
  const Table& uk = table(unnamed, "kernels");
  int by_order = 0, numbered_only = 0;
  for (size_t i = 0; i < uk.rows.size(); ++i) {
    const std::string v = cell(uk, i, "version"), name = cell(uk, i, "kernel");
    if (v == "naive") numbered_only += name.rfind("kernel ", 0) == 0;
    if (v == "atomic-dq" && name == "outer_k_kernel") {
      EXPECT_NEAR(cell(uk, i, "dram_over_model").get<double>(), 0.1, 1e-9);
      ++by_order;
    }
  }
  EXPECT_EQ(by_order, 12);
  EXPECT_EQ(numbered_only, 12 * 8);

  // The lecture's explanation is said only when the counters bear it out.
  const auto explains = [](const Report& rep) {
    for (const std::string& s : rep.observations)
      if (s.find("what the lecture expected") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(explains(r));
  EXPECT_FALSE(explains(lab::io_lab(o, FakeGpu{1.0, 0.9, ""}.setup())));

  // The same shares for both: the measured ratio is the modeled one, and the 1.8 holds.
  const Report same = lab::io_lab(o, FakeGpu{0.3, 0.3, ""}.setup());
  EXPECT_EQ(same.figures.at("lecture_ratio_holds").at("value"), true);
  LabOptions zo;
  zo.lang = "zh";
  zo.backend = "cuda";
  const Report zh = lab::io_lab(zo, FakeGpu{0.3, 0.3, ""}.setup());
  bool holds_zh = false;
  for (const std::string& s : zh.observations)
    holds_zh = holds_zh || s.find("讲义的 ≈ 1.8 对这块 GPU 的显存流量成立") != std::string::npos;
  EXPECT_TRUE(holds_zh);

  // The figure of a measured report renders.
  const std::string svg = plot_svg(to_json(r));
  EXPECT_NE(svg.find("roofline · d = 128 · N = 4096"), std::string::npos);
  EXPECT_NE(svg.find("atomic-dq"), std::string::npos);
}

// The figure of a report made on a GPU: the roofline panels (roofs from the ceilings, a point per
// kernel) and the ratio panel, rendered to a PNG by rsvg-convert.
TEST(IoLab, PlotDrawsTheRooflineAndTheRatio) {
  LabOptions o;
  o.backend = "cuda";
  json doc = to_json(lab::io_lab(o, gpu_without_counters()));
  doc["machine"]["gpu"] = {
      {"name", "Test GPU"}, {"compute_capability", "9.0"}, {"driver_version", 13000}};
  // The rows a measured run adds: kernels on the roofline, the measured ratios.
  json roofline = {{"id", "roofline"}, {"title", "roofline"}, {"columns", json::array()}};
  roofline["rows"] = json::array();
  const struct {
    const char* version;
    const char* kernel;
    double intensity, achieved;
  } points[] = {{"naive", "matmul_kernel #1", 3.1, 7e12},
                {"naive", "softmax_rows", 0.2, 6e11},
                {"tiled", "fwd_kernel", 310, 3.3e14},
                {"atomic-dq", "outer_k_kernel", 190, 2.4e14},
                {"atomic-dq", "preprocess_kernel", 0.4, 1.1e12},
                {"recompute", "outer_k_kernel", 220, 2.2e14}};
  for (double d : {128.0, 64.0})
    for (const auto& p : points)
      roofline["rows"].push_back({{"d", d},
                                  {"version", p.version},
                                  {"pass", "bwd"},
                                  {"kernel", p.kernel},
                                  {"intensity", p.intensity},
                                  {"achieved", p.achieved * (d == 64 ? 0.8 : 1.0)}});
  doc["tables"].push_back(roofline);
  for (json& t : doc["tables"])
    if (t["id"] == "ratio")
      for (json& row : t["rows"]) {
        row["ratio_dram"] = row["ratio_model"].get<double>() * 6.5;
        row["ratio_l2"] = row["ratio_model"].get<double>() * 1.3;
      }
  const std::string svg = plot_svg(doc);
  EXPECT_NE(svg.find("roofline · d = 128 · N = 4096 · HBM 4.1 TB/s"), std::string::npos);
  EXPECT_NE(svg.find("roofline · d = 64"), std::string::npos);
  EXPECT_NE(svg.find("mma.sync 610 TFLOP/s"), std::string::npos);
  EXPECT_EQ(svg.find("wgmma "), std::string::npos);  // not measured: no roof
  EXPECT_NE(svg.find("DRAM, d=128"), std::string::npos);
  EXPECT_GE(std::count(svg.begin(), svg.end(), '<'), 100);

  // A report made without a GPU still plots: the modeled ratio alone.
  const std::string cpu_svg = plot_svg(to_json(modeled_only()));
  EXPECT_NE(cpu_svg.find("counted, d=128"), std::string::npos);
  EXPECT_EQ(cpu_svg.find("roofline ·"), std::string::npos);

  if (std::system("command -v rsvg-convert > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "rsvg-convert not installed (Debian package librsvg2-bin)";
  testing::ScratchDir dir;
  const std::string in = dir / "io.svg", out = dir / "io.png";
  std::ofstream(in) << svg;
  ASSERT_EQ(std::system(("rsvg-convert '" + in + "' -o '" + out + "'").c_str()), 0);
  std::ifstream png(out, std::ios::binary);
  unsigned char head[24] = {};
  png.read(reinterpret_cast<char*>(head), 24);
  ASSERT_TRUE(png);
  EXPECT_EQ(head[1], 'P');
  const uint32_t width = uint32_t(head[16]) << 24 | head[17] << 16 | head[18] << 8 | head[19];
  const uint32_t height = uint32_t(head[20]) << 24 | head[21] << 16 | head[22] << 8 | head[23];
  EXPECT_GE(width, 900u);   // two panels side by side
  EXPECT_GE(height, 700u);  // two rows
  EXPECT_GT(std::filesystem::file_size(out), 30000u);
}

}  // namespace flashlab

namespace flashlab {

// The device script's cross-check reads both of Nsight Compute's CSV pages and compares the right
// launch with the lab's figure; its self-test proves it here, where there is no ncu.
TEST(IoLab, NcuCrossCheckReadsBothCsvPages) {
  const std::string cmd = std::string("/usr/bin/python3 '") + FLASHLAB_SOURCE_DIR +
                          "/scripts/ncu_crosscheck.py' --self-test > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace flashlab
