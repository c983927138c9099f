// The version ladder. Every version is one folder (kernels/NN_name/, or kernels/exercises/NAME/ for
// the chapter's starters) and nothing outside the folder lists it:
//
//   - the folder's .cpp declares its registry entry once, with FLASHLAB_VERSION({...})
//     (src/version_folder.h), next to its CPU twin;
//   - the folder's cuda.cu, when it has one, declares its CUDA side with FLASHLAB_CUDA_VERSION;
//   - the build globs the folders (kernels/versions.cmake) and generates the list that versions()
//     returns, in folder order, with the SHA-256 of each folder's sources and why a CUDA side is
//     absent from the build.
//
// Every list the lab prints (flashlab list, the README's version table, the docs) comes from here.
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

// What a version folder declares about itself.
struct VersionEntry {
  const char* id;  // stable id used on the command line and in reports
  Pass pass;
  const char* idea;       // the one idea it adds to the rung before
  bool deterministic;     // bitwise-identical outputs run to run
  const char* workspace;  // extra memory as a formula, for people
  // Extra memory in bytes for a problem (CPU twin's fp32/fp64 buffers are not counted: this is the
  // device workspace the CUDA version allocates, by the same formula).
  int64_t (*workspace_bytes)(const Problem&, const CpuOptions&);
  CpuForwardFn cpu_forward;    // null when the version has no forward
  CpuBackwardFn cpu_backward;  // null when the version has no backward
  // Host bytes the CPU twin allocates while it runs, besides its outputs, at the size of the type
  // it computes in, each thread's tiles included (the memory check counts them; run/host_memory.h).
  int64_t (*cpu_scratch_bytes)(const Problem&, const CpuOptions&);
  // Whether its forward keeps P (N x N per head) for its backward (naive): the host memory check
  // counts that matrix for it (run/host_memory.cpp).
  bool stores_p = false;
};

// One source file of a version folder and the SHA-256 of its bytes when this binary was built.
struct SourceHash {
  const char* path;    // from the repository root: "kernels/04_atomic_dq/cpu.cpp"
  const char* sha256;  // 64 lowercase hex digits
};

// A registered version: its entry, plus what the build knows about the folder.
struct VersionInfo : VersionEntry {
  const char* folder;         // "kernels/04_atomic_dq"
  bool exercise;              // a chapter starter under kernels/exercises/
  const cuda::Version* cuda;  // null when this build has no CUDA side for it
  const char* cuda_absent;    // why cuda is null ("" otherwise)
  const char* cuda_targets;   // the code the build made: "sm_80 sm_90a" (SASS), "compute_90" (PTX)
  std::span<const SourceHash> sources;
};

// The ladder, then the exercises, each in folder order.
std::span<const VersionInfo> versions();
// nullptr when no version has this id.
const VersionInfo* find_version(const std::string& id);
std::string to_string(Pass p);
bool cuda_built();

// Why `v` cannot run on the CUDA backend here ("" when it can): its CUDA side is absent from this
// build, there is no usable device, the build has no code for this GPU, or the version's own
// reason (cuda::Version::unavailable).
std::string cuda_unavailable(const VersionInfo& v);

// The same judgement for a given device (compute capability major.minor), without the device
// lookup: what `cuda_unavailable` uses once it knows the GPU.
std::string cuda_unavailable_on(const VersionInfo& v, int cc_major, int cc_minor);

// The shared sources every version builds on (kernels/common), hashed like a version's folder.
std::span<const SourceHash> shared_sources();

}  // namespace flashlab
