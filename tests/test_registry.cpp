// What the registry promises the harness and the labs, checked against the folders' sources: one
// version feeds the backward-only versions, and every kernel a version names for the io lab
// (VersionEntry::kernel_counts) is a __global__ function in its own folder or kernels/common, so
// renaming a kernel without its entry fails here instead of silently dropping a measurement.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "run/registry.h"
#include "test_cli_helpers.h"
#include "test_cpu_util.h"

namespace flashlab {
namespace {

TEST(Registry, OneForwardFeedsTheBackwardOnlyVersions) {
  int feeders = 0;
  for (const VersionInfo& v : versions()) feeders += v.feeds_backward;
  EXPECT_EQ(feeders, 1);
  const VersionInfo& f = feeding_forward();
  EXPECT_NE(f.cpu_forward, nullptr);
  EXPECT_FALSE(f.exercise);
}

// The __global__ functions of a set of sources: "__global__ [qualifiers] void name(".
std::set<std::string> kernels_in(std::span<const SourceHash> files) {
  static const std::regex global(
      R"(__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:void\s+)?(\w+)\s*\()");
  std::set<std::string> names;
  for (const SourceHash& f : files) {
    const std::string text = testing::slurp(std::string(FLASHLAB_SOURCE_DIR) + "/" + f.path);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), global);
         it != std::sregex_iterator(); ++it)
      names.insert((*it)[1]);
  }
  return names;
}

TEST(Registry, DeclaredKernelsExistInTheSources) {
  const std::set<std::string> shared = kernels_in(shared_sources());
  ASSERT_TRUE(shared.count("outer_k_kernel")) << "the regex no longer finds kernels";
  int declared = 0;
  for (const VersionInfo& v : versions()) {
    if (!v.kernel_counts) continue;
    const std::set<std::string> own = kernels_in(v.sources);
    const Problem p = testing::make_problem(1, 2, 300, 200, 64, true, DType::f32);
    CpuOptions o;
    o.Br = o.Bc = 128;
    o.dry_run = true;
    for (bool backward : {false, true}) {
      if (backward ? !v.cpu_backward : !v.cpu_forward) continue;
      Counters total;
      Forward f;
      Gradients g;
      if (backward)
        v.cpu_backward(p, {}, f, o, g, total);
      else
        v.cpu_forward(p, {}, o, f, total);
      for (const KernelCount& k : v.kernel_counts(p, o, backward, total)) {
        ++declared;
        EXPECT_TRUE(own.count(k.kernel) || shared.count(k.kernel))
            << v.id << " names kernel " << k.kernel << ", which is no __global__ function of "
            << v.folder << " or kernels/common";
      }
    }
  }
  EXPECT_GE(declared, 10);  // tiled's one, and three for each of the three FA2 backwards
}

}  // namespace
}  // namespace flashlab
