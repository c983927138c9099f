// What a CUDA version offers the runner. Plain C++ (no CUDA headers) so host code that is built
// without nvcc can hold the pointers; the runner in src/cuda/ owns allocation, upload, poisoning,
// timing and download.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/problem.h"

namespace flashlab::cuda {

// Device pointers for one problem. Q, K, V, O, dO, dQ, dK, dV hold the problem's storage dtype
// (fp16 or bf16 as raw 16-bit words); LSE and D are float. All tensors [B,H,N,d] contiguous.
struct DeviceTensors {
  Problem problem;
  const void* Q = nullptr;
  const void* K = nullptr;
  const void* V = nullptr;
  void* O = nullptr;
  float* LSE = nullptr;
  const void* dO = nullptr;
  void* dQ = nullptr;
  void* dK = nullptr;
  void* dV = nullptr;
  void* workspace = nullptr;  // workspace_bytes(problem) bytes, owned by the runner
  void* stream = nullptr;     // cudaStream_t
};

struct Version {
  // Empty when the problem is supported; otherwise one sentence saying why not.
  std::string (*check)(const Problem&) = nullptr;
  size_t (*workspace_bytes)(const Problem&) = nullptr;
  // Forward writes O and LSE; backward reads Q,K,V,O,LSE,dO and writes dQ,dK,dV. Either may be null
  // when the version has no such pass. Launches only: no allocation, no synchronisation.
  void (*forward)(const DeviceTensors&) = nullptr;
  void (*backward)(const DeviceTensors&) = nullptr;
  // Empty when this build and this GPU can run the version at all; otherwise why not (a rung
  // built for one GPU generation only). Null means always available where CUDA is.
  std::string (*unavailable)() = nullptr;
};

// Defined in kernels/NN_name/cuda.cu.
extern const Version naive;
extern const Version tiled;
extern const Version recompute;
extern const Version atomic_dq;
extern const Version deterministic_dq;
extern const Version hopper;

// The hopper rung's ablation: the rung, then one variant per idea switched off, in the order of
// kernels/06_hopper/ablation.h (empty when this build has no sm_90a code).
std::span<const Version> hopper_ablation();

}  // namespace flashlab::cuda
