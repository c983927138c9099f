// The chapter labs: each one run, and its key figures checked against the lecture's numbers and
// against closed forms of the CPU twins' counters.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "cuda/runner.h"
#include "labs/11_fp8/fp8_check.h"
#include "labs/common/hopper_pair.h"
#include "labs/lab.h"
#include "report/render.h"

namespace flashlab {

namespace {

Report run_lab(const std::string& name, const std::string& lang = "en") {
  const LabInfo* lab = find_lab(name);
  if (lab == nullptr) throw std::runtime_error("no lab " + name);
  LabOptions o;
  o.lang = lang;
  o.backend = "cpu";
  return lab->run(o);
}

const Table& table(const Report& r, const std::string& id) {
  for (const Table& t : r.tables)
    if (t.id == id) return t;
  throw std::runtime_error("no table " + id + " in " + r.command);
}

size_t col_index(const Table& t, const std::string& key) {
  for (size_t i = 0; i < t.columns.size(); ++i)
    if (t.columns[i].key == key) return i;
  throw std::runtime_error("no column " + key + " in " + t.id);
}

const json& cell(const Table& t, size_t row, const std::string& key) {
  return t.rows.at(row).at(col_index(t, key));
}
double num(const Table& t, size_t row, const std::string& key) {
  return cell(t, row, key).get<double>();
}
std::string text(const Table& t, size_t row, const std::string& key) {
  return format_cell(t.columns[col_index(t, key)], cell(t, row, key));
}

bool has_cjk(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0xE4 && c <= 0xE9) return true;
  return false;
}

}  // namespace

TEST(Labs, RegistryListsEveryLabOnce) {
  std::set<std::string> names;
  for (const LabInfo& l : labs()) {
    EXPECT_TRUE(names.insert(l.name).second) << l.name;
    EXPECT_EQ(find_lab(l.name), &l);
    EXPECT_TRUE(has_cjk(l.title_zh)) << l.name;
  }
  for (const char* n :
       {"gradcheck", "memory", "cost", "causal", "bwd-ratio", "no-lse", "determinism"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(find_lab("no-such-lab"), nullptr);
}

// Every lab fills the report: command, typed rows as wide as the columns, finite numbers or null,
// computed observations; in Chinese with lang zh, in English otherwise.
TEST(Labs, EveryLabFillsItsReportInBothLanguages) {
  for (const LabInfo& l : labs()) {
    for (const std::string lang : {"en", "zh"}) {
      const Report r = run_lab(l.name, lang);
      SCOPED_TRACE(std::string(l.name) + " " + lang);
      EXPECT_EQ(r.command, std::string("lab ") + l.name);
      EXPECT_TRUE(r.ok);
      ASSERT_FALSE(r.tables.empty());
      ASSERT_FALSE(r.observations.empty());
      for (const Table& t : r.tables) {
        EXPECT_FALSE(t.id.empty());
        // `--table` is checked against the ids a lab declares, before it runs.
        EXPECT_NE(std::find(l.tables.begin(), l.tables.end(), t.id), l.tables.end())
            << t.id << " is not among the lab's declared tables";
        EXPECT_EQ(has_cjk(t.title), lang == "zh") << t.title;
        ASSERT_FALSE(t.rows.empty()) << t.id;
        for (const auto& row : t.rows) {
          ASSERT_EQ(row.size(), t.columns.size()) << t.id;
          for (const json& v : row)
            if (v.is_number()) {
              EXPECT_TRUE(std::isfinite(v.get<double>())) << t.id;
            }
        }
      }
      for (const std::string& s : r.observations) EXPECT_EQ(has_cjk(s), lang == "zh") << s;
      EXPECT_TRUE(r.config.is_object());
    }
  }
}

// The decode lab's counted half: split-kv's rule at its kernel's tile on 132 SMs (the stand-in
// where no GPU answers). B = 1 with 8 K/V heads is 8 workers: 16 splits of a 65,536-key cache fill
// 128 SMs; B = 8 is 64 workers: 2 splits; B = 64 fills the GPU: 1 split, no partials.
TEST(Labs, DecodeSplitsTheKeysWhereTheBatchLeavesSmsIdle) {
  if (cuda::device_info().present) GTEST_SKIP() << "the counted half is checked on 132 SMs";
  const Report r = run_lab("decode");
  const Table& t = table(r, "decode");
  ASSERT_EQ(t.rows.size(), 15u);  // 3 batches x 5 caches
  const double caches[] = {1024, 4096, 16384, 65536, 262144};
  for (size_t i = 0; i < 15; ++i) {
    const double B = i < 5 ? 1 : i < 10 ? 8 : 64, Nk = caches[i % 5];
    EXPECT_EQ(num(t, i, "cache"), Nk);
    EXPECT_EQ(num(t, i, "kv_bytes"), 2 * B * 8 * Nk * 128 * 2);
    EXPECT_EQ(num(t, i, "workers_unsplit"), B * 8);
    EXPECT_LE(num(t, i, "workers"), std::max(132.0, B * 8));
    EXPECT_TRUE(t.rows[i][7].is_null()) << "no time without a GPU";
  }
  EXPECT_EQ(num(t, 3, "splits"), 16);
  EXPECT_EQ(num(t, 3, "workers"), 128);
  EXPECT_GT(num(t, 3, "partials_share"), 0);
  EXPECT_LT(num(t, 3, "partials_share"), 0.005);  // 2 x 16 x 32 x 129 x 4 B of 268 MB
  EXPECT_EQ(num(t, 8, "splits"), 2);
  for (size_t i = 10; i < 15; ++i) {
    EXPECT_EQ(num(t, i, "splits"), 1);
    EXPECT_EQ(num(t, i, "partials_share"), 0);
  }
}

// K and V of one layer: 2 * Hkv * N * 128 * 2 bytes; 8 K/V heads under 32 keep a quarter.
TEST(Labs, MemoryShowsWhatGroupedHeadsSave) {
  const Report r = run_lab("memory");
  const Table& t = table(r, "kv");
  ASSERT_EQ(t.rows.size(), 9u);
  for (size_t i = 0; i < 9; ++i) {
    const double N = num(t, i, "N"), Hkv = num(t, i, "Hkv");
    EXPECT_EQ(num(t, i, "kv_bytes"), 2 * Hkv * N * 128 * 2);
    EXPECT_DOUBLE_EQ(num(t, i, "vs_mha"), Hkv / 32);
  }
  EXPECT_EQ(text(t, 7, "kv_bytes"), "512.0 MiB");  // N = 131072, 8 K/V heads
}

// Demo 2, to the character: 32 heads, fp16 P against fp32 LSE.
TEST(Labs, MemoryReproducesTheLectureTable) {
  const Report r = run_lab("memory");
  const Table& t = table(r, "kept");
  ASSERT_EQ(t.rows.size(), 4u);
  const char* expect[4][4] = {{"2,048", "256.0 MiB", "256.0 KiB", "1,024"},
                              {"8,192", "4.0 GiB", "1.0 MiB", "4,096"},
                              {"32,768", "64.0 GiB", "4.0 MiB", "16,384"},
                              {"131,072", "1.0 TiB", "16.0 MiB", "65,536"}};
  for (size_t i = 0; i < 4; ++i) {
    const double N = num(t, i, "N");
    EXPECT_EQ(num(t, i, "P_bytes"), 32 * N * N * 2);
    EXPECT_EQ(num(t, i, "LSE_bytes"), 32 * N * 4);
    EXPECT_EQ(num(t, i, "ratio"), N / 2);
    EXPECT_EQ(text(t, i, "N"), expect[i][0]);
    EXPECT_EQ(text(t, i, "P_bytes"), expect[i][1]);
    EXPECT_EQ(text(t, i, "LSE_bytes"), expect[i][2]);
    EXPECT_EQ(text(t, i, "ratio"), expect[i][3]);
  }
  // Workspaces at B=4, H=16, N=4096, d=128, Bc=128: one fp32 dQ (atomic) or 32 splits
  // (deterministic), plus a few fp32 vectors of one value per row (D, ...).
  const Table& w = table(r, "workspace");
  const double BH = 64, N = 4096, d = 128, row_vector = BH * N * 4;
  for (size_t i = 0; i < w.rows.size(); ++i) {
    const std::string id = cell(w, i, "version").get<std::string>();
    const double dq = BH * N * d * 4 * (id == "deterministic-dq" ? 32 : 1);
    if (id == "atomic-dq" || id == "deterministic-dq") {
      EXPECT_GE(num(w, i, "bytes"), dq) << id;
      EXPECT_LE(num(w, i, "bytes"), dq + 4 * row_vector) << id;
    }
  }
  if (!cuda::device_info().present) {
    bool said = false;
    for (const std::string& s : r.observations)
      said = said || s.find("not measured") != std::string::npos;
    EXPECT_TRUE(said);
  }
}

// Demo 3: counts equal their closed forms (one head, N divisible by the 128 x 128 blocks):
//   standard = naive fwd (4N^2 + 4Nd + N) + naive bwd (7N^2 + 8Nd) elements, 12 N^2 d FLOPs
//   FA = tiled fwd (2Nd + N + T*2Nd) + atomic-dq bwd (8Nd + N + T*(4Nd + 2N)), 14 N^2 d FLOPs
TEST(Labs, CostCountsMatchClosedFormsAndTheLectureRatios) {
  const Report r = run_lab("cost");
  const Table& t = table(r, "cost");
  ASSERT_EQ(t.rows.size(), 5u);
  const double d = 128;
  double last_io_ratio = 0;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const double N = num(t, i, "N"), T = N / 128;
    SCOPED_TRACE(N);
    EXPECT_EQ(num(t, i, "flops_standard"), 12 * N * N * d);
    EXPECT_EQ(num(t, i, "flops_fa"), 14 * N * N * d);
    EXPECT_NEAR(num(t, i, "flops_ratio"), 7.0 / 6.0, 1e-12);
    EXPECT_EQ(text(t, i, "flops_ratio"), "1.167");
    EXPECT_EQ(num(t, i, "io_standard"), 2 * (11 * N * N + 12 * N * d + N));
    const double fa = (2 * N * d + N + T * 2 * N * d) + (8 * N * d + N + T * (4 * N * d + 2 * N));
    EXPECT_EQ(num(t, i, "io_fa"), 2 * fa);
    // About 1.8 and flat: settles by N = 2048, never above 11/6.
    const double io_ratio = num(t, i, "io_ratio");
    EXPECT_GE(io_ratio, last_io_ratio);
    EXPECT_LT(io_ratio, 11.0 / 6.0);
    if (N >= 2048) {
      EXPECT_NEAR(io_ratio, 1.8, 0.05);
    }
    last_io_ratio = io_ratio;
    // Roofline on the lecture's H100: both bandwidth-bound, so the speedup is the IO ratio.
    EXPECT_NEAR(num(t, i, "roofline_standard"), num(t, i, "io_standard") / 3.35e12 * 1e6, 1e-9);
    EXPECT_NEAR(num(t, i, "speedup"), io_ratio, 1e-12);
  }
}

// Demo 4: 0.508, 0.516, 0.531 for square blocks, equal to 1/2 + 1/(2T).
TEST(Labs, CausalSkippingMatchesTheFormula) {
  const Report r = run_lab("causal");
  const Table& t = table(r, "causal");
  ASSERT_EQ(t.rows.size(), 4u);
  const char* expect[] = {"0.508", "0.516", "0.531"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(num(t, i, "flops_ratio"), num(t, i, "formula"), 1e-12);
    EXPECT_EQ(text(t, i, "flops_ratio"), expect[i]);
    EXPECT_EQ(text(t, i, "formula"), expect[i]);
  }
  EXPECT_TRUE(cell(t, 3, "formula").is_null());  // 128 x 64 is not square
  EXPECT_NEAR(num(t, 3, "flops_ratio"), 1056.0 / 2048.0, 1e-12);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_GT(num(t, i, "io_ratio"), num(t, i, "flops_ratio"));  // Q reads and O writes stay
    EXPECT_LT(num(t, i, "io_ratio"), 0.6);
  }
}

// The window table: the twin's count of blocks computed under a causal window of W keys back is
// T + k(k+1)/2 + k(T-1-k) (k = W/B, T = N/B), and the rest of the T^2 blocks are skipped.
TEST(Labs, WindowSkippingMatchesTheFormula) {
  const Report r = run_lab("causal");
  const Table& t = table(r, "window");
  ASSERT_EQ(t.rows.size(), 4u);
  const int64_t W[] = {256, 1024, 256, 1024}, B[] = {64, 64, 128, 128};
  for (size_t i = 0; i < 4; ++i) {
    const int64_t T = 4096 / B[i], k = W[i] / B[i];
    EXPECT_EQ(num(t, i, "computed"), T + k * (k + 1) / 2 + k * (T - 1 - k));
    EXPECT_EQ(num(t, i, "formula"), num(t, i, "computed"));
    EXPECT_EQ(num(t, i, "computed") + num(t, i, "skipped"), T * T);
    EXPECT_LT(num(t, i, "vs_causal"), 0.6);
  }
  EXPECT_EQ(num(t, 0, "computed"), 310);  // 64 + 10 + 4 * 59
  bool said = false;
  for (const std::string& line : r.observations)
    said = said || line.find("The counts meet the formula block for block.") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(Labs, GradcheckIsWithinTheLectureBounds) {
  const Report r = run_lab("gradcheck");
  EXPECT_TRUE(r.ok);
  const Table& t = table(r, "gradcheck");
  // causal and not, grouped heads with a window, a packed batch x (standard + 8 CPU backwards:
  // naive, recompute, atomic-dq, deterministic-dq, hopper, hopper-deterministic, ring,
  // ring-contiguous)
  EXPECT_EQ(t.rows.size(), 36u);
  for (size_t i = 0; i < t.rows.size(); ++i) {
    EXPECT_LE(num(t, i, "fwd_O"), 1e-14);
    if (!cell(t, i, "vs_standard").is_null()) {
      EXPECT_LE(num(t, i, "vs_standard"), 1e-13);
    }
    EXPECT_LE(num(t, i, "vs_fd"), 1e-7);
    EXPECT_TRUE(cell(t, i, "within_bounds").get<bool>());
  }
  EXPECT_LE(r.figures["D_identity_gap"]["value"].get<double>(), 1e-13);
}

// Exercise 3: rebuilding m and l costs one more Q K^T per pair and a read of K per Q block.
TEST(Labs, NoLseExtraCostsMatchClosedForms) {
  const Report r = run_lab("no-lse");
  const Table& t = table(r, "no_lse");
  ASSERT_EQ(t.rows.size(), 5u);
  const double d = 128;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const double N = num(t, i, "N");
    const double extra_flops = num(t, i, "flops_no_lse") - num(t, i, "flops_lse");
    EXPECT_EQ(extra_flops, 2 * N * N * d);
    EXPECT_NEAR(num(t, i, "extra_flops"), 20.0, 1e-9);         // 2 N^2 d on top of 10 N^2 d
    const double extra_elems = N * d + (N / 128) * N * d + N;  // Q, K per Q block, LSE
    EXPECT_EQ(num(t, i, "extra_io_bytes"), 2 * extra_elems);
    EXPECT_EQ(r.figures[fmt::format("extra_io_N{}", int64_t(N))]["value"].get<double>(),
              extra_elems);
  }
}

TEST(Labs, DeterministicDqIsBitwiseRepeatable) {
  const Report r = run_lab("determinism");
  const Table& t = table(r, "determinism");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(cell(t, 0, "version"), "atomic-dq");
  EXPECT_EQ(cell(t, 1, "version"), "deterministic-dq");
  EXPECT_EQ(num(t, 1, "runs_differing"), 0);
  EXPECT_EQ(num(t, 1, "max_diff"), 0);
  EXPECT_TRUE(cell(t, 1, "dkdv_identical").get<bool>());
  EXPECT_GT(num(t, 1, "workspace"), num(t, 0, "workspace"));
  // atomic-dq may or may not differ on a given day; when it does, only by rounding.
  EXPECT_LE(num(t, 0, "rel_diff"), 1e-5);
  EXPECT_TRUE(r.ok);
}

// The Hopper pair (hopper vs hopper-deterministic) joins the labs only where the GPU runs it. The
// decision, with a stand-in for cuda_unavailable so that both answers are reachable without a GPU.
TEST(Labs, HopperPairOnlyWhereTheGpuRunsIt) {
  ASSERT_NE(find_version("hopper"), nullptr);
  ASSERT_NE(find_version("hopper-deterministic"), nullptr);
  LabOptions o;
  const auto runs = [](const VersionInfo&) { return std::string(); };
  EXPECT_EQ(lab::hopper_pair_absent(o, true, runs), "");
  // The CPU backend leaves them out even where a GPU could run them.
  const std::string cpu = lab::hopper_pair_absent(o, false, runs);
  EXPECT_NE(cpu.find("CPU twins"), std::string::npos) << cpu;
  // One of the two not runnable is enough to leave both out, and the reason is passed on.
  const auto no_det = [](const VersionInfo& v) {
    return v.id == std::string("hopper-deterministic") ? std::string("needs an sm_90a GPU")
                                                       : std::string();
  };
  const std::string gpu = lab::hopper_pair_absent(o, true, no_det);
  EXPECT_NE(gpu.find("hopper-deterministic: needs an sm_90a GPU"), std::string::npos) << gpu;
  // The real judgement on this machine agrees with cuda_unavailable.
  const bool runnable = cuda_unavailable(*find_version("hopper")).empty() &&
                        cuda_unavailable(*find_version("hopper-deterministic")).empty();
  EXPECT_EQ(lab::hopper_pair_absent(o, true).empty(), runnable);
  o.lang = "zh";
  EXPECT_TRUE(has_cjk(lab::hopper_pair_absent(o, false, runs)));
  EXPECT_TRUE(has_cjk(lab::hopper_pair_absent_note(o, "x")));
}

// On the CPU backend (the only one without a GPU) both labs keep their rows and tables as before,
// without the Hopper versions, and say why in one observation line.
TEST(Labs, HopperPairAbsentOnTheCpuBackendWithTheReason) {
  for (const std::string lang : {"en", "zh"}) {
    for (const char* name : {"determinism", "bwd-ratio"}) {
      SCOPED_TRACE(std::string(name) + " " + lang);
      const Report r = run_lab(name, lang);
      for (const Table& t : r.tables) {
        EXPECT_NE(t.id, "bwd_ratio_hopper");
        for (const auto& row : t.rows)
          for (const json& v : row)
            if (v.is_string()) {
              EXPECT_EQ(v.get<std::string>().find("hopper"), std::string::npos);
            }
      }
      for (const auto& [key, value] : r.figures.items())
        EXPECT_EQ(key.find("hopper"), std::string::npos) << key;
      for (const std::string& id : r.version_ids) EXPECT_EQ(id.find("hopper"), std::string::npos);
      LabOptions o;
      o.lang = lang;
      const std::string note = lab::hopper_pair_absent_note(o, lab::hopper_pair_absent(o, false));
      std::string all;
      for (const std::string& s : r.observations) all += s + "\n";
      EXPECT_EQ(std::count(r.observations.begin(), r.observations.end(), note), 1) << note << "\n"
                                                                                   << all;
      EXPECT_NE(note.find("hopper-deterministic"), std::string::npos);
    }
  }
  // With --versions, bwd-ratio times the one backward asked for and says nothing about Hopper.
  LabOptions o;
  o.backend = "cpu";
  o.versions = {find_version("deterministic-dq")};
  const Report r = find_lab("bwd-ratio")->run(o);
  for (const std::string& s : r.observations) EXPECT_EQ(s.find("hopper"), std::string::npos) << s;
}

TEST(Labs, BwdRatioMeasuresAndCountsTheFlopRatio) {
  const Report r = run_lab("bwd-ratio");
  const Table& t = table(r, "bwd_ratio");
  ASSERT_GE(t.rows.size(), 2u);
  for (size_t i = 0; i < t.rows.size(); ++i) {
    EXPECT_EQ(num(t, i, "flop_ratio"), 2.5);
    EXPECT_GT(num(t, i, "fwd_time"), 0);
    EXPECT_GT(num(t, i, "time_ratio"), 0);
  }
  EXPECT_EQ(r.config["backend"], "cpu");
}

}  // namespace flashlab

namespace flashlab {

// lab fp8: the four rows on normal and outlier inputs, bf16 far below every fp8 row and each
// within its budget, incoherent processing lowering the block-scaled error on outliers (its factor
// a figure of the report and said in the observations), the ordering of the rows on normal inputs
// said from the numbers, and the speed half (on this backend, cpu) saying why it is empty.
TEST(Labs, Fp8TableIsFa3sErrorTable) {
  const Report r = run_lab("fp8");
  EXPECT_TRUE(r.ok);
  const Table& t = table(r, "errors");
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(t.rows[0][1], "hopper");
  EXPECT_EQ(t.rows[3][1], "hopper-fp8");
  for (size_t i = 0; i < 4; ++i)
    for (const char* kind : {"normal", "outliers"}) {
      EXPECT_LE(num(t, i, std::string("rel_") + kind), num(t, i, std::string("budget_") + kind));
      EXPECT_GT(num(t, i, std::string("budget_") + kind), 0);
    }
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_GT(num(t, i, "rel_normal"), 10 * num(t, 0, "rel_normal"));
    EXPECT_GT(num(t, i, "rmse_outliers"), num(t, i, "rmse_normal"));  // outliers make O larger
    EXPECT_GT(num(t, i, "budget_normal"), 10 * num(t, 0, "budget_normal"));  // fp8's, not bf16's
  }
  const double factor = r.figures.at("incoherent_factor_outliers")["value"].get<double>();
  EXPECT_NEAR(factor, num(t, 2, "rel_outliers") / num(t, 3, "rel_outliers"), 1e-12);
  EXPECT_GT(factor, 1.4);
  bool said = false, ranked = false;
  const std::string first =
      fmt::format("from the smallest error: bf16 ({:.2e}) < ", num(t, 0, "rel_normal"));
  for (const std::string& o : r.observations) {
    said = said || o.find(fmt::format("{:.2f}x", factor)) != std::string::npos;
    ranked = ranked || o.find(first) != std::string::npos;
    EXPECT_EQ(o.rfind("FAIL", 0), std::string::npos) << o;
  }
  EXPECT_TRUE(said) << "the factor is said in the observations";
  EXPECT_TRUE(ranked) << "the ordering on normal inputs is said, bf16 first";
  const Table& speed = table(r, "speed");
  ASSERT_EQ(speed.rows.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(cell(speed, i, "ms").is_null());
    EXPECT_TRUE(cell(speed, i, "tflops").is_null());
    EXPECT_NE(cell(speed, i, "why").get<std::string>().find("needs a GPU"), std::string::npos);
  }
  EXPECT_FALSE(r.figures.contains("tflops_hopper-fp8"));
  EXPECT_EQ(r.config["backend"], "cpu");
}

// A row over its budget, or not finite, is a wrong answer: one FAIL line that names the version,
// where it ran and the output over budget, and the lab fails on it (r.ok is false exactly when
// some row's verdict is a FAIL line).
TEST(Labs, Fp8FailsARowOverItsBudget) {
  lab::fp8_check::RowResult row{"hopper-fp8", "GPU, outlier inputs", 0.05, 1e-3, 0.2, 4e-3, true};
  EXPECT_EQ(lab::fp8_check::verdict(row, false), "");
  EXPECT_EQ(lab::fp8_check::verdict(row, true), "");
  row.o_rel = 0.3;  // e.g. a K block skipped
  const std::string line = lab::fp8_check::verdict(row, false);
  EXPECT_EQ(line.rfind("FAIL hopper-fp8 (GPU, outlier inputs): O rel error 3.00e-01 > budget "
                       "2.00e-01.",
                       0),
            0u)
      << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_TRUE(has_cjk(lab::fp8_check::verdict(row, true)));
  row.o_rel = 0.05;
  row.lse_rel = 5e-3;
  EXPECT_NE(lab::fp8_check::verdict(row, false).find("LSE rel error 5.00e-03 > budget 4.00e-03"),
            std::string::npos);
  row.lse_rel = NAN;  // NaN is never within a budget
  EXPECT_NE(lab::fp8_check::verdict(row, false), "");
  row.lse_rel = 1e-3;
  row.finite = false;
  EXPECT_NE(lab::fp8_check::verdict(row, false).find("NaN or Inf"), std::string::npos);
}

}  // namespace flashlab
