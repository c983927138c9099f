// Which tiles a block works on, where they live in shared memory, and which named barriers its
// warpgroups use. The order of the K/V blocks inside a tile is schedule.h's (shared with the CPU
// twin).
//
// Tiles: (head, Q block) pairs numbered head-major, the Q blocks of a head from the last (the
// most keys under the causal mask) to the first when heavy_first. Block b takes tile b first.
// Then, when the grid has a block per tile, nothing more; when the kernel is persistent (a block
// per SM), non-causal: b + gridDim.x, b + 2 gridDim.x, ...; causal (dynamic order): the next
// unclaimed tile, from a counter in global memory. The producer takes it (atomicAdd) and
// announces it to the block's other threads through a two-slot ring in shared memory. Either
// way neighbouring blocks work on the same head at the same time, so its K and V are read from
// HBM about once and then served by L2; under the causal mask, whose tiles differ in length, only
// the counter keeps it so (a fixed stride lets the blocks drift apart), and no block idles while
// tiles remain.
//
// Shared memory (every tile 1024-byte aligned, as the 128-byte swizzle requires):
//   Q     [2][D/64][Br][64]           two buffers: the block's n-th tile's Q goes to buffer n % 2,
//                                     so the next tile's Q arrives while this one's last products
//                                     and epilogue run; consumer warpgroup w reads rows 64w..
//                                     (d = 256: one buffer, the traits' kQBuffers)
//   O     [D/64][Br][64]              each warpgroup's O rows on their way out by bulk store
//                                     (d = 256: through the Q buffer, or two 64 x 64 slots per
//                                     warpgroup: the traits' kOStage)
//   K     [kStages][D/64][Bc][64]     ring of K tiles (the ring runs on across the block's tiles)
//   V     [kStages][D/64][Bc][64]     ring of V tiles
//   bars  q_full[kQBuffers], q_empty[kQBuffers], k_full[s], k_empty[s], v_full[s], v_empty[s],
//         tile_full[2], tile_empty[2]
//   tile_slot[2]                       the announced tiles (dynamic order)
#pragma once

#include <cstdint>

#include "common/packed.h"
#include "common/sm90/sync.cuh"
#include "fwd_params.h"
#include "schedule.h"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd {

// Named barrier ids (0 is __syncthreads): kTurnBarrier + w is "consumer warpgroup w's turn on the
// tensor cores" (256 threads meet: the 128 of w syncing, the 128 of the warpgroup before it
// arriving); kEpilogueBarrierId + w gathers the 128 threads of warpgroup w for its epilogue.
constexpr uint32_t kTurnBarrier = 1;
constexpr uint32_t kEpilogueBarrierId = 5;

using ::flashlab::FLASHLAB_FOLDER::BlockSchedule;

struct Tile {
  int head;
  int q_block;
  int seq;  // a packed batch's sequence (0 for a dense problem)
};

// The lengths of the tile's sequence: the problem's (dense), or sequence `seq`'s (packed). The
// dense kernels read them from the parameters wherever they are used (no registers held); a packed
// kernel keeps them per tile.
struct SeqView {
  int nq, nk;  // query rows and keys
  int offset;  // nk - nq: the causal diagonal's offset (the problem's for a dense one)
  int q_tok;   // the sequence's first query token (packed); 0 for a dense problem
};

template <bool kPacked>
__device__ SeqView seq_view(const FwdParams& p, int seq) {
  if constexpr (!kPacked) {
    return {p.Nq, p.Nk, p.causal_offset, 0};
  } else {
    const SeqRows r = seq_rows(p.cu_q, p.cu_k, seq);
    return {r.nq, r.nk, r.nk - r.nq, r.q0};
  }
}

// Tiles of a dense problem: head-major, q_blocks per head. Of a packed batch: sequence by
// sequence in seq_order (most keys first), each one's H ceil(nq / Br) tiles head-major as a dense
// problem's; tile_start (B + 1 entries) says where each sequence's run starts, so a tile finds
// its sequence by bisection. A sequence without queries has no tiles: every tile is a real one.
template <bool kHeavyFirst, bool kPacked = false, int Br = 0>
__device__ Tile tile_of(const FwdParams& p, int tile) {
  if constexpr (!kPacked) {
    const int head = tile / p.q_blocks, rank = tile % p.q_blocks;
    return {head, kHeavyFirst ? p.q_blocks - 1 - rank : rank, 0};
  } else {
    const int i = seq_of(p.B, tile, [&](int k) { return p.tile_start[k]; });
    const int seq = p.seq_order[i];
    const int nq = p.cu_q[seq + 1] - p.cu_q[seq];
    const int q_blocks = (nq + Br - 1) / Br, local = tile - p.tile_start[i];
    const int head = local / q_blocks, rank = local % q_blocks;
    return {head, kHeavyFirst ? q_blocks - 1 - rank : rank, seq};
  }
}

// kLeft: the kernel's band has a left side (fwd_params.h: kLeftSide); false (the causal mask, a
// window without a left bound) makes the schedule skip the left side's arithmetic once per tile
// (schedule.h; docs/perf.md, "The sweeps again at 62aeebd").
template <int Br, int Bc, bool kCausal, bool kLeft = true>
__device__ BlockSchedule block_schedule(const FwdParams& p, const SeqView& v, int q_block) {
  return ::flashlab::FLASHLAB_FOLDER::block_schedule(Br, Bc, kCausal, v.nq, v.nk, v.offset,
                                                     p.band_left, p.band_right, q_block, kLeft);
}

template <int D, bool kCausal>
struct SmemLayout {
  using Tr = FwdTraits<D, kCausal>;
  static constexpr int kQBuffers = Tr::kQBuffers;  // Q tiles in flight: the block's tiles take turns
  static constexpr int kQBytes = Tr::Br * D * 2;     // one Q buffer, and the O tile
  static constexpr int kTileBytes = Tr::Bc * D * 2;  // one K or V stage
  static constexpr int kQ = 0;
  // O (the traits' kOStage): a tile of its own after the Q buffers, the one Q buffer, or
  // kOSlots slots of 64 x 64 per consumer warpgroup.
  static constexpr int kOBytes = Tr::kOStage == OStage::tile    ? kQBytes
                                 : Tr::kOStage == OStage::slots ? Tr::kConsumers * Tr::kOSlots * 64 * 128
                                                                : 0;
  static constexpr int kO = Tr::kOStage == OStage::in_q ? kQ : kQ + kQBuffers * kQBytes;
  static constexpr int kK = kQ + kQBuffers * kQBytes + kOBytes;
  static_assert(Tr::kOStage != OStage::in_q || kQBuffers == 1, "O through Q's buffer: one Q buffer");
  static constexpr int kV = kK + Tr::kStages * kTileBytes;
  static constexpr int kBars = kV + Tr::kStages * kTileBytes;
  static constexpr int kSlots = kBars + (2 * kQBuffers + 4 * Tr::kStages + 4) * 8;
  static constexpr int kBytes = kSlots + 2 * 4;
  static constexpr int kLaunchBytes = kBytes + 1024;  // room to align the base to 1024 bytes
  static_assert(kQBytes % 1024 == 0 && kTileBytes % 1024 == 0, "1024-byte tiles");
  static_assert(kLaunchBytes <= 227 * 1024, "more shared memory than a block can have");
};

// Pointers into one block's shared memory: one base, and every tile and barrier at a constant
// offset from it (so that a thread keeps one register for all of them).
template <class T, int D, bool kCausal>
struct Smem {
  using L = SmemLayout<D, kCausal>;
  static constexpr int S = FwdTraits<D, kCausal>::kStages;
  static constexpr int kQBuffers = L::kQBuffers;
  unsigned char* base;  // 1024-byte aligned

  __device__ explicit Smem(unsigned char* raw) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
    base = raw + ((1024 - (a & 1023)) & 1023);
  }

  __device__ T* q() const { return reinterpret_cast<T*>(base + L::kQ); }  // buffer b: + b Br D
  __device__ T* o() const { return reinterpret_cast<T*>(base + L::kO); }
  __device__ T* k() const { return reinterpret_cast<T*>(base + L::kK); }  // stage s: + s Bc D
  __device__ T* v() const { return reinterpret_cast<T*>(base + L::kV); }
  __device__ uint64_t* q_full() const { return bars(); }  // [kQBuffers]
  __device__ uint64_t* q_empty() const { return bars() + kQBuffers; }
  __device__ uint64_t* k_full() const { return bars() + 2 * kQBuffers; }  // [kStages] each
  __device__ uint64_t* k_empty() const { return k_full() + S; }
  __device__ uint64_t* v_full() const { return k_full() + 2 * S; }
  __device__ uint64_t* v_empty() const { return k_full() + 3 * S; }
  __device__ uint64_t* tile_full() const { return k_full() + 4 * S; }  // [2]: slot s announced
  __device__ uint64_t* tile_empty() const { return tile_full() + 2; }  // [2]: slot s taken by all
  __device__ int* tile_slot() const { return reinterpret_cast<int*>(base + L::kSlots); }  // [2]

 private:
  __device__ uint64_t* bars() const { return reinterpret_cast<uint64_t*>(base + L::kBars); }

 public:
  // The dynamic order's ring of announced tiles: the block's n-th tile goes through slot n % 2,
  // whose barriers complete a phase per lap (parity (n / 2) % 2). The announcing thread waits
  // until every reader has taken the tile the slot held before; its arrival releases the store,
  // so a reader that has waited sees it. Arrivals: tile_full 1, tile_empty one per reader.
  __device__ void announce_tile(int n, int tile) const {
    sm90::mbar_wait(tile_empty() + n % 2, ((n / 2) & 1) ^ 1);
    tile_slot()[n % 2] = tile;
    sm90::mbar_arrive(tile_full() + n % 2);
  }
  __device__ int take_announced_tile(int n) const {
    sm90::mbar_wait(tile_full() + n % 2, (n / 2) & 1);
    const int tile = tile_slot()[n % 2];
    sm90::mbar_arrive(tile_empty() + n % 2);
    return tile;
  }
};

// How a launch hands out its tiles: a persistent grid (a block per SM) needs the producer
// warpgroup (without it the refills are written for one tile per block); the dynamic order is the
// traits' choice (causal) on a persistent grid, and needs the bulk copy engine: the cp.async
// producer's 128 threads, at 40 registers, spill when they take their tiles from the ring too, so
// that variant of the ablation runs causal tiles one block each.
template <class Tr, unsigned kIdeaBits>
constexpr bool kPersistentGrid =
    ideas_of(kIdeaBits).persistent&& ideas_of(kIdeaBits).warp_specialized &&
    (ideas_of(kIdeaBits).tma || !Tr::kDynamic);
template <class Tr, unsigned kIdeaBits>
constexpr bool kDynamicOrder = kPersistentGrid<Tr, kIdeaBits>&& Tr::kDynamic;

// The block's n-th tile (p.tiles or more: the block is done). Every thread of the block walks
// the same sequence: in the dynamic order one thread of the producer (`announcer`) claims each
// tile after the first and announces it, every other thread takes it from the ring.
template <bool kDynamic, class SmemT>
__device__ int block_tile(const FwdParams& p, const SmemT& sm, int n, bool announcer) {
  if constexpr (!kDynamic) {
    return blockIdx.x + n * gridDim.x;
  } else {
    if (!announcer) return sm.take_announced_tile(n);
    // The grid's size read where it is used (a volatile read of %nctaid.x): ptxas held gridDim.x
    // in a register across the producer's loop, and the packed d = 64 producer spilled it.
    uint32_t blocks;
    asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(blocks));
    const int tile = n == 0 ? blockIdx.x : static_cast<int>(blocks) + atomicAdd(p.tile_counter, 1);
    sm.announce_tile(n, tile);
    return tile;
  }
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
