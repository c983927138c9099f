// The labs that compare backward versions on the GPU (determinism, bwd-ratio) include the Hopper
// pair exactly when this GPU runs it: its rows and figures then, the line saying why not otherwise.
// lab fp8 measures its GPU half (errors and speed) where its four rows run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "gpu_check.h"
#include "labs/common/hopper_pair.h"
#include "labs/lab.h"
#include "run/registry.h"

namespace flashlab {
namespace {

Report run_cuda(const char* name) {
  LabOptions o;
  o.backend = "cuda";
  return find_lab(name)->run(o);
}

bool runnable() {
  return cuda_unavailable(*find_version("hopper")).empty() &&
         cuda_unavailable(*find_version("hopper-deterministic")).empty();
}

TEST(GpuLabs, DeterminismHasTheHopperPairWhereItRuns) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const Report r = run_cuda("determinism");
  const Table& t = r.tables.at(0);
  std::vector<std::string> ids;
  for (const auto& row : t.rows) ids.push_back(row.at(0).get<std::string>());
  if (runnable()) {
    EXPECT_EQ(ids, (std::vector<std::string>{"atomic-dq", "deterministic-dq", "hopper",
                                             "hopper-deterministic"}));
    EXPECT_EQ(r.figures["hopper_deterministic_runs_differing"]["value"].get<int>(), 0);
    EXPECT_TRUE(r.figures.contains("hopper_time_ratio"));
    EXPECT_TRUE(t.rows.at(3).at(4).get<bool>());  // hopper-deterministic's dK, dV
    EXPECT_TRUE(t.rows.at(2).at(4).get<bool>());  // hopper's dK, dV need no reduce-adds
  } else {
    EXPECT_EQ(ids, (std::vector<std::string>{"atomic-dq", "deterministic-dq"}));
    LabOptions o;
    const std::string note = lab::hopper_pair_absent_note(o, lab::hopper_pair_absent(o, true));
    EXPECT_NE(std::find(r.observations.begin(), r.observations.end(), note), r.observations.end());
  }
  EXPECT_TRUE(r.ok);
}

TEST(GpuLabs, BwdRatioHasTheHopperTableWhereItRuns) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const Report r = run_cuda("bwd-ratio");
  const auto it = std::find_if(r.tables.begin(), r.tables.end(),
                               [](const Table& t) { return t.id == "bwd_ratio_hopper"; });
  EXPECT_EQ(it != r.tables.end(), runnable());
  if (it != r.tables.end()) {
    ASSERT_EQ(it->rows.size(), 2 * r.tables.at(0).rows.size());
    EXPECT_GT(r.figures["hopper_time_ratio_min"]["value"].get<double>(), 0);
    EXPECT_GT(r.figures["hopper_deterministic_time_ratio_min"]["value"].get<double>(), 0);
  }
}

// lab fp8 on the GPU: where the four rows run (sm_90a), the error table is the kernels' and
// within budget (r.ok), every row is timed at FA3's speed shape with FA2's FLOP count, and the
// speed is said from the figures; elsewhere the speed table says which version cannot
// run, and why.
TEST(GpuLabs, Fp8MeasuresItsGpuHalfWhereTheRowsRun) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const Report r = run_cuda("fp8");
  const Table& speed = r.tables.at(1);
  ASSERT_EQ(speed.id, "speed");
  ASSERT_EQ(speed.rows.size(), 4u);
  bool all_run = true;
  for (const char* id : {"hopper", "hopper-fp8-per-tensor", "hopper-fp8-no-hadamard", "hopper-fp8"})
    all_run = all_run && cuda_unavailable(*find_version(id)).empty();
  EXPECT_EQ(r.config["backend"], all_run ? "cuda" : "cpu");
  EXPECT_TRUE(r.ok) << (r.observations.empty() ? "" : r.observations.back());
  if (!all_run) {
    for (const auto& row : speed.rows) EXPECT_TRUE(row.at(2).is_null());
    return;
  }
  for (size_t i = 0; i < 4; ++i) {
    const std::string id = speed.rows[i].at(1).get<std::string>();
    const double ms = speed.rows[i].at(2).get<double>(), tf = speed.rows[i].at(3).get<double>();
    EXPECT_GT(ms, 0) << id;
    // FA2's count at B = 1, H = 16, N = 16384, d = 128: 4 N^2 d H FLOPs in ms.
    EXPECT_NEAR(tf, 4.0 * 16384 * 16384 * 128 * 16 / (ms * 1e-3) / 1e12, 1e-6 * tf) << id;
    EXPECT_EQ(r.figures["tflops_" + id]["value"].get<double>(), tf);
    EXPECT_NEAR(speed.rows[i].at(4).get<double>(), tf / speed.rows[0].at(3).get<double>(),
                1e-12);  // x bf16
  }
  const std::string said = fmt::format("hopper-fp8 runs at {:.0f} TFLOP/s",
                                       r.figures["tflops_hopper-fp8"]["value"].get<double>());
  EXPECT_NE(std::find_if(r.observations.begin(), r.observations.end(),
                         [&](const std::string& o) { return o.find(said) != std::string::npos; }),
            r.observations.end());
  const Table& errors = r.tables.at(0);
  EXPECT_NE(errors.title.find("GPU"), std::string::npos);
  EXPECT_GT(r.figures["incoherent_factor_outliers"]["value"].get<double>(), 1.4);
}

}  // namespace
}  // namespace flashlab
