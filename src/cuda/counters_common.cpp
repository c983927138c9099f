// The parts of the counter layer that need no GPU: the metric list, CUPTI's error codes in words,
// kernel names, the environment switch. (Without CUDA, no_cuda.cpp answers "no counters".)
#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "cuda/counters.h"

namespace flashlab::cuda {

const std::vector<MetricSpec>& metric_specs() {
  static const std::vector<MetricSpec> specs = {
      // The lab's question: what reaches DRAM, what the SMs ask of L2, and how much of it hits.
      {"time_ns", "ns", {"gpu__time_duration.sum"}, true},
      {"dram_read_bytes", "B", {"dram__bytes_read.sum"}, true},
      {"dram_write_bytes", "B", {"dram__bytes_write.sum"}, true},
      {"l2_bytes", "B", {"lts__t_bytes.sum"}, true},
      {"l2_hit_pct", "%", {"lts__t_sector_hit_rate.pct"}, true},
      {"l2_sm_read_sectors", "sectors", {"lts__t_sectors_srcunit_tex_op_read.sum"}, true},
      {"l2_sm_read_hit_sectors",
       "sectors",
       {"lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"},
       true},
      // Extras: the roofline's FLOPs and the tensor pipe. A GPU that lacks them still answers
      // the question above.
      {"l2_sm_sectors", "sectors", {"lts__t_sectors_srcunit_tex.sum"}, false},
      {"hmma_inst",
       "instructions",
       {"sm__inst_executed_pipe_tensor_op_hmma.sum", "smsp__inst_executed_pipe_tensor_op_hmma.sum"},
       false},
      {"gmma_inst", "instructions", {"sm__inst_executed_pipe_tensor_op_gmma.sum"}, false},
      // Tensor-core work counted by the hardware for bf16 sources, whatever the instruction
      // (mma.sync or wgmma); the GPU tests say whether one op is a FLOP or a multiply-add.
      {"tensor_ops_bf16", "ops", {"sm__ops_path_tensor_src_bf16_dst_fp32.sum"}, false},
      {"ffma_thread_inst",
       "instructions",
       {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"},
       false},
      {"tensor_active_pct",
       "%",
       {"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"},
       false},
      {"dram_peak_pct", "%", {"dram__throughput.avg.pct_of_peak_sustained_elapsed"}, false},
  };
  return specs;
}

std::string describe_cupti_error(int code, const std::string& call, const std::string& text) {
  const std::string where =
      call + ": " + (text.empty() ? "CUPTI error " + std::to_string(code) : text);
  switch (code) {
    case 35:  // CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
      return "no permission to read the GPU's performance counters (" + where +
             "; CUPTI_ERROR_INSUFFICIENT_PRIVILEGES): run as root, or load the NVIDIA driver with "
             "NVreg_RestrictProfilingToAdminUsers=0";
    case 40:  // CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES
      return "this virtual GPU is not allowed to read performance counters (" + where +
             "): profiling must be enabled for the vGPU by its host";
    case 39:  // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
      return "another profiler is attached to this process (Nsight Compute, Nsight Systems, "
             "compute-sanitizer or cuda-gdb), and CUPTI serves one at a time (" +
             where + ")";
    case 27:  // CUPTI_ERROR_NOT_SUPPORTED
    case 33:  // CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED
    case 41:  // CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED
    case 42:  // CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED
    case 43:  // CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED
      return "this GPU or its configuration does not support CUPTI's profiler (" + where + ")";
    default:
      return "reading the counters failed (" + where + ")";
  }
}

std::string demangle(const std::string& symbol) {
  if (symbol.rfind("_Z", 0) != 0) return symbol;
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> d(
      abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : symbol;
}

std::string short_kernel_name(const std::string& symbol) {
  std::string s = demangle(symbol);
  for (size_t p; (p = s.find("(anonymous namespace)")) != std::string::npos;)
    s.replace(p, 21, "anon");
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  const size_t cut = s.find_first_of("<(");
  if (cut != std::string::npos) s.erase(cut);
  const size_t colon = s.rfind("::");
  if (colon != std::string::npos) s.erase(0, colon + 2);
  return s.empty() ? symbol : s;
}

std::string counters_disabled_by_env() {
  const char* v = std::getenv("FLASHLAB_COUNTERS");
  if (v == nullptr) return {};
  const std::string s = v;
  if (s == "off" || s == "0" || s == "no")
    return "hardware counters are switched off (FLASHLAB_COUNTERS=" + s + ")";
  return {};
}

}  // namespace flashlab::cuda
