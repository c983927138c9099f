// hopper-fp8, CUDA side: declared, its kernel not written yet. The rung's first step is its CPU
// twin (cpu.cpp), which fixes every number the kernel must reproduce: the Hadamard signs, the
// e4m3 roundings, the block scales, P's 2^8 and the block schedule. Until the kernel exists each
// of the folder's ids says so in one line, and `flashlab run --backend cuda --versions
// hopper-fp8` is refused with it before anything is allocated; `--versions all` on cuda leaves
// them out with the same line.
#include <string>

#include "core/device_api.h"

namespace flashlab::cuda {

namespace {

// Said after the version's id ("version 'hopper-fp8' cannot run on cuda: ...").
const char* const kNotBuilt =
    "its FP8 kernel (e4m3 wgmma) is not written yet; its CPU twin runs it (--backend cpu)";

std::string not_built_on(int, int) {
  return kNotBuilt;
}

std::string not_built(const Problem&) {
  return kNotBuilt;
}

size_t no_workspace(const Problem&, const LaunchOptions&) {
  return 0;
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = not_built,
                       .workspace_bytes = no_workspace,
                       .unavailable = not_built_on});
FLASHLAB_CUDA_VARIANT(no_hadamard, {.check = not_built,
                                    .workspace_bytes = no_workspace,
                                    .unavailable = not_built_on});
FLASHLAB_CUDA_VARIANT(per_tensor, {.check = not_built,
                                   .workspace_bytes = no_workspace,
                                   .unavailable = not_built_on});
