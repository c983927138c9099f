// What cuda.cu needs to launch split-kv's two kernels: their parameters, the tile shape the
// schedule is planned with, and one launcher per (dtype, head dim, cache layout), each
// (dtype, head dim) compiled in an object of its own that the build writes from version.cmake.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashlab::cuda::FLASHLAB_FOLDER::split_fwd {

// The tile every worker (thread block) walks: kBr packed rows (one m16 tile: at Nq = 1 a group's
// query heads are 1 to 16 rows) against key tiles of kBc keys, one kWarps-th of each tile per warp.
inline constexpr int kBr = 16, kBc = 64, kWarps = 4;

// Splits merged in place: the last split of a worker's rows to finish merges them (it counts the
// arrivals on a counter of those rows), so no second kernel is launched. The counters live in the
// kernels' own device memory, zero when the module loads and set back to zero by each merge, for
// up to kArrivalSlots workers' rows (B Hkv row blocks); more than that (only with --splits forced
// on a large batch: the rule splits only when fewer workers than the GPU holds) and the combine
// kernel merges them instead. One launch at a time uses them (the runner's single stream).
inline constexpr int kArrivalSlots = 1024;

// The merge holds each split's LSE in a lane of one warp: up to 4 x 32 splits (core/problem.h's
// kMaxKvSplits, checked in cuda.cu).
inline constexpr int kMaxSplitsPerLane = 4;

struct SplitParams {
  const void* q;  // [B, H, Nq, d]
  const void* k;  // [B, Hkv, Nk, d], or the pool [pages, Hkv, page_size, d]
  const void* v;
  void* o;      // [B, H, Nq, d]
  float* lse;   // [B, H, Nq]
  const int32_t* block_table = nullptr;  // a paged cache: [B, pages_per_seq]
  // splits > 1: split j's partial O (divided by its own l) and LSE of packed row R of K/V head kh
  // at [(j B Hkv + kh) rows + R], O's d floats one after another.
  float* part_o = nullptr;
  float* part_lse = nullptr;
  int H, Hkv, group, Nq, Nk;
  int rows;                            // packed rows of one K/V head: group * Nq
  int page_size = 0, page_shift = 0, pages_per_seq = 0;  // page_size = 2^page_shift
  int splits, first_block, seen_blocks;  // schedule.h's SplitSchedule
  bool merge_in_place = false;           // splits > 1: the last split merges (kArrivalSlots)
  // The keys query row r sees: [max(0, r + lo_shift), min(Nk - 1, r + hi_shift)], the band of
  // common/band.h (offset - left, offset + right) as shifts from the row.
  int lo_shift, hi_shift;
  float scale_log2;  // softmax scale * log2(e)
};

// The split pass: grid (splits x Hkv, row blocks, B); with one split it writes O and LSE itself.
template <class T, int D, bool kPaged>
void launch_split(const SplitParams& p, int row_blocks, int kv_heads, cudaStream_t stream);

// The combine pass (splits > 1, not merged in place): one warp per packed row merges its splits
// into O and LSE.
template <class T, int D>
void launch_combine(const SplitParams& p, int kv_heads, cudaStream_t stream);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::split_fwd
