// Hardware counters and the machine's ceilings on a real GPU. Without a device every test skips;
// where the counters cannot be read (no libcupti, no permission) the counter tests skip with
// CUPTI's reason, which the io lab prints too.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "cuda/ceilings.h"
#include "cuda/counters.h"
#include "gpu_check.h"
#include "run/registry.h"

namespace flashlab {
namespace {

#define FLASHLAB_SKIP_WITHOUT_COUNTERS()                                             \
  do {                                                                               \
    FLASHLAB_SKIP_WITHOUT_DEVICE();                                                  \
    if (!::flashlab::cuda::counter_status().available)                               \
      GTEST_SKIP() << "no counters: " << ::flashlab::cuda::counter_status().why_not; \
  } while (0)

Problem bf16_problem(int64_t B, int64_t H, int64_t N, int64_t d) {
  Problem p;
  p.shape = {B, H, N, N, d};
  p.dtype = DType::bf16;
  return p;
}

double value(const cuda::KernelCounters& k, const char* key) {
  const auto it = k.values.find(key);
  if (it == k.values.end()) throw std::runtime_error(std::string("not measured: ") + key);
  return it->second;
}

std::vector<std::string> names(const cuda::PassCounters& pc) {
  std::vector<std::string> n;
  for (const cuda::KernelCounters& k : pc.kernels) n.push_back(k.name);
  return n;
}

// Needs libcupti but no GPU: every metric the lab reads is one the H100/H200 chip knows, and the
// whole set takes a handful of passes. Runs wherever the CUDA build runs.
TEST(CountersOffline, TheH200sChipKnowsEveryMetric) {
  cuda::CounterPlan plan;
  try {
    plan = cuda::plan_for_chip("GH100");
  } catch (const std::exception& e) {
    GTEST_SKIP() << "no CUPTI to ask: " << e.what();
  }
  EXPECT_TRUE(plan.missing.empty()) << plan.missing.front();
  EXPECT_EQ(plan.metrics.size(), cuda::metric_specs().size());
  for (size_t i = 0; i < plan.metrics.size() && i < cuda::metric_specs().size(); ++i)
    EXPECT_EQ(plan.metrics[i], cuda::metric_specs()[i].names.front());
  EXPECT_GE(plan.replay_passes, 1);
  EXPECT_LE(plan.replay_passes, 8);
  std::cout << plan.library << ": " << plan.metrics.size() << " metrics in " << plan.replay_passes
            << " passes on GH100\n";
  EXPECT_THROW(cuda::plan_for_chip("NO_SUCH_CHIP"), std::runtime_error);
}

TEST(Counters, AvailableOrSayWhyNot) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const cuda::CounterStatus& s = cuda::counter_status();
  if (!s.available) {
    EXPECT_FALSE(s.why_not.empty());
    GTEST_SKIP() << s.why_not;
  }
  EXPECT_FALSE(s.library.empty());
  EXPECT_FALSE(s.chip.empty());
  EXPECT_GE(s.replay_passes, 1);
  for (const cuda::MetricSpec& m : cuda::metric_specs()) {
    if (!m.core) continue;
    for (const std::string& missing : s.missing) EXPECT_NE(missing, m.key);
  }
  std::cout << "libcupti: " << s.library << ", chip " << s.chip << ", " << s.metrics.size()
            << " metrics in " << s.replay_passes << " passes; missing:";
  for (const std::string& m : s.missing) std::cout << " " << m;
  std::cout << "\n";
}

// The tiled forward at B*N = 16k tokens, d = 128: after the L2 is cleaned, every input must come
// from DRAM at least once, no more than the lecture's count says, and the tensor cores do exactly
// the model's matmul FLOPs (4 B H N^2 d, no masked tails at N = 4096).
TEST(Counters, TiledForwardReadsItsInputsFromDram) {
  FLASHLAB_SKIP_WITHOUT_COUNTERS();
  const Problem p = bf16_problem(4, 16, 4096, 128);
  const cuda::RunResult r = cuda::run(*find_version("tiled")->cuda, p, make_inputs(p, 21), nullptr,
                                      cuda::counters_only());
  ASSERT_EQ(names(r.fwd_counters), std::vector<std::string>{"fwd_kernel"}) << r.fwd_counters.note;
  const cuda::KernelCounters& k = r.fwd_counters.kernels[0];
  const double q = static_cast<double>(p.shape.q_elems());
  const double inputs = 2 * 3 * q, outputs = 2 * q + 4 * static_cast<double>(p.shape.lse_elems());
  Counters model;
  Forward f;
  CpuOptions o;
  o.Br = o.Bc = 128;
  o.dry_run = true;
  find_version("tiled")->cpu_forward(p, Inputs{}, o, f, model);
  const double read = value(k, "dram_read_bytes"), written = value(k, "dram_write_bytes");
  std::cout << "fwd_kernel: DRAM read " << read / 1e6 << " MB (inputs " << inputs / 1e6
            << " MB, lecture's count " << model.elems_read * 2 / 1e6 << " MB), written "
            << written / 1e6 << " MB (outputs " << outputs / 1e6 << " MB), "
            << value(k, "time_ns") / 1e3 << " us, " << r.fwd_counters.replay_passes << " replays\n";
  EXPECT_GE(read, 0.95 * inputs);
  EXPECT_LE(read, 2.0 * static_cast<double>(model.elems_read));
  // DRAM is written when L2 evicts a dirty line, not when the kernel stores it: some of the
  // outputs are still in L2 when the kernel ends (Nsight Compute counts 55 MB of the 68 here),
  // and lines left dirty before it may be evicted during it (the range profiler counts 85 MB).
  // Per kernel, writes are known to within what L2 holds.
  const double l2 = static_cast<double>(cuda::device_info().l2_bytes);
  EXPECT_LE(std::fabs(written - outputs), l2) << "written " << written << ", outputs " << outputs;
  EXPECT_GT(value(k, "time_ns"), 0);
  const double hit = value(k, "l2_sm_read_hit_sectors") / value(k, "l2_sm_read_sectors");
  EXPECT_GT(hit, 0.5) << "K and V are read by every Q-block CTA of a head";
  EXPECT_LE(hit, 1.0);
  if (k.values.count("hmma_inst")) {
    const double flops = 2.0 * 16 * 8 * 16 * value(k, "hmma_inst");
    EXPECT_NEAR(flops / static_cast<double>(model.matmul_flops), 1.0, 0.01)
        << "one mma.sync m16n8k16 is 4096 FLOP";
  }
  if (k.values.count("tensor_ops_bf16")) {
    // The hardware's bf16 tensor ops: one per FLOP or one per multiply-add, nothing else.
    const double per_flop = value(k, "tensor_ops_bf16") / static_cast<double>(model.matmul_flops);
    std::cout << "fwd_kernel: " << per_flop << " bf16 tensor ops per matmul FLOP\n";
    EXPECT_TRUE(std::fabs(per_flop - 1) < 0.01 || std::fabs(per_flop - 0.5) < 0.005) << per_flop;
  }
  if (k.values.count("gmma_inst")) {
    EXPECT_EQ(value(k, "gmma_inst"), 0) << "mma.sync, not wgmma";
  }
}

// Every kernel of a backward pass, named and in launch order (recompute's dQ kernel runs on a
// second stream; the profiler serialises it after the dK, dV kernel).
TEST(Counters, EveryBackwardKernelIsNamedInLaunchOrder) {
  FLASHLAB_SKIP_WITHOUT_COUNTERS();
  const Problem p = bf16_problem(2, 4, 1024, 64);
  const Inputs in = make_inputs(p, 22);
  cuda::RunOptions plain = cuda::counters_only();
  plain.counters = false;
  const cuda::RunResult fwd = cuda::run(*find_version("tiled")->cuda, p, in, nullptr, plain);
  const std::vector<std::pair<const char*, std::vector<std::string>>> expect = {
      {"recompute", {"preprocess_kernel", "outer_k_kernel", "dq_outer_q_kernel"}},
      {"atomic-dq", {"preprocess_kernel", "outer_k_kernel", "convert_dq_kernel"}},
      {"deterministic-dq", {"preprocess_kernel", "outer_k_kernel", "convert_dq_kernel"}}};
  for (const auto& [id, kernels] : expect) {
    const cuda::RunResult r =
        cuda::run(*find_version(id)->cuda, p, in, &fwd.fwd, cuda::counters_only());
    EXPECT_EQ(names(r.bwd_counters), kernels) << id << ": " << r.bwd_counters.note;
    for (const cuda::KernelCounters& k : r.bwd_counters.kernels) {
      EXPECT_GT(value(k, "time_ns"), 0) << id << " " << k.name;
      EXPECT_GT(value(k, "dram_read_bytes"), 0) << id << " " << k.name;
    }
  }
  // naive: three forward kernels, and a backward measured after its own forward (it needs P).
  const cuda::RunResult n =
      cuda::run(*find_version("naive")->cuda, p, in, nullptr, cuda::counters_only());
  EXPECT_EQ(names(n.fwd_counters),
            (std::vector<std::string>{"matmul_kernel", "softmax_rows", "matmul_kernel"}));
  EXPECT_EQ(names(n.bwd_counters),
            (std::vector<std::string>{"matmul_kernel", "matmul_kernel", "softmax_grad_rows",
                                      "matmul_kernel", "matmul_kernel"}));
}

TEST(Ceilings, MeasuredAndChecked) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const std::vector<cuda::Ceiling> cs = cuda::measure_ceilings();
  std::vector<std::string> keys;
  for (const cuda::Ceiling& c : cs) keys.push_back(c.key);
  ASSERT_EQ(keys, (std::vector<std::string>{"hbm_copy", "hbm_read", "mma_sync_bf16", "wgmma_bf16",
                                            "ffma_fp32"}));
  for (const cuda::Ceiling& c : cs) {
    std::cout << c.key << ": " << c.value * 1e-12 << " T" << c.unit << "; " << c.check << "; "
              << (c.why_not.empty() ? c.how : c.why_not) << "\n";
    if (!c.why_not.empty()) {
      EXPECT_EQ(c.key, "wgmma_bf16") << "only wgmma may be unavailable";
      continue;
    }
    EXPECT_TRUE(c.check_ok) << c.key << ": " << c.check;
    EXPECT_GT(c.value, 0) << c.key;
  }
  // HBM, copied and read: more than any PCIe link, less than any HBM3e stack set.
  for (const int i : {0, 1}) {
    EXPECT_GT(cs[i].value, 5e11) << cs[i].key;
    EXPECT_LT(cs[i].value, 2e13) << cs[i].key;
  }
  EXPECT_GT(cs[2].value, 5e13);  // mma.sync bf16
  EXPECT_GT(cs[4].value, 5e12);  // fp32 FMA
  const cuda::DeviceInfo& dev = cuda::device_info();
  if (dev.cc_major == 9 && cs[3].why_not.empty()) {
    EXPECT_GT(cs[3].value, 1e14);
  }
}

}  // namespace
}  // namespace flashlab
