// The producer: for each tile of the block, its Q into one of the two Q buffers (the block's n-th
// tile with keys into buffer n % 2, so that the next tile's Q lands while this one's last products
// run) and its K/V blocks into the K and V rings; each copy completes on its buffer's or stage's
// `full` barrier, and each is reused only after the consumers released it on `empty`.
//
// With the bulk tensor copy engine (the rung) one thread does all of it: a 128 x 128 tile is
// two copy instructions (one per 64-column block). Without it (the ablation's "no TMA") the four
// warps of the producer warpgroup copy every 16-byte chunk themselves with cp.async, computing
// the swizzled address and zero-filling rows past the end, and each thread's copies arrive on the
// barrier when they land.
#pragma once

#include "common/sm90/tma.cuh"
#include "common/sm90/wgmma.cuh"
#include "fwd_schedule.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd {

template <class T, int D, bool kCausal, unsigned kIdeaBits>
struct Loader {
  static constexpr FwdIdeas kIdeas = ideas_of(kIdeaBits);
  using Tr = FwdTraits<D, kCausal>;
  static constexpr int Br = Tr::Br, Bc = Tr::Bc, kStages = Tr::kStages;
  static constexpr int kQBuffers = Tr::kQBuffers;
  static constexpr int kBlocks = D / 64;                       // 64-column blocks per tile row
  static constexpr bool kLeft = (kIdeaBits & kLeftSide) != 0;  // the band's left side
  // A packed batch's producer copies a tile's 64-column blocks in a loop, not unrolled: with the
  // sequence's maps its 24 registers hold a d = 256 tile without a spill that way.
  static constexpr int kUnroll = (kIdeaBits & kPackedBatch) != 0 ? 1 : D / 64;

  const FwdParams& p;
  const Smem<T, D, kCausal>& sm;
  int tid;  // thread within the producer warpgroup (cp.async copies use all 128)

  // Arrivals a `full` barrier waits for: the arming thread, or every copying thread.
  static constexpr uint32_t kFullArrivals = kIdeas.tma ? 1 : 128;

  // The Q tile of the block's `count`-th tile with keys, into buffer count % kQBuffers once the
  // consumers are done with the tile that buffer held before (its S products have all completed;
  // the parity flips each lap of the buffers).
  // `map`: Q's tensor map (the problem's, or a packed batch's sequence's); the K and V loads
  // take theirs the same way.
  __device__ void load_q(const CUtensorMap* map, int head, int q0, int count) const {
    const int buf = count % kQBuffers;
    T* tile = sm.q() + buf * Br * D;
    sm90::mbar_wait(sm.q_empty() + buf, ((count / kQBuffers) & 1) ^ 1);
    if constexpr (kIdeas.tma) {
      sm90::mbar_arrive_expect_tx(sm.q_full() + buf, Br * D * 2);
#pragma unroll(kUnroll)
      for (int b = 0; b < kBlocks; ++b)
        sm90::tma_load_3d(tile + b * Br * 64, map, 64 * b, q0, head, sm.q_full() + buf);
    } else {
      copy_tile<Br>(tile, static_cast<const T*>(p.q), head, q0, p.Nq);
      sm90::cp_async_arrive(sm.q_full() + buf);
    }
  }

  // The K (or V) block of iteration `it` of a tile into stage g % kStages, where g counts the
  // block's iterations over all its tiles, once that stage is free: the consumers released it
  // kStages iterations ago (the parity flips each lap of the ring). kv_head: the K/V head the
  // tile's query head reads (head / group), worked out once per tile by the caller (a division
  // here, at every load, cost the producer's 24 registers a spill).
  __device__ void load_k(const CUtensorMap* map, int kv_head, const BlockSchedule& sc, int it,
                         int g) const {
    load_kv(sm.k(), sm.k_full(), sm.k_empty(), map, p.k, kv_head, sc.kv_block<kLeft>(it) * Bc, g);
  }
  __device__ void load_v(const CUtensorMap* map, int kv_head, const BlockSchedule& sc, int it,
                         int g) const {
    load_kv(sm.v(), sm.v_full(), sm.v_empty(), map, p.v, kv_head, sc.kv_block<kLeft>(it) * Bc, g);
  }
  // The same by the K/V block's index.
  __device__ void load_k(const CUtensorMap* map, int kv_head, int kv_block, int g) const {
    load_kv(sm.k(), sm.k_full(), sm.k_empty(), map, p.k, kv_head, kv_block * Bc, g);
  }
  __device__ void load_v(const CUtensorMap* map, int kv_head, int kv_block, int g) const {
    load_kv(sm.v(), sm.v_full(), sm.v_empty(), map, p.v, kv_head, kv_block * Bc, g);
  }

 private:
  __device__ void load_kv(T* ring, uint64_t* full, uint64_t* empty, const CUtensorMap* map,
                          const void* src, int head, int row0, int g) const {
    const int s = g % kStages;
    sm90::mbar_wait(empty + s, ((g / kStages) & 1) ^ 1);
    T* tile = ring + s * Bc * D;
    if constexpr (kIdeas.tma) {
      sm90::mbar_arrive_expect_tx(full + s, Bc * D * 2);
#pragma unroll(kUnroll)
      for (int b = 0; b < kBlocks; ++b)
        sm90::tma_load_3d(tile + b * Bc * 64, map, 64 * b, row0, head, full + s);
    } else {
      copy_tile<Bc>(tile, static_cast<const T*>(src), head, row0, p.Nk);
      sm90::cp_async_arrive(full + s);
    }
  }

  // Rows [row0, row0 + kRows) of this head's [n_rows x D] tensor into a swizzled tile, by the 128
  // threads of the producer warpgroup; rows outside [0, n_rows) are zero-filled (a causal head's
  // first Q block starts above row 0: schedule.h).
  template <int kRows>
  __device__ void copy_tile(T* dst, const T* tensor, int head, int row0, int n_rows) const {
    constexpr int kChunks = D / 8;  // 16-byte chunks per row
    const T* src = tensor + static_cast<int64_t>(head) * n_rows * D;
    const uint32_t base = smem_addr(dst);
    for (int i = tid; i < kRows * kChunks; i += 128) {
      const int r = i / kChunks, c = i % kChunks;
      const uint32_t to = base + (c / 8) * kRows * 128 + sm90::swizzle128_offset(r, (c % 8) * 8);
      const bool valid = row0 + r >= 0 && row0 + r < n_rows;
      cp_async_16(to, valid ? src + static_cast<int64_t>(row0 + r) * D + c * 8 : src, valid);
    }
  }
};

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
