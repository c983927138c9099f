// FA2 backward, outer loop over K blocks (chapter 16.2): one CTA owns Bc keys of one K/V head,
// keeps K_j and V_j in shared memory and dK_j, dV_j in registers, and walks the Q blocks that see
// them: those of every query head that reads this K/V head (grouped heads: H / Hkv of them, one
// after the other), so dK_j and dV_j are the whole group's sums when they are stored.
// Shared by three versions through DqMode:
//
//   none   (recompute)         S, P, dV, dP, dS, dK        4 matmuls; dQ from another kernel
//   atomic (atomic-dq)         ... + dQ_i += dS K_j        5 matmuls; fp32 adds at L2 (see "dQ"
//                                                          below)
//   split  (deterministic-dq)  ... + split_s += dS K_j     5 matmuls; one writer per split
//                                                          element
//
// Grid: none and atomic launch one CTA per K block (grid.x = ceil(Nk/Bc)). split launches
// grid.x = nsplits (bwd_dq_splits: a few per head, enough to fill the GPU) and CTA s walks its
// K blocks one after another, snaking so that causal work evens out across the CTAs:
//
//   nsplits = 3, Tc = 8:   group g = 0      1        2
//                          CTA 0: j = 0  -> 5  ->  6      each K block: the whole body below,
//                          CTA 1: j = 1  -> 4  ->  7      dK_j, dV_j stored at its end;
//                          CTA 2: j = 2  -> 3             dQ partials into split s
//
// A CTA's K blocks increase, so the first of them that meets a Q block stores its partials into
// split s and the later ones add into them: j = s for every Q block the K block j = s meets, a
// later one only for the Q blocks below a window's left side (common/band.h). Each split element is only ever stored or added by one thread of one CTA,
// always in the same program order, so the sums are the same bits on every run.
//
// Per Q block i, in the paper's notation (S is Br x Bc; this kernel computes its transpose, so
// that rows are keys, like the rows of dK_j and dV_j that the CTA accumulates):
//
//   S^T  = K_j Q_i^T                  P^T = exp2(S^T * scale*log2e - LSE2_i)   (masked -> 0)
//   dP^T = V_j dO_i^T                 dS^T = P^T * (dP^T - D_i)
//   dV_j += P^T dO_i                  dK_j += dS^T Q_i
//   dQ_i += dS K_j
//
// Tiles and warps (Bc = 128 keys per K block, 8 warps; Br = 64 queries per step at d = 128, 128
// at d = 64; d = 256 below). Each product gets its own warp grid, so that every warp tile is at least 32 wide in
// both directions: a warp tile of m x n reads (m + n) / 16 ldmatrix.x4 fragments per 16-deep k
// step for m*n/128 mma's, so 32 x 32 reads 4 per 8 mma's and 32 x 64 reads 6 per 16, where the
// first layout of this kernel (each warp 16 keys across all 64 queries, and the whole d of its
// dK_j, dV_j rows) read 5 per 8 for S^T and dP^T and 4 to 6 per 8 for the other products.
//
//   S^T, dP^T (Bc x Br)        dV_j, dK_j (Bc x d)          dQ_i (Br x d): 2 x 4 at d = 128
//   keys x queries: 4 x 2      keys x d: 4 x 2              (shown), 4 x 2 at d = 64
//   +-----+-----+              +---------+---------+        +-----+-----+-----+-----+
//   | w0  | w4  |  32 x Br/2   | w0      | w4      |        | w0  | w2  | w4  | w6  |  32 x 32
//   | w1  | w5  |  each        | w1      | w5      |        | w1  | w3  | w5  | w7  |  each
//   | w2  | w6  |              | w2      | w6      |        +-----+-----+-----+-----+
//   | w3  | w7  |              | w3      | w7      |  32 x d/2 each, accumulated in registers
//   +-----+-----+              +---------+---------+  over the whole Q loop
//
// A warp's P^T and dS^T tiles are needed by the warps that own other d columns or other queries,
// so both go through shared memory, rounded to T once. dS^T is formed from the fp32 P^T, not
// from its rounded copy (as FA2 does): rounding P puts a relative error of up to 2^-8 (bf16) or
// 2^-11 (fp16) into every element of dS, which made dQ and dK 1.2x less accurate than FA2's. The
// price is registers: P^T stays in fp32 while dP^T is computed (32 floats a thread at d = 128, 64
// at d = 64, where the packed pairs took half). Two barriers per step: one when Q_i has landed
// (which also frees the buffers of step i-1), one when P^T and dS^T are written.
//
//   Shared memory: K_j, V_j, 2 x (Q_i, dO_i, LSE2_i, D_i) (cp.async one step ahead), P^T and
//   dS^T (Bc x Br each); all 16-bit tiles swizzled (conflict-free ldmatrix): 161 KiB at
//   d = 128 (Br = 64), 162 KiB at d = 64 (Br = 128). atomic and split add two fp32 dQ_i staging
//   blocks on sm_90 (2 x Br x d x 4 bytes = 64 KiB): 225 and 226 KiB of the 227 KiB allowed.
//
// Head dim 256 (blocks.h: Bc = 64, Br = 64; every warp grid 2 x 4). dK_j + dV_j of a 128-key block
// would be 2 x 128 x 256 fp32 = 256 registers a thread over 8 warps, more than a thread has; of a
// 64-key block, 128: the same as d = 128's 32 keys x d/2, here 32 keys x d/4 a warp.
//
//   S^T, dP^T (64 x 64)        dV_j, dK_j (64 x 256)        dQ_i (64 x 256)
//   keys x queries: 2 x 4      keys x d: 2 x 4              queries x d: 2 x 4
//   +---+---+---+---+          +----+----+----+----+        +----+----+----+----+
//   |w0 |w2 |w4 |w6 |          | w0 | w2 | w4 | w6 |        | w0 | w2 | w4 | w6 |
//   |w1 |w3 |w5 |w7 |          | w1 | w3 | w5 | w7 |        | w1 | w3 | w5 | w7 |
//   +---+---+---+---+          +----+----+----+----+        +----+----+----+----+
//   32 x 16 each: S^T, dP^T    32 x 64 each, in registers   32 x 64 each: 64 registers while
//   16 registers each          over the Q loop: 128         the dQ product runs (S^T, dP^T dead)
//
// Shared memory: K_j, V_j 32 KiB each, 2 x (Q_i, dO_i) 128 KiB, P^T and dS^T 8 KiB each, LSE2
// and D 1 KiB: 209 KiB. The two fp32 dQ_i staging blocks would add 128 KiB (one alone 64), so at
// d = 256 dQ goes from registers to dQ_accum with red.global.add on every GPU (v2.f32 on sm_90:
// one instruction per fragment pair, 32 a thread per step).
//
// Masking: only tiles that a row's band crosses (the causal diagonal, a window's sides) or the last
// (ragged) K block are masked, by
// a second copy of the softmax step; Q blocks that see none of the keys are never visited (the
// loop walks Band::q_blocks: from the causal diagonal or the window's right side to the window's
// left side), and a K block that no query sees skips its Q loop whole and stores zeros for
// dK_j, dV_j. Padding query rows have LSE2 = +inf (P = 0) and zero dO and D, so they contribute
// nothing without a test.
//
// dQ (atomic, split). On sm_90 a step's Br x d partial dQ_i goes from registers to one of two
// shared-memory staging blocks, and at the next step one thread issues a single bulk copy that
// adds the whole block into dQ_accum at L2 (cp.reduce.async.bulk; split's first K block stores
// instead). Elsewhere (and at d = 256, see above) every thread adds its fragment with
// red.global.add. Writing 16 fragments per thread to global memory as reductions held their
// registers and the memory pipe through the next step; on the H200 the staged copy made the whole
// backward 12-22 % faster (docs/perf.md, step 8).
//
// Packed batches (common/packed.h, params.h): a second kernel, outer_k_packed_kernel, from the
// same body. Its grid's y is (sequence, K/V head) and its x counts the longest sequence's K blocks
// (or the splits); a CTA reads its sequence's offsets and lengths first, a K block past its
// sequence's keys is never visited, and from there on the body is the dense one on the
// sequence's rows (row stride H d for Q, dO; Hkv d for K, V, dK, dV), lengths and band. Loads are
// zero-filled and stores skipped past a sequence's last row or key (the bulk dQ copy is clipped at
// its last row), so nothing outside the sequence is read or written.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/fa2_bwd/params.h"
#include "common/packed.h"
#include "common/smem_opt_in.h"
#include "common/sm80/mma.cuh"
#include "common/sm80/tiles.cuh"
#include "common/sm90/bulk.cuh"
#include "core/cuda_check.h"

namespace flashlab::cuda::bwd {

template <int kD>
struct OuterKTraits {
  // d = 64 takes 128 queries a step: its dK_j, dV_j accumulators are half the size, which leaves
  // room for 32 x 64 score tiles (a quarter fewer fragment reads per mma than 32 x 32) and halves
  // the steps, barriers and prefetches per K block. d = 256 takes 64 keys a block: see "Head dim
  // 256" above.
  static constexpr int Br = outer_k_br(kD);
  static constexpr int Bc = outer_k_bc(kD);
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static_assert(kD == 64 || kD == 128 || kD == 256, "head dims 64, 128 and 256");
  static_assert(Br <= kRowPad && kRowPad % Br == 0, "LSE2 and D are padded for whole blocks");

  // Warp grids (rows x columns of warps) and the warp tile of each product. d = 256: 2 x 4
  // everywhere, so that each warp keeps 32 keys x 64 columns of dK_j and dV_j (the register count
  // of d = 128's 32 x d/2).
  static constexpr int kSWarpRows = kD == 256 ? 2 : 4;         // S^T, dP^T: keys x queries
  static constexpr int kSRows = Bc / kSWarpRows;               // 32 keys
  static constexpr int kSCols = Br / (kWarps / kSWarpRows);    // Br/2 queries (16 at d = 256)
  static constexpr int kKVWarpRows = kD == 256 ? 2 : 4;        // dK, dV: keys x d
  static constexpr int kKVRows = Bc / kKVWarpRows;             // 32 keys
  static constexpr int kKVCols = kD / (kWarps / kKVWarpRows);  // d/2 (d/4 at d = 256)
  static constexpr int kQWarpRows = kD == 64 ? 4 : 2;          // dQ: queries x d
  static constexpr int kQRows = Br / kQWarpRows;               // 32 queries
  static constexpr int kQCols = kD / (kWarps / kQWarpRows);    // 32 columns of d (64 at 256)
  // dQ_i's columns per pass: all at once, but 2 x 32 at d = 256 (fewer live registers).
  static constexpr int kQPasses = kD == 256 ? 2 : 1;
  static_assert(kSRows % 16 == 0 && kSCols % 16 == 0 && kKVRows % 16 == 0 && kKVCols % 16 == 0 &&
                    kQRows % 16 == 0 && (kQCols / kQPasses) % 16 == 0,
                "warp tiles are made of 16 x 16 pieces");

  static constexpr int kTileKV = Bc * kD;  // elements
  static constexpr int kTileQ = Br * kD;
  static constexpr int kTileS = Bc * Br;
  // dQ_i staging (sm_90, atomic and split): two Br x d fp32 blocks, laid out exactly as in
  // dQ_accum (sm80/tiles.cuh: dq_accum_col), so one bulk copy moves a whole block. Only where they
  // fit beside the tiles in the 227 KiB a block may have: not at d = 256 (209 + 128 KiB), which
  // adds dQ from registers with red.global.add on every GPU.
  static constexpr int kTileDq = Br * kD;  // floats
  static constexpr size_t kTilesBytes =
      (2 * kTileKV + 4 * kTileQ + 2 * kTileS) * 2 + 4 * Br * sizeof(float);
  static constexpr size_t kStagingBytes = 2 * kTileDq * sizeof(float);
  static constexpr bool kStageDq = kTilesBytes + kStagingBytes <= 227 * 1024;
  static_assert(kTilesBytes <= 227 * 1024, "more shared memory than a block can have");
  static constexpr size_t smem_bytes(DqMode mode, bool staged_dq) {
    return kTilesBytes + (mode != DqMode::none && staged_dq && kStageDq ? kStagingBytes : 0);
  }
};

template <class T, int kD, DqMode kMode, bool kPacked>
__device__ __forceinline__ void outer_k_body(const BwdParams& p) {
  using Tr = OuterKTraits<kD>;
  constexpr int Br = Tr::Br, Bc = Tr::Bc, kThreads = Tr::kThreads;
  constexpr int kSM = Tr::kSRows / 16, kSN = Tr::kSCols / 8;      // m16 and n8 tiles of S^T
  constexpr int kKVM = Tr::kKVRows / 16, kKVN = Tr::kKVCols / 8;  // ... of dK_j, dV_j
  constexpr int kQM = Tr::kQRows / 16, kQN = Tr::kQCols / 8;      // ... of dQ_i

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + Tr::kTileKV;
  T* sQ = sV + Tr::kTileKV;                                   // [2][Br x d]
  T* sdO = sQ + 2 * Tr::kTileQ;                               // [2][Br x d]
  T* sP = sdO + 2 * Tr::kTileQ;                               // [Bc x Br], P^T of this step
  T* sdS = sP + Tr::kTileS;                                   // [Bc x Br], dS^T of this step
  float* sLSE2 = reinterpret_cast<float*>(sdS + Tr::kTileS);  // [2][Br]
  float* sD = sLSE2 + 2 * Br;                                 // [2][Br]
  const uint32_t adQ = smem_addr(sD + 2 * Br);  // [2][Br x d] fp32, sm_90 dQ_i staging
  // Whether this kernel stages dQ_i in shared memory for bulk reduce-adds (sm_90, where the two
  // blocks fit: not at d = 256) or adds it from registers with red.global.add.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kStaged = kMode != DqMode::none && Tr::kStageDq;
#else
  constexpr bool kStaged = false;
#endif

  // Grouped heads: this CTA's K/V head serves `group` query heads, and its Q loop walks the Q
  // blocks of each of them in turn, so that dK_j and dV_j sum over the whole group in registers.
  const int64_t kvh = blockIdx.y;
  const int group = p.group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, qd = lane % 4;  // fragment row group, column quad (mma.cuh)
  // This warp's place in each warp grid.
  const int s_row0 = (warp % Tr::kSWarpRows) * Tr::kSRows;  // keys of its S^T, dP^T tile
  const int s_col0 = (warp / Tr::kSWarpRows) * Tr::kSCols;  // queries of it
  const int kv_row0 = (warp % Tr::kKVWarpRows) * Tr::kKVRows;
  const int kv_col0 = (warp / Tr::kKVWarpRows) * Tr::kKVCols;
  const int q_row0 = (warp % Tr::kQWarpRows) * Tr::kQRows;
  const int q_col0 = (warp / Tr::kQWarpRows) * Tr::kQCols;
  // This lane's ldmatrix / stmatrix offsets at those origins (sm80/tiles.cuh): every fragment read
  // below is one XOR and one constant add away from them.
  const Ldsm<Frag::a_rowmajor, kD> ld_s_a(s_row0, 0);     // K_j, V_j rows (keys) of S^T, dP^T
  const Ldsm<Frag::b_nk, kD> ld_s_b(s_col0, 0);           // Q_i, dO_i rows (queries) of S^T, dP^T
  const Ldsm<Frag::a_rowmajor, Br> ld_kv_a(kv_row0, 0);   // P^T, dS^T rows (keys) of dV_j, dK_j
  const Ldsm<Frag::b_kn, kD> ld_kv_b(0, kv_col0);         // dO_i, Q_i columns of dV_j, dK_j
  const Ldsm<Frag::a_colmajor, Br> ld_q_a(0, q_row0);     // dS^T columns (queries) of dQ_i
  const Ldsm<Frag::b_kn, kD> ld_q_b(0, q_col0);           // K_j columns of dQ_i
  const Ldsm<Frag::a_rowmajor, Br> st_s(s_row0, s_col0);  // stmatrix of P^T, dS^T: the A map

  const int64_t bh0 = kvh * group;  // the group's first query head
  // The sequence's rows, lengths and band: the problem's for a dense batch; a packed CTA's
  // blockIdx.y is (sequence, K/V head), and query head h of the group is head kv_in * group + h
  // of its sequence's tokens.
  int Nq = p.Nq, Nk = p.Nk;
  Band band = p.band;
  int64_t kv_stride = kD;       // elements between two rows of K, V, dK, dV
  int64_t kv_base = kvh * p.Nk * kD;  // K/V head kvh's first row
  [[maybe_unused]] SeqRows sr{};
  [[maybe_unused]] int b = 0;
  [[maybe_unused]] int64_t kv_in = 0;
  if constexpr (kPacked) {
    b = static_cast<int>(blockIdx.y) / p.Hkv;
    kv_in = static_cast<int>(blockIdx.y) - b * p.Hkv;
    sr = seq_rows(p.cu_q, p.cu_k, b);
    Nq = sr.nq;
    Nk = sr.nk;
    band = seq_band(p.band, Nq, Nk);
    kv_stride = static_cast<int64_t>(p.Hkv) * kD;
    kv_base = sr.k0 * kv_stride + kv_in * kD;
  }
  const T* K = static_cast<const T*>(p.K) + kv_base;
  const T* V = static_cast<const T*>(p.V) + kv_base;
  // Query head h of the group: its Q and dO rows, its LSE2 and D, its rows of the dQ accumulator.
  auto q_offset = [&](int h) -> int64_t {
    if constexpr (kPacked)
      return (static_cast<int64_t>(sr.q0) * p.H + kv_in * group + h) * kD;
    else
      return (bh0 + h) * p.Nq * kD;
  };
  auto lse_offset = [&](int h) -> int64_t {
    if constexpr (kPacked)
      return (kv_in * group + h) * p.lse_rows + bwd_packed_lse_start(sr.q0, b);
    else
      return (bh0 + h) * p.Nq_pad;
  };
  auto accum_offset = [&](int h) -> int64_t {
    if constexpr (kPacked)
      return ((kv_in * group + h) * p.total_q + sr.q0) * kD;
    else
      return (bh0 + h) * p.Nq * kD;
  };
  const int64_t q_stride = kPacked ? static_cast<int64_t>(p.H) * kD : kD;

  const int n_kblocks = (Nk + Bc - 1) / Bc;
  if constexpr (kPacked && kMode != DqMode::split) {
    if (static_cast<int>(blockIdx.x) >= n_kblocks) return;  // past the sequence's keys
  }
  constexpr bool kWalk = kMode == DqMode::split;  // several K blocks per CTA; else exactly one
  const int n_split = gridDim.x;

  // The K blocks of this CTA, group by group (snake order, see the picture). The body is the same
  // code for every K block; nothing but j and grp lives from one K block to the next. For
  // none and atomic the loop has one trip, known at compile time, and vanishes.
  for (int grp = 0; kWalk ? grp * n_split < n_kblocks : grp < 1; ++grp) {
    const int j = kWalk ? grp * n_split + (grp % 2 ? n_split - 1 - blockIdx.x : blockIdx.x)
                        : static_cast<int>(blockIdx.x);
    if (kWalk && j >= n_kblocks) continue;  // the last group may be partial (uniform per CTA)
    const int key0 = j * Bc;
    // The Q blocks that see any key of block j (common/band.h), for each query head of the group
    // in turn: the steps walk (Q block i, query head bh0 + h) with i fastest, counted on without
    // a division (registers are tight here).
    const BlockRange qr = band.q_blocks(j, Bc, Br);
    const int m_begin = qr.begin, m_last = qr.end - 1, n_steps = qr.count() * group;
    struct Step {
      int i, h;
    };
    auto next = [&](Step s) { return s.i == m_last ? Step{m_begin, s.h + 1} : Step{s.i + 1, s.h}; };
    // split: the first K block of this CTA that meets Q block i stores its partial, the later ones
    // add (the CTA's K blocks increase; common/band.h). Without a window's left side that is
    // always the CTA's first K block.
    auto stores_dq = [&](int i) {
      return grp == 0 || snake_block(blockIdx.x, grp - 1, n_split) < band.k_blocks(i, Br, Bc).begin;
    };

    float acc_dK[kKVM][kKVN][4] = {};
    float acc_dV[kKVM][kKVN][4] = {};

    auto load_q_block = [&](Step st, int buf) {
      const int i = st.i;
      const T* Q = static_cast<const T*>(p.Q) + q_offset(st.h);
      const T* dO = static_cast<const T*>(p.dO) + q_offset(st.h);
      load_tile_async<Br, kD, kThreads>(sQ + buf * Tr::kTileQ, Q, i * Br, Nq, q_stride);
      load_tile_async<Br, kD, kThreads>(sdO + buf * Tr::kTileQ, dO, i * Br, Nq, q_stride);
      load_rows_async<Br>(sLSE2 + buf * Br, p.LSE2 + lse_offset(st.h) + i * Br, 0);
      load_rows_async<Br>(sD + buf * Br, p.D + lse_offset(st.h) + i * Br, Br / 4);
    };

    // sm_90: dQ_i goes to staging buffer t % 2 at the end of step t, and at the start of step t+1
    // (after the barrier) thread 0 hands the whole block to the copy engine, which adds it into
    // dQ_accum at L2 (or, for split's first K block on it, stores it): one instruction per step
    // instead of 16 red.global.add per thread, and the dQ registers are free at once. Before the
    // first barrier of step t+2, thread 0 waits until that copy has read the buffer, which step
    // t+2 then rewrites: a whole step of slack, so the wait costs nothing.
    auto dq_rows = [&](Step st) {
      return p.dQ_accum + (kMode == DqMode::split ? blockIdx.x * p.split_stride : 0) +
             accum_offset(st.h);
    };
    [[maybe_unused]] auto flush_dq = [&](Step st, int parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      if (threadIdx.x == 0) {
        const int blk = st.i;
        const int rows = min(Br, Nq - blk * Br);  // the last block may be ragged
        float* dst = dq_rows(st) + static_cast<int64_t>(blk) * Br * kD;
        const uint32_t bytes = static_cast<uint32_t>(rows * kD * sizeof(float));
        const uint32_t src = adQ + parity * Tr::kTileDq * sizeof(float);
        if (kMode == DqMode::split && stores_dq(blk)) {
          sm90::bulk_store(dst, src, bytes);
        } else {
          sm90::bulk_reduce_add_f32(dst, src, bytes);
        }
        sm90::bulk_commit();
      }
#endif
    };

    if (n_steps > 0) {
      load_tile_async<Bc, kD, kThreads>(sK, K, key0, Nk, kv_stride);
      load_tile_async<Bc, kD, kThreads>(sV, V, key0, Nk, kv_stride);
      load_q_block(Step{m_begin, 0}, 0);
      cp_async_commit();
    }

    Step step{m_begin, 0}, last_step{m_begin, 0};  // this step's and the one before
    for (int t = 0, buf = 0; t < n_steps; ++t, buf ^= 1) {
      const int i = step.i;
      // Step t has landed, and every warp is done with step t-1's buffers, P^T and dS^T.
      cp_async_wait<0>();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      if constexpr (kStaged)
        if (threadIdx.x == 0) sm90::bulk_wait_read();  // staging buffer t % 2 (step t-2) is free
#endif
      __syncthreads();
      if (t + 1 < n_steps) load_q_block(next(step), buf ^ 1);  // overlaps with the matmuls
      cp_async_commit();
      if constexpr (kStaged)
        if (t > 0) flush_dq(last_step, buf ^ 1);  // staged at the end of the last step

      const T* sQi = sQ + buf * Tr::kTileQ;
      const T* sdOi = sdO + buf * Tr::kTileQ;
      const uint32_t aK = smem_addr(sK), aV = smem_addr(sV), aQi = smem_addr(sQi),
                     adOi = smem_addr(sdOi), aP = smem_addr(sP), adS = smem_addr(sdS);
      const float* sLSE2i = sLSE2 + buf * Br;
      const float* sDi = sD + buf * Br;

      // ---- S^T = K_j Q_i^T and dP^T = V_j dO_i^T on this warp's 32 keys x Br/2 queries ----
      // Element e of n8 tile n of m16 tile m: key row s_row0 + 16m + g (+8 for e >= 2), query
      // column s_col0 + 8n + 2qd (+1 for odd e).
      auto scores = [&](float(&acc)[kSM][kSN][4], uint32_t sA, uint32_t sB) {
        score_tile<T, kD>(acc, ld_s_a, sA, ld_s_b, sB);
      };

      float s[kSM][kSN][4] = {};
      scores(s, aK, aQi);

      // ---- P^T = exp2(S^T * scale*log2e - LSE2), masked entries -> 0, in place: s holds P^T ----
      // Two copies of the loop: the masked one runs only on tiles that cross the causal diagonal
      // or the end of the keys.
      auto softmax = [&](auto masked) {
#pragma unroll
        for (int n = 0; n < kSN; ++n) {
          const float2 lse2 = *reinterpret_cast<const float2*>(sLSE2i + s_col0 + n * 8 + 2 * qd);
#pragma unroll
          for (int m = 0; m < kSM; ++m) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              s[m][n][e] = fast_exp2(fmaf(s[m][n][e], p.scale_log2, -(e % 2 ? lse2.y : lse2.x)));
              if constexpr (decltype(masked)::value) {
                const int key = key0 + s_row0 + 16 * m + g + (e / 2) * 8;
                const int query = i * Br + s_col0 + n * 8 + 2 * qd + e % 2;
                if (key >= Nk || !band.sees(query, key)) s[m][n][e] = 0.f;
              }
            }
          }
        }
      };
      const bool mask_tile = band.cuts(i * Br, Br, key0, Bc);
      if (mask_tile) {
        softmax(std::true_type{});
      } else {
        softmax(std::false_type{});
      }

      // Stores this warp's tile of T pairs into a Bc x Br tile of shared memory. A 16 x 16 piece
      // (n8 tiles n, n+1; rows g and g+8) holds its values where an A fragment would, so on sm_90
      // one stmatrix writes it (the inverse of the ldmatrix that reads A); else 8 plain stores.
      auto store_tile = [&](uint32_t tile, const uint32_t(&v)[kSM][kSN][2]) {
#pragma unroll
        for (int m = 0; m < kSM; ++m)
#pragma unroll
          for (int n = 0; n < kSN; n += 2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            const uint32_t piece[4] = {v[m][n][0], v[m][n][1], v[m][n + 1][0], v[m][n + 1][1]};
            sm90::stmatrix_x4(st_s.at(tile, 16 * m, 8 * n), piece);
#else
#pragma unroll
            for (int h = 0; h < 4; ++h) {
              const int r = s_row0 + 16 * m + g + 8 * (h % 2),
                        c = s_col0 + (n + h / 2) * 8 + 2 * qd;
              st_shared_u32(tile + 2 * swizzled_offset<Br>(r, c), v[m][n + h / 2][h % 2]);
            }
#endif
          }
      };
      // P^T rounded to T feeds dV_j += P^T dO_i; the fp32 values in s stay for dS^T.
      uint32_t pt[kSM][kSN][2];  // P^T as T pairs: [0] row g, [1] row g + 8
#pragma unroll
      for (int m = 0; m < kSM; ++m)
#pragma unroll
        for (int n = 0; n < kSN; ++n) {
          pt[m][n][0] = ElemTraits<T>::pack(s[m][n][0], s[m][n][1]);
          pt[m][n][1] = ElemTraits<T>::pack(s[m][n][2], s[m][n][3]);
        }
      store_tile(aP, pt);

      float dp[kSM][kSN][4] = {};
      scores(dp, aV, adOi);

      // ---- dS^T = P^T * (dP^T - D) from the fp32 P^T, rounded to T once: D is per query, i.e.
      // per column here ----
      uint32_t dst[kSM][kSN][2];
#pragma unroll
      for (int n = 0; n < kSN; ++n) {
        const float2 d = *reinterpret_cast<const float2*>(sDi + s_col0 + n * 8 + 2 * qd);
#pragma unroll
        for (int m = 0; m < kSM; ++m) {
          const float(&pv)[4] = s[m][n];  // rows g (0, 1) and g + 8 (2, 3)
          dst[m][n][0] =
              ElemTraits<T>::pack(pv[0] * (dp[m][n][0] - d.x), pv[1] * (dp[m][n][1] - d.y));
          dst[m][n][1] =
              ElemTraits<T>::pack(pv[2] * (dp[m][n][2] - d.x), pv[3] * (dp[m][n][3] - d.y));
        }
      }
      store_tile(adS, dst);
      __syncthreads();  // P^T and dS^T of the whole block are in shared memory

      // ---- dV_j += P^T dO_i and dK_j += dS^T Q_i (scaled by `scale` once, at the end) ----
      // This warp's 32 keys x d/2 columns; k runs over the Br queries of the step.
      auto accumulate_kv = [&](float(&acc)[kKVM][kKVN][4], uint32_t sA, uint32_t sB) {
#pragma unroll
        for (int kk = 0; kk < Br / 16; ++kk) {
          uint32_t a[kKVM][4];
#pragma unroll
          for (int m = 0; m < kKVM; ++m) ld_kv_a(a[m], sA, 16 * m, 16 * kk);
#pragma unroll
          for (int n = 0; n < kKVN / 2; ++n) {
            uint32_t b[4];
            ld_kv_b(b, sB, 16 * kk, 16 * n);
#pragma unroll
            for (int m = 0; m < kKVM; ++m) mma_pair<T>(acc[m][2 * n], acc[m][2 * n + 1], a[m], b);
          }
        }
      };
      accumulate_kv(acc_dV, aP, adOi);
      accumulate_kv(acc_dK, adS, aQi);

      if constexpr (kMode != DqMode::none) {
        // ---- dQ_i (partial over this K block) = dS K_j: this warp's kQRows x kQCols tile, in
        // kQPasses passes over its columns (d = 256: two of 32 columns, so that 32 fp32 partials
        // a thread are live beside dK_j and dV_j, not 64) ----
        constexpr int kQNp = kQN / Tr::kQPasses;  // n8 tiles of one pass
        // The partials of n8 tiles n0 .. n0 + kQNp - 1.
        auto dq_product = [&](float(&dq)[kQM][kQNp][4], int n0) {
#pragma unroll
          for (int kk = 0; kk < Bc / 16; ++kk) {
            uint32_t a[kQM][4];
#pragma unroll
            for (int m = 0; m < kQM; ++m) ld_q_a(a[m], adS, 16 * kk, 16 * m);  // dS = (dS^T)^T
#pragma unroll
            for (int n = 0; n < kQNp / 2; ++n) {
              uint32_t b[4];
              ld_q_b(b, aK, 16 * kk, 8 * n0 + 16 * n);
#pragma unroll
              for (int m = 0; m < kQM; ++m) mma_pair<T>(dq[m][2 * n], dq[m][2 * n + 1], a[m], b);
            }
          }
        };

        // atomic: every K block adds into the same fp32 buffer (order varies run to run).
        // split:  CTA s owns split s; its first K block stores, its later ones add. An element is
        //         only ever stored or added by one thread (staged: the copies issued by thread 0;
        //         else the thread that holds its fragment), in program order: the same sum, bit for
        //         bit, on every run.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        if constexpr (kStaged) {
          static_assert(Tr::kQPasses == 1, "the staged copy takes the whole tile at once");
          float dq[kQM][kQN][4] = {};
          dq_product(dq, 0);
          // Rows q_row0 + 16m + 8h + g all have row & 3 == g & 3, so dq_accum_col is one XOR of
          // the group index n with this lane's g & 3: group 8(g & 3) is folded into the lane's
          // offset, and group n is an XOR with 32n bytes (q_col0 is a multiple of 32 floats).
          const uint32_t lane_off = static_cast<uint32_t>(
              (buf * Tr::kTileDq + (q_row0 + g) * kD + q_col0 + 2 * qd + 8 * (g & 3)) *
              sizeof(float));
#pragma unroll
          for (int m = 0; m < kQM; ++m)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int n = 0; n < kQN; ++n)
                st_shared_f32x2(
                    adQ + (lane_off ^ (32u * n)) + (16 * m + 8 * h) * kD * sizeof(float),
                    dq[m][n][2 * h], dq[m][n][2 * h + 1]);
          sm90::fence_proxy_async();  // visible to the copy engine once the next barrier has passed
        }
#endif
        if constexpr (!kStaged) {
          // One address per step (this lane's first element); the others are constant offsets from
          // it. Only the last Q block can have rows past Nq, so only there are rows tested (a
          // second copy of the loop, like the softmax's).
          const int row0 = i * Br + q_row0 + g;
          float* dst_q = dq_rows(step) + static_cast<int64_t>(row0) * kD + q_col0 + 2 * qd;
          const int n_xor = g & 3;  // dq_accum_col for this lane's rows (see above)
          // A pass's partials leave before the next pass computes its own (not unrolled, so that
          // the compiler cannot hoist the next pass's products above the reductions).
#pragma unroll 1
          for (int n0 = 0; n0 < kQN; n0 += kQNp) {
            float dq[kQM][kQNp][4] = {};
            dq_product(dq, n0);
            auto put_dq = [&](auto test_rows) {
#pragma unroll
              for (int m = 0; m < kQM; ++m)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                  if constexpr (decltype(test_rows)::value)
                    if (row0 + 16 * m + 8 * h >= Nq) continue;
                  float* at = dst_q + (16 * m + 8 * h) * kD;
#pragma unroll
                  for (int n = 0; n < kQNp; ++n) {
                    float* col = at + 8 * ((n0 + n) ^ n_xor);
                    if (kMode == DqMode::atomic || (kMode == DqMode::split && !stores_dq(i))) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
                      sm90::red_add_f32x2(col, dq[m][n][2 * h], dq[m][n][2 * h + 1]);
#else
                      atomicAdd(col, dq[m][n][2 * h]);
                      atomicAdd(col + 1, dq[m][n][2 * h + 1]);
#endif
                    } else {
                      *reinterpret_cast<float2*>(col) =
                          make_float2(dq[m][n][2 * h], dq[m][n][2 * h + 1]);
                    }
                  }
                }
            };
            if ((i + 1) * Br <= Nq) {
              put_dq(std::false_type{});
            } else {
              put_dq(std::true_type{});
            }
          }
        }
      }
      last_step = step;
      step = next(step);
    }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (kStaged) {
      if (n_steps > 0) {
        __syncthreads();  // the last step's dQ is staged
        flush_dq(last_step, (n_steps - 1) % 2);
      }
      // Complete, not just read: split's next K block adds into the same rows, and must come
      // after (and the CTA's shared memory must outlive the copies).
      if (threadIdx.x == 0) sm90::bulk_wait_all();
    }
#endif

    // ---- dK_j = scale * dS^T Q, dV_j = P^T dO: one store per key row (zeros if never visited)
    T* dK = static_cast<T*>(p.dK) + (kPacked ? kv_base : kvh * p.Nk * kD);
    T* dV = static_cast<T*>(p.dV) + (kPacked ? kv_base : kvh * p.Nk * kD);
#pragma unroll
    for (int m = 0; m < kKVM; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = key0 + kv_row0 + 16 * m + g + 8 * h;
        if (key >= Nk) continue;
#pragma unroll
        for (int n = 0; n < kKVN; ++n) {
          const int64_t at = static_cast<int64_t>(key) * kv_stride + kv_col0 + n * 8 + 2 * qd;
          *reinterpret_cast<uint32_t*>(dK + at) =
              ElemTraits<T>::pack(acc_dK[m][n][2 * h] * p.scale, acc_dK[m][n][2 * h + 1] * p.scale);
          *reinterpret_cast<uint32_t*>(dV + at) =
              ElemTraits<T>::pack(acc_dV[m][n][2 * h], acc_dV[m][n][2 * h + 1]);
        }
      }
    // The next K block reloads K, V, Q and dO: every warp must be done reading this one's tiles.
    if constexpr (kWalk) __syncthreads();
  }  // K blocks of this CTA
}

template <class T, int kD, DqMode kMode>
__global__ void __launch_bounds__(OuterKTraits<kD>::kThreads, 1) outer_k_kernel(const BwdParams p) {
  outer_k_body<T, kD, kMode, false>(p);
}

template <class T, int kD, DqMode kMode>
__global__ void __launch_bounds__(OuterKTraits<kD>::kThreads, 1)
    outer_k_packed_kernel(const BwdParams p) {
  outer_k_body<T, kD, kMode, true>(p);
}

}  // namespace flashlab::cuda::bwd

namespace flashlab::cuda {

template <class T, int kD, DqMode kMode>
void launch_bwd_outer_k(const BwdParams& p, void* stream) {
  using bwd::outer_k_kernel;
  using bwd::outer_k_packed_kernel;
  using Tr = bwd::OuterKTraits<kD>;
  // dQ staging needs sm_90's bulk copies; elsewhere the kernel adds dQ with red.global.add.
  const size_t kSmem = Tr::smem_bytes(kMode, bwd_staged_dq());
  // Above 48 KiB a kernel must opt in; done once per instantiation (dense and packed) and device.
  FLASHLAB_CUDA_CHECK(opt_in_smem(&outer_k_kernel<T, kD, kMode>, static_cast<int>(kSmem)));
  FLASHLAB_CUDA_CHECK(opt_in_smem(&outer_k_packed_kernel<T, kD, kMode>, static_cast<int>(kSmem)));
  const int n_kblocks = (p.Nk + Tr::Bc - 1) / Tr::Bc;
  // split: nsplits CTAs per head walk the K blocks (bwd_dq_splits); otherwise one per K block.
  // Grouped heads: one CTA per K/V head (p.BH / p.group of them), each over its group's Q heads.
  // Packed: the same grid over the longest sequence's K blocks, p.BH / p.group = B Hkv.
  const dim3 grid(kMode == DqMode::split ? p.dq_splits : n_kblocks, p.BH / p.group);
  if (grid.x == 0) return;  // a packed batch with no keys: dK, dV are empty
  const auto st = static_cast<cudaStream_t>(stream);
  if (p.cu_q != nullptr)
    outer_k_packed_kernel<T, kD, kMode><<<grid, Tr::kThreads, kSmem, st>>>(p);
  else
    outer_k_kernel<T, kD, kMode><<<grid, Tr::kThreads, kSmem, st>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda
