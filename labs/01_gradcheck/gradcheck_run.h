// The lecture's demo 1 as plain numbers: on one small fp64 head, the tiled forward against the
// reference, each chosen CPU backward against the standard backward, and the standard backward and
// each CPU backward against central finite differences of L = sum(O * dO) on random elements.
// Data only; the gradcheck lab and `flashlab gradcheck` turn it into a report. The versions are
// run here, beside the labs: the fp64 reference (reference/) knows nothing of the versions it
// judges.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "run/registry.h"

namespace flashlab::lab {

struct GradcheckConfig {
  int64_t N = 48, d = 16;  // Nq = Nk = N; one head, or H over Hkv in the grouped case
  int64_t H = 4, Hkv = 2;  // the grouped case's heads
  int64_t window_left = 6, window_right = 3;  // ... and its window (with the causal mask)
  // The packed case: grouped heads over a batch of these lengths (one of them 0), causal.
  std::vector<int64_t> seqlens = {1, 17, 0, 30};
  int Br = 16, Bc = 12;  // blocks of the tiled and FA backward versions
  uint64_t seed = 0;     // inputs and the choice of elements
  int per_tensor = 6;    // finite-difference elements drawn from each of Q, K, V
  double eps = 1e-6;     // central-difference step
};

// One element checked by finite differences.
struct FdPoint {
  char tensor;       // 'Q', 'K' or 'V'
  int64_t row, col;  // position in the tensor as [heads * N, d] (Q: H heads, K, V: Hkv); packed:
                     // [tokens * heads, d]
  double finite_difference;
  double standard;  // the standard backward's value there
};

struct GradcheckVersion {
  std::string id;          // registry id of a CPU backward version
  double max_vs_standard;  // max over dQ, dK, dV of |grad - standard backward|
  double max_vs_fd;        // max over the checked elements of |grad - finite difference|
  // Set when the version is a starter with a step still to write ("not implemented: ..."), or
  // threw anything else ("error: ...").
  std::string not_implemented;
};

struct GradcheckCase {
  bool causal = false;
  // "" for one head without a window; "H/Hkv, window (L, R)" for the grouped case;
  // "H/Hkv, packed L1,L2,..." for the packed batch.
  std::string problem;
  double fwd_max_abs = 0;                  // max |O_tiled - O_reference|
  double standard_vs_fd = 0;               // max |standard backward - finite difference|
  std::vector<GradcheckVersion> versions;  // in registry order
  std::vector<FdPoint> points;
};

// Every registered ladder version with a CPU backward, in registry order (the exercises are
// chosen by id).
std::vector<const VersionInfo*> backward_versions();

// Non-causal first, then causal, then grouped heads with a window under the causal mask, then a
// packed batch of grouped heads, causal (a version that does not take those axes has no row there); `versions` are the backward versions to check
// (default: all).
std::vector<GradcheckCase> run_gradcheck(const GradcheckConfig& config = {},
                                         const std::vector<const VersionInfo*>& versions = {});

}  // namespace flashlab::lab
