#include "labs/common/lab_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cuda/runner.h"
#include "labs/common/hopper_pair.h"
#include "run/runner.h"
#include "util/progress.h"

namespace flashlab::lab {

std::string human_time(double s) {
  const double a = std::fabs(s);
  if (a >= 1.0) return fmt::format("{:.2f} s", s);
  if (a >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  if (a >= 1e-6) return fmt::format("{:.1f} µs", s * 1e6);
  return fmt::format("{:.0f} ns", s * 1e9);
}

Column col(const char* key, const std::string& header, const char* unit, const char* format) {
  return Column{key, header, unit, format};
}

bool use_gpu(const LabOptions& o) {
  const cuda::DeviceInfo& dev = cuda::device_info();
  if (o.backend == "cpu") return false;
  if (o.backend == "cuda") {
    if (!dev.present) throw std::runtime_error("--backend cuda: no CUDA device: " + dev.why_absent);
    return true;
  }
  return dev.present;
}

std::string backend_note(const LabOptions& o, bool gpu) {
  const cuda::DeviceInfo& dev = cuda::device_info();
  if (gpu) return fmt::format("GPU ({})", dev.name);
  if (dev.present) return zh(o) ? "CPU 孪生版本（--backend cpu）" : "CPU twins (--backend cpu)";
  return zh(o) ? "CPU 孪生版本（没有 GPU）" : "CPU twins (no GPU)";
}

std::string hopper_pair_absent(const LabOptions& o, bool gpu,
                               const std::function<std::string(const VersionInfo&)>& unavailable) {
  const VersionInfo* a = find_version(kHopper);
  const VersionInfo* b = find_version(kHopperDeterministic);
  if (!a || !b) return tr(o, "this build does not register them", "这次构建里没有这两个版本");
  if (!gpu)
    return fmt::format(
        fmt::runtime(tr(o,
                        "the lab measures them only on a GPU that runs them (sm_90a), and this run "
                        "uses the {}; their CPU twins follow atomic-dq's schedule and would repeat "
                        "its rows",
                        "这个实验只在能跑它们的 GPU（sm_90a）上测量，这次用的是 {}；它们的 CPU "
                        "孪生版本和 atomic-dq 是同一份调度，放进来只会重复 atomic-dq 的那几行")),
        backend_note(o, false));
  for (const VersionInfo* v : {a, b}) {
    const std::string why = unavailable(*v);
    if (!why.empty())
      return fmt::format(
          fmt::runtime(tr(o, "this GPU cannot run {}: {}", "这块 GPU 跑不了 {}：{}")), v->id, why);
  }
  return "";
}

std::string hopper_pair_absent_note(const LabOptions& o, const std::string& why) {
  return fmt::format(
      fmt::runtime(tr(o, "{} and {} are not in this lab's table: {}.", "表里没有 {} 和 {}：{}。")),
      kHopper, kHopperDeterministic, why);
}

Problem make_problem(int64_t BH, int64_t N, int64_t d, bool causal, DType dt) {
  Problem p;
  p.shape = Shape{1, BH, N, N, d};
  p.causal = causal;
  p.dtype = dt;
  return p;
}

CpuOptions blocks(int Br, int Bc, bool dry_run) {
  CpuOptions o;
  o.Br = Br;
  o.Bc = Bc;
  o.dry_run = dry_run;
  return o;
}

const VersionInfo& version(const char* id) {
  const VersionInfo* v = find_version(id);
  if (!v) throw std::logic_error(std::string("this build has no version '") + id + "'");
  return *v;
}

std::vector<std::string> ids_of(const std::vector<const VersionInfo*>& vs) {
  std::vector<std::string> ids;
  for (const VersionInfo* v : vs) ids.push_back(v->id);
  return ids;
}

double median(std::vector<double> xs) {
  if (xs.empty()) return NAN;
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

std::string wrong_backward(const VersionInfo& v, const LabOptions& o, const std::string& then_en,
                           const std::string& then_zh) {
  for (const bool causal : {false, true}) {
    RunConfig c;
    c.problem = make_problem(1, 192, 64, causal, DType::f32);
    c.versions = {&v};
    c.seed = o.seed;
    c.repeats = 1;
    c.warmup = 0;
    Progress quiet;
    const RunOutcome out = run_versions(c, quiet);
    const VersionOutcome& got = out.versions.front();
    if (got.ok()) continue;
    std::string why;
    for (const std::string& f : got.failures) why += (why.empty() ? "" : "; ") + f;
    return zh(o) ? fmt::format("FAIL {}：它的梯度不对（N = 192，fp32，causal = {}）：{}。{}", v.id,
                               causal, why, then_zh)
                 : fmt::format("FAIL {}: its gradients are wrong (N = 192, fp32, causal = {}): {}. {}",
                               v.id, causal, why, then_en);
  }
  return {};
}

}  // namespace flashlab::lab
