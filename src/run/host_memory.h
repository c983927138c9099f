// Host memory a command holds at its peak, counted buffer by buffer at the size each buffer really
// has: what the memory check compares with what is available before anything large is allocated,
// and what the memory test compares with the peak resident memory of real runs.
//
// `flashlab run` goes through phases; each holds the inputs and what the phases before it kept:
//   reference   the fp64 reference forward (with its Nq x Nk P), then its backward
//   budget      the storage-dtype computation that sets the error budget (not for fp64), with its
//               own P
//   versions    one version after another: every finished one keeps its outputs for the report;
//               the running one holds two sets of outputs (first run, current run), naive its P,
//               and its CPU twin its own buffers (the registry's cpu_scratch_bytes)
//   outputs     the report, and the dump's .npy files, one at a time
// The estimate is the largest phase plus the program itself.
#pragma once

#include <string>

#include "run/config.h"

namespace flashlab {

// The program itself: what the process holds before a run allocates anything (code, libraries,
// the heap so far: its resident size when the first estimate is made), plus kSlackBytes for the
// allocator's bookkeeping and the report, plus kThreadBytes for each thread's stack and heap.
inline constexpr double kSlackBytes = 2.0 * (1 << 20);
inline constexpr double kThreadBytes = 256.0 * (1 << 10);

// `flashlab run` with this configuration.
double run_host_bytes(const RunConfig& c);

// Throws UsageError, one sentence that starts with `what`, when `need` bytes do not fit in what
// this process may still allocate: 90% of the memory available, and under an address-space or
// data limit (ulimit -v, -d) 90% of that limit's room less the whole stack of each of the run's
// threads.
void check_host_room(const RunConfig& c, double need, const std::string& what);

// One timed point of `flashlab bench`: its inputs, the shared (feeding) forward, one version at a time.
double bench_point_host_bytes(const RunConfig& c);

}  // namespace flashlab
