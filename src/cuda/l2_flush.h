// Emptying L2 of earlier data before a timed or measured pass: the runner does it before every
// timed repeat, the counters before every measured run.
//
//   L2 before               sweep: read 4x L2 bytes              L2 after
//   [ dirty | clean ]  ->   the lines there are evicted     ->   [ clean lines of the buffer ]
//                           (the dirty ones written back to
//                           DRAM now, before the pass)
//
// DRAM is written when L2 evicts a dirty line, so a line left dirty by the preparation (the
// poisoned outputs, the pass before) and evicted during the pass would be charged to the pass, in
// its time and in its DRAM write counters. A read sweep leaves only clean lines behind: the pass
// starts from an L2 that holds none of its data and owes DRAM nothing. (A memset, the usual flush,
// leaves L2 full of dirty lines of its own.) Nsight Compute flushes and invalidates L2 through the
// driver; neither CUDA nor CUPTI offers that to a program.
//
// The buffer is allocated and filled once, when the flush is made, so the sweep itself allocates
// nothing and can sit between timed regions.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace flashlab::cuda {

// Bytes the sweep reads: 4x the device's L2 (4x 1 MiB when the device reports no L2).
int64_t l2_flush_bytes();

class L2Flush {
 public:
  L2Flush();  // allocates bytes() on the current device and fills it
  ~L2Flush();
  L2Flush(const L2Flush&) = delete;
  L2Flush& operator=(const L2Flush&) = delete;

  // Enqueues the sweep on `stream` and returns; the caller orders it with the pass (same stream,
  // or a synchronisation).
  void sweep(cudaStream_t stream) const;

  // Device bytes this object holds: the buffer, l2_flush_bytes().
  size_t bytes() const { return bytes_; }

 private:
  void* buffer_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace flashlab::cuda
