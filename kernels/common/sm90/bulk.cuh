// Bulk copies, sm_90: the copy engine moves a contiguous run of bytes between shared and global
// memory for one issuing thread, and stmatrix stores fragments from registers to shared memory.
//
// cp.async.bulk copies; its .reduce form adds fp32 into global memory at L2 instead of storing.
// Completion is tracked per issuing thread in bulk groups (commit, then wait). Shared memory
// written by ordinary stores must be fenced for the engine (fence_proxy_async) before a barrier,
// after which one thread may issue the copy. Where the engine's global writes are handed to another
// CTA by an ordinary release and acquire (hopper-deterministic's turns), both sides fence the
// global async proxy (fence_proxy_async_global) next to them. Only sm_90 code may call these.
// (Tensor copies, with a tensor map, are in tma.cuh.) Beside them, the vector form of the plain
// fp32 reduction, for a kernel that adds from registers where a staged bulk copy does not fit.
#pragma once

#include <cstdint>

namespace flashlab::cuda::sm90 {

__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
// global[0 .. bytes) += shared[0 .. bytes), fp32 (bytes a multiple of 16, both ends 16-aligned).
__device__ __forceinline__ void bulk_reduce_add_f32(float* gmem, uint32_t smem, uint32_t bytes) {
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(gmem),
      "r"(smem), "r"(bytes)
      : "memory");
}
// global[0, 1] += (x, y), fp32: one reduction at L2 for a pair (gmem 8-byte aligned).
__device__ __forceinline__ void red_add_f32x2(float* gmem, float x, float y) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(gmem), "f"(x), "f"(y) : "memory");
}
// global[0 .. bytes) = shared[0 .. bytes).
__device__ __forceinline__ void bulk_store(float* gmem, uint32_t smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gmem),
               "r"(smem), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// This thread's bulk copies have finished reading shared memory (it may be overwritten): all of
// them, or all but the kPending groups committed last.
template <int kPending = 0>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
// This thread's bulk copies are complete: their global writes are done.
__device__ __forceinline__ void bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// The inverse of ldmatrix_x4 (sm_90): four 8x8 matrices from registers to shared memory; lane l
// supplies the row address of matrix l/8, row l%8, and register r of every lane holds its two
// elements of matrix r -- the same places an A fragment's registers a0..a3 take.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
}

}  // namespace flashlab::cuda::sm90
