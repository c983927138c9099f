// Hopper's synchronisation primitives, as thin wrappers over their PTX (sm_90).
//
// mbarrier: a 64-bit object in shared memory that counts arrivals and, optionally, bytes. It has
// a phase bit that flips each time the expected arrivals (and bytes) have all come in. A waiter
// asks "has the phase with parity P completed?", so a ring of stages is driven by two barriers
// per stage and a parity that flips whenever the ring wraps:
//
//   producer                                       consumer
//   wait empty[s] (parity ^ 1)  <-- stage free --  arrive empty[s]   (after reading stage s)
//   arm full[s] with the bytes, start the copy --> wait full[s] (parity)
//
// A fresh barrier is in phase 0, so waiting for parity 1 passes at once: the producer's first
// lap over the ring does not wait for releases nobody has made yet.
//
// Named barriers (bar.sync / bar.arrive with an id 1..15) let subsets of a block meet without
// __syncthreads (id 0): bar.sync waits until `count` threads have arrived (itself included),
// bar.arrive counts itself and goes on. That asymmetry is what lets two warpgroups take turns.
//
// setmaxnreg moves registers between warpgroups at run time: the producer gives most of its
// registers back, the consumers take them. It needs a register cap at entry (launch bounds with
// a minimum of 1 block) and is executed by all threads of a warpgroup.
#pragma once

#include <cstdint>

#include "common/sm80/mma.cuh"  // smem_addr

namespace flashlab::cuda::sm90 {

// ---- mbarrier ----------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals)
               : "memory");
}

// Makes the initialised barriers visible to the copy engine and the other threads; follow with a
// block-wide barrier before anyone uses them.
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival, and `bytes` more expected from asynchronous copies in this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// Returns once the phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_addr(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}

// ---- named barriers -----------------------------------------------------------------------------

__device__ __forceinline__ void named_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- registers ----------------------------------------------------------------------------------

template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

template <uint32_t kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// A counter another CTA waits on: read with acquire (this thread then sees every write the
// releasing thread made before its release), written with release. GPU scope.
__device__ __forceinline__ int load_acquire(const int* at) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(at) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(int* at, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;\n" ::"l"(at), "r"(v) : "memory");
}

}  // namespace flashlab::cuda::sm90
