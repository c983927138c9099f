// Everything `run` and `bench` check before they compute: names, ranges, memory, the device, output
// paths. Each check throws UsageError with one sentence, before any large allocation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "run/config.h"

namespace flashlab {

// Sane limits for a lab: larger shapes are almost certainly typos.
inline constexpr int64_t kMaxN = int64_t{1} << 20;
inline constexpr int64_t kMaxHeadDim = 256;
inline constexpr int64_t kMaxHidden = int64_t{1} << 16;      // bench: H * d
inline constexpr int64_t kMaxBatchHeads = int64_t{1} << 20;  // B*H
// Tokens of a packed batch, of queries and of keys alike: the host keeps several fp64 copies of
// every tensor; the int32 offsets (FA's cu_seqlens) would allow up to 2^31.
inline constexpr int64_t kMaxPackedTokens = kMaxN * 16;
// Sequences of a packed batch: its B, held to the same B and B*H as a dense batch's. A sequence
// costs little else (two lengths on the host, two int32 offsets on the device; the CPU side walks
// the sequences once, with running offsets: core/packed.h). A CUDA version may take fewer (its own
// check()).
inline constexpr int64_t kMaxSequences = kMaxBatchHeads;
// Keys per page of a paged K/V cache (--page-size): a power of two up to this.
inline constexpr int64_t kMaxPageSize = int64_t{1} << 16;
inline constexpr int kMaxTile = 4096;
inline constexpr int kMaxThreads = 1024;
inline constexpr int kMaxRepeats = 10000;

// "a,b" or "all" (every version of the ladder; exercises by id) -> registry entries in registry
// order. Unknown id: UsageError naming the known ids.
std::vector<const VersionInfo*> parse_versions(const std::string& list);

// The entries of `list` that the CUDA backend can run on this build and device: what "all" means
// there (a rung built for one GPU generation drops out instead of failing the whole run). Each one
// left out adds a sentence to `left_out` when given.
std::vector<const VersionInfo*> runnable_on_cuda(const std::vector<const VersionInfo*>& list,
                                                 std::vector<std::string>* left_out = nullptr);

// Why a ring (context parallelism) cannot run p over `ranks` ranks on the CUDA backend here, in
// one sentence ("" when it can): the twin's geometry (N >= 2R), the GPU side's own check, one GPU
// per rank, and block kernels that take every pair of chunks (run/ring_blocks.h).
std::string ring_cuda_refusal(const VersionInfo& v, const Problem& p, int ranks);

// The entries of `list` without the rings that cannot run p over `ranks` ranks on the CUDA
// backend: what "all" means there. Each one left out adds a sentence to `left_out` when given.
std::vector<const VersionInfo*> rings_running(const std::vector<const VersionInfo*>& list,
                                              const Problem& p, int ranks,
                                              std::vector<std::string>* left_out);

// The entries of `list` that take every axis of `p` beyond dense multi-head attention (grouped
// heads, window) on `backend`: what "all" means for such a problem. Each one left out adds a
// sentence to `left_out` when given.
std::vector<const VersionInfo*> taking_axes(const std::vector<const VersionInfo*>& list,
                                            const Problem& p, Backend backend,
                                            std::vector<std::string>* left_out = nullptr);

// Why version `v` does not take dtype `t`, in one sentence ("" when it does): an FP8 version
// (VersionEntry::fp8) takes fp8 only, and fp8 is for FP8 versions only -- never a backward, whose
// FP8 rung stays in bf16.
std::string dtype_refusal(const VersionInfo& v, DType t);

// The entries of `list` that take dtype `t`: what "all" means for it. The ones left out add one
// sentence to `left_out` when given.
std::vector<const VersionInfo*> taking_dtype(const std::vector<const VersionInfo*>& list, DType t,
                                             std::vector<std::string>* left_out = nullptr);

// "cpu", "cuda" or "auto" (cuda when a device is present). "cuda" without a device: UsageError
// with the reason the device is absent.
Backend resolve_backend(const std::string& name);

// A packed batch: one length of keys per sequence, lengths in range, at least one sequence with
// both queries and keys, and a total that a lab can hold.
void check_packed(const Problem& p);

// A paged cache: its page size a power of two in 1..kMaxPageSize, and a dense batch (not a packed
// one). (validate_run also checks that an int32 block table can name the pool's pages.)
void check_paged(const Problem& p);

// --splits (CpuOptions::splits): in 1..kMaxKvSplits, and some selected version splits the keys
// (VersionEntry::kv_splits); the others ignore it. 0: not given.
void check_splits(int splits, const std::vector<const VersionInfo*>& selected);

// --ranks (CpuOptions::ranks): in 1..kMaxRanks, and some selected version runs over ranks
// (VersionEntry::ring); the others ignore it. 0: not given.
void check_ranks(int ranks, const std::vector<const VersionInfo*>& selected);

// Shape, scale, tiles, threads, repeats, splits, ranks; on cuda also each version's own check().
void validate_run(const RunConfig& c);

// Host memory (run_host_bytes, and device memory on cuda) against what is available. UsageError
// when it will not fit.
void check_memory(const RunConfig& c);

// Bytes a --dump of this run writes.
double estimate_dump_bytes(const RunConfig& c);

}  // namespace flashlab
