// The bulk tensor copy engine (TMA, sm_90): one thread asks for a whole tile and the hardware
// moves it between global and shared memory, computing addresses, applying the shared-memory
// swizzle and clipping at the tensor's edges on its own.
//
// A copy is described by a tensor map (a 128-byte CUtensorMap made on the host, see
// tensor_map.h) and the coordinates of the tile's first element. Loads complete on an mbarrier
// that was armed with the number of bytes to expect (the whole box, also where the box reaches
// past the tensor's end: those elements arrive as zeros). Stores complete in bulk groups of the
// issuing thread, like the plain bulk copies in bulk.cuh.
//
// The map must stay in parameter (or constant) memory: it is passed to the kernel as a
// `const __grid_constant__` parameter and its generic address handed to the instruction.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/sm90/sync.cuh"

namespace flashlab::cuda::sm90 {

__device__ __forceinline__ uint64_t map_addr(const CUtensorMap* map) {
  return reinterpret_cast<uint64_t>(map);
}

// Fetches the map into the cache ahead of its first use.
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map_addr(map)) : "memory");
}

// ---- tensor maps made on the device (a packed batch's maps per sequence) ---------------------
//
// A map in global memory can be written by ordinary (generic) stores: a copy of a map made on the
// host, then single fields replaced in place. The copy engine reads maps through its own proxy,
// so the writer ends with a release fence and every thread that issues copies with the map does
// an acquire fence on it first (PTX ISA: tensormap.replace, fence.proxy.tensormap::generic).
// `dst` is 128-byte aligned.
__device__ __forceinline__ void tensormap_set_address(CUtensorMap* dst, const void* base) {
  asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;\n" ::"l"(dst),
               "l"(base)
               : "memory");
}
// The extent of dimension 1 (the rows of the lab's 3-d maps).
__device__ __forceinline__ void tensormap_set_rows(CUtensorMap* dst, int rows) {
  asm volatile("tensormap.replace.tile.global_dim.global.b1024.b32 [%0], 1, %1;\n" ::"l"(dst),
               "r"(rows)
               : "memory");
}
// The writer's side: its maps' stores before any later use of them by the copy engine.
__device__ __forceinline__ void tensormap_release() {
  asm volatile("fence.proxy.tensormap::generic.release.gpu;\n" ::: "memory");
}
// The user's side, per map, before its first copy.
__device__ __forceinline__ void tensormap_acquire(const CUtensorMap* map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(map_addr(map))
               : "memory");
}

// Box at (c0, c1, c2) of a 3-d tensor -> shared memory at `dst`; completes on `bar`.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(smem_addr(dst)),
      "l"(map_addr(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar))
      : "memory");
}

// `bytes` contiguous bytes of global memory -> shared memory at `dst` (no tensor map: the plain
// bulk copy); completes on `bar` like a tensor load. Addresses and size are multiples of 16.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
// Shared memory at `src` -> box at (c0, c1, c2); elements past the tensor's end are not written.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, int c0, int c1, int c2,
                                             const void* src) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::
          "l"(map_addr(map)),
      "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(src))
      : "memory");
}

// A store completes in the issuing thread's bulk group: bulk_commit(), then bulk_wait_read()
// before the shared memory is written again (bulk.cuh).

// ---- the same tiles without the copy engine (for the ablation) ---------------------------------
//
// Without the copy engine the tiles come by cp.async (cp_async_16 in mma.cuh, zero-filled past the
// end), and this makes the barrier wait for them: an arrival on `bar` once all of this thread's
// earlier cp.async copies have landed. With .noinc the arrival is one of the barrier's expected
// arrivals, so the barrier is initialised with one per thread.
__device__ __forceinline__ void cp_async_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar))
               : "memory");
}

}  // namespace flashlab::cuda::sm90
