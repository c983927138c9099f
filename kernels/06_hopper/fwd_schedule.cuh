// Which tiles a block works on, where they live in shared memory, and which named barriers its
// warpgroups use. The order of the K/V blocks inside a tile is schedule.h's (shared with the CPU
// twin).
//
// Tiles: (head, Q block) pairs numbered head-major, the Q blocks of a head from the last (the
// most keys under the causal mask) to the first when heavy_first. Block b takes tiles b,
// b + gridDim.x, b + 2 gridDim.x, ...: one tile when the grid has a block per tile, many when the
// kernel is persistent (a block per SM). Neighbouring blocks work on the same head at the same
// time, so its K and V are read from HBM about once and then served by L2.
//
// Shared memory (every tile 1024-byte aligned, as the 128-byte swizzle requires):
//   Q     [D/64][Br][64]              loaded once per tile; consumer warpgroup w reads rows 64w..
//   O     [D/64][Br][64]              each warpgroup's O rows on their way out by bulk store
//   K     [kStages][D/64][Bc][64]     ring of K tiles (the ring runs on across the block's tiles)
//   V     [kStages][D/64][Bc][64]     ring of V tiles
//   bars  q_full, q_empty, k_full[s], k_empty[s], v_full[s], v_empty[s]
#pragma once

#include <cstdint>

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
};

template <bool kHeavyFirst>
__device__ Tile tile_of(const FwdParams& p, int tile) {
  const int head = tile / p.q_blocks, rank = tile % p.q_blocks;
  return {head, kHeavyFirst ? p.q_blocks - 1 - rank : rank};
}

template <int Br, int Bc, bool kCausal>
__device__ BlockSchedule block_schedule(const FwdParams& p, int q_block) {
  return ::flashlab::FLASHLAB_FOLDER::block_schedule(Br, Bc, kCausal, p.Nq, p.Nk, p.causal_offset,
                                                     q_block);
}

template <int D, bool kCausal>
struct SmemLayout {
  using Tr = FwdTraits<D, kCausal>;
  static constexpr int kQBytes = Tr::Br * D * 2;
  static constexpr int kTileBytes = Tr::Bc * D * 2;  // one K or V stage
  static constexpr int kQ = 0;
  static constexpr int kO = kQ + kQBytes;
  static constexpr int kK = kO + kQBytes;
  static constexpr int kV = kK + Tr::kStages * kTileBytes;
  static constexpr int kBars = kV + Tr::kStages * kTileBytes;
  static constexpr int kBytes = kBars + (2 + 4 * Tr::kStages) * 8;
  static constexpr int kLaunchBytes = kBytes + 1024;  // room to align the base to 1024 bytes
  static_assert(kQBytes % 1024 == 0 && kTileBytes % 1024 == 0, "1024-byte tiles");
  static_assert(kLaunchBytes <= 227 * 1024, "more shared memory than a block can have");
};

// Pointers into one block's shared memory.
template <class T, int D, bool kCausal>
struct Smem {
  using L = SmemLayout<D, kCausal>;
  T* q;
  T* o;
  T* k;  // stage s at k + s * Bc * D
  T* v;
  uint64_t* q_full;
  uint64_t* q_empty;
  uint64_t* k_full;
  uint64_t* k_empty;
  uint64_t* v_full;
  uint64_t* v_empty;

  __device__ explicit Smem(unsigned char* raw) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
    unsigned char* base = raw + ((1024 - (a & 1023)) & 1023);
    q = reinterpret_cast<T*>(base + L::kQ);
    o = reinterpret_cast<T*>(base + L::kO);
    k = reinterpret_cast<T*>(base + L::kK);
    v = reinterpret_cast<T*>(base + L::kV);
    constexpr int S = FwdTraits<D, kCausal>::kStages;
    q_full = reinterpret_cast<uint64_t*>(base + L::kBars);
    q_empty = q_full + 1;
    k_full = q_empty + 1;
    k_empty = k_full + S;
    v_full = k_empty + S;
    v_empty = v_full + S;
  }
};

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
