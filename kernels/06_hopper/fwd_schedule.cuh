// Where one block's tiles live in shared memory, and which named barriers its warpgroups use.
// The order of its tiles is schedule.h's (shared with the CPU twin).
//
// Shared memory (every tile 1024-byte aligned, as the 128-byte swizzle requires):
//   Q     [D/64][Br][64]              loaded once; each consumer warpgroup reads its 64 rows, and
//                                     writes its O rows back into them for the bulk store
//   K     [kStages][D/64][Bc][64]     ring of K tiles
//   V     [kStages][D/64][Bc][64]     ring of V tiles
//   bars  q_full, k_full[s], k_empty[s], v_full[s], v_empty[s]
#pragma once

#include <cstdint>

#include "06_hopper/fwd_params.h"
#include "06_hopper/schedule.h"

namespace flashlab::cuda::hopper_fwd {

// Named barrier ids (0 is __syncthreads): kTurnBarrier + w is "consumer warpgroup w's turn on the
// tensor cores" (256 threads meet: the 128 of w syncing, the 128 of the other arriving);
// kEpilogueBarrierId + w gathers the 128 threads of warpgroup w for its epilogue.
constexpr uint32_t kTurnBarrier = 1;
constexpr uint32_t kEpilogueBarrierId = 3;

using ::flashlab::hopper::BlockSchedule;

template <int Br, int Bc, bool kCausal>
__device__ BlockSchedule block_schedule(const FwdParams& p, int q_block) {
  return ::flashlab::hopper::block_schedule(Br, Bc, kCausal, p.Nq, p.Nk, p.causal_offset, q_block);
}

template <int D>
struct SmemLayout {
  using Tr = FwdTraits<D>;
  static constexpr int kQBytes = Tr::Br * D * 2;
  static constexpr int kTileBytes = Tr::Bc * D * 2;  // one K or V stage
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kQBytes;
  static constexpr int kV = kK + Tr::kStages * kTileBytes;
  static constexpr int kBars = kV + Tr::kStages * kTileBytes;
  static constexpr int kBytes = kBars + (1 + 4 * Tr::kStages) * 8;
  static constexpr int kLaunchBytes = kBytes + 1024;  // room to align the base to 1024 bytes
  static_assert(kK % 1024 == 0 && kV % 1024 == 0 && kTileBytes % 1024 == 0, "1024-byte tiles");
};

// Pointers into one block's shared memory.
template <class T, int D>
struct Smem {
  using L = SmemLayout<D>;
  T* q;
  T* k;  // stage s at k + s * Bc * D
  T* v;
  uint64_t* q_full;
  uint64_t* k_full;
  uint64_t* k_empty;
  uint64_t* v_full;
  uint64_t* v_empty;

  __device__ explicit Smem(unsigned char* raw) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
    unsigned char* base = raw + ((1024 - (a & 1023)) & 1023);
    q = reinterpret_cast<T*>(base + L::kQ);
    k = reinterpret_cast<T*>(base + L::kK);
    v = reinterpret_cast<T*>(base + L::kV);
    constexpr int S = FwdTraits<D>::kStages;
    q_full = reinterpret_cast<uint64_t*>(base + L::kBars);
    k_full = q_full + 1;
    k_empty = k_full + S;
    v_full = k_empty + S;
    v_empty = v_full + S;
  }
};

}  // namespace flashlab::cuda::hopper_fwd
