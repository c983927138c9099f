// Entry points of the CPU twins, one pair per version folder (kernels/NN_name/cpu.cpp).
//
// A twin walks the same block schedule as its CUDA kernel: loops over Br x Bc tiles (N need not
// divide), computing in double when the problem's dtype is fp64 and in float otherwise (outputs
// rounded to the dtype, LSE kept in full precision), while counting matmul FLOPs, elements moved
// outside the tile and atomic adds into `counters`. With options.dry_run it walks the schedule and
// counts without touching the arithmetic (outputs are left empty).
#pragma once

#include "core/problem.h"

namespace flashlab::cpu {

// Forward passes: write O and LSE (naive also writes P).
void naive_forward(const Problem&, const Inputs&, const CpuOptions&, Forward&, Counters&);
void tiled_forward(const Problem&, const Inputs&, const CpuOptions&, Forward&, Counters&);

// Backward passes: read Q, K, V, dO from `in` and O, LSE (naive: P) from `fwd`.
void naive_backward(const Problem&, const Inputs&, const Forward&, const CpuOptions&, Gradients&,
                    Counters&);
void recompute_backward(const Problem&, const Inputs&, const Forward&, const CpuOptions&,
                        Gradients&, Counters&);
void atomic_dq_backward(const Problem&, const Inputs&, const Forward&, const CpuOptions&,
                        Gradients&, Counters&);
void deterministic_dq_backward(const Problem&, const Inputs&, const Forward&, const CpuOptions&,
                               Gradients&, Counters&);

// Host bytes each twin allocates while it runs, besides its outputs (naive's stored P is an
// output): every buffer of its own, at the size of the type it computes in (double for fp64
// problems, float otherwise), each thread's tiles included. The memory check before a run adds them
// up.
int64_t naive_scratch_bytes(const Problem&, const CpuOptions&);
int64_t tiled_scratch_bytes(const Problem&, const CpuOptions&);
int64_t recompute_scratch_bytes(const Problem&, const CpuOptions&);
int64_t atomic_dq_scratch_bytes(const Problem&, const CpuOptions&);
int64_t deterministic_dq_scratch_bytes(const Problem&, const CpuOptions&);

// Exercise 3 of the chapter: the atomic-dq backward without a stored LSE. Before the main pass it
// re-runs the online softmax over all K blocks for every Q block to rebuild m and l, and counts
// what that costs. Used by the no-lse lab.
void no_lse_backward(const Problem&, const Inputs&, const Forward&, const CpuOptions&, Gradients&,
                     Counters&);

}  // namespace flashlab::cpu
