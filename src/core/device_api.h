// What a CUDA version offers the runner. Plain C++ (no CUDA headers) so host code that is built
// without nvcc can hold the pointers; the runner in src/cuda/ owns allocation, upload, poisoning,
// timing and download.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/version.h"

namespace flashlab::cuda {

struct Version;

// How the run asks a version to launch, beyond the problem: only what changes the kernels'
// schedule (and so their workspace).
struct LaunchOptions {
  int kv_splits = 0;  // a version that splits the keys (split-kv): this many (0: its own rule)
  // A version that runs one problem over ranks (Version::ring): how many (0: one), and the
  // kernels every rank runs on a pair of chunks, picked by the harness from the registry
  // (run/ring_blocks.h; null: the harness picks them when it runs the version).
  int ranks = 0;
  const Version* ring_forward = nullptr;
  const Version* ring_backward = nullptr;
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
  // Optional: a problem that `check` takes but the backward cannot (its forward takes more head
  // dims than its backward), in one sentence saying what the backward takes; empty when it can.
  // Such a problem runs the forward alone (cuda::run, the runner, bench), and the report says
  // why the backward did not run; a ring does not take this backward for such blocks
  // (run/ring_blocks.h). Null: the backward takes whatever `check` takes.
  std::string (*backward_check)(const Problem&) = nullptr;
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
  // A version that runs one problem over several GPUs, one rank each (context parallelism,
  // kernels/09_ring): it has no forward or backward of one device, and runs whole problems
  // through this instead. Null for the others.
  const struct RingCuda* ring = nullptr;
};

// Why v's backward does not run on p though its forward does (Version::backward_check), or
// empty: then both passes run.
inline std::string backward_refusal(const Version& v, const Problem& p) {
  if (v.forward == nullptr || v.backward == nullptr || v.backward_check == nullptr) return {};
  return v.backward_check(p);
}

// A whole run of a ring on the GPUs (RingCuda::run): the problem, its host inputs, the ranks and
// block kernels, and how often to run: once for the answer, then warm-up, timed and bitwise runs.
struct RingJob {
  Problem problem;
  const Inputs* inputs = nullptr;
  LaunchOptions launch;
  int warmup = 0, repeats = 0, bitwise_repeats = 0;
};

// Milliseconds per rank and step ([rank][step]), each the median over the timed runs: the step's
// kernels on the compute stream, and its transfers on the communication stream (from the moment
// the stream may start them to their end, so a wait for the peer is counted).
struct RingStepTimes {
  std::vector<std::vector<double>> fwd_compute, fwd_comm, bwd_compute, bwd_comm;
  std::vector<double> bwd_home;  // per rank: the backward's last transfer (dK, dV going home)
};

struct RingOutcome {
  Forward fwd;      // O, LSE in the global layout, as doubles
  Gradients grads;  // dQ, dK, dV
  std::vector<double> fwd_ms, bwd_ms;  // per timed run: the slowest rank's span of the pass
  int64_t workspace_bytes = 0;         // per rank (the largest): everything but the shards
  int64_t peak_device_bytes = 0;       // per rank (the largest): everything it allocated
  int bitwise_mismatches = 0;          // bitwise runs whose outputs differed from the first
  struct PerOutput {
    int O = 0, LSE = 0, dQ = 0, dK = 0, dV = 0;
  } differing_runs;
  RingStepTimes steps;
};

// What a ring declares beyond a plain version.
struct RingCuda {
  // The versions whose kernels a rank may run on a pair of chunks, best first: the harness takes
  // the first that this GPU runs and whose check takes every pair of the problem (a backward's
  // backward_check too).
  std::span<const char* const> forward_blocks, backward_blocks;
  // The problems of the pairs of chunks a run of p over `ranks` ranks gives its block kernels.
  std::vector<Problem> (*block_problems)(const Problem& p, int ranks) = nullptr;
  // Device bytes the largest rank allocates (launch names the ranks and block kernels).
  int64_t (*rank_bytes)(const Problem& p, const LaunchOptions& launch) = nullptr;
  // Runs the job; throws std::runtime_error with one line on any failure.
  RingOutcome (*run)(const RingJob& job) = nullptr;
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
