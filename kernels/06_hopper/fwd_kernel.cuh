// The Hopper forward kernel: its entry point (roles, barriers) and its launcher. cuda.cu explains
// the rung and draws the pipeline; the roles live in fwd_producer.cuh (loads),
// fwd_consumer.cuh (products and softmax), fwd_epilogue.cuh (O and LSE out) and
// fwd_schedule.cuh (which tiles, where in shared memory).
//
// Built for sm_90a only: wgmma and setmaxnreg exist nowhere else.
#pragma once

#include <algorithm>

#include "common/smem_opt_in.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "fwd_consumer.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd {

// Threads: a producer warpgroup and the consumer warpgroups, or the consumers alone.
template <class Tr, unsigned kIdeas>
constexpr int kThreads = 128 * (Tr::kConsumers + (ideas_of(kIdeas).warp_specialized ? 1 : 0));

// Registers per thread after setmaxnreg: the producer keeps what issuing copies needs (more for
// cp.async, whose addresses its threads compute), the consumers share the rest of the 64K
// registers of an SM: 128 x 24 + 256 x 240 = 64512 with two consumer warpgroups,
// 128 x 24 + 384 x 160 = 64512 with three.
template <unsigned kIdeas>
constexpr uint32_t kProducerRegs = ideas_of(kIdeas).tma ? 24 : 40;
template <class Tr, unsigned kIdeas>
constexpr uint32_t kConsumerRegs = Tr::kConsumers == 2 ? (ideas_of(kIdeas).tma ? 240 : 232) : 160;

template <class T, int D, bool kCausal, unsigned kIdeaBits>
__global__ void __launch_bounds__(kThreads<FwdTraits<D, kCausal>, kIdeaBits>, 1)
    fwd_kernel(const __grid_constant__ FwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr FwdIdeas kIdeas = ideas_of(kIdeaBits);
  static_assert(kIdeas.tma || kIdeas.warp_specialized,
                "cp.async loads need the producer warpgroup");
  using Tr = FwdTraits<D, kCausal>;
  constexpr int kStages = Tr::kStages, W = Tr::kConsumers;
  extern __shared__ unsigned char smem_raw[];
  const Smem<T, D, kCausal> sm(smem_raw);
  using L = Loader<T, D, kCausal, kIdeaBits>;
  constexpr bool kPacked = (kIdeaBits & kPackedBatch) != 0;
  static_assert(!kPacked || (kIdeaBits & kAllIdeas) == kAllIdeas,
                "a packed batch runs with every idea on (bulk copies only)");

  if (threadIdx.x == 0) {
    for (int b = 0; b < Tr::kQBuffers; ++b) {
      sm90::mbar_init(sm.q_full() + b, L::kFullArrivals);
      // Every consumer thread releases Q after its last S; with O through Q's buffer, one thread
      // of each warpgroup after O's store (fwd_epilogue.cuh).
      sm90::mbar_init(sm.q_empty() + b, Tr::kOStage == OStage::in_q ? W : 128 * W);
    }
    for (int s = 0; s < kStages; ++s) {
      sm90::mbar_init(sm.k_full() + s, L::kFullArrivals);
      sm90::mbar_init(sm.v_full() + s, L::kFullArrivals);
      sm90::mbar_init(sm.k_empty() + s, 128 * W);
      sm90::mbar_init(sm.v_empty() + s, 128 * W);
    }
    for (int s = 0; s < 2; ++s) {  // the dynamic order's ring: one announcer, the consumers read
      sm90::mbar_init(sm.tile_full() + s, 1);
      sm90::mbar_init(sm.tile_empty() + s, 128 * W);
    }
    sm90::mbar_fence_init();
    if constexpr (kIdeas.tma) {
      sm90::tma_prefetch_map(&p.q_map);
      sm90::tma_prefetch_map(&p.k_map);
      sm90::tma_prefetch_map(&p.v_map);
      sm90::tma_prefetch_map(&p.o_map);
    }
  }
  __syncthreads();

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if constexpr (kIdeas.warp_specialized) {
    if (wg == 0) {  // the producer warpgroup: every tile of the block, in order
      sm90::setmaxnreg_dec<kProducerRegs<kIdeaBits>>();
      if (kIdeas.tma && t != 0) return;  // one thread issues every bulk copy
      const L loader{p, sm, t};
      constexpr bool kDynamic = kDynamicOrder<Tr, kIdeaBits>;
      int q_count = 0, g = 0;
      for (int n = 0;; ++n) {
        const int tile = block_tile<kDynamic>(p, sm, n, t == 0);
        if (tile >= p.tiles) break;
        const Tile tl = tile_of<kIdeas.heavy_first, kPacked, Tr::Br>(p, tile);
        const BlockSchedule sc =
            block_schedule<Tr::Br, Tr::Bc, kCausal, L::kLeft>(p, seq_view<kPacked>(p, tl.seq),
                                                          tl.q_block);
        if (sc.n_kv == 0) continue;
        // The tile's maps: the problem's, or its sequence's (made by the map kernel: acquired
        // before their first copy).
        const CUtensorMap* maps = kPacked ? p.seq_maps + 4 * tl.seq : nullptr;
        if constexpr (kPacked) {
          sm90::tensormap_acquire(maps + 0);
          sm90::tensormap_acquire(maps + 1);
          sm90::tensormap_acquire(maps + 2);
        }
        loader.load_q(kPacked ? maps + 0 : &p.q_map, tl.head, sc.q0, q_count++);
        const int kv_head = tl.head / p.group;  // grouped heads: the K/V head it reads
        if constexpr (kPacked) {
          // The visited K/V blocks from the last down (schedule.h's order), counted by the block
          // itself: with the sequence's maps in hand, the 24 registers have no room for more.
          const int first = sc.kv_block<L::kLeft>(sc.n_kv - 1);
          for (int kb = sc.kv_block<L::kLeft>(0); kb >= first; --kb, ++g) {
            loader.load_k(maps + 1, kv_head, kb, g);
            loader.load_v(maps + 2, kv_head, kb, g);
          }
        } else {
          for (int it = 0; it < sc.n_kv; ++it, ++g) {
            loader.load_k(&p.k_map, kv_head, sc, it, g);
            loader.load_v(&p.v_map, kv_head, sc, it, g);
          }
        }
      }
      return;
    }
    sm90::setmaxnreg_inc<kConsumerRegs<Tr, kIdeaBits>>();
    Consumer<T, D, kCausal, kIdeaBits> c{p, sm, wg - 1, t, nullptr};
    c.run();
  } else {
    // No producer: thread 0 starts each tile's loads, then refills each stage as it is released.
    const L loader{p, sm, t};
    Consumer<T, D, kCausal, kIdeaBits> c{p, sm, wg, t, threadIdx.x == 0 ? &loader : nullptr};
    c.run();
  }
#endif
}

template <class T, int D, bool kCausal, unsigned kIdeas>
void launch_fwd(const FwdParams& p, cudaStream_t stream) {
  using Tr = FwdTraits<D, kCausal>;
  constexpr int kSmem = SmemLayout<D, kCausal>::kLaunchBytes;
  auto* kernel = &fwd_kernel<T, D, kCausal, kIdeas>;
  // More than 48 KiB of dynamic shared memory must be asked for, once per kernel and device.
  FLASHLAB_CUDA_CHECK(opt_in_smem(kernel, kSmem));
  const int blocks = kPersistentGrid<Tr, kIdeas> ? std::min(p.tiles, device_info().sms) : p.tiles;
  if constexpr (kDynamicOrder<Tr, kIdeas>)  // the counter hands out tiles blocks, blocks + 1, ...
    FLASHLAB_CUDA_CHECK(cudaMemsetAsync(p.tile_counter, 0, sizeof(int), stream));
  kernel<<<blocks, kThreads<Tr, kIdeas>, kSmem, stream>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
