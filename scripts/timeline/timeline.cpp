// A GPU timeline of any CUDA program, without a profiler: a library that the CUDA driver loads
// into the program (CUDA_INJECTION64_PATH) and that records, through CUPTI's activity API, when
// every kernel, memset and memcpy began and ended on the GPU. Nothing is serialized or replayed,
// so the gaps between launches and the time spent outside the main kernel of a pass show as they
// are when `bench` times it.
//
// Build (on any machine with the CUDA toolkit):
//   g++ -std=c++17 -O2 -shared -fPIC scripts/timeline/timeline.cpp -o timeline.so \
//       -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti
// Run:
//   FLASHLAB_TIMELINE=out.csv CUDA_INJECTION64_PATH=$PWD/timeline.so flashlab bench ...
// One CSV row per activity: kind, start and end in ns (GPU clock), stream, grid size, name.
// scripts/timeline/gaps.py reads it.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace {

std::FILE* g_out = nullptr;
std::mutex g_mu;
constexpr size_t kBufferBytes = 8u << 20;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "timeline: %s failed: %s\n", what, s ? s : "unknown CUPTI error");
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void write_record(const CUpti_Activity* rec) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      std::fprintf(g_out, "kernel,%llu,%llu,%u,%d,\"%s\"\n",
                   static_cast<unsigned long long>(k->start),
                   static_cast<unsigned long long>(k->end), k->streamId,
                   k->gridX * k->gridY * k->gridZ, k->name ? k->name : "?");
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      std::fprintf(g_out, "memset,%llu,%llu,%u,0,\"%llu bytes\"\n",
                   static_cast<unsigned long long>(m->start),
                   static_cast<unsigned long long>(m->end), m->streamId,
                   static_cast<unsigned long long>(m->bytes));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      std::fprintf(g_out, "memcpy,%llu,%llu,%u,0,\"%llu bytes kind %d\"\n",
                   static_cast<unsigned long long>(m->start),
                   static_cast<unsigned long long>(m->end), m->streamId,
                   static_cast<unsigned long long>(m->bytes), static_cast<int>(m->copyKind));
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    CUpti_Activity* rec = nullptr;
    while (g_out && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
      write_record(rec);
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
    if (dropped) std::fprintf(stderr, "timeline: %zu records dropped\n", dropped);
  }
  std::free(buffer);
}

void at_exit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out) std::fclose(g_out);
  g_out = nullptr;
}

}  // namespace

extern "C" int InitializeInjection(void) {
  const char* path = std::getenv("FLASHLAB_TIMELINE");
  g_out = std::fopen(path && *path ? path : "timeline.csv", "w");
  if (!g_out) {
    std::fprintf(stderr, "timeline: cannot write %s\n", path ? path : "timeline.csv");
    return 0;
  }
  std::fprintf(g_out, "kind,start_ns,end_ns,stream,grid,name\n");
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
        "cuptiActivityRegisterCallbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernels");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable memsets");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable memcpys");
  std::atexit(at_exit);
  return 1;
}
