// libcupti, opened at run time: the binary keeps its static CUDA runtime and runs unchanged where
// libcupti is missing (the counters then say so). Every function the counters call is looked up
// by name into one table; the CUPTI headers give only the types. (counters.cu uses the table.)
//
//   FLASHLAB_CUPTI=/path/to/libcupti.so   the caller's choice, tried first
//   libcupti.so.13, libcupti.so           wherever the dynamic loader finds them
//   /usr/local/cuda/.../libcupti.so.13    the toolkit's usual places
#pragma once

#include <cupti_callbacks.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace flashlab::cuda::cupti {

// Every CUPTI function used, by name.
#define FLASHLAB_CUPTI_FUNCTIONS(X)               \
  X(cuptiGetResultString)                         \
  X(cuptiProfilerInitialize)                      \
  X(cuptiProfilerDeviceSupported)                 \
  X(cuptiDeviceGetChipName)                       \
  X(cuptiProfilerGetCounterAvailability)          \
  X(cuptiProfilerHostInitialize)                  \
  X(cuptiProfilerHostDeinitialize)                \
  X(cuptiProfilerHostConfigAddMetrics)            \
  X(cuptiProfilerHostGetConfigImageSize)          \
  X(cuptiProfilerHostGetConfigImage)              \
  X(cuptiProfilerHostGetNumOfPasses)              \
  X(cuptiProfilerHostEvaluateToGpuValues)         \
  X(cuptiRangeProfilerEnable)                     \
  X(cuptiRangeProfilerDisable)                    \
  X(cuptiRangeProfilerGetCounterDataSize)         \
  X(cuptiRangeProfilerCounterDataImageInitialize) \
  X(cuptiRangeProfilerSetConfig)                  \
  X(cuptiRangeProfilerStart)                      \
  X(cuptiRangeProfilerStop)                       \
  X(cuptiRangeProfilerPushRange)                  \
  X(cuptiRangeProfilerPopRange)                   \
  X(cuptiRangeProfilerDecodeData)                 \
  X(cuptiRangeProfilerGetCounterDataInfo)         \
  X(cuptiSubscribe)                               \
  X(cuptiUnsubscribe)                             \
  X(cuptiEnableDomain)

// The loaded library and one pointer per function (null until load()).
struct Api {
  void* handle = nullptr;
  std::string path;  // where the loader found it, for the report
#define FLASHLAB_CUPTI_POINTER(name) decltype(&::name) name = nullptr;
  FLASHLAB_CUPTI_FUNCTIONS(FLASHLAB_CUPTI_POINTER)
#undef FLASHLAB_CUPTI_POINTER
};

// Loads libcupti and every function; throws a sentence saying what is missing.
void load(Api& api);

// A failed CUPTI call, with its code kept so callers can tell "no permission" from the rest.
struct Error : std::runtime_error {
  int code;
  Error(int c, const std::string& what) : std::runtime_error(what), code(c) {}
};

// Throws Error with the sentence describe_cupti_error() gives when `r` is not CUPTI_SUCCESS.
void check(const Api& api, CUptiResult r, const char* call);

// A CUPTI parameter struct: zeroed, with its size filled in.
template <class P>
P params(size_t struct_size) {
  P p{};
  p.structSize = struct_size;
  return p;
}

}  // namespace flashlab::cuda::cupti

// Calls api.fn(p) and checks the result, naming the function.
#define FLASHLAB_CUPTI(api, fn, p) ::flashlab::cuda::cupti::check((api), (api).fn(p), #fn)
