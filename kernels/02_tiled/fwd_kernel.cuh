// The tiled forward kernel (FA2 forward on mma.sync). cuda.cu explains the idea and draws the
// tile picture; this file is the kernel, its compile-time traits and its launcher.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/packed.h"
#include "common/smem_opt_in.h"
#include "common/sm80/mma.cuh"
#include "core/cuda_check.h"
#include "fwd_launch.h"

namespace flashlab::cuda::FLASHLAB_FOLDER::tiled_fwd {

// Block shape per head dim. Every warp owns kRowsPerWarp query rows for the whole loop and holds
// their S tile and O accumulator in registers; K and V tiles are shared by all warps. Q fragments
// are either held in registers for the whole loop (kQInRegs) or re-read from the shared Q tile at
// every k16 step of Q.K^T.
template <int D>
struct FwdTraits;

// kMinBlocks is the register budget: 65536 / (threads * kMinBlocks) registers per thread.
//
// d = 64: 4 warps x 32 rows (two m16 tiles per warp), so every K/V fragment read from shared
// memory feeds two MMAs (half the ldmatrix traffic of 16 rows per warp). Per thread: Q 32
// registers, S 64 floats, O 64 floats; ptxas fits it in about 240 registers, so two blocks (8
// warps) share an SM. Three K/V stages (3 x 16 KiB + Q 16 KiB = 64 KiB per block).
template <>
struct FwdTraits<64> {
  static constexpr int Br = 128, Bc = 64, kWarps = 4, kStages = 3, kMinBlocks = 2;
  static constexpr bool kQInRegs = true;
};

// d = 128: 4 warps x 32 rows as well. Per thread O is 128 floats and S 64; Q held for the whole
// loop would add 64 registers and spill, so Q is re-read from shared memory (8 registers live per
// k16 step). Per warp and K/V tile that reads Q 8 KiB + K 16 KiB + V 16 KiB for 32 rows, against
// K + V = 32 KiB for 16 rows with 8 warps x 16 rows and Q in registers: 0.62x the shared-memory
// reads per row. Two blocks (8 warps) per SM: 2 x (Q 32 KiB + 2 x (K 16 + V 16) KiB) = 192 KiB,
// so two K/V stages, not three.
template <>
struct FwdTraits<128> {
  static constexpr int Br = 128, Bc = 64, kWarps = 4, kStages = 2, kMinBlocks = 2;
  static constexpr bool kQInRegs = false;
};

// d = 256: O alone is 128 floats a thread for 16 rows a warp, so 8 warps x 16 rows, Q re-read
// from shared memory, one block an SM (65536 / 256 threads = 255 registers each). A copy pass of
// 256 threads is 8 rows of 32 chunks (every thread keeps its swizzled column, load_tile). Shared
// memory: Q 64 KiB + 2 stages x (K 32 + V 32) KiB = 192 KiB. FA2 chapter's kernel takes the shape
// at its own cost (the Hopper rung is where d = 256 is fast).
template <>
struct FwdTraits<256> {
  static constexpr int Br = 128, Bc = 64, kWarps = 8, kStages = 2, kMinBlocks = 1;
  static constexpr bool kQInRegs = false;
};

template <int D>
constexpr int fwd_smem_bytes() {
  using Tr = FwdTraits<D>;
  return (Tr::Br + 2 * Tr::kStages * Tr::Bc) * D * 2;
}

// Rows [row0, row0 + kRows) of a [n_rows x D] tensor whose rows are `stride` elements apart (D for
// a dense head, H D or Hkv D in a packed batch) -> a swizzled kRows x D shared tile. Rows past
// the end are zero-filled by cp.async and never read from global memory. Each pass of the block
// copies kPassRows whole rows; kPassRows is a multiple of 8, so a thread's chunk keeps its swizzled
// column from pass to pass and every pass is the first one's addresses plus a constant.
template <int kRows, int D, int kThreads, class T>
__device__ __forceinline__ void load_tile(T* smem, const T* gmem, int row0, int n_rows,
                                          int stride) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kPassRows = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && kPassRows % 8 == 0 && kRows % kPassRows == 0,
                "every thread copies the same column of kRows / kPassRows rows");
  const int r = static_cast<int>(threadIdx.x) / kChunksPerRow;
  const int col = (static_cast<int>(threadIdx.x) % kChunksPerRow) * 8;
  const int rows_left = n_rows - row0 - r;
  const T* src = gmem + static_cast<int64_t>(row0 + r) * stride + col;
  const uint32_t dst = smem_addr(smem + swizzled_offset<D>(r, col));
#pragma unroll
  for (int i = 0; i < kRows / kPassRows; ++i) {
    const bool valid = i * kPassRows < rows_left;
    // Pass i's rows: a constant offset for a dense head; in a packed batch a 32-bit product
    // (i kPassRows rows of a few thousand elements), so that no 64-bit offsets stay live.
    cp_async_16(dst + i * kPassRows * D * 2, valid ? src + i * kPassRows * stride : gmem, valid);
  }
}

// The kernel's body, for a dense problem and for a packed batch (kPacked: the block first finds
// its sequence; everything after that is the dense code on the sequence's rows, lengths and band,
// with a row stride of H d or Hkv d). The dense path's strides and lengths are compile-time
// constants and kernel parameters, as they were before packed batches existed.
template <class T, int D, MaskKind kMask, bool kPacked>
__device__ __forceinline__ void fwd_body(const FwdParams& p) {
  using Tr = FwdTraits<D>;
  using E = ElemTraits<T>;
  constexpr int Br = Tr::Br, Bc = Tr::Bc, kStages = Tr::kStages;
  constexpr int kThreads = Tr::kWarps * 32;
  constexpr int kRowsPerWarp = Br / Tr::kWarps;
  constexpr int MT = kRowsPerWarp / 16;  // m16 tiles per warp
  constexpr int KD = D / 16;             // k16 steps of Q.K^T
  constexpr int NS = Bc / 8;             // n8 tiles of S
  constexpr int KS = Bc / 16;            // k16 steps of P.V
  constexpr int NO = D / 8;              // n8 tiles of O
  static_assert(kRowsPerWarp % 16 == 0 && Bc % 16 == 0 && D % 64 == 0, "tile shape");
  static_assert(kStages >= 2, "at least double buffering");
  // The mask's sides (common/band.h): kBanded tests the right side, kLeft the left one too.
  constexpr bool kBanded = kMask != MaskKind::none, kLeft = kMask == MaskKind::both;

  extern __shared__ __align__(256) unsigned char smem_raw[];  // see col_step below
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + Br * D;            // kStages tiles of Bc x D
  T* sV = sK + kStages * Bc * D;  // kStages tiles of Bc x D

  // Causal blocks near the bottom of the matrix have the most keys: launch them first.
  const int q0 = (gridDim.x - 1 - blockIdx.x) * Br;
  // Grid (Q blocks, group, K/V heads): query head z group + y reads K/V head z, with no division
  // (one in the kernel cost the d = 128 kernel a spill at 255 registers). Packed: z is
  // (sequence, K/V head), the grid's x counts the longest sequence's blocks, and a block past its
  // sequence's end returns at once.
  // Packed: this block's rows are its sequence's, found from the offsets. They are read again
  // where they are needed (the K/V loads, the epilogue) rather than held in registers across the
  // loop, which the d = 128 kernel has none to spare for. The dense path is the code from before
  // packed batches: pointers from the kernel's parameters.
  struct Rows {
    const T* Q;
    const T* K;
    const T* V;
    T* O;
    float* LSE;
    int Nq, Nk;
  };
  [[maybe_unused]] auto packed_rows = [&]() -> Rows {
    const int b = static_cast<int>(blockIdx.z) / p.Hkv;
    const int64_t kv_head = static_cast<int>(blockIdx.z) - b * p.Hkv;
    const int64_t head = kv_head * gridDim.y + blockIdx.y;  // in the token's H heads
    const SeqRows sr = seq_rows_reread(p.cu_q, p.cu_k, b);
    const int64_t q_row = static_cast<int64_t>(p.H) * D, kv_row = static_cast<int64_t>(p.Hkv) * D;
    return {static_cast<const T*>(p.q) + sr.q0 * q_row + head * D,
            static_cast<const T*>(p.k) + sr.k0 * kv_row + kv_head * D,
            static_cast<const T*>(p.v) + sr.k0 * kv_row + kv_head * D,
            static_cast<T*>(p.o) + sr.q0 * q_row + head * D,
            p.lse + head * p.total_q + sr.q0,
            sr.nq,
            sr.nk};
  };
  const T* Q;
  const T* K;
  const T* V;
  T* O;
  float* LSE;
  int Nq = p.Nq, Nk = p.Nk;
  Band band = p.band;
  if constexpr (kPacked) {
    const Rows a = packed_rows();
    if (q0 >= a.Nq) return;  // past its sequence's end
    Q = a.Q, K = a.K, V = a.V, O = a.O, LSE = a.LSE;
    Nq = a.Nq;
    Nk = a.Nk;
    band = seq_band(p.band, Nq, Nk);  // the problem's sides, the sequence's lengths
  } else {
    const int64_t kv_head = blockIdx.z;
    const int64_t head = kv_head * gridDim.y + blockIdx.y;
    Q = static_cast<const T*>(p.q) + head * p.Nq * D;
    K = static_cast<const T*>(p.k) + kv_head * p.Nk * D;
    V = static_cast<const T*>(p.v) + kv_head * p.Nk * D;
    O = static_cast<T*>(p.o) + head * p.Nq * D;
    LSE = p.lse + head * p.Nq;
  }
  // Elements between two rows: D (dense), H D or Hkv D (packed).
  const int q_stride = kPacked ? p.H * D : D;
  const int kv_stride = kPacked ? p.Hkv * D : D;

  const int tid = threadIdx.x, lane = tid % 32, g = lane / 4, qd = lane % 4;
  const int warp_row0 = (tid / 32) * kRowsPerWarp;

  // The K/V tiles this block visits, kv0 .. kv0 + n_kv - 1: with a band, none that no row of it
  // sees (those above the causal diagonal, those outside a window are skipped whole).
  const BlockRange kr =
      kBanded ? band.k_blocks(q0 / Br, Br, Bc) : BlockRange{0, (Nk + Bc - 1) / Bc};
  // Without a left side every row's band starts at key 0. At d = 64 and 128 kv0 is then the
  // constant 0, so the K/V loads below compile to the plain ones: at d = 64 against ec149c0's causal
  // kernel 0.999-1.013x, where kv0 from the band ran at 0.978-0.994x (docs/perf.md, "tiled's causal
  // forward against ec149c0"). d = 256 keeps the band's. Without a band (MaskKind::none) kv0 is 0
  // anyway.
  constexpr bool kKv0Zero = !kLeft && (D == 64 || D == 128);
  const int kv0 = kKv0Zero ? 0 : kr.begin;
  int n_kv = kr.end - kv0;
  if constexpr (kMask == MaskKind::right && D == 128) {
    // ec149c0's count: the tiles up to the last key of the block's last real row (the band's count
    // also covers the padding rows of a ragged last block, which are never stored). With the
    // band's count and kv0 = 0, ptxas fitted this kernel in 255 registers without its 8-byte spill,
    // by a schedule that ran at 0.935-0.969x ec149c0's; with this one the loop compiles to
    // ec149c0's but for the mask block and where the band test sits among the Q.K^T MMAs, and runs
    // at 0.990-1.009x ec149c0's (docs/perf.md).
    const int last_key = min(q0 + Br, Nq) - 1 + band.offset + band.right;
    n_kv = last_key < 0 ? 0 : min((Nk + Bc - 1) / Bc, last_key / Bc + 1);
  }
  // Loop invariants: the keys from kv0 * Bc on (the loop counts tiles from there), and the band's
  // offset of the warp (the mask below).
  const int64_t kv_skip = static_cast<int64_t>(kv0) * Bc * kv_stride;  // elements of K, V skipped
  const int nk_rel = Nk - kv0 * Bc;
  const int u0 = kv0 * Bc - (q0 + warp_row0) - band.offset;
  if (n_kv == 0) {  // no row of this block sees a key: O = 0, LSE = -inf
    for (int i = tid; i < Br * D / 2; i += kThreads) {
      const int r = q0 + i / (D / 2);
      if (r < Nq)
        reinterpret_cast<uint32_t*>(O + static_cast<int64_t>(r) * q_stride)[i % (D / 2)] = 0;
    }
    for (int r = tid; r < Br; r += kThreads)
      if (q0 + r < Nq) LSE[q0 + r] = -INFINITY;
    return;
  }

  // Pipeline: group t holds K/V tile t (group 0 also holds Q); kStages - 1 groups in flight.
  auto load_kv = [&](int tile) {
    const int stage = tile % kStages;
    const T* Kt = K;
    const T* Vt = V;
    if constexpr (kPacked) {
      const Rows a = packed_rows();
      Kt = a.K;
      Vt = a.V;
    }
    load_tile<Bc, D, kThreads>(sK + stage * Bc * D, Kt + kv_skip, tile * Bc, nk_rel, kv_stride);
    load_tile<Bc, D, kThreads>(sV + stage * Bc * D, Vt + kv_skip, tile * Bc, nk_rel, kv_stride);
  };
  load_tile<Br, D, kThreads>(sQ, Q, q0, Nq, q_stride);
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < n_kv) load_kv(t);
    cp_async_commit();
  }

  // ldmatrix addresses. Lane l supplies the row address of 8x8 matrix l / 8; its byte offset in a
  // swizzled tile at column step 0 is computed once per operand. The swizzle XORs the 16-byte
  // chunk index with row % 8 and, with c < 2 and r < 8, (2 kk + c) ^ r == 2 kk ^ (c ^ r): moving
  // to the 16 columns of step kk is a single XOR with kk * 32 bytes (tiles are 256-byte aligned),
  // and moving down by 16 rows adds a constant. No per-fragment address is kept in registers.
  constexpr int kRow16 = 16 * D * 2;  // bytes in 16 rows of a tile
  auto col_step = [](uint32_t lane_addr, int kk) {
    return lane_addr ^ static_cast<uint32_t>(kk << 5);
  };
  // Q (A operand, rows = queries): matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15).
  const uint32_t q_lane =
      smem_addr(sQ + swizzled_offset<D>(warp_row0 + (lane & 15), (lane >> 4) * 8));
  // K (B operand of Q.K^T, rows = keys): matrices (cols 0-7, keys 0-7), (cols 8-15, keys 0-7),
  // (cols 0-7, keys 8-15), (cols 8-15, keys 8-15) = b0, b1 of key tiles n and n + 1.
  const uint32_t k_lane = static_cast<uint32_t>(
      2 * swizzled_offset<D>((lane & 7) + ((lane >> 4) << 3), ((lane >> 3) & 1) * 8));
  // V (B operand of P.V, transposed on load): (keys 0-7 | 8-15) x (cols 0-7 | 8-15).
  const uint32_t v_lane = static_cast<uint32_t>(
      2 * swizzled_offset<D>((lane & 7) + (((lane >> 3) & 1) << 3), (lane >> 4) * 8));
  auto load_q = [&](uint32_t(&frag)[4], int mt, int kk) {
    ldmatrix_x4(frag, col_step(q_lane, kk) + mt * kRow16);
  };
  cp_async_wait<kStages - 2>();
  __syncthreads();
  uint32_t q_held[Tr::kQInRegs ? MT * KD : 1][4];  // the whole loop's Q fragments, if held
  if constexpr (Tr::kQInRegs) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int kk = 0; kk < KD; ++kk) load_q(q_held[mt * KD + kk], mt, kk);
  }

  float o[MT][NO][4];
  float m[MT][2], l[MT][2];  // running max (log2 units, scale folded in) and partial row sums
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int n = 0; n < NO; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }

  for (int j = 0; j < n_kv; ++j) {
    cp_async_wait<kStages - 2>();  // tile j has landed (for this thread's copies) ...
    __syncthreads();               // ... for everyone's, and tile j-1's stage is free again
    if (j + kStages - 1 < n_kv) load_kv(j + kStages - 1);
    cp_async_commit();

    const uint32_t kj = smem_addr(sK + (j % kStages) * Bc * D);
    const uint32_t vj = smem_addr(sV + (j % kStages) * Bc * D);

    // S = Q K^T for this warp's rows: K read as B fragments (rows of K are columns of K^T).
    float s[MT][NS][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < NS; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
      uint32_t qf[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (Tr::kQInRegs) {
#pragma unroll
          for (int i = 0; i < 4; ++i) qf[mt][i] = q_held[mt * KD + kk][i];
        } else {
          load_q(qf[mt], mt, kk);
        }
      }
#pragma unroll
      for (int np = 0; np < NS / 2; ++np) {
        uint32_t kf[4];
        ldmatrix_x4(kf, col_step(kj + k_lane, kk) + np * kRow16);
        const uint32_t b0[2] = {kf[0], kf[1]}, b1[2] = {kf[2], kf[3]};
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<T>(s[mt][2 * np], qf[mt], b0);
          mma_16816<T>(s[mt][2 * np + 1], qf[mt], b1);
        }
      }
    }

    // Masks only where they can bite: the ragged last tile, and tiles a row's band crosses.
    // u = (tile's first key) - (warp's first row) - offset: key k of row q is in the band iff
    // -left <= k - q - offset <= right, and over the warp's tile k - q - offset runs from
    // u - (kRowsPerWarp - 1) to u + Bc - 1 (rows past Nq included: they are never stored).
    const int u = u0 + j * Bc;
    const bool ragged = j * Bc + Bc > nk_rel;
    const bool masked = ragged || (kBanded && u + Bc - 1 > band.right) ||
                        (kLeft && u - (kRowsPerWarp - 1) < -band.left);
    if (masked) {
      // This lane's element (row r, column c) of the tile is key k0 + 2 qd + c of row
      // q0 + warp_row0 + g + r: visible iff c < key_end and -left <= t + c - r <= right.
      const int key_end = nk_rel - j * Bc - 2 * qd;
      const int t = u + 2 * qd - g;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < NS; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = mt * 16 + (e >> 1) * 8, c = n * 8 + (e & 1);
            if (c >= key_end ||
                (kBanded && t + c - r > band.right) || (kLeft && t + c - r < -band.left))
              s[mt][n][e] = -INFINITY;
          }
    }

    // Online softmax in base 2: p = 2^(s*scale*log2e - m). A row with nothing visible yet keeps
    // m = -inf and uses 0 in its place so that every p is exp2(-inf) = 0, never NaN.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < NS; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * h], s[mt][n][2 * h + 1]));
        mx = quad_max(mx);
        const float m_new = fmaxf(m[mt][h], mx * p.scale_log2);
        const float m_use = m_new == -INFINITY ? 0.f : m_new;
        const float alpha = fast_exp2(m[mt][h] - m_use);
        m[mt][h] = m_new;
        float rowsum = 0.f;
#pragma unroll
        for (int n = 0; n < NS; ++n)
#pragma unroll
          for (int e = 2 * h; e < 2 * h + 2; ++e) {
            const float pe = fast_exp2(fmaf(s[mt][n][e], p.scale_log2, -m_use));
            s[mt][n][e] = pe;
            rowsum += pe;
          }
        l[mt][h] = l[mt][h] * alpha + rowsum;
#pragma unroll
        for (int n = 0; n < NO; ++n) {
          o[mt][n][2 * h] *= alpha;
          o[mt][n][2 * h + 1] *= alpha;
        }
      }

      // O += P V: the S accumulators, packed to 16 bits, are already P's A fragments.
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = E::pack(s[mt][2 * ks][0], s[mt][2 * ks][1]);
        pa[mt][1] = E::pack(s[mt][2 * ks][2], s[mt][2 * ks][3]);
        pa[mt][2] = E::pack(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1]);
        pa[mt][3] = E::pack(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < NO / 2; ++dp) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, col_step(vj + v_lane, dp) + ks * kRow16);
        const uint32_t b0[2] = {vf[0], vf[1]}, b1[2] = {vf[2], vf[3]};
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<T>(o[mt][2 * dp], pa[mt], b0);
          mma_16816<T>(o[mt][2 * dp + 1], pa[mt], b1);
        }
      }
    }
  }
  cp_async_wait<0>();

  // O = acc / l and LSE = m ln2 + ln l (natural log), for the rows that exist.
  constexpr float kLn2 = 0.6931471805599453f;
  if constexpr (kPacked) {
    const Rows a = packed_rows();
    O = a.O;
    LSE = a.LSE;
    Nq = a.Nq;
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float lt = quad_sum(l[mt][h]);
      const float inv = lt > 0.f ? 1.f / lt : 0.f;
      const int row = q0 + warp_row0 + mt * 16 + g + 8 * h;
      if (row < Nq) {
        T* orow = O + static_cast<int64_t>(row) * q_stride + 2 * qd;
#pragma unroll
        for (int n = 0; n < NO; ++n)
          *reinterpret_cast<uint32_t*>(orow + n * 8) =
              E::pack(o[mt][n][2 * h] * inv, o[mt][n][2 * h + 1] * inv);
        if (qd == 0) LSE[row] = lt > 0.f ? m[mt][h] * kLn2 + logf(lt) : -INFINITY;
      }
    }
}

template <class T, int D, MaskKind kMask>
__global__ void __launch_bounds__(FwdTraits<D>::kWarps * 32, FwdTraits<D>::kMinBlocks)
    fwd_kernel(const FwdParams p) {
  fwd_body<T, D, kMask, false>(p);
}

// A packed batch: every band, both of its sides tested (the lengths differ per sequence, so the
// dense kernel's choice between no mask and a band is not worth a second packed kernel).
template <class T, int D>
__global__ void __launch_bounds__(FwdTraits<D>::kWarps * 32, FwdTraits<D>::kMinBlocks)
    fwd_packed_kernel(const FwdParams p) {
  fwd_body<T, D, MaskKind::both, true>(p);
}

template <class T, int D, MaskKind kMask>
void launch_fwd(const FwdParams& p, int heads, cudaStream_t stream) {
  using Tr = FwdTraits<D>;
  constexpr int kSmem = fwd_smem_bytes<D>();
  auto* kernel = &fwd_kernel<T, D, kMask>;
  if constexpr (kMask == MaskKind::both) {
    if (p.cu_q != nullptr) kernel = &fwd_packed_kernel<T, D>;
  }
  // More than 48 KiB of dynamic shared memory must be asked for, once per kernel and device.
  FLASHLAB_CUDA_CHECK(opt_in_smem(kernel, kSmem));
  const dim3 grid((p.Nq + Tr::Br - 1) / Tr::Br, p.group, heads / p.group);
  kernel<<<grid, Tr::kWarps * 32, kSmem, stream>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::tiled_fwd
