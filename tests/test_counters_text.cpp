// The parts of the counter layer that run everywhere: the metric list, CUPTI's error codes in
// words (the no-permission path says what to do), kernel names from symbols, the switch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "cuda/counters.h"

namespace flashlab {

TEST(CountersText, MetricListHasUniqueKeysAndTheCoreFiguresFirst) {
  std::set<std::string> keys;
  bool extras = false;
  for (const cuda::MetricSpec& m : cuda::metric_specs()) {
    EXPECT_TRUE(keys.insert(m.key).second) << m.key;
    EXPECT_FALSE(m.names.empty()) << m.key;
    for (const char* n : m.names) EXPECT_NE(std::string(n).find("__"), std::string::npos) << n;
    EXPECT_FALSE(m.core && extras) << m.key << ": a core figure after the extras";
    extras = extras || !m.core;
  }
  for (const char* k : {"time_ns", "dram_read_bytes", "dram_write_bytes", "l2_bytes",
                        "l2_sm_read_sectors", "l2_sm_read_hit_sectors", "hmma_inst"})
    EXPECT_TRUE(keys.count(k)) << k;
}

TEST(CountersText, NoPermissionSaysWhatToDo) {
  const std::string s = cuda::describe_cupti_error(35, "cuptiRangeProfilerEnable",
                                                   "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
  EXPECT_EQ(s.rfind("no permission to read the GPU's performance counters", 0), 0u) << s;
  EXPECT_NE(s.find("cuptiRangeProfilerEnable"), std::string::npos);
  EXPECT_NE(s.find("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"), std::string::npos);
  EXPECT_NE(s.find("root"), std::string::npos);
  EXPECT_NE(s.find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos);

  EXPECT_NE(cuda::describe_cupti_error(39, "cuptiSubscribe", "").find("another profiler"),
            std::string::npos);
  EXPECT_NE(cuda::describe_cupti_error(27, "x", "").find("does not support"), std::string::npos);
  const std::string other =
      cuda::describe_cupti_error(7, "cuptiRangeProfilerSetConfig", "CUPTI_ERROR_INVALID_OPERATION");
  EXPECT_NE(other.find("cuptiRangeProfilerSetConfig: CUPTI_ERROR_INVALID_OPERATION"),
            std::string::npos)
      << other;
  EXPECT_NE(cuda::describe_cupti_error(7, "f", "").find("CUPTI error 7"), std::string::npos);
}

TEST(CountersText, ShortKernelNames) {
  // Mangled, as the launch callbacks give them, and demangled.
  EXPECT_EQ(cuda::short_kernel_name("_ZN8flashlab4cuda3bwd14outer_k_kernelI13__nv_bfloat16Li128E"
                                    "LNS0_6DqModeE1EEEvNS0_9BwdParamsE"),
            "outer_k_kernel");
  EXPECT_EQ(cuda::demangle("_ZN8flashlab4cuda3bwd14outer_k_kernelI13__nv_bfloat16Li128ELNS0_"
                           "6DqModeE1EEEvNS0_9BwdParamsE"),
            "void flashlab::cuda::bwd::outer_k_kernel<__nv_bfloat16, 128, "
            "(flashlab::cuda::DqMode)1>(flashlab::cuda::BwdParams)");
  // nvcc names an anonymous namespace after the file.
  EXPECT_EQ(
      cuda::short_kernel_name(
          "_ZN8flashlab4cuda44_GLOBAL__N__7dcaaa2c_11_ceilings_cu_f1953ce110mma_chainsEPKjiPf"),
      "mma_chains");
  EXPECT_EQ(cuda::short_kernel_name("flashlab::cuda::(anonymous namespace)::softmax_rows(float "
                                    "const*, float*, float*, int, int, int, bool)"),
            "softmax_rows");
  EXPECT_EQ(cuda::short_kernel_name("void foo<int>(int)"), "foo");
  EXPECT_EQ(cuda::short_kernel_name("plain_kernel"), "plain_kernel");
  EXPECT_EQ(cuda::demangle("not_mangled"), "not_mangled");
}

TEST(CountersText, EnvironmentSwitchesThemOff) {
  unsetenv("FLASHLAB_COUNTERS");
  EXPECT_EQ(cuda::counters_disabled_by_env(), "");
  for (const char* v : {"off", "0", "no"}) {
    setenv("FLASHLAB_COUNTERS", v, 1);
    EXPECT_NE(cuda::counters_disabled_by_env().find(std::string("FLASHLAB_COUNTERS=") + v),
              std::string::npos);
  }
  setenv("FLASHLAB_COUNTERS", "on", 1);
  EXPECT_EQ(cuda::counters_disabled_by_env(), "");
  unsetenv("FLASHLAB_COUNTERS");
}

}  // namespace flashlab
