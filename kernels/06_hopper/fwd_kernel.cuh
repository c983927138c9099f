// The Hopper forward kernel: its entry point (roles, barriers) and its launcher. cuda.cu explains
// the rung and draws the pipeline; the roles live in fwd_producer.cuh (loads),
// fwd_consumer.cuh (products and softmax) and fwd_epilogue.cuh (O and LSE out).
//
// Built for sm_90a only: wgmma and setmaxnreg exist nowhere else.
#pragma once

#include <cmath>

#include "06_hopper/fwd_consumer.cuh"
#include "common/check.cuh"

namespace flashlab::cuda::hopper_fwd {

// Threads: a producer warpgroup and two consumer warpgroups, or the two consumers alone.
template <unsigned kIdeas>
constexpr int kThreads = ideas_of(kIdeas).warp_specialized ? 384 : 256;

// Registers per thread after setmaxnreg: the producer keeps what issuing copies needs (more for
// cp.async, whose addresses the threads compute), the consumers share the rest. 128 x 24 +
// 256 x 240 = 64512 of the 65536 registers of an SM.
template <unsigned kIdeas>
constexpr uint32_t kProducerRegs = ideas_of(kIdeas).tma ? 24 : 40;
template <unsigned kIdeas>
constexpr uint32_t kConsumerRegs = ideas_of(kIdeas).tma ? 240 : 232;

template <class T, int D, bool kCausal, unsigned kIdeaBits>
__global__ void __launch_bounds__(kThreads<kIdeaBits>, 1)
    fwd_kernel(const __grid_constant__ FwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr FwdIdeas kIdeas = ideas_of(kIdeaBits);
  static_assert(kIdeas.tma || kIdeas.warp_specialized,
                "cp.async loads need the producer warpgroup");
  using Tr = FwdTraits<D>;
  constexpr int Br = Tr::Br, kStages = Tr::kStages;
  extern __shared__ unsigned char smem_raw[];
  const Smem<T, D> sm(smem_raw);
  const int q_block = kIdeas.heavy_first ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int head = blockIdx.y;
  const BlockSchedule sc = block_schedule<Br, Tr::Bc, kCausal>(p, q_block);

  if (sc.n_kv == 0) {  // causal, Nq > Nk: no row of this block sees a key. O = 0, LSE = -inf.
    T* O = static_cast<T*>(p.o) + static_cast<int64_t>(head) * p.Nq * D;
    for (int i = threadIdx.x; i < Br * D / 2; i += blockDim.x) {
      const int r = sc.q0 + i / (D / 2);
      if (r < p.Nq) reinterpret_cast<uint32_t*>(O + static_cast<int64_t>(r) * D)[i % (D / 2)] = 0;
    }
    for (int r = threadIdx.x; r < Br; r += blockDim.x)
      if (sc.q0 + r < p.Nq) p.lse[static_cast<int64_t>(head) * p.Nq + sc.q0 + r] = -INFINITY;
    return;
  }

  using L = Loader<T, D, kIdeaBits>;
  if (threadIdx.x == 0) {
    sm90::mbar_init(sm.q_full, L::kFullArrivals);
    for (int s = 0; s < kStages; ++s) {
      sm90::mbar_init(sm.k_full + s, L::kFullArrivals);
      sm90::mbar_init(sm.v_full + s, L::kFullArrivals);
      sm90::mbar_init(sm.k_empty + s, 256);  // every consumer thread releases
      sm90::mbar_init(sm.v_empty + s, 256);
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
    if (wg == 0) {  // the producer warpgroup
      sm90::setmaxnreg_dec<kProducerRegs<kIdeaBits>>();
      const L loader{p, sm, sc, head, t};
      if (kIdeas.tma && t != 0) return;  // one thread issues every bulk copy
      loader.load_q();
      for (int it = 0; it < sc.n_kv; ++it) {
        loader.load_k(it);
        loader.load_v(it);
      }
      return;
    }
    sm90::setmaxnreg_inc<kConsumerRegs<kIdeaBits>>();
    Consumer<T, D, kCausal, kIdeaBits> c{p, sm, sc, head, wg - 1, t, nullptr};
    c.run();
  } else {
    // No producer: thread 0 fills the ring ahead, then refills each stage as it is released.
    const L loader{p, sm, sc, head, t};
    if (threadIdx.x == 0) {
      loader.load_q();
      for (int it = 0; it < kStages && it < sc.n_kv; ++it) {
        loader.load_k(it);
        loader.load_v(it);
      }
    }
    Consumer<T, D, kCausal, kIdeaBits> c{
        p, sm, sc, head, wg, t, threadIdx.x == 0 ? &loader : nullptr};
    c.run();
  }
#endif
}

template <class T, int D, bool kCausal, unsigned kIdeas>
void launch_fwd(const FwdParams& p, int heads, cudaStream_t stream) {
  constexpr int kSmem = SmemLayout<D>::kLaunchBytes;
  auto* kernel = &fwd_kernel<T, D, kCausal, kIdeas>;
  // More than 48 KiB of dynamic shared memory must be asked for, once per kernel.
  static const bool smem_raised = [kernel] {
    FLASHLAB_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    return true;
  }();
  (void)smem_raised;
  const dim3 grid((p.Nq + FwdTraits<D>::Br - 1) / FwdTraits<D>::Br, heads);
  kernel<<<grid, kThreads<kIdeas>, kSmem, stream>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda::hopper_fwd
