// Opening NCCL at run time (nccl_api.h says where it looks, and why at run time).
#include "nccl_api.h"

#ifdef FLASHLAB_HAVE_NCCL
#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace flashlab::cuda::FLASHLAB_FOLDER {

namespace {

// The files tried after the loader's own search, in order.
std::vector<std::string> candidate_files() {
  std::vector<std::string> files = {"/usr/local/cuda/lib64/libnccl.so.2",
                                    "/usr/local/cuda/lib/libnccl.so.2",
                                    "/usr/lib/x86_64-linux-gnu/libnccl.so.2"};
  std::vector<std::string> prefixes = {"/usr/local/lib", "/usr/lib", "/opt/conda/lib"};
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* v = std::getenv(var); v && *v) prefixes.insert(prefixes.begin(), std::string(v) + "/lib");
  if (const char* home = std::getenv("HOME"); home && *home)
    prefixes.push_back(std::string(home) + "/.local/lib");
  for (const std::string& prefix : prefixes)
    for (const char* packages : {"site-packages", "dist-packages"}) {
      const std::string pattern =
          prefix + "/python3*/" + packages + "/nvidia/nccl/lib/libnccl.so.2";
      glob_t g{};
      if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) files.push_back(g.gl_pathv[i]);
      globfree(&g);
    }
  return files;
}

template <class F>
bool take(void* lib, const char* name, F& fn, std::string& why) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) why = std::string("the NCCL library has no ") + name;
  return fn != nullptr;
}

NcclApi* open_nccl(std::string& why) {
  // Multicast off before NCCL reads its environment (at the first call).
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  void* lib = nullptr;
  std::string path;
  if (const char* forced = std::getenv("FLASHLAB_NCCL_LIB"); forced && *forced) {
    path = forced;
    lib = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      why = "FLASHLAB_NCCL_LIB=" + path + " cannot be opened: " + (e ? e : "unknown error");
      return nullptr;
    }
  } else {
    path = "libnccl.so.2";
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    for (const std::string& f : candidate_files()) {
      if (lib) break;
      path = f;
      lib = dlopen(f.c_str(), RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
      why = "no NCCL library found (libnccl.so.2 is not on LD_LIBRARY_PATH, in the CUDA toolkit or "
            "in a Python nvidia-nccl wheel): set FLASHLAB_NCCL_LIB to the file";
      return nullptr;
    }
  }
  auto* api = new NcclApi;  // kept for the life of the process, as the library is
  api->path = path;
  const bool ok = take(lib, "ncclGetVersion", api->GetVersion, why) &&
                  take(lib, "ncclGetErrorString", api->GetErrorString, why) &&
                  take(lib, "ncclGetLastError", api->GetLastError, why) &&
                  take(lib, "ncclCommInitAll", api->CommInitAll, why) &&
                  take(lib, "ncclCommFinalize", api->CommFinalize, why) &&
                  take(lib, "ncclCommDestroy", api->CommDestroy, why) &&
                  take(lib, "ncclCommAbort", api->CommAbort, why) &&
                  take(lib, "ncclGroupStart", api->GroupStart, why) &&
                  take(lib, "ncclGroupEnd", api->GroupEnd, why) &&
                  take(lib, "ncclSend", api->Send, why) && take(lib, "ncclRecv", api->Recv, why);
  if (!ok) {
    why += " (" + path + ")";
    delete api;
    return nullptr;
  }
  if (api->GetVersion(&api->version) != ncclSuccess || api->version < 21400) {
    why = path + " is NCCL " + std::to_string(api->version) +
          "; the ring needs 2.14 or later (ncclCommFinalize)";
    delete api;
    return nullptr;
  }
  return api;
}

}  // namespace

const NcclApi* nccl_api(std::string* why) {
  static std::once_flag once;
  static NcclApi* api = nullptr;
  static std::string reason;
  std::call_once(once, [] { api = open_nccl(reason); });
  if (!api && why) *why = reason;
  return api;
}

const NcclApi& nccl() {
  std::string why;
  const NcclApi* api = nccl_api(&why);
  if (!api) throw std::runtime_error(why);
  return *api;
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER

#endif  // FLASHLAB_HAVE_NCCL
