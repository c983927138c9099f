// The version ladder: one entry per version, and every list the lab prints (flashlab list, the
// README's version table, the docs) is generated from this table.
#pragma once

#include <span>
#include <string>

#include "core/problem.h"
#include "cuda/device_api.h"

namespace flashlab {

enum class Pass { fwd, bwd, both };

using CpuForwardFn = void (*)(const Problem&, const Inputs&, const CpuOptions&, Forward&,
                              Counters&);
using CpuBackwardFn = void (*)(const Problem&, const Inputs&, const Forward&, const CpuOptions&,
                               Gradients&, Counters&);

struct VersionInfo {
  const char* id;         // stable id used on the command line and in reports
  const char* folder;     // kernels/<folder>
  Pass pass;
  const char* idea;       // the one idea it adds to the rung before
  bool deterministic;     // bitwise-identical outputs run to run
  const char* workspace;  // extra memory as a formula, for people
  // Extra memory in bytes for a problem (CPU twin's fp32/fp64 buffers are not counted: this is the
  // device workspace the CUDA version allocates, by the same formula).
  int64_t (*workspace_bytes)(const Problem&, const CpuOptions&);
  CpuForwardFn cpu_forward;    // null when the version has no forward
  CpuBackwardFn cpu_backward;  // null when the version has no backward
  const cuda::Version* cuda;   // null when CUDA was not built
  // Host bytes the CPU twin allocates while it runs, besides its outputs, at the size of the type
  // it computes in (the memory check counts them; kernels/cpu_versions.h).
  int64_t (*cpu_scratch_bytes)(const Problem&, const CpuOptions&);
};

std::span<const VersionInfo> versions();
// nullptr when no version has this id.
const VersionInfo* find_version(const std::string& id);
std::string to_string(Pass p);
bool cuda_built();

}  // namespace flashlab
