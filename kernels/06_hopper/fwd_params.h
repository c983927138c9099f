// What the Hopper forward's host side and its kernels share: the parameters, the block shape per
// head dim, and the switches of the ablation (each Hopper idea can be turned off at compile time).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd {

// One problem: Q, O [B*H, Nq, d], K, V [B*Hkv, Nk, d] (query head h reads K/V head h / group).
// The tensor maps describe Q, K, V and O for the bulk tensor copy engine (3-d: columns, rows,
// heads; boxes of 64 columns); the raw pointers serve the variants of the ablation that load with
// cp.async or store O from registers.
struct FwdParams {
  CUtensorMap q_map, k_map, v_map, o_map;
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  int Nq, Nk;
  int group;                  // query heads per K/V head
  int band_left, band_right;  // the keys row i sees: [i + offset - left, i + offset + right]
  int causal_offset;          // Nk - Nq: query i sees keys j <= i + causal_offset
  float scale_log2;           // softmax scale * log2(e)
  int q_blocks;               // ceil(Nq / Br): tiles per head
  int tiles;                  // q_blocks * B * H: the (head, Q block) tiles of the problem
  int* tile_counter;  // the dynamic tile order's counter (in the workspace), zeroed before launch
  // A packed batch only (the kernels of kPackedBatch; common/packed.h): the offsets, and what
  // the map kernel (seq_maps.cuh) wrote into the workspace before the launch: sequence b's
  // tensor maps (q, k, v, o) at seq_maps[4 b ..], clipped at its last row; the sequences in the
  // order their tiles are numbered (most keys first) and where each one's tiles start.
  const int32_t* cu_q = nullptr;
  const int32_t* cu_k = nullptr;
  const CUtensorMap* seq_maps = nullptr;
  const int* seq_order = nullptr;   // [B]
  const int* tile_start = nullptr;  // [B + 1], in seq_order's order
  int B = 0;
  int total_q = 0;  // LSE is [H, total_q]
  int heads = 0;    // H (query heads): the row stride of Q and O is H d
};

// Block shape per head dim and mask. Br query rows per block, 64 per consumer warpgroup; Bc keys
// per K/V tile; kStages tiles of K and of V in flight. Every block shape is persistent (one block
// per SM walking many tiles, so that one tile's epilogue overlaps the next one's loads); kDynamic:
// the tiles after a block's first are taken from a counter in global memory in index order, not
// in a fixed stride. The choices are measured (docs/perf.md, Hopper forward steps):
//   - d = 64: three consumer warpgroups (192 rows), so that two of them do their softmax while
//     the third has the tensor cores: at d = 64 the exponentials take about as long as the
//     products (+14 % at N = 4096 causal, +20 % at N = 16384 non-causal, against two).
//   - causal tiles differ in length (the diagonal), so blocks walking a fixed stride drift apart
//     over many heads and their K, V no longer fit in L2 (d = 128, N = 16384: 432 against 686
//     TFLOP/s for one block per tile); taking the next tile from a counter keeps the blocks in
//     flight on neighbouring tiles, as the hardware's order of one block per tile does.
//     Non-causal tiles are all alike: a fixed stride.
//   - kPingpong: the consumer warpgroups take turns on the tensor cores (idea 4), except at
//     d = 128 under the causal mask, where two warpgroups issuing whenever they are ready run
//     2.3-3.6 % faster at every N (at d = 64 the turns are worth 2.4-7 %).
//   - kIdlePadding: under the causal mask a warpgroup whose 64 rows are all padding (above row 0
//     in a head's first block: schedule.h) skips its products. At d = 64 (Br = 192) that is one
//     warpgroup or two of the first block whenever Nq is not a multiple of 192 (+1.2 % at N =
//     1024); at d = 128 only when Nq mod 128 is 1..64, and there the branch cost 1.8 % on every
//     causal shape, so it is left out.
//   - kQBuffers: Q tiles in flight, so that the next tile's Q lands while this one's last
//     products run (two); kOStage: how O reaches the bulk store (OStage below).
//   - d = 256: a 64 x 256 O accumulator is 128 registers a thread, so key tiles of 80 (S 40, P
//     20: 188 with O) where d = 128 takes 128, and 64 under the causal mask (at 80 its masks
//     spilled 28 bytes, 76 with a window's left side). Q alone is 64 KiB: one Q buffer. Without
//     the mask two stages of K and V (80 KiB each) and Q fill the 227 KiB a block may have, and
//     O leaves through Q's buffer; with it (stages of 32 KiB) 32 KiB remain, two slots of 64 x
//     64 per warpgroup, and Q is released after the tile's last S, so the next tile's Q lands
//     while this one's epilogue runs (causal tiles are short: that wait costs more there).
//
// Where O is staged on its way to the bulk store:
//   tile   a tile of its own, Br x D: each warpgroup writes its rows and stores them at once;
//   in_q   the Q buffer its rows came from, once the tile's last S has read it: the buffer is
//          released to the producer after the store has read O (one thread per warpgroup);
//   slots  kOSlots slots of 64 x 64 per warpgroup: the warpgroup writes O's 64-column blocks in
//          turn, each slot reused once the store issued from it kOSlots blocks before has read it.
enum class OStage { tile, in_q, slots };

template <int D, bool kCausal>
struct FwdTraits;

template <bool kCausal>
struct FwdTraits<64, kCausal> {
  static constexpr int Br = 192, Bc = 128, kStages = 2;
  // How far a row's max may pass its reference before O is rescaled (log2 units; 0: at every
  // block, as the online softmax does). Not at d = 64: there a first form of the lagging
  // reference spilled 8 bytes in six causal kernels (160 registers a thread), with the polynomial
  // exponentials tried then in the same kernels (docs/perf.md).
  static constexpr float kMaxLagLog2 = 0.f;
  static constexpr int kConsumers = Br / 64;
  static constexpr bool kDynamic = kCausal;
  static constexpr bool kPingpong = true;
  static constexpr bool kIdlePadding = kCausal;
  static constexpr int kQBuffers = 2;
  static constexpr OStage kOStage = OStage::tile;
  static constexpr int kOSlots = 0;
};

template <bool kCausal>
struct FwdTraits<128, kCausal> {
  static constexpr int Br = 128, Bc = 128, kStages = 2;
  // A row's reference max moves only when its max passes it by more than 8 (log2 units, FA4's
  // rule): P stays at most 2^8, and O is rescaled only in the blocks where some row moved.
  static constexpr float kMaxLagLog2 = 8.f;
  static constexpr int kConsumers = Br / 64;
  static constexpr bool kDynamic = kCausal;
  static constexpr bool kPingpong = !kCausal;
  static constexpr bool kIdlePadding = false;
  static constexpr int kQBuffers = 2;
  static constexpr OStage kOStage = OStage::tile;
  static constexpr int kOSlots = 0;
};

template <bool kCausal>
struct FwdTraits<256, kCausal> {
  static constexpr int Br = 128, Bc = kCausal ? 64 : 80, kStages = 2;
  // A row's reference max moves only when its max passes it by more than 8 (log2 units, FA4's
  // rule): P stays at most 2^8, and O is rescaled only in the blocks where some row moved.
  static constexpr float kMaxLagLog2 = 8.f;
  static constexpr int kConsumers = Br / 64;
  static constexpr bool kDynamic = kCausal;
  static constexpr bool kPingpong = true;
  static constexpr bool kIdlePadding = false;
  static constexpr int kQBuffers = 1;
  static constexpr OStage kOStage = kCausal ? OStage::slots : OStage::in_q;
  static constexpr int kOSlots = kCausal ? 2 : 0;
};

// The Hopper ideas of this rung, each a compile-time switch (the ablation turns one off at a
// time; the rung itself has all of them on).
struct FwdIdeas {
  // 1. Tiles by the bulk tensor copy engine (off: cp.async by the producer warpgroup).
  bool tma = true;
  // 2. Products waited for only when their result is needed (off: as soon as issued).
  bool async_wgmma = true;
  // 3. A producer warpgroup loads, setmaxnreg (off: a consumer thread loads as stages free up).
  bool warp_specialized = true;
  // 4. The consumer warpgroups take turns on the tensor cores (where the traits' kPingpong
  //    says they gain by it).
  bool pingpong = true;
  // 5. Softmax of block j while S = Q K_{j+1}^T runs (off: S, softmax, P V in turn).
  bool intra_overlap = true;
  // 6a. O through shared memory and a bulk tensor store (off: stored from registers).
  bool tma_epilogue = true;
  // 6b. Causal: the Q blocks with the most keys start first.
  bool heavy_first = true;
  // 6c. One block per SM walks many tiles, so one tile's epilogue overlaps the next one's loads
  //     (off: one block per tile); causal: in the order of a tile counter (the traits' kDynamic).
  bool persistent = true;
};

// Kernels take the ideas as a bit set (one bit per field, in order): nvcc's host stubs cannot
// spell a class-type template argument.
constexpr unsigned bits_of(FwdIdeas i) {
  return unsigned(i.tma) | unsigned(i.async_wgmma) << 1 | unsigned(i.warp_specialized) << 2 |
         unsigned(i.pingpong) << 3 | unsigned(i.intra_overlap) << 4 |
         unsigned(i.tma_epilogue) << 5 | unsigned(i.heavy_first) << 6 | unsigned(i.persistent) << 7;
}
constexpr FwdIdeas ideas_of(unsigned b) {
  return {(b & 1) != 0,  (b & 2) != 0,  (b & 4) != 0,  (b & 8) != 0,
          (b & 16) != 0, (b & 32) != 0, (b & 64) != 0, (b & 128) != 0};
}

inline constexpr unsigned kAllIdeas = bits_of(FwdIdeas{});

// Not an idea but a bit of the same set, above the ideas' eight: the consumers also test the left
// side of the band (a window with a left bound: its blocks' tail needs a mask, schedule.h). Only
// the kernels of kCausal = true (every banded problem) take it; the causal mask alone runs without
// it, whose extra compares cost the d = 64 kernel 12 bytes of spill.
inline constexpr unsigned kLeftSide = 1u << 8;

// A bit of the same set too: the kernel takes a packed batch (FwdParams' packed fields). Only
// with every idea on (kAllIdeas): its loads and stores are all bulk tensor copies.
inline constexpr unsigned kPackedBatch = 1u << 9;

// The ablation's variants: the rung with one idea switched off (instantiated for bf16, d = 128).
inline constexpr unsigned kWithoutTma = bits_of({.tma = false});
inline constexpr unsigned kWithoutAsyncWgmma = bits_of({.async_wgmma = false});
inline constexpr unsigned kWithoutWarpSpecialization = bits_of({.warp_specialized = false});
inline constexpr unsigned kWithoutPingpong = bits_of({.pingpong = false});
inline constexpr unsigned kWithoutIntraOverlap = bits_of({.intra_overlap = false});
inline constexpr unsigned kWithoutTmaEpilogue = bits_of({.tma_epilogue = false});
inline constexpr unsigned kWithoutHeavyFirst = bits_of({.heavy_first = false});
inline constexpr unsigned kWithoutPersistent = bits_of({.persistent = false});

// Launches the kernel over p.tiles tiles: one block per tile, or one per SM (at most) when
// persistent.
template <class T, int D, bool kCausal, unsigned kIdeas>
void launch_fwd(const FwdParams& p, cudaStream_t stream);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
