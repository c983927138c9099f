// Which Q blocks a block of the backward walks and in which order, where its tiles live in shared
// memory, and which named barriers its consumer warpgroups use.
//
// Q blocks: block (j, kv head) owns K block j of a K/V head and visits the Q blocks that see any of
// its keys, from the first (at the causal diagonal or a window's right side, 0 without either) to
// the last (at a window's left side, the last Q block without one), in each query
// head of its group (grouped heads: H / Hkv query heads read one K/V head); hopper walks the Q
// blocks upwards, hopper-deterministic downwards (QRange says why), and the group's heads turn
// fastest.
//
// Shared memory, in the order it is laid out (every 16-bit tile in 64-column blocks of 128-byte
// swizzled rows, 1024-aligned):
//   K, V        [D/64][Bc][64]             once per block; later dK, dV on their way out
//   Q, dO       [kStages][D/64][Br][64]    a ring of stages, one Q block each
//   dS^T        [kDsBuffers][Br/64][Bc][64]  the step's dS^T, read by both warpgroups' dQ
//                                          products (step n's in buffer n % kDsBuffers)
//   P^T         [Bc][64]                   d = 256 only (kSplitD): the step's P^T, both warpgroups'
//   dP^T - D    [Bc Br] fp32               d = 256 only: from warpgroup 1 to 0, thread-major
//   dQ staging  [2][Br][D] fp32            d = 64, 128: columns permuted as in the accumulator
//                                          (sm80/tiles.cuh)
//   LSE2, D     [kStages][Br] fp32         LSE2_i and D_i of each stage's Q block
//   barriers    kv_full, q_full[s], q_empty[s], dq_full[2], dq_empty[2] (the dQ writer's: d = 64,
//               128)
//   place       a packed batch's block: its sequence, K block, K/V head, band and rows (BlockPlace)
// Tiles of 224 KiB at d = 128, 192 KiB at d = 64 and 224 KiB at d = 256; LSE2, D and the
// barriers add about 1 KiB (d = 128, 256) and 2 KiB (d = 64).
#pragma once

#include <cstdint>

#include "bwd_params.h"
#include "common/band.h"
#include "common/fa2_bwd/params.h"
#include "common/packed.h"
#include "common/sm80/tiles.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

// Named barriers (0 is __syncthreads): the 256 consumer threads meet when dS^T is whole in shared
// memory, and when both warpgroups' dQ products are done with it (d = 64: every step, before the
// next step rewrites it; d = 128, whose steps take turns on two buffers: once, before the epilogue
// writes over K_j); each consumer warpgroup gathers for its epilogue.
constexpr uint32_t kDsReady = 1;
constexpr uint32_t kDsFree = 2;
constexpr uint32_t kEpilogue = 3;  // + w
// d = 256 (bwd_consumer_split_d.cuh): warpgroup 1's dP^T - D is in shared memory.
constexpr uint32_t kDpReady = 5;

template <int D>
struct BwdLayout {
  using Tr = BwdTraits<D>;
  static constexpr int Br = Tr::Br, Bc = Tr::Bc, S = Tr::kStages;
  static constexpr int kKV = Bc * D * 2;  // bytes of one K or V tile
  static constexpr int kQ = Br * D * 2;   // one Q or dO stage
  static constexpr int kK = 0;
  static constexpr int kV = kK + kKV;
  static constexpr int kQs = kV + kKV;
  static constexpr int kdOs = kQs + S * kQ;
  static constexpr int kdS = kdOs + S * kQ;
  static constexpr int kPt = kdS + Tr::kDsBuffers * Bc * Br * 2;
  static constexpr int kdP = kPt + (Tr::kSplitD ? Bc * Br * 2 : 0);
  static constexpr int kdQ = kdP + (Tr::kSplitD ? Bc * Br * 4 : 0);
  static constexpr int kLse2 = kdQ + (Tr::kSplitD ? 0 : 2 * Br * D * 4);
  static constexpr int kD = kLse2 + S * Br * 4;
  static constexpr int kBars = kD + S * Br * 4;
  static constexpr int kPlace = kBars + (1 + 2 * S + 4) * 8;
  static constexpr int kBytes = kPlace + 64;
  static constexpr int kLaunchBytes = kBytes + 1024;  // room to align the base to 1024 bytes
  static_assert(kKV % 1024 == 0 && kQ % 1024 == 0 && (Bc * Br * 2) % 1024 == 0, "1024-byte tiles");
  static_assert(kLaunchBytes <= 227 * 1024, "more shared memory than a block can have");
};

// Where a packed batch's block works, worked out once by thread 0 (bwd_kernel.cuh: place_packed) and
// read from shared memory where it is used, so that no thread holds it in registers across its
// loop. A dense block's are the problem's: the kernel reads them from the parameters.
struct BlockPlace {
  Band band;    // its sequence's band (common/packed.h: seq_band)
  int j;        // K block, within the sequence
  int kv_head;  // K/V head
  int seq;      // the sequence: its maps are seq_maps[kSeqMaps seq ..]
  int q0;       // the sequence's first query token: its rows of the dQ accumulator
  int lse0;     // its first row of LSE2 and D in a head (bwd_packed_lse_start)
  int qb0;      // its first Q block of the turn counters in a head (packed_turn_block)
};
static_assert(sizeof(BlockPlace) <= 64, "BwdLayout gives the place 64 bytes");

template <class T, int D>
struct BwdSmem {
  using L = BwdLayout<D>;
  unsigned char* base;
  uint64_t* kv_full;
  uint64_t* q_full;    // [kStages]
  uint64_t* q_empty;   // [kStages]
  uint64_t* dq_full;   // [2]
  uint64_t* dq_empty;  // [2]
  BlockPlace* place;

  __device__ explicit BwdSmem(unsigned char* raw) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
    base = raw + ((1024 - (a & 1023)) & 1023);
    kv_full = reinterpret_cast<uint64_t*>(base + L::kBars);
    q_full = kv_full + 1;
    q_empty = q_full + L::S;
    dq_full = q_empty + L::S;
    dq_empty = dq_full + 2;
    place = reinterpret_cast<BlockPlace*>(base + L::kPlace);
  }
  __device__ T* k() const { return reinterpret_cast<T*>(base + L::kK); }
  __device__ T* v() const { return reinterpret_cast<T*>(base + L::kV); }
  __device__ T* q(int s) const { return reinterpret_cast<T*>(base + L::kQs + s * L::kQ); }
  __device__ T* dO(int s) const { return reinterpret_cast<T*>(base + L::kdOs + s * L::kQ); }
  __device__ T* dS(int b = 0) const {
    return reinterpret_cast<T*>(base + L::kdS + b * L::Bc * L::Br * 2);
  }
  __device__ T* pt() const { return reinterpret_cast<T*>(base + L::kPt); }          // d = 256
  __device__ float* dp() const { return reinterpret_cast<float*>(base + L::kdP); }  // d = 256
  __device__ float* dq(int b) const {
    return reinterpret_cast<float*>(base + L::kdQ) + b * L::Br * D;
  }
  __device__ float* lse2(int s) const {
    return reinterpret_cast<float*>(base + L::kLse2) + s * L::Br;
  }
  __device__ float* d(int s) const { return reinterpret_cast<float*>(base + L::kD) + s * L::Br; }
};

// The Q blocks K block j visits: from the first that sees any of its keys to the last; hopper
// walks them upwards, hopper-deterministic downwards. Its K blocks take turns on each Q block in
// the order of j (within each dQ split: bwd_dq_writer.cuh), and walking down, every K block of a
// head reaches Q block i at the same step (the last block first, for all of them), so each turn
// comes right after the one before. Walking up, K block j would reach Q block i about j Bc / Br
// steps before K block 0 does (it starts at its diagonal) and wait for it there: under the causal
// mask that made the deterministic backward twice as slow (H200, bf16, N = 4096).
// With grouped heads, walking down, step n is Q block n / group of query head n % group of the
// group: the steps at which the K blocks of a K/V head reach (query head, Q block i) stay the same
// for all of them, as with one head.
// The producer and the dQ writer walk the steps with a QStep, counted on without a division (their
// threads have 24 registers, 32 in hopper-deterministic at d = 128; the consumers work the Q
// block out of the step count).
struct QStep {
  int i;  // Q block
  int h;  // query head of the group: 0 .. group - 1
};
// Walking down (hopper-deterministic) the heads turn fastest, so that the turns stay aligned;
// walking up (hopper) the Q blocks do, so that the blocks of one K/V head work on the Q, dO and dQ
// rows of one query head at a time and those stay in L2 (a group of 4 heads' rows at N = 16384 is
// 64 MiB, more than the 50 MiB of the H200's L2).
struct QRange {
  int begin, end;
  bool down;
  int group;  // query heads per K/V head
  __device__ int count() const { return (end - begin) * group; }
  __device__ QStep first() const { return {down ? end - 1 : begin, 0}; }
  // Step n, worked out by a division (the consumers, and the dQ writer).
  __device__ QStep at(int n) const {
    if (down) return {end - 1 - n / group, n % group};
    const int per_head = end - begin;
    return {begin + n % per_head, n / per_head};
  }
  __device__ QStep next(QStep s) const {
    if (down) return s.h + 1 < group ? QStep{s.i, s.h + 1} : QStep{s.i - 1, 0};
    return s.i + 1 < end ? QStep{s.i + 1, s.h} : QStep{begin, s.h + 1};
  }
};
template <int Br, int Bc, bool kDown>
__device__ QRange q_range(const Band& band, int group, int j) {
  const BlockRange r = band.q_blocks(j, Bc, Br);  // common/band.h: causal, window or neither
  return {r.begin, r.end > r.begin ? r.end : r.begin, kDown, group};
}

// What the roles read of their block's place: the problem's (a dense block: the parameters, no
// registers held) or the sequence's (a packed one: shared memory, BlockPlace).
template <bool kPacked>
struct Where {
  const BwdParams& p;
  const BlockPlace* place;
  __device__ const Band& band() const {
    if constexpr (kPacked)
      return place->band;
    else
      return p.b.band;
  }
  // The row of LSE2 and D, of the dQ accumulator, and the Q block of the turn counters, of Q
  // block i's first row in query head `head`.
  __device__ int64_t lse_row(int head, int i, int Br) const {
    return static_cast<int64_t>(head) * p.lse_head_rows + (kPacked ? place->lse0 : 0) + i * Br;
  }
  __device__ int64_t accum_row(int head, int i, int Br) const {
    return static_cast<int64_t>(head) * p.accum_head_rows + (kPacked ? place->q0 : 0) + i * Br;
  }
  __device__ int64_t turn_block(int head, int i) const {
    return static_cast<int64_t>(head) * p.turn_head_blocks + (kPacked ? place->qb0 : 0) + i;
  }
  // Tensor map m (SeqMap) of the block: the problem's, or the sequence's.
  __device__ const CUtensorMap* map(int m) const {
    if constexpr (kPacked) return p.seq_maps + kSeqMaps * place->seq + m;
    const CUtensorMap* const maps[kSeqMaps] = {&p.q_map, &p.do_map, &p.k_map,
                                               &p.v_map, &p.dk_map, &p.dv_map};
    return maps[m];
  }
};

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
