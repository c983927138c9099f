// The modeled half of the io lab: what the lecture's accounting says each pass and each kernel
// moves through HBM (the CPU twins' dry-run counters: every element read from or written to a
// tensor outside the tile counts, 2 bytes an element, blocks 128 x 128), and the floor no
// implementation can go under (each input read once, each output written once, at the sizes the
// CUDA versions store: 2 bytes for fp16/bf16 tensors, 4 for LSE).
//
// Per kernel, each version says which of its twin's phases each CUDA kernel runs
// (VersionEntry::kernel_counts); naive's twin counts the whole pass, so its kernels get no model of
// their own.
#pragma once

#include <string>
#include <vector>

#include "core/problem.h"
#include "run/registry.h"

namespace flashlab::lab::io_model {

// The sweep of the FA2 paper, as `flashlab bench` runs it: B*N = 16k tokens, hidden 2048.
inline constexpr int64_t kTokens = 16384;
inline constexpr int64_t kHidden = 2048;
inline constexpr int kBlock = 128;                  // the lecture's blocks, and the outer-K Bc
inline constexpr double kModelBytesPerElement = 2;  // the lecture's convention

// B = kTokens / N, H = kHidden / d, bf16, not causal.
Problem problem(int64_t N, int64_t d);

struct PassModel {
  Counters total;                    // the twin's count of the pass
  std::vector<KernelCount> kernels;  // in launch order; empty when the phases are not kernels
};

// The model of one pass (backward = false: forward) of a version that has it.
PassModel model_pass(const VersionInfo& v, bool backward, const Problem& p);

// Bytes by the lecture's convention.
double model_bytes(const Counters& c);

// Bytes every implementation of the pass must move at least.
double floor_bytes(bool backward, const Problem& p);

}  // namespace flashlab::lab::io_model
