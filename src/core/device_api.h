// What a CUDA version offers the runner. Plain C++ (no CUDA headers) so host code that is built
// without nvcc can hold the pointers; the runner in src/cuda/ owns allocation, upload, poisoning,
// timing and download.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/problem.h"
#include "core/version.h"

namespace flashlab::cuda {

// How the run asks a version to launch, beyond the problem: only what changes the kernels'
// schedule (and so their workspace).
struct LaunchOptions {
  int kv_splits = 0;  // a version that splits the keys (split-kv): this many (0: its own rule)
};

// Device pointers for one problem. Q, K, V, O, dO, dQ, dK, dV hold the problem's storage dtype
// (fp16 or bf16 as raw 16-bit words); LSE and D are float. All tensors [B,H,N,d] contiguous, or,
// for a packed batch, [total, H, d] and LSE [H, total_q] (core/problem.h), with the cumulative
// offsets of the sequences on the device.
struct DeviceTensors {
  Problem problem;
  // A packed batch only: B + 1 offsets each (cu_q[b] = Shape::q_start(b)), int32 as FA's API.
  const int32_t* cu_q = nullptr;
  const int32_t* cu_k = nullptr;
  // A paged K/V cache only: the block table, [B, pages_per_seq] int32 (core/paged.h); K and V
  // (and dK, dV) are then the pool [num_pages, Hkv, page_size, d].
  const int32_t* block_table = nullptr;
  const void* Q = nullptr;
  const void* K = nullptr;
  const void* V = nullptr;
  void* O = nullptr;
  float* LSE = nullptr;
  const void* dO = nullptr;
  void* dQ = nullptr;
  void* dK = nullptr;
  void* dV = nullptr;
  void* workspace = nullptr;  // workspace_bytes(problem, launch) bytes, owned by the runner
  void* stream = nullptr;     // cudaStream_t
  LaunchOptions launch;
};

struct Version {
  // Empty when the problem is supported; otherwise one sentence saying why not.
  std::string (*check)(const Problem&) = nullptr;
  size_t (*workspace_bytes)(const Problem&, const LaunchOptions&) = nullptr;
  // Forward writes O and LSE; backward reads Q,K,V,O,LSE,dO and writes dQ,dK,dV. Either may be null
  // when the version has no such pass. Launches only: no allocation, no synchronisation.
  void (*forward)(const DeviceTensors&) = nullptr;
  void (*backward)(const DeviceTensors&) = nullptr;
  // Optional: empty when the version can run on a GPU of this compute capability, otherwise one
  // sentence saying why not ("needs ..."). The build's own targets are checked before this (a
  // folder built only for sm_90a is unavailable on an sm_80 GPU without asking).
  std::string (*unavailable)(int cc_major, int cc_minor) = nullptr;
  // Optional: the version's kernel with one of its ideas switched off at a time, for an ablation
  // study (`flashlab lab hopper`); the first entry is the version itself.
  std::span<const struct AblationVariant> (*ablation)() = nullptr;
  // The problem's axes beyond dense multi-head attention its kernels take (Axis flags of
  // core/problem.h); a problem with another is refused before anything is allocated.
  unsigned axes = 0;
  // A version that splits each K/V head's keys (split-kv): how many splits its kernels make for
  // the problem on this device (LaunchOptions::kv_splits forces them, within its limits). Null for
  // the others.
  int64_t (*kv_splits)(const Problem&, const LaunchOptions&) = nullptr;
};

// One line of an ablation: which idea is off and what runs instead, and the kernel that does it.
struct AblationVariant {
  const char* id;    // "hopper", "no-tma", ...
  const char* idea;  // the idea that is off ("" for the version itself)
  const char* what;  // what the variant does instead
  Version version;
};

}  // namespace flashlab::cuda

// Declares the CUDA side of a version folder, once, at global scope in its cuda.cu (see
// src/core/version.h for FLASHLAB_FOLDER):
//
//   FLASHLAB_CUDA_VERSION({.check = ..., .workspace_bytes = ..., .backward = ...});
#define FLASHLAB_CUDA_VERSION(...)                               \
  namespace flashlab::cuda::folders {                            \
  extern const ::flashlab::cuda::Version FLASHLAB_FOLDER;        \
  const ::flashlab::cuda::Version FLASHLAB_FOLDER = __VA_ARGS__; \
  }                                                              \
  static_assert(true, "FLASHLAB_CUDA_VERSION(...) ends with a semicolon")

// The CUDA side of a second id the folder registers with FLASHLAB_VARIANT(variant, ...).
#define FLASHLAB_CUDA_VARIANT(variant, ...)                                                      \
  namespace flashlab::cuda::folders {                                                            \
  extern const ::flashlab::cuda::Version FLASHLAB_VARIANT_NAME(FLASHLAB_FOLDER, variant);        \
  const ::flashlab::cuda::Version FLASHLAB_VARIANT_NAME(FLASHLAB_FOLDER, variant) = __VA_ARGS__; \
  }                                                                                              \
  static_assert(true, "FLASHLAB_CUDA_VARIANT(...) ends with a semicolon")
