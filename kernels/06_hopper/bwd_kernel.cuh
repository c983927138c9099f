// The Hopper backward kernel: its entry point (roles, barriers) and its launcher. FA2's outer loop
// over K blocks (one block per K block j of a head, dK_j and dV_j accumulated in registers over
// the Q blocks that see it), with the forward's machinery; README.md draws the pipeline. The roles
// live in bwd_producer.cuh (loads), bwd_dq_writer.cuh (dQ partials out), bwd_consumer.cuh
// (products, dK and dV out) and bwd_schedule.cuh (which Q blocks, where in shared memory).
//
//   producer warpgroup, 24 registers a thread (32 in hopper-deterministic at d = 128):
//     thread 0    K_j, V_j once; then Q_i, dO_i, LSE2_i, D_i into a ring of kStages stages
//     thread 32   the dQ writer: each staged dQ_i partial into the fp32 accumulator by a bulk
//                 reduce-add; hopper-deterministic in a fixed order (turns on counters)
//   consumer warpgroups w = 0, 1, 240 registers a thread (232 there): keys 64w .. 64w + 63
//     per Q block i: S^T, dP^T, P^T, dS^T; dV_w, dK_w; a 64 x 64 piece of dQ_i to the writer
//     at the end: dK_w * scale, dV_w out by bulk tensor stores
//
// At d = 256 (BwdTraits::kSplitD) the block holds 64 keys and the consumer warpgroups split the
// head dim instead (bwd_consumer_split_d.cuh): warpgroup 0 computes S^T and P^T, warpgroup 1
// dP^T, they meet in shared memory, and both compute dK and dV only: dQ comes from a pass of its
// own (bwd_dq_pass.cuh), so thread 32 has nothing to write.
//
// A packed batch (kPacked) runs the same roles on each sequence's K blocks: its blocks are
// numbered sequence by sequence (place_packed), its copies go through the sequence's own tensor
// maps (seq_maps.cuh: clipped at its last row, so nothing is read or written past it), and its
// rows of LSE2, D, the dQ accumulator and the turn counters are found from its first token
// (bwd_schedule.cuh: Where).
//
// Built for sm_90a only: wgmma and setmaxnreg exist nowhere else.
#pragma once

#include <cstdint>

#include "bwd_consumer.cuh"
#include "bwd_consumer_split_d.cuh"
#include "bwd_dq_writer.cuh"
#include "bwd_producer.cuh"
#include "common/packed.h"
#include "common/sm90/sync.cuh"
#include "common/sm90/tma.cuh"
#include "common/smem_opt_in.h"
#include "core/cuda_check.h"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

// Registers per thread after setmaxnreg: 128 x 24 + 256 x 240 = 64512 of the SM's 65536. (32 for
// the producer, the whole register file, hung the kernel on the H200: the consumers' setmaxnreg
// never got its registers: setmaxnreg moves registers within the block's launch allocation, 384 x
// 168 = 64512.) At d = 128 hopper-deterministic's dQ writer (thread 32, its turns) spilled 8 bytes
// in 24 registers, and its consumers need no more than 232: 128 x 32 + 256 x 232 = 63488.
template <int D, bool kDeterministic>
constexpr bool kWideProducer = D == 128 && kDeterministic;
template <int D, bool kDeterministic>
constexpr uint32_t kProducerRegs = kWideProducer<D, kDeterministic> ? 32 : 24;
template <int D, bool kDeterministic>
constexpr uint32_t kConsumerRegs = kWideProducer<D, kDeterministic> ? 232 : 240;

// Which (K block, K/V head) block b of a head-major run owns: n_k K blocks of n_kv K/V heads. Chunks
// of kv_chunk K/V heads run one after another; in a chunk the K blocks go in order, all its heads
// at each. Under the causal mask the low K blocks have the most Q blocks to walk, so the heavy
// blocks start first and the light ones fill the tail; kv_chunk = max(1, SMs / K blocks) keeps
// what runs at once to about one K/V head's worth of K blocks per SM (its Q, dO and dQ rows in
// L2). With grouped heads a block walks H / Hkv heads' Q blocks, and one block per tile in launch
// order left the GPU's tail 12 % idle (bf16, d = 128, 32 over 8 heads, N = 4096, causal; a
// list-schedule count of the blocks' steps). A K/V head's K blocks still start in the order of j,
// as the deterministic turns need.
__device__ inline void block_in(int n_k, int n_kv, int kv_chunk, int b, int& j, int& kv_head) {
  const int chunk = b / (kv_chunk * n_k), r = b - chunk * kv_chunk * n_k;
  const int in_chunk = min(kv_chunk, n_kv - chunk * kv_chunk);
  j = r / in_chunk;
  kv_head = chunk * kv_chunk + r % in_chunk;
}

// A dense problem: one run over all B Hkv K/V heads.
template <int Bc>
__device__ void block_of(const BwdParams& p, int& j, int& kv_head) {
  const int n_k = (p.b.Nk + Bc - 1) / Bc;
  block_in(n_k, p.b.BH / p.b.group, p.kv_chunk, blockIdx.x, j, kv_head);
}

// A packed batch: the sequences' runs one after another, in the map kernel's order (most keys
// first, seq_maps.cuh), each a dense run over its Hkv K/V heads with a chunk of its own; thread 0
// writes where the block works into shared memory (BlockPlace).
template <int Br, int Bc>
__device__ void place_packed(const BwdParams& p, BlockPlace* pl) {
  const int x = blockIdx.x;
  const int rank = seq_of(p.b.B, x, [&](int k) { return p.block_start[k]; });
  const int seq = p.seq_order[rank];
  const SeqRows r = seq_rows(p.b.cu_q, p.b.cu_k, seq);
  const int n_k = (r.nk + Bc - 1) / Bc;
  block_in(n_k, p.b.Hkv, max(1, p.sms / n_k), x - p.block_start[rank], pl->j, pl->kv_head);
  pl->band = seq_band(p.b.band, r.nq, r.nk);
  pl->seq = seq;
  pl->q0 = r.q0;
  pl->lse0 = static_cast<int>(bwd_packed_lse_start(r.q0, seq));
  pl->qb0 = packed_turn_block(r.q0, seq, Br);
}

template <class T, int D, bool kDeterministic, bool kPacked>
__global__ void __launch_bounds__(BwdTraits<D>::kThreads, 1)
    bwd_kernel(const __grid_constant__ BwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tr = BwdTraits<D>;
  extern __shared__ unsigned char smem_raw[];
  const BwdSmem<T, D> sm(smem_raw);

  if (threadIdx.x == 0) {
    if constexpr (kPacked) place_packed<Tr::Br, Tr::Bc>(p, sm.place);
    sm90::mbar_init(sm.kv_full, 1);
    for (int s = 0; s < Tr::kStages; ++s) {
      sm90::mbar_init(sm.q_full + s, 1);
      sm90::mbar_init(sm.q_empty + s, 256);  // every consumer thread releases
    }
    for (int b = 0; b < 2; ++b) {
      sm90::mbar_init(sm.dq_full + b, 256);
      sm90::mbar_init(sm.dq_empty + b, 1);
    }
    sm90::mbar_fence_init();
    if constexpr (!kPacked) {
      sm90::tma_prefetch_map(&p.q_map);
      sm90::tma_prefetch_map(&p.do_map);
      sm90::tma_prefetch_map(&p.k_map);
      sm90::tma_prefetch_map(&p.v_map);
    }
  }
  __syncthreads();
  int j, kv_head;  // K block j of K/V head kv_head
  // Worked out by each role after its setmaxnreg (a dense block's from its index, a packed one's
  // from shared memory): worked out before it, the two values stayed live across the change, and
  // in the 24-register producer warpgroup at d = 64 they spilled.
  const auto find_block = [&] {
    if constexpr (kPacked) {
      j = sm.place->j;
      kv_head = sm.place->kv_head;
    } else {
      block_of<Tr::Bc>(p, j, kv_head);
    }
  };

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (wg == 0) {
    sm90::setmaxnreg_dec<kProducerRegs<D, kDeterministic>>();
    if (t == 0) {
      find_block();
      produce<T, D, kDeterministic, kPacked>(p, sm, j, kv_head);
    } else if (t == 32) {
      if constexpr (!Tr::kSplitD) {
        find_block();
        write_dq<T, D, kDeterministic, kPacked, (kProducerRegs<D, kDeterministic> < 32)>(p, sm, j,
                                                                                     kv_head);
      }
    }
    return;
  }
  sm90::setmaxnreg_inc<kConsumerRegs<D, kDeterministic>>();
  find_block();
  if constexpr (Tr::kSplitD) {
    ConsumerSplitD<T, D, kDeterministic, kPacked> c{p, sm, wg - 1, t, j, kv_head};
    c.run();
  } else {
    Consumer<T, D, kDeterministic, kPacked> c{p, sm, wg - 1, t, j, kv_head};
    c.run();
  }
#endif
}

template <class T, int D, bool kDeterministic, bool kPacked>
void launch_bwd(const BwdParams& p, int blocks, cudaStream_t stream) {
  using Tr = BwdTraits<D>;
  constexpr int kSmem = BwdLayout<D>::kLaunchBytes;
  auto* kernel = &bwd_kernel<T, D, kDeterministic, kPacked>;
  FLASHLAB_CUDA_CHECK(opt_in_smem(kernel, kSmem));  // once per kernel and device
  // One block per (K block, K/V head), in block_in's order: a head's K blocks start in order, as
  // the deterministic turns rely on.
  if constexpr (!kPacked) blocks = ((p.b.Nk + Tr::Bc - 1) / Tr::Bc) * (p.b.BH / p.b.group);
  if (blocks == 0) return;  // a packed batch whose sequences have no keys
  kernel<<<blocks, Tr::kThreads, kSmem, stream>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
