// The labs that compare backward versions on the GPU (determinism, bwd-ratio) include the Hopper
// pair exactly when this GPU runs it: its rows and figures then, the line saying why not otherwise.
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

}  // namespace
}  // namespace flashlab
