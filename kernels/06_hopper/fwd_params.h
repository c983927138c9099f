// What the Hopper forward's host side and its kernels share: the parameters, the block shape per
// head dim, and the switches of the ablation (each Hopper idea can be turned off at compile time).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

namespace flashlab::cuda::hopper_fwd {

// One [B*H, N, d] problem. The tensor maps describe Q, K, V and O for the bulk tensor copy engine
// (3-d: columns, rows, heads; boxes of 64 columns); the raw pointers serve the variants of the
// ablation that load with cp.async or store O from registers.
struct FwdParams {
  CUtensorMap q_map, k_map, v_map, o_map;
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  int Nq, Nk;
  int causal_offset;  // Nk - Nq: query i sees keys j <= i + causal_offset
  float scale_log2;   // softmax scale * log2(e)
};

// Block shape per head dim. Br query rows per block = 64 per consumer warpgroup; Bc keys per K/V
// tile; kStages tiles of K and of V in flight.
template <int D>
struct FwdTraits;

template <>
struct FwdTraits<64> {
  static constexpr int Br = 128, Bc = 128, kStages = 2;
};

template <>
struct FwdTraits<128> {
  static constexpr int Br = 128, Bc = 128, kStages = 2;
};

// The Hopper ideas of this rung, each a compile-time switch (the ablation turns one off at a
// time; the rung itself has all of them on).
struct FwdIdeas {
  bool tma =
      true;  // 1. tiles by the bulk tensor copy engine (off: cp.async by the producer warpgroup)
  bool async_wgmma =
      true;  // 2. products waited for only when their result is needed (off: at once)
  bool warp_specialized =
      true;              // 3. a producer warpgroup loads, setmaxnreg (off: a consumer thread loads)
  bool pingpong = true;  // 4. the two consumer warpgroups take turns on the tensor cores
  bool intra_overlap =
      true;  // 5. softmax of block j while S = Q K_{j+1}^T runs (off: S, softmax, P V in turn)
  bool tma_epilogue =
      true;  // 6a. O through shared memory and a bulk tensor store (off: from registers)
  bool heavy_first = true;  // 6b. causal: the Q blocks with the most keys start first
};

// Kernels take the ideas as a bit set (one bit per field, in order): nvcc's host stubs cannot
// spell a class-type template argument.
constexpr unsigned bits_of(FwdIdeas i) {
  return unsigned(i.tma) | unsigned(i.async_wgmma) << 1 | unsigned(i.warp_specialized) << 2 |
         unsigned(i.pingpong) << 3 | unsigned(i.intra_overlap) << 4 |
         unsigned(i.tma_epilogue) << 5 | unsigned(i.heavy_first) << 6;
}
constexpr FwdIdeas ideas_of(unsigned b) {
  return {(b & 1) != 0,  (b & 2) != 0,  (b & 4) != 0, (b & 8) != 0,
          (b & 16) != 0, (b & 32) != 0, (b & 64) != 0};
}

inline constexpr unsigned kAllIdeas = bits_of(FwdIdeas{});

// The ablation's variants: the rung with one idea switched off (instantiated for bf16, d = 128).
inline constexpr unsigned kWithoutTma = bits_of({.tma = false});
inline constexpr unsigned kWithoutAsyncWgmma = bits_of({.async_wgmma = false});
inline constexpr unsigned kWithoutWarpSpecialization = bits_of({.warp_specialized = false});
inline constexpr unsigned kWithoutPingpong = bits_of({.pingpong = false});
inline constexpr unsigned kWithoutIntraOverlap = bits_of({.intra_overlap = false});
inline constexpr unsigned kWithoutTmaEpilogue = bits_of({.tma_epilogue = false});
inline constexpr unsigned kWithoutHeavyFirst = bits_of({.heavy_first = false});

template <class T, int D, bool kCausal, unsigned kIdeas>
void launch_fwd(const FwdParams& p, int heads, cudaStream_t stream);

}  // namespace flashlab::cuda::hopper_fwd
