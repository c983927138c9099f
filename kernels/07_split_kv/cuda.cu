// split-kv, CUDA side: declared, its kernels not written yet. The rung's first step is its CPU
// twin (cpu.cpp), which walks the schedule the kernels will (schedule.h); until they exist this
// entry says so in one line, and `flashlab run --backend cuda --versions split-kv` is refused
// with it before anything is allocated, as a version unavailable on a GPU is. `--versions all`
// on cuda leaves it out with the same line.
#include <string>

#include "core/device_api.h"

namespace flashlab::cuda {

namespace {

// Said after the version's id ("version 'split-kv' cannot run on cuda: ..."), so a copy made by
// `flashlab new --from` says it of its own id.
const char* const kNotBuilt =
    "its CUDA kernel is not built yet; its CPU twin runs it (--backend cpu)";

std::string not_built_on(int, int) {
  return kNotBuilt;
}

std::string not_built(const Problem&) {
  return kNotBuilt;
}

size_t no_workspace(const Problem&) {
  return 0;
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = not_built,
                       .workspace_bytes = no_workspace,
                       .unavailable = not_built_on});
