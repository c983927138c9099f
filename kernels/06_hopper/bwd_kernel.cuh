// The Hopper backward kernel: its entry point (roles, barriers) and its launcher. FA2's outer loop
// over K blocks (one block per K block j of a head, dK_j and dV_j accumulated in registers over
// the Q blocks that see it), with the forward's machinery; README.md draws the pipeline. The roles
// live in bwd_producer.cuh (loads), bwd_dq_writer.cuh (dQ partials out), bwd_consumer.cuh
// (products, dK and dV out) and bwd_schedule.cuh (which Q blocks, where in shared memory).
//
//   producer warpgroup, 24 registers a thread:
//     thread 0    K_j, V_j once; then Q_i, dO_i, LSE2_i, D_i into a ring of kStages stages
//     thread 32   the dQ writer: each staged dQ_i partial into the fp32 accumulator by a bulk
//                 reduce-add; hopper-deterministic in a fixed order (turns on counters)
//   consumer warpgroups w = 0, 1, 240 registers a thread: keys 64w .. 64w + 63 of the block
//     per Q block i: S^T, dP^T, P^T, dS^T; dV_w, dK_w; a 64 x 64 piece of dQ_i to the writer
//     at the end: dK_w * scale, dV_w out by bulk tensor stores
//
// Built for sm_90a only: wgmma and setmaxnreg exist nowhere else.
#pragma once

#include <cstdint>

#include "bwd_consumer.cuh"
#include "bwd_dq_writer.cuh"
#include "bwd_producer.cuh"
#include "common/sm90/sync.cuh"
#include "common/sm90/tma.cuh"
#include "core/cuda_check.h"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

// Registers per thread after setmaxnreg: 128 x 24 + 256 x 240 = 64512 of the SM's 65536. (32 for
// the producer, the whole register file, hung the kernel on the H200: the consumers' setmaxnreg
// never got its registers.)
constexpr uint32_t kProducerRegs = 24;
constexpr uint32_t kConsumerRegs = 240;

// Which (K block, K/V head) a block owns. Chunks of kv_chunk K/V heads run one after another; in a
// chunk the K blocks go in order, all its heads at each. Under the causal mask the low K blocks
// have the most Q blocks to walk, so the heavy blocks start first and the light ones fill the
// tail; kv_chunk = max(1, SMs / K blocks) keeps what runs at once to about one K/V head's worth of
// K blocks per SM (its Q, dO and dQ rows in L2). With grouped heads a block walks H / Hkv heads'
// Q blocks, and one block per tile in launch order left the GPU's tail 12 % idle (bf16, d = 128,
// 32 over 8 heads, N = 4096, causal; a list-schedule count of the blocks' steps). A K/V head's
// K blocks still start in the order of j, as the deterministic turns need.
__device__ inline void block_of(const BwdParams& p, int& j, int& kv_head) {
  const int n_k = (p.b.Nk + ::flashlab::cuda::kOuterKBc - 1) / ::flashlab::cuda::kOuterKBc;
  const int n_kv = p.b.BH / p.b.group;
  const int b = blockIdx.x;
  const int chunk = b / (p.kv_chunk * n_k), r = b - chunk * p.kv_chunk * n_k;
  const int in_chunk = min(p.kv_chunk, n_kv - chunk * p.kv_chunk);
  j = r / in_chunk;
  kv_head = chunk * p.kv_chunk + r % in_chunk;
}

template <class T, int D, bool kDeterministic>
__global__ void __launch_bounds__(BwdTraits<D>::kThreads, 1)
    bwd_kernel(const __grid_constant__ BwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tr = BwdTraits<D>;
  extern __shared__ unsigned char smem_raw[];
  const BwdSmem<T, D> sm(smem_raw);
  int j, kv_head;  // K block j of K/V head kv_head
  block_of(p, j, kv_head);

  if (threadIdx.x == 0) {
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
    sm90::tma_prefetch_map(&p.q_map);
    sm90::tma_prefetch_map(&p.do_map);
    sm90::tma_prefetch_map(&p.k_map);
    sm90::tma_prefetch_map(&p.v_map);
  }
  __syncthreads();

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (wg == 0) {
    sm90::setmaxnreg_dec<kProducerRegs>();
    if (t == 0) produce<T, D, kDeterministic>(p, sm, j, kv_head);
    if (t == 32) write_dq<T, D, kDeterministic>(p, sm, j, kv_head);
    return;
  }
  sm90::setmaxnreg_inc<kConsumerRegs>();
  Consumer<T, D, kDeterministic> c{p, sm, wg - 1, t, j, kv_head};
  c.run();
#endif
}

template <class T, int D, bool kDeterministic>
void launch_bwd(const BwdParams& p, cudaStream_t stream) {
  using Tr = BwdTraits<D>;
  constexpr int kSmem = BwdLayout<D>::kLaunchBytes;
  auto* kernel = &bwd_kernel<T, D, kDeterministic>;
  static const bool smem_raised = [kernel] {
    FLASHLAB_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)smem_raised;
  // One block per (K block, K/V head), in block_of's order: a head's K blocks start in order, as
  // the deterministic turns rely on.
  const dim3 grid(((p.b.Nk + Tr::Bc - 1) / Tr::Bc) * (p.b.BH / p.b.group));
  kernel<<<grid, Tr::kThreads, kSmem, stream>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
