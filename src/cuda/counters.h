// Hardware counters around every kernel of one pass: DRAM bytes read and written, L2 traffic and
// hit rates, tensor-pipe activity, duration. Read through CUPTI's range profiler (one range per
// kernel launch), with libcupti loaded at run time (dlopen, cupti_api.h): a binary without it, or a
// user without permission to read the counters, still runs and is told exactly why there are no
// counters.
//
// How one pass is measured (counters.cu):
//
//   once per process   dlopen libcupti -> profiler init -> chip name -> counter availability
//                      -> every wanted metric tried alone (the GPU may not know some)
//                      -> one config image with the metrics it knows
//   per pass           enable on the context -> counter data image -> auto ranges, user replay
//                      repeat until CUPTI has every metric:
//                        prepare (poison, inputs) -> the L2 flush (l2_flush.h: a read of 4x L2,
//                        so L2 holds only clean lines and the pass pays no write-back of earlier
//                        data) -> start -> launch the pass -> synchronise the device -> stop
//                      decode -> one range per kernel, named from the launch callbacks
//
// Auto ranges serialise the kernels (recompute's second stream included), so each range is one
// kernel on an otherwise idle GPU. Nothing here is used unless a caller asks for counters
// (cuda::RunOptions::counters): the runner's timing path never loads CUPTI.
//
// FLASHLAB_COUNTERS=off switches the counters off (the lab then says so, as it does when libcupti
// is missing); FLASHLAB_CUPTI=/path/to/libcupti.so picks the library.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace flashlab::cuda {

class L2Flush;  // l2_flush.h

// One figure the lab reads per kernel, and the CUPTI metric names that give it, in order of
// preference: the first one this GPU knows is used.
struct MetricSpec {
  const char* key;   // "dram_read_bytes"
  const char* unit;  // "B", "ns", "%", "sectors", "instructions"
  std::vector<const char*> names;
  bool core;  // needed for the lab's question; the others are extras that may be missing
};

// Every figure, core ones first.
const std::vector<MetricSpec>& metric_specs();

// Whether counters can be read here, and if not, why not (one sentence).
struct CounterStatus {
  bool available = false;
  std::string why_not;
  std::string library;               // path of the libcupti that was loaded
  std::string chip;                  // "GH100"
  std::vector<std::string> metrics;  // CUPTI names in use, in metric_specs() order
  std::vector<std::string> missing;  // keys this GPU gave no metric for
  int replay_passes = 0;             // times a pass runs to collect every metric
};

// Probes once (needs a device) and caches the answer; never throws.
const CounterStatus& counter_status();

struct KernelCounters {
  std::string name;       // short kernel name ("outer_k_kernel"), or "kernel 3" when unknown
  std::string signature;  // demangled name with template arguments, when known
  std::map<std::string, double> values;  // by MetricSpec::key; a key is absent when not measured
};

struct PassCounters {
  std::vector<KernelCounters> kernels;  // in launch order
  int replay_passes = 0;                // how often the pass ran
  bool named = true;                    // false: the launch callbacks gave no names
  std::string note;                     // anything the reader should know (names unknown, ...)
};

// Measures one pass: `prepare` restores the inputs and poisons the outputs (it runs before every
// replay and is not measured), `l2` empties L2 after it, `launch` enqueues the pass. Throws
// std::runtime_error with CUPTI's message when the measurement fails; check counter_status()
// first.
PassCounters measure_pass(const std::function<void()>& prepare, const std::function<void()>& launch,
                          const L2Flush& l2);

// The host half of the setup, which needs no GPU: load libcupti, keep the metrics `chip` knows
// ("GH100" for the H100 and H200), and count the passes a measurement takes. Throws with the reason
// (no libcupti, a CUPTI without the range profiler, a chip it does not know). The GPU tests run it
// where there is no GPU, so a metric name the chip lacks shows up before the code meets a GPU.
struct CounterPlan {
  std::string library;
  std::vector<std::string> metrics, missing;
  int replay_passes = 0;
};
CounterPlan plan_for_chip(const std::string& chip);

// --- Pure helpers (no GPU), tested on every machine --------------------------------------------

// The sentence for a CUPTI result code returned by `call`: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
// (35) says how to get permission, the others quote CUPTI's text.
std::string describe_cupti_error(int code, const std::string& call, const std::string& text);

// The demangled form of a C++ symbol (the symbol itself when it is not mangled).
std::string demangle(const std::string& symbol);

// "void flashlab::cuda::bwd::outer_k_kernel<__nv_bfloat16, 128, (DqMode)1>(BwdParams)" and its
// mangled form give "outer_k_kernel".
std::string short_kernel_name(const std::string& symbol);

// The reason counters are switched off by the environment, or "" when they are not
// (FLASHLAB_COUNTERS=off|0|no).
std::string counters_disabled_by_env();

}  // namespace flashlab::cuda
