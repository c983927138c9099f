// The CUPTI side of the counter layer (counters.h draws the sequence): the profiler's setup, once
// per process (chip, the metrics it knows, one config image), and the measurement of one pass
// (auto ranges, user replay, decode). libcupti comes from cupti_api.h; L2 is emptied before each
// run by the flush the caller hands in (l2_flush.h).
#ifndef FLASHLAB_NO_CUPTI
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "cuda/counters.h"
#include "cuda/cupti_api.h"
#include "cuda/l2_flush.h"
#include "cuda/runner.h"

namespace flashlab::cuda {

namespace {

using cupti::params;

// The process-wide state: the library, the chip, and one config image for the metrics the GPU
// knows, made once.
struct Profiler {
  cupti::Api api;
  CounterStatus status;
  CUcontext ctx = nullptr;
  std::string chip;
  std::vector<uint8_t> availability;
  CUpti_Profiler_Host_Object* host = nullptr;
  std::vector<uint8_t> config;
  std::vector<std::string> names;      // CUPTI names in use
  std::vector<const char*> name_ptrs;  // the same, for the C API
  std::vector<std::string> keys;       // MetricSpec::key of each name
};

// The primary context the runtime uses, from the driver's own entry point (the runtime is linked
// statically, libcuda is not linked at all).
CUcontext current_context() {
  FLASHLAB_CUDA_CHECK(cudaFree(nullptr));  // makes the primary context current
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  FLASHLAB_CUDA_CHECK(
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &q));
  if (!fn || q != cudaDriverEntryPointSuccess)
    throw std::runtime_error("the driver offers no cuCtxGetCurrent");
  CUcontext ctx = nullptr;
  if (reinterpret_cast<CUresult (*)(CUcontext*)>(fn)(&ctx) != CUDA_SUCCESS || !ctx)
    throw std::runtime_error("no current CUDA context");
  return ctx;
}

// Why CUPTI says the device cannot be profiled, in words; "" when it can.
std::string unsupported_reason(Profiler& pr, int device) {
  auto p = params<CUpti_Profiler_DeviceSupported_Params>(
      CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE);
  p.cuDevice = device;
  p.api = CUPTI_PROFILER_RANGE_PROFILING;
  if (pr.api.cuptiProfilerDeviceSupported(&p) != CUPTI_SUCCESS) return {};
  if (p.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return {};
  std::string why;
  auto add = [&](CUpti_Profiler_Support_Level l, const char* what) {
    if (l != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
      why += std::string(why.empty() ? "" : ", ") + what +
             (l == CUPTI_PROFILER_CONFIGURATION_DISABLED ? " (disabled)" : "");
  };
  add(p.architecture, "the architecture");
  add(p.sli, "SLI");
  add(p.vGpu, "the virtual GPU");
  add(p.confidentialCompute, "confidential computing");
  add(p.cmp, "a mining processor");
  add(p.wsl, "WSL");
  return "CUPTI's profiler does not support this device: " + (why.empty() ? "unknown" : why);
}

CUpti_Profiler_Host_Object* host_object(Profiler& pr) {
  auto p = params<CUpti_Profiler_Host_Initialize_Params>(
      CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  p.pChipName = pr.chip.c_str();
  p.pCounterAvailabilityImage = pr.availability.empty() ? nullptr : pr.availability.data();
  FLASHLAB_CUPTI(pr.api, cuptiProfilerHostInitialize, &p);
  return p.pHostObject;
}

void drop_host_object(Profiler& pr, CUpti_Profiler_Host_Object* h) {
  auto p = params<CUpti_Profiler_Host_Deinitialize_Params>(
      CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
  p.pHostObject = h;
  pr.api.cuptiProfilerHostDeinitialize(&p);
}

// Whether this GPU knows a metric: add it alone to a fresh host object.
bool knows_metric(Profiler& pr, const char* name) {
  CUpti_Profiler_Host_Object* h = host_object(pr);
  auto p = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  p.pHostObject = h;
  const char* names[] = {name};
  p.ppMetricNames = names;
  p.numMetrics = 1;
  const CUptiResult r = pr.api.cuptiProfilerHostConfigAddMetrics(&p);
  drop_host_object(pr, h);
  if (r == CUPTI_ERROR_INVALID_METRIC_NAME || r == CUPTI_ERROR_INVALID_PARAMETER ||
      r == CUPTI_ERROR_NOT_SUPPORTED)
    return false;
  cupti::check(pr.api, r, "cuptiProfilerHostConfigAddMetrics");
  return true;
}

void build_config(Profiler& pr) {
  for (const MetricSpec& m : metric_specs()) {
    bool found = false;
    for (const char* name : m.names)
      if (knows_metric(pr, name)) {
        pr.names.push_back(name);
        pr.keys.push_back(m.key);
        found = true;
        break;
      }
    if (!found) pr.status.missing.push_back(m.key);
  }
  if (pr.names.empty())
    throw std::runtime_error("this GPU knows none of the metrics the lab reads");
  for (const std::string& n : pr.names) pr.name_ptrs.push_back(n.c_str());

  pr.host = host_object(pr);
  auto add = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  add.pHostObject = pr.host;
  add.ppMetricNames = pr.name_ptrs.data();
  add.numMetrics = pr.name_ptrs.size();
  FLASHLAB_CUPTI(pr.api, cuptiProfilerHostConfigAddMetrics, &add);
  auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  size.pHostObject = pr.host;
  FLASHLAB_CUPTI(pr.api, cuptiProfilerHostGetConfigImageSize, &size);
  pr.config.resize(size.configImageSize);
  auto image = params<CUpti_Profiler_Host_GetConfigImage_Params>(
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  image.pHostObject = pr.host;
  image.configImageSize = pr.config.size();
  image.pConfigImage = pr.config.data();
  FLASHLAB_CUPTI(pr.api, cuptiProfilerHostGetConfigImage, &image);
  auto passes = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  passes.configImageSize = pr.config.size();
  passes.pConfigImage = pr.config.data();
  FLASHLAB_CUPTI(pr.api, cuptiProfilerHostGetNumOfPasses, &passes);
  pr.status.replay_passes = static_cast<int>(passes.numOfPasses);
}

void setup(Profiler& pr) {
  if (const std::string off = counters_disabled_by_env(); !off.empty())
    throw std::runtime_error(off);
  const DeviceInfo& dev = device_info();
  if (!dev.present) throw std::runtime_error(dev.why_absent);
  cupti::load(pr.api);
  pr.status.library = pr.api.path;
  pr.ctx = current_context();
  int device = 0;
  FLASHLAB_CUDA_CHECK(cudaGetDevice(&device));

  auto init =
      params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  FLASHLAB_CUPTI(pr.api, cuptiProfilerInitialize, &init);
  if (const std::string why = unsupported_reason(pr, device); !why.empty())
    throw std::runtime_error(why);

  auto chip = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  chip.deviceIndex = static_cast<size_t>(device);
  FLASHLAB_CUPTI(pr.api, cuptiDeviceGetChipName, &chip);
  pr.chip = chip.pChipName ? chip.pChipName : "";
  pr.status.chip = pr.chip;

  auto avail = params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  avail.ctx = pr.ctx;
  FLASHLAB_CUPTI(pr.api, cuptiProfilerGetCounterAvailability, &avail);
  pr.availability.resize(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = pr.availability.data();
  FLASHLAB_CUPTI(pr.api, cuptiProfilerGetCounterAvailability, &avail);

  build_config(pr);
  pr.status.metrics = pr.names;
  pr.status.available = true;
}

Profiler& profiler() {
  static Profiler pr;
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      setup(pr);
    } catch (const std::exception& e) {
      pr.status.available = false;
      pr.status.why_not = e.what();
    }
  });
  return pr;
}

// Kernel names, in launch order, from the driver's and the runtime's launch callbacks (a memset
// is logged too, in case the profiler gives it a range of its own).
struct LaunchLog {
  std::vector<std::string> driver, driver_and_memsets, runtime;
  void clear() { driver.clear(), driver_and_memsets.clear(), runtime.clear(); }
};

void CUPTIAPI on_api(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  auto* log = static_cast<LaunchLog*>(user);
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (d->callbackSite != CUPTI_API_ENTER || !d->functionName) return;
  const std::string fn = d->functionName;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    if (fn.rfind("cuLaunch", 0) == 0 && d->symbolName) {
      log->driver.push_back(d->symbolName);
      log->driver_and_memsets.push_back(d->symbolName);
    } else if (fn.rfind("cuMemset", 0) == 0) {
      log->driver_and_memsets.push_back("memset");
    }
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && fn.rfind("cudaLaunch", 0) == 0 &&
             d->symbolName) {
    log->runtime.push_back(d->symbolName);
  }
}

// Subscribes for the lifetime of the object; a failure leaves the names unknown, not the counts.
class LaunchNames {
 public:
  LaunchNames(Profiler& pr, LaunchLog& log) : pr_(pr) {
    if (pr.api.cuptiSubscribe(&sub_, reinterpret_cast<CUpti_CallbackFunc>(on_api), &log) !=
        CUPTI_SUCCESS) {
      sub_ = nullptr;
      return;
    }
    pr.api.cuptiEnableDomain(1, sub_, CUPTI_CB_DOMAIN_DRIVER_API);
    pr.api.cuptiEnableDomain(1, sub_, CUPTI_CB_DOMAIN_RUNTIME_API);
  }
  ~LaunchNames() {
    if (sub_) pr_.api.cuptiUnsubscribe(sub_);
  }
  LaunchNames(const LaunchNames&) = delete;
  LaunchNames& operator=(const LaunchNames&) = delete;
  bool active() const { return sub_ != nullptr; }

 private:
  Profiler& pr_;
  CUpti_SubscriberHandle sub_ = nullptr;
};

// The range profiler on the context for the lifetime of the object.
class RangeProfiler {
 public:
  explicit RangeProfiler(Profiler& pr) : pr_(pr) {
    auto p =
        params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    p.ctx = pr.ctx;
    FLASHLAB_CUPTI(pr.api, cuptiRangeProfilerEnable, &p);
    obj_ = p.pRangeProfilerObject;
  }
  ~RangeProfiler() {
    auto p =
        params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = obj_;
    pr_.api.cuptiRangeProfilerDisable(&p);
  }
  RangeProfiler(const RangeProfiler&) = delete;
  RangeProfiler& operator=(const RangeProfiler&) = delete;
  CUpti_RangeProfiler_Object* get() const { return obj_; }

 private:
  Profiler& pr_;
  CUpti_RangeProfiler_Object* obj_ = nullptr;
};

constexpr size_t kMaxRanges = 64;  // kernels in one pass (naive's backward launches 5)
constexpr int kMaxReplays = 64;

struct Raw {
  std::vector<std::vector<double>> values;  // per range, per metric
  LaunchLog log;
  bool names_logged = false;
  int replays = 0;
  size_t dropped = 0;
};

// One measurement of a pass. `wrap` puts the launches inside a pushed range as well.
Raw measure_once(Profiler& pr, const std::function<void()>& prepare,
                 const std::function<void()>& launch, const L2Flush& l2, bool wrap) {
  Raw raw;
  LaunchNames names(pr, raw.log);
  raw.names_logged = names.active();
  RangeProfiler rp(pr);

  auto size = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
  size.pRangeProfilerObject = rp.get();
  size.pMetricNames = pr.name_ptrs.data();
  size.numMetrics = pr.name_ptrs.size();
  size.maxNumOfRanges = kMaxRanges;
  size.maxNumRangeTreeNodes = kMaxRanges;
  FLASHLAB_CUPTI(pr.api, cuptiRangeProfilerGetCounterDataSize, &size);
  std::vector<uint8_t> data(size.counterDataSize);
  auto init = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  init.pRangeProfilerObject = rp.get();
  init.counterDataSize = data.size();
  init.pCounterData = data.data();
  FLASHLAB_CUPTI(pr.api, cuptiRangeProfilerCounterDataImageInitialize, &init);

  auto cfg = params<CUpti_RangeProfiler_SetConfig_Params>(
      CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  cfg.pRangeProfilerObject = rp.get();
  cfg.configSize = pr.config.size();
  cfg.pConfig = pr.config.data();
  cfg.counterDataImageSize = data.size();
  cfg.pCounterDataImage = data.data();
  cfg.range = CUPTI_AutoRange;
  cfg.replayMode = CUPTI_UserReplay;
  cfg.maxRangesPerPass = kMaxRanges;
  cfg.numNestingLevels = 1;
  cfg.minNestingLevel = 1;
  cfg.passIndex = 0;
  cfg.targetNestingLevel = 1;
  FLASHLAB_CUPTI(pr.api, cuptiRangeProfilerSetConfig, &cfg);

  for (bool done = false; !done;) {
    if (++raw.replays > kMaxReplays)
      throw std::runtime_error("the profiler still wanted more passes after " +
                               std::to_string(kMaxReplays));
    prepare();
    // The outputs were just poisoned on the runner's stream (non-blocking, so not ordered with
    // the sweep on the default stream): let those stores finish before the sweep pushes their
    // dirty lines out of L2, or their write-back is charged to the kernel. Then the sweep, and
    // the range starts only after it.
    FLASHLAB_CUDA_CHECK(cudaDeviceSynchronize());
    l2.sweep(nullptr);
    FLASHLAB_CUDA_CHECK(cudaDeviceSynchronize());
    raw.log.clear();
    auto start =
        params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
    start.pRangeProfilerObject = rp.get();
    FLASHLAB_CUPTI(pr.api, cuptiRangeProfilerStart, &start);
    bool pushed = false;
    if (wrap) {
      auto push = params<CUpti_RangeProfiler_PushRange_Params>(
          CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE);
      push.pRangeProfilerObject = rp.get();
      push.pRangeName = "pass";
      pushed = pr.api.cuptiRangeProfilerPushRange(&push) == CUPTI_SUCCESS;
    }
    launch();
    FLASHLAB_CUDA_CHECK(cudaDeviceSynchronize());
    if (pushed) {
      auto pop = params<CUpti_RangeProfiler_PopRange_Params>(
          CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
      pop.pRangeProfilerObject = rp.get();
      FLASHLAB_CUPTI(pr.api, cuptiRangeProfilerPopRange, &pop);
    }
    auto stop =
        params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    stop.pRangeProfilerObject = rp.get();
    FLASHLAB_CUPTI(pr.api, cuptiRangeProfilerStop, &stop);
    done = stop.isAllPassSubmitted != 0;
  }

  auto decode = params<CUpti_RangeProfiler_DecodeData_Params>(
      CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  decode.pRangeProfilerObject = rp.get();
  FLASHLAB_CUPTI(pr.api, cuptiRangeProfilerDecodeData, &decode);
  raw.dropped = decode.numOfRangeDropped;

  auto info = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = data.data();
  info.counterDataImageSize = data.size();
  FLASHLAB_CUPTI(pr.api, cuptiRangeProfilerGetCounterDataInfo, &info);
  for (size_t r = 0; r < info.numTotalRanges; ++r) {
    std::vector<double> v(pr.name_ptrs.size());
    auto eval = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    eval.pHostObject = pr.host;
    eval.pCounterDataImage = data.data();
    eval.counterDataImageSize = data.size();
    eval.rangeIndex = r;
    eval.ppMetricNames = pr.name_ptrs.data();
    eval.numMetrics = pr.name_ptrs.size();
    eval.pMetricValues = v.data();
    FLASHLAB_CUPTI(pr.api, cuptiProfilerHostEvaluateToGpuValues, &eval);
    raw.values.push_back(std::move(v));
  }
  return raw;
}

}  // namespace

CounterPlan plan_for_chip(const std::string& chip) {
  Profiler pr;
  cupti::load(pr.api);
  pr.chip = chip;
  build_config(pr);
  drop_host_object(pr, pr.host);
  CounterPlan plan;
  plan.library = pr.api.path;
  plan.metrics = pr.names;
  plan.missing = pr.status.missing;
  plan.replay_passes = pr.status.replay_passes;
  return plan;
}

const CounterStatus& counter_status() {
  return profiler().status;
}

PassCounters measure_pass(const std::function<void()>& prepare, const std::function<void()>& launch,
                          const L2Flush& l2) {
  Profiler& pr = profiler();
  if (!pr.status.available) throw std::runtime_error(pr.status.why_not);
  PassCounters out;
  // Auto ranges need no pushed range by CUPTI's documentation; some versions record them only
  // inside one. The second attempt wraps the pass, and the note says so.
  Raw raw;
  std::string first_error;
  try {
    raw = measure_once(pr, prepare, launch, l2, false);
  } catch (const cupti::Error& e) {
    first_error = e.what();
  }
  if (raw.values.empty()) {
    try {
      raw = measure_once(pr, prepare, launch, l2, true);
    } catch (const cupti::Error& e) {
      throw std::runtime_error(first_error.empty() ? e.what() : first_error);
    }
    out.note = "ranges recorded only inside a pushed range";
  }
  if (raw.values.empty())
    throw std::runtime_error(first_error.empty() ? "the profiler recorded no kernel in this pass"
                                                 : first_error);
  out.replay_passes = raw.replays;
  const size_t n = raw.values.size();
  const std::vector<std::string>* names = nullptr;
  for (const auto* list : {&raw.log.driver, &raw.log.runtime, &raw.log.driver_and_memsets})
    if (!names && list->size() == n) names = list;
  out.named = names != nullptr;
  if (!names) {
    const std::string why = raw.names_logged
                                ? std::to_string(raw.log.driver.size()) + " launches seen for " +
                                      std::to_string(n) + " ranges"
                                : "the launch callbacks could not be subscribed";
    out.note += (out.note.empty() ? "" : "; ") + std::string("kernel names unknown (") + why + ")";
  }
  if (raw.dropped)
    out.note += (out.note.empty() ? "" : "; ") + std::to_string(raw.dropped) + " ranges dropped";
  for (size_t r = 0; r < n; ++r) {
    KernelCounters k;
    if (names) {
      k.signature = demangle((*names)[r]);
      k.name = short_kernel_name((*names)[r]);
    } else {
      k.name = "kernel " + std::to_string(r + 1);
    }
    for (size_t m = 0; m < pr.keys.size(); ++m) k.values[pr.keys[m]] = raw.values[r][m];
    out.kernels.push_back(std::move(k));
  }
  return out;
}

}  // namespace flashlab::cuda

#else  // built without CUPTI's headers
#include <stdexcept>

#include "cuda/counters.h"

namespace flashlab::cuda {

const CounterStatus& counter_status() {
  static const CounterStatus s = [] {
    CounterStatus c;
    c.why_not = "this flashlab was built without CUPTI's headers (cupti_range_profiler.h)";
    return c;
  }();
  return s;
}

PassCounters measure_pass(const std::function<void()>&, const std::function<void()>&,
                          const L2Flush&) {
  throw std::runtime_error(counter_status().why_not);
}

CounterPlan plan_for_chip(const std::string&) {
  throw std::runtime_error(counter_status().why_not);
}

}  // namespace flashlab::cuda
#endif
