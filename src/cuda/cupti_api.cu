// The CUPTI loader (cupti_api.h): dlopen, one dlsym per function, and CUPTI's results in words.
// Without CUPTI's headers there is nothing to load (counters.cu then says why there are no
// counters).
#ifndef FLASHLAB_NO_CUPTI
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/counters.h"
#include "cuda/cupti_api.h"

namespace flashlab::cuda::cupti {

namespace {

// Where libcupti may be: the caller's choice, the loader's path, then the toolkit's usual places.
std::vector<std::string> candidates() {
  std::vector<std::string> c;
  if (const char* p = std::getenv("FLASHLAB_CUPTI"); p && *p) c.push_back(p);
  for (const char* name : {"libcupti.so.13", "libcupti.so"}) c.push_back(name);
  for (const char* dir : {"/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64",
                          "/usr/local/cuda/targets/x86_64-linux/lib",
                          "/usr/local/cuda-13.0/extras/CUPTI/lib64", "/usr/local/cuda-13.0/lib64"})
    c.push_back(std::string(dir) + "/libcupti.so.13");
  return c;
}

}  // namespace

void load(Api& api) {
  std::string first_error;
  for (const std::string& path : candidates()) {
    api.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.handle) {
      api.path = path;
      break;
    }
    if (first_error.empty()) {
      const char* e = dlerror();
      first_error = e ? e : path;
    }
  }
  if (!api.handle)
    throw std::runtime_error(
        "libcupti (CUDA's profiling library) was not found: " + first_error +
        " (install the CUDA toolkit's CUPTI, or point FLASHLAB_CUPTI at libcupti.so)");
  char dir[4096] = {};  // where the loader found it, for the report
  if (dlinfo(api.handle, RTLD_DI_ORIGIN, dir) == 0 && dir[0])
    api.path = std::string(dir) + "/" + api.path.substr(api.path.rfind('/') + 1);
#define FLASHLAB_CUPTI_LOOKUP(name)                                          \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(api.handle, #name)); \
  if (!api.name)                                                             \
    throw std::runtime_error(                                                \
        api.path + " has no " #name " (CUPTI 12.6 or newer is needed for the range profiler)");
  FLASHLAB_CUPTI_FUNCTIONS(FLASHLAB_CUPTI_LOOKUP)
#undef FLASHLAB_CUPTI_LOOKUP
}

void check(const Api& api, CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  if (api.cuptiGetResultString) api.cuptiGetResultString(r, &text);
  throw Error(static_cast<int>(r),
              describe_cupti_error(static_cast<int>(r), call, text ? text : ""));
}

}  // namespace flashlab::cuda::cupti
#endif
