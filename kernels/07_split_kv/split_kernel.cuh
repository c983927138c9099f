// split-kv's kernels: the split pass and the combine. cuda.cu explains the rung and draws the
// picture; this file is the kernels, their traits and their launchers.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/sm80/mma.cuh"
#include "common/smem_opt_in.h"
#include "core/cuda_check.h"
#include "split_launch.h"

namespace flashlab::cuda::FLASHLAB_FOLDER::split_fwd {

// Per head dim: the key-tile stages in flight, and whether a warp holds the block's 16 rows of Q
// in registers for the whole loop (kQInRegs) or reads them from the shared Q tile at every k16
// step of Q K^T, beside K's fragment.
template <int D>
struct SplitTraits;

// d = 64: 16 KiB a stage (K + V), four of them and the Q tile, 66 KiB.
template <>
struct SplitTraits<64> {
  static constexpr int kStages = 4;
  static constexpr bool kQInRegs = true;
};

// d = 128: a stage is 32 KiB, three of them and the Q tile are 100 KiB, so two blocks fit an SM.
// A thread holds O (16 x 128 over a warp: 64 floats) and Q (8 k16 steps: 32 registers).
template <>
struct SplitTraits<128> {
  static constexpr int kStages = 3;
  static constexpr bool kQInRegs = true;
};

// d = 256: O alone is 16 x 256 fp32 over a warp, 128 registers a thread; Q held as well would be
// 64 more (16 k16 steps), 192 before S, addresses and the softmax's state, so Q is read from
// shared memory, one ldmatrix beside each of K's (decoding waits on HBM, not on ldmatrix). A stage
// is K + V = 64 KiB; three of them and the Q tile (8 KiB) are 200 KiB, one block an SM, with two
// tiles (128 KiB) in flight while a third is used: as much as d = 128's two workers of a paged
// cache keep in flight (schedule.h plans one worker an SM at d = 256). Two stages (136 KiB) would
// let the pipeline drain to nothing at every tile (the next tile is issued only once the one
// before has landed). 200 KiB is an sm_90 block's (227 KiB), not an sm_80 one's (163 KiB).
template <>
struct SplitTraits<256> {
  static constexpr int kStages = 3;
  static constexpr bool kQInRegs = false;
};

template <int D>
constexpr int split_smem_bytes() {
  return (kBr + 2 * SplitTraits<D>::kStages * kBc) * D * 2;
}

// Arrivals of the splits of each worker's rows, for merging in place (split_launch.h): zero when
// the module loads, set back to zero by every merge.
static __device__ unsigned g_arrivals[kArrivalSlots];

// Merges the splits' partials of packed row R of K/V head kh (gr = kh rows + R; total = every
// head's rows) into O and LSE, in split order, so the answer does not depend on which split came
// last: one warp, lane l holding columns [l D / 32, (l + 1) D / 32).
//   LSE = log sum_j exp(LSE_j),  O = sum_j exp(LSE_j - LSE) O_j
// The partials are read from L2 (ld.global.cg): merged in place, other SMs wrote them moments ago.
// The merge sits at the end of the pass, so its latency is the pass's: the first 16 splits'
// partial O rows are loaded together with every LSE_j (lane j % 32 holds split j's, then its
// weight), before any of them is needed, so up to 16 splits cost one trip to L2, not sixteen.
template <class T, int D>
__device__ void merge_row(const SplitParams& p, int64_t total, int64_t gr, int lane) {
  using E = ElemTraits<T>;
  constexpr int kPer = D / 32;  // columns per lane
  constexpr int kBatch = 16;    // partial O rows in flight per lane
  using Vec = std::conditional_t<kPer == 2, float2, float4>;
  constexpr int kVecs = kPer == 8 ? 2 : 1;  // 16-byte loads of a lane's columns (d = 256: two)
  static_assert(kPer == 2 || kPer == 4 || kPer == 8, "d = 64, 128 or 256");
  const int kh = static_cast<int>(gr / p.rows), R = static_cast<int>(gr - int64_t{kh} * p.rows);
  const int64_t split_stride = total;  // partials of one split: every packed row of every head
  const float* col = p.part_o + gr * D + lane * kPer;  // split 0's partial, this lane's columns
  Vec o[kBatch][kVecs];
  auto load_batch = [&](int j0) {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int j = j0 + u;
#pragma unroll
      for (int v = 0; v < kVecs; ++v)
        o[u][v] = j < p.splits
                      ? __ldcg(reinterpret_cast<const Vec*>(col + j * split_stride * D) + v)
                      : Vec{};
    }
  };
  // w[i]: split lane + 32 i's LSE, then its weight; -inf (weight 0) past the last split and for
  // a split that saw none of the row's keys.
  float w[kMaxSplitsPerLane];
#pragma unroll
  for (int i = 0; i < kMaxSplitsPerLane; ++i) {
    const int j = lane + 32 * i;
    w[i] = j < p.splits ? __ldcg(&p.part_lse[j * split_stride + gr]) : -INFINITY;
  }
  load_batch(0);
  float most = -INFINITY;
#pragma unroll
  for (int i = 0; i < kMaxSplitsPerLane; ++i) most = fmaxf(most, w[i]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) most = fmaxf(most, __shfl_xor_sync(0xffffffffu, most, off));
  const int b = kh / p.Hkv, kvh = kh - b * p.Hkv;
  const int64_t head = int64_t{b} * p.H + int64_t{kvh} * p.group + R % p.group;
  const int64_t q_row = head * p.Nq + R / p.group;
  T* out = static_cast<T*>(p.o) + q_row * D + lane * kPer;
  if (most == -INFINITY) {  // no split saw a key of this row
#pragma unroll
    for (int k = 0; k < kPer; ++k) out[k] = E::from_float(0.f);
    if (lane == 0) p.lse[q_row] = -INFINITY;
    return;
  }
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxSplitsPerLane; ++i) sum += expf(w[i] - most);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  const float lse = most + logf(sum);
#pragma unroll
  for (int i = 0; i < kMaxSplitsPerLane; ++i) w[i] = expf(w[i] - lse);
  float acc[kPer] = {};
  for (int j0 = 0; j0 < p.splits; j0 += kBatch) {
    if (j0 > 0) load_batch(j0);
    // The weights of splits j0 .. j0 + 15 are in lanes j0 % 32 .. of w[j0 / 32].
    const int i = j0 / 32;
    const float wi = i == 0 ? w[0] : i == 1 ? w[1] : i == 2 ? w[2] : w[3];
    static_assert(kMaxSplitsPerLane == 4 && 32 % kBatch == 0, "one w[i] per batch");
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const float wj = __shfl_sync(0xffffffffu, wi, (j0 + u) % 32);
      if (j0 + u < p.splits) {
#pragma unroll
        for (int v = 0; v < kVecs; ++v) {
          acc[4 * v] += wj * o[u][v].x;
          acc[4 * v + 1] += wj * o[u][v].y;
          if constexpr (kPer >= 4) {
            acc[4 * v + 2] += wj * o[u][v].z;
            acc[4 * v + 3] += wj * o[u][v].w;
          }
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kPer; k += 2)
    *reinterpret_cast<uint32_t*>(out + k) = E::pack(acc[k], acc[k + 1]);
  if (lane == 0) p.lse[q_row] = lse;
}

// The split pass. Block (split j and K/V head kvh, m, b): split j of the key blocks, packed rows
// [16 m, 16 m + 16) of K/V head kvh of sequence b. The K/V heads of a sequence are the grid's
// fastest index, so the blocks that read the same keys of every head (in a paged cache, the same
// pages, where one key's heads lie side by side) are launched together.
template <class T, int D, bool kPaged>
__global__ void __launch_bounds__(kWarps * 32) split_kernel(const SplitParams p) {
  using E = ElemTraits<T>;
  constexpr int kStages = SplitTraits<D>::kStages;
  constexpr bool kQInRegs = SplitTraits<D>::kQInRegs;
  constexpr int kThreads = kWarps * 32;
  constexpr int KD = D / 16;        // k16 steps of Q K^T
  constexpr int NO = D / 8;         // n8 tiles of O
  constexpr int kKeysPerWarp = kBc / kWarps;
  static_assert(kKeysPerWarp == 16, "each warp takes one k16 step of P V per tile");
  constexpr int kChunks = D / 8;                   // 16-byte chunks in a row
  constexpr int kPassRows = kThreads / kChunks;    // rows one pass of the block copies
  static_assert(
      kBc % kPassRows == 0 && kBr % kPassRows == 0 && (kPassRows % 8 == 0 || 2 * kPassRows == 8),
      "whole rows per pass, each thread's chunk in one or two swizzled columns");

  // The tiles start at a multiple of a row's bytes (and of 256), so that col_step's XOR below
  // stays inside the row: at d = 256 it flips address bits 5-8, and the dynamic shared memory
  // would otherwise start 256 bytes past a multiple of 512, after the static arrays.
  constexpr int kSmemAlign = 2 * D > 256 ? 2 * D : 256;
  extern __shared__ __align__(kSmemAlign) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBr * D;             // kStages tiles of kBc x D
  T* sV = sK + kStages * kBc * D;   // kStages tiles of kBc x D

  const int split = blockIdx.x / p.Hkv, kvh = blockIdx.x - split * p.Hkv;
  const int R0 = blockIdx.y * kBr, b = blockIdx.z;
  const int kh = b * p.Hkv + kvh;  // K/V head over the batch
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, qd = lane % 4;

  // The keys this block's rows see, and the ones every row of it sees (no mask needed there).
  // Rows past the group's last (in the last row block) take the last row's keys.
  const int r_first = R0 / p.group, r_last = min(R0 + kBr - 1, p.rows - 1) / p.group;
  const int blk_lo = max(0, r_first + p.lo_shift), blk_hi = min(p.Nk - 1, r_last + p.hi_shift);
  const int all_lo = max(0, r_last + p.lo_shift), all_hi = min(p.Nk - 1, r_first + p.hi_shift);
  // This thread's two rows (g and g + 8 of the tile): the keys each sees.
  int key_lo[2], key_hi[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = min(R0 + g + 8 * h, p.rows - 1) / p.group;
    key_lo[h] = max(0, r + p.lo_shift);
    key_hi[h] = min(p.Nk - 1, r + p.hi_shift);
  }

  // The key tiles of split j, cut to those some row of the block sees.
  const int64_t sb = p.first_block + int64_t{split} * p.seen_blocks / p.splits;
  const int64_t se = p.first_block + int64_t{split + 1} * p.seen_blocks / p.splits;
  int t0 = static_cast<int>(sb), t1 = static_cast<int>(se);
  if (blk_lo > blk_hi) {
    t1 = t0;  // no row of the block sees a key
  } else {
    t0 = max(t0, blk_lo / kBc);
    t1 = min(t1, blk_hi / kBc + 1);
  }
  const int n_kv = max(0, t1 - t0);

  // Copies: thread tid takes 16 bytes (chunk tid % kChunks) of rows tid / kChunks + i kPassRows.
  // The swizzle repeats every 8 rows: with 8 rows a pass or more (d = 64, 128) a thread's chunk
  // keeps its column and pass i is pass 0's address plus i kPassRows rows; at d = 256 a pass is 4
  // rows of 32 chunks, and an odd pass's rows sit 4 further into the 8, so its chunk also moves
  // by odd_shift bytes (the column XOR 4).
  const int cp_row = tid / kChunks, cp_col = (tid % kChunks) * 8;
  [[maybe_unused]] const int odd_shift = 2 * (swizzled_offset<D>(cp_row + kPassRows, cp_col) -
                                              swizzled_offset<D>(cp_row, cp_col) - kPassRows * D);
  auto pass_at = [&](int i) -> uint32_t {  // bytes from pass 0's chunk to pass i's
    if constexpr (kPassRows % 8 == 0) {
      return i * kPassRows * D * 2;
    } else {
      return i * kPassRows * D * 2 + (i % 2 ? odd_shift : 0);
    }
  };
  const T* Kg = static_cast<const T*>(p.k);
  const T* Vg = static_cast<const T*>(p.v);
  // Where key `key` of this K/V head starts (elements), contiguous or in its page: in the pool
  // [pages, Hkv, P, d] a page holds this head's P keys as one run, like the contiguous layout.
  // (Reading the page ids a tile ahead, into registers, was measured slower: docs/perf.md.)
  const int32_t* table = kPaged ? p.block_table + int64_t{b} * p.pages_per_seq : nullptr;
  auto key_at = [&](int key) -> int64_t {
    if constexpr (kPaged) {
      const int page = __ldg(&table[key >> p.page_shift]);
      return ((int64_t{page} * p.Hkv + kvh) * p.page_size + (key & (p.page_size - 1))) * D;
    } else {
      return (int64_t{kh} * p.Nk + key) * D;
    }
  };
  auto load_kv = [&](int tile) {  // tile: the n-th of this block's tiles
    const int stage = tile % kStages;
    const int c0 = (t0 + tile) * kBc;
    const uint32_t dk = smem_addr(sK + stage * kBc * D + swizzled_offset<D>(cp_row, cp_col));
    const uint32_t dv = smem_addr(sV + stage * kBc * D + swizzled_offset<D>(cp_row, cp_col));
    // Pages of kBc keys or more (powers of two): the whole tile is in one page, found once.
    const bool one_page = !kPaged || p.page_size >= kBc;
    const int64_t tile_at = one_page ? key_at(c0) : 0;
#pragma unroll
    for (int i = 0; i < kBc / kPassRows; ++i) {
      const int row = cp_row + i * kPassRows, key = c0 + row;
      const bool valid = key < p.Nk;  // a paged cache's slots past Nk hold no key: never read
      const int64_t at = !valid ? 0 : (one_page ? tile_at + row * D : key_at(key)) + cp_col;
      cp_async_16(dk + pass_at(i), Kg + at, valid);
      cp_async_16(dv + pass_at(i), Vg + at, valid);
    }
  };
  // The Q tile: packed row R is query row R / group of head (b H + kvh group + R % group).
  {
    const T* Qg = static_cast<const T*>(p.q);
    const uint32_t dq = smem_addr(sQ + swizzled_offset<D>(cp_row, cp_col));
#pragma unroll
    for (int i = 0; i < kBr / kPassRows; ++i) {
      const int R = R0 + cp_row + i * kPassRows;
      const bool valid = R < p.rows;
      const int64_t head = int64_t{b} * p.H + int64_t{kvh} * p.group + R % p.group;
      const int64_t at = valid ? (head * p.Nq + R / p.group) * D + cp_col : 0;
      cp_async_16(dq + pass_at(i), Qg + at, valid);
    }
  }
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < n_kv) load_kv(t);
    cp_async_commit();
  }

  // ldmatrix addresses as in tiled (its fwd_kernel.cuh explains them): Q as A fragments; the
  // warp's 16 keys of K as B fragments of Q K^T, of V (transposed) as B fragments of P V.
  constexpr int kRow16 = 16 * D * 2;
  auto col_step = [](uint32_t lane_addr, int kk) {
    return lane_addr ^ static_cast<uint32_t>(kk << 5);
  };
  const uint32_t q_lane = smem_addr(sQ + swizzled_offset<D>(lane & 15, (lane >> 4) * 8));
  const uint32_t k_lane =
      static_cast<uint32_t>(2 * swizzled_offset<D>((lane & 7) + ((lane >> 4) << 3),
                                                   ((lane >> 3) & 1) * 8)) +
      warp * kRow16;
  const uint32_t v_lane =
      static_cast<uint32_t>(2 * swizzled_offset<D>((lane & 7) + (((lane >> 3) & 1) << 3),
                                                   (lane >> 4) * 8)) +
      warp * kRow16;

  cp_async_wait<kStages - 2>();
  __syncthreads();
  // The block's 16 rows of Q, held for the whole loop (kQInRegs).
  [[maybe_unused]] uint32_t qf[kQInRegs ? KD : 1][4];
  if constexpr (kQInRegs) {
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) ldmatrix_x4(qf[kk], col_step(q_lane, kk));
  }

  float o[NO][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // log2 units, scale folded in
#pragma unroll
  for (int n = 0; n < NO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

  for (int j = 0; j < n_kv; ++j) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (j + kStages - 1 < n_kv) load_kv(j + kStages - 1);
    cp_async_commit();
    const uint32_t kj = smem_addr(sK + (j % kStages) * kBc * D);
    const uint32_t vj = smem_addr(sV + (j % kStages) * kBc * D);

    // S = Q K^T over the warp's 16 keys: two n8 tiles.
    float s[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
      uint32_t kf[4];
      ldmatrix_x4(kf, col_step(kj + k_lane, kk));
      const uint32_t b0[2] = {kf[0], kf[1]}, b1[2] = {kf[2], kf[3]};
      if constexpr (kQInRegs) {
        mma_16816<T>(s[0], qf[kk], b0);
        mma_16816<T>(s[1], qf[kk], b1);
      } else {
        uint32_t qa[4];
        ldmatrix_x4(qa, col_step(q_lane, kk));
        mma_16816<T>(s[0], qa, b0);
        mma_16816<T>(s[1], qa, b1);
      }
    }
    // Scaled into log2 units; -inf where the row does not see the key (only in tiles that some
    // row's band crosses, and the ragged last tile).
    const int c0 = (t0 + j) * kBc;
    const bool masked = c0 < all_lo || c0 + kBc - 1 > all_hi;
    const int key0 = c0 + warp * kKeysPerWarp + 2 * qd;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, key = key0 + n * 8 + (e & 1);
        s[n][e] *= p.scale_log2;
        if (masked && (key < key_lo[h] || key > key_hi[h])) s[n][e] = -INFINITY;
      }
    // Online softmax of tiled, over the warp's keys. A row that has seen nothing yet keeps
    // m = -inf and uses 0 in its place, so every p is exp2(-inf) = 0, never NaN.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float mx = quad_max(fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]),
                                      fmaxf(s[1][2 * h], s[1][2 * h + 1])));
      const float m_new = fmaxf(m[h], mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = fast_exp2(m[h] - m_use);
      m[h] = m_new;
      float rowsum = 0.f;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[n][e] = fast_exp2(s[n][e] - m_use);
          rowsum += s[n][e];
        }
      l[h] = l[h] * alpha + rowsum;
#pragma unroll
      for (int n = 0; n < NO; ++n) {
        o[n][2 * h] *= alpha;
        o[n][2 * h + 1] *= alpha;
      }
    }
    // O += P V over the warp's 16 keys: P's A fragment is the S accumulators packed to 16 bits.
    const uint32_t pa[4] = {E::pack(s[0][0], s[0][1]), E::pack(s[0][2], s[0][3]),
                            E::pack(s[1][0], s[1][1]), E::pack(s[1][2], s[1][3])};
#pragma unroll
    for (int dp = 0; dp < NO / 2; ++dp) {
      uint32_t vf[4];
      ldmatrix_x4_trans(vf, col_step(vj + v_lane, dp));
      const uint32_t b0[2] = {vf[0], vf[1]}, b1[2] = {vf[2], vf[3]};
      mma_16816<T>(o[2 * dp], pa, b0);
      mma_16816<T>(o[2 * dp + 1], pa, b1);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the K/V stages are free: they hold the warps' states below

  // The four warps saw different keys of the same rows: merge their (m, l, O) as the combine
  // merges splits. Warp w's O goes to rows of D + 8 floats (conflict-free float2 stores).
  constexpr int kORow = D + 8;
  float* sO = reinterpret_cast<float*>(sK);  // kWarps x kBr x kORow floats
  static_assert(kWarps * kBr * kORow * 4 <= 2 * kStages * kBc * D * 2, "in the K/V stages");
  __shared__ float sM[kWarps][kBr], sL[kWarps][kBr];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = g + 8 * h;
    const float lt = quad_sum(l[h]);
    if (qd == 0) {
      sM[warp][row] = m[h];
      sL[warp][row] = lt;
    }
    float* orow = sO + (warp * kBr + row) * kORow + 2 * qd;
#pragma unroll
    for (int n = 0; n < NO; ++n)
      *reinterpret_cast<float2*>(orow + n * 8) = make_float2(o[n][2 * h], o[n][2 * h + 1]);
  }
  __syncthreads();

  constexpr float kLn2 = 0.6931471805599453f;
  const bool direct = p.splits == 1;
  for (int i = tid; i < kBr * kChunks; i += kThreads) {
    const int row = i / kChunks, col = (i % kChunks) * 8, R = R0 + row;
    if (R >= p.rows) continue;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sM[w][row]);
    float acc[8] = {}, L = 0.f;
    if (M != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float c = fast_exp2(sM[w][row] - M);  // 0 for a warp that saw no key of the row
        L += c * sL[w][row];
        const float* ow = sO + (w * kBr + row) * kORow + col;
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[k] += c * ow[k];
      }
      const float inv = 1.f / L;
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] *= inv;
    }
    const float lse = M == -INFINITY ? -INFINITY : M * kLn2 + logf(L);
    if (direct) {
      const int64_t head = int64_t{b} * p.H + int64_t{kvh} * p.group + R % p.group;
      const int64_t q_row = head * p.Nq + R / p.group;
      uint4 packed;
      packed.x = E::pack(acc[0], acc[1]);
      packed.y = E::pack(acc[2], acc[3]);
      packed.z = E::pack(acc[4], acc[5]);
      packed.w = E::pack(acc[6], acc[7]);
      *reinterpret_cast<uint4*>(static_cast<T*>(p.o) + q_row * D + col) = packed;
      if (col == 0) p.lse[q_row] = lse;
    } else {
      const int64_t at = (int64_t{split} * gridDim.z * p.Hkv + kh) * p.rows + R;
      float4* dst = reinterpret_cast<float4*>(p.part_o + at * D + col);
      dst[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      dst[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
      if (col == 0) p.part_lse[at] = lse;
    }
  }
  if (direct || !p.merge_in_place) return;

  // Merged in place: the split that arrives last at this worker's rows merges every split's
  // partials. Fence-then-count: the barrier orders the block's partial stores before thread 0's
  // fence, which makes them visible to the whole GPU before the count that says they are there
  // (one fence for the block, as a grid-wide barrier does it, not one per thread).
  __syncthreads();
  __shared__ bool last;
  const int unit = kh * gridDim.y + blockIdx.y;  // this worker's rows: (K/V head, row block)
  if (tid == 0) {
    __threadfence();
    last = atomicAdd(&g_arrivals[unit], 1u) == static_cast<unsigned>(p.splits - 1);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // the counted splits' partials are read after the count
  const int64_t total = int64_t{gridDim.z} * p.Hkv * p.rows;
  for (int r = warp; r < kBr; r += kWarps)
    if (R0 + r < p.rows) merge_row<T, D>(p, total, int64_t{kh} * p.rows + R0 + r, lane);
  if (tid == 0) g_arrivals[unit] = 0;  // ready for the next launch
}

// The combine (splits not merged in place): warp (kh, R) merges the splits of packed row R of
// K/V head kh.
template <class T, int D>
__global__ void __launch_bounds__(128) combine_kernel(const SplitParams p, const int kv_heads) {
  const int64_t gr = int64_t{blockIdx.x} * 4 + threadIdx.x / 32;  // kh rows + R
  const int64_t total = int64_t{kv_heads} * p.rows;
  if (gr < total) merge_row<T, D>(p, total, gr, threadIdx.x % 32);
}

template <class T, int D, bool kPaged>
void launch_split(const SplitParams& p, int row_blocks, int kv_heads, cudaStream_t stream) {
  constexpr int smem = split_smem_bytes<D>();
  auto* kernel = split_kernel<T, D, kPaged>;
  FLASHLAB_CUDA_CHECK(opt_in_smem(kernel, smem));  // above 48 KiB: once per kernel and device
  const dim3 grid(p.splits * p.Hkv, row_blocks, kv_heads / p.Hkv);
  kernel<<<grid, kWarps * 32, smem, stream>>>(p);
  FLASHLAB_CUDA_CHECK(cudaGetLastError());
}

template <class T, int D>
void launch_combine(const SplitParams& p, int kv_heads, cudaStream_t stream) {
  const int64_t warps = int64_t{kv_heads} * p.rows;
  const unsigned blocks = static_cast<unsigned>((warps + 3) / 4);
  combine_kernel<T, D><<<blocks, 128, 0, stream>>>(p, kv_heads);
  FLASHLAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::split_fwd
