// The Hopper backward's dQ pass at d = 256: recompute's second pass (kernels/03_recompute) with
// the forward's machinery. At d = 256 the outer-K kernel cannot keep its dQ partials: each
// (K block, Q block) pair would add a 64 x 256 fp32 piece into the accumulator at L2, 34 GB of
// reductions a pass at N = 16384, which held the kernel near 300 TFLOP/s whatever issued them
// (docs/perf.md). So the outer-K kernel computes dK and dV alone (bwd_consumer_split_d.cuh) and
// this pass computes dQ with Q blocks outside, K blocks inside, as the forward walks them:
//
//   block: one (query head, Q block of Br = 128 rows) tile, as the forward's tiles (fwd_schedule.cuh)
//   producer (1 thread):  Q_i, dO_i once; K_j (two stages) and V_j (one) for each visited K block
//   consumer warpgroup w (rows 64w .. 64w + 63), per K block j:
//     dP   = dO_i V_j^T          64 x 64, k = 256, both operands from shared memory; release V_j
//     S    = Q_i K_j^T           64 x 64, k = 256
//     P    = exp2(S scale log2e - LSE2), 0 where masked;  dS = P (dP - D)   (registers)
//     dQ  += dS K_j              64 x 256, k = 64, dS from registers (as P in the forward's P V)
//     release K_j
//   dQ * scale -> dQ (16-bit), stored from registers: each row written once, by its own block
//
// Three products a step where the outer-K kernel has five, and no reductions at all: every dQ
// element is one block's sum in a fixed order, so the pass is deterministic, and hopper and
// hopper-deterministic run the same backward at d = 256 (cuda.cu).
//
// Shared memory: Q, dO [D/64][Br][64] (64 KiB each), K [2][D/64][Bc][64] (64 KiB), V [D/64][Bc][64]
// (32 KiB): 224 KiB, no room for a second V stage. V is the first operand a step reads and is
// released after the step's first product, so its next block loads under the rest of the step.
#pragma once

#include <cmath>
#include <cstdint>

#include "bwd_params.h"
#include "common/fa2_bwd/params.h"
#include "common/packed.h"
#include "common/sm80/mma.cuh"
#include "common/sm90/sync.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/wgmma.cuh"
#include "common/smem_opt_in.h"
#include "core/cuda_check.h"
#include "fwd_schedule.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

struct DqLayout {
  using Tr = DqTraits;
  static constexpr int kQBytes = Tr::Br * Tr::D * 2, kKVBytes = Tr::Bc * Tr::D * 2;
  static constexpr int kQ = 0;
  static constexpr int kdO = kQ + kQBytes;
  static constexpr int kK = kdO + kQBytes;
  static constexpr int kV = kK + Tr::kKStages * kKVBytes;
  static constexpr int kBars = kV + kKVBytes;  // q_full, k_full[2], k_empty[2], v_full, v_empty
  static constexpr int kBytes = kBars + 8 * 8;
  static constexpr int kLaunchBytes = kBytes + 1024;  // room to align the base to 1024 bytes
  static_assert(kLaunchBytes <= 227 * 1024, "more shared memory than a block can have");
};

template <class T, bool kBanded, bool kPacked>
struct DqPass {
  using Tr = DqTraits;
  using L = DqLayout;
  static constexpr int D = Tr::D, Br = Tr::Br, Bc = Tr::Bc, S = Tr::kKStages;
  static constexpr int NS = Bc / 2;  // S or dP accumulators: 64 x Bc over 128 threads
  static constexpr int NQ = D / 2;   // dQ accumulators: 64 x D
  static constexpr int NP = Bc / 4;  // dS as packed pairs: the A operand of dS K

  const DqParams& p;
  unsigned char* base;
  hopper_fwd::Tile tl;
  hopper_fwd::SeqView sv;
  ::flashlab::FLASHLAB_FOLDER::BlockSchedule sc;

  __device__ T* q() const { return reinterpret_cast<T*>(base + L::kQ); }
  __device__ T* dO() const { return reinterpret_cast<T*>(base + L::kdO); }
  __device__ T* k(int s) const { return reinterpret_cast<T*>(base + L::kK) + s * Bc * D; }
  __device__ T* v() const { return reinterpret_cast<T*>(base + L::kV); }
  __device__ uint64_t* q_full() const { return reinterpret_cast<uint64_t*>(base + L::kBars); }
  __device__ uint64_t* k_full() const { return q_full() + 1; }   // [2]
  __device__ uint64_t* k_empty() const { return q_full() + 3; }  // [2]
  __device__ uint64_t* v_full() const { return q_full() + 5; }
  __device__ uint64_t* v_empty() const { return q_full() + 6; }

  __device__ const CUtensorMap* map(int m) const {
    if constexpr (kPacked) return p.f.seq_maps + kDqMaps * tl.seq + m;
    const CUtensorMap* const maps[kDqMaps] = {&p.f.q_map, &p.f.k_map, &p.f.v_map, &p.do_map};
    return maps[m];
  }

  // ---- the producer: one thread ----
  __device__ void produce() const {
    if constexpr (kPacked) {
      for (int m = 0; m < kDqMaps; ++m) sm90::tensormap_acquire(map(m));
    }
    sm90::mbar_arrive_expect_tx(q_full(), 2 * Br * D * 2);
    for (int blk = 0; blk < D / 64; ++blk) {
      sm90::tma_load_3d(q() + blk * Br * 64, map(kDqMapQ), 64 * blk, sc.q0, tl.head, q_full());
      sm90::tma_load_3d(dO() + blk * Br * 64, map(kDqMapDO), 64 * blk, sc.q0, tl.head, q_full());
    }
    const int kv_head = tl.head / p.f.group;
    for (int it = 0; it < sc.n_kv; ++it) {
      const int s = it % S, row = sc.kv_block<kBanded>(it) * Bc;
      sm90::mbar_wait(k_empty() + s, ((it / S) & 1) ^ 1);
      sm90::mbar_arrive_expect_tx(k_full() + s, Bc * D * 2);
      for (int blk = 0; blk < D / 64; ++blk)
        sm90::tma_load_3d(k(s) + blk * Bc * 64, map(kDqMapK), 64 * blk, row, kv_head, k_full() + s);
      sm90::mbar_wait(v_empty(), (it & 1) ^ 1);
      sm90::mbar_arrive_expect_tx(v_full(), Bc * D * 2);
      for (int blk = 0; blk < D / 64; ++blk)
        sm90::tma_load_3d(v() + blk * Bc * 64, map(kDqMapV), 64 * blk, row, kv_head, v_full());
    }
  }

  // ---- a consumer warpgroup ----
  // S = X Y^T for this warpgroup's 64 rows of X (Q or dO, Br rows a column block) and the Bc rows
  // of Y (K or V): both K-major, D/16 steps of k16 across the D/64 column blocks.
  __device__ static void issue_scores(float (&acc)[NS], uint32_t x, uint32_t y) {
    const uint64_t xd = sm90::smem_desc(x), yd = sm90::smem_desc(y);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t blk = kk / 4, step = (kk % 4) * 32;
      sm90::wgmma_ss<T, Bc>(acc, sm90::desc_advance(xd, blk * Br * 128 + step),
                            sm90::desc_advance(yd, blk * Bc * 128 + step), kk > 0);
    }
  }

  __device__ void consume(int w, int t) const {
    float dq[NQ];
#pragma unroll
    for (int e = 0; e < NQ; ++e) dq[e] = 0.f;
    // The thread's two rows (accumulator element e sits in row h = (e >> 1) & 1): LSE2 and D, and
    // +inf / 0 for padding rows (above row 0 of a banded head's first block, or past its end),
    // whose P is then 0.
    const int lane = t % 32;
    const int row0 = sc.q0 + 64 * w + 16 * (t / 32) + lane / 4;
    float lse2[2], dd[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + 8 * h;
      const bool real = r >= 0 && r < sv.nq;
      const int64_t at = static_cast<int64_t>(tl.head) * p.lse_head_rows +
                         (kPacked ? bwd_packed_lse_start(sv.q_tok, tl.seq) : 0) + r;
      lse2[h] = real ? p.lse2[at] : INFINITY;
      dd[h] = real ? p.dd[at] : 0.f;
    }
    if (sc.n_kv > 0) {
      sm90::mbar_wait(q_full(), 0);
      const uint32_t qa = smem_addr(q()) + w * 64 * 128, doa = smem_addr(dO()) + w * 64 * 128;
      for (int it = 0; it < sc.n_kv; ++it) {
        const int s = it % S;
        float dp[NS], sc_[NS];
        sm90::mbar_wait(v_full(), it & 1);
        sm90::wgmma_fence();
        issue_scores(dp, doa, smem_addr(v()));
        sm90::wgmma_commit();
        sm90::mbar_wait(k_full() + s, (it / S) & 1);
        issue_scores(sc_, qa, smem_addr(k(s)));
        sm90::wgmma_commit();
        sm90::wgmma_wait<1>();
        sm90::pin(dp);
        sm90::mbar_arrive(v_empty());
        sm90::wgmma_wait<0>();
        sm90::pin(sc_);
        uint32_t ds[NP];
        if (sc.masked<kBanded>(it))
          ds_of<true>(sc_, dp, lse2, dd, it, row0, lane, ds);
        else
          ds_of<false>(sc_, dp, lse2, dd, it, row0, lane, ds);
        sm90::wgmma_fence();
        const uint64_t kd = sm90::smem_desc(smem_addr(k(s)), Bc * 128);
#pragma unroll
        for (int kk = 0; kk < Bc / 16; ++kk) {
          const uint32_t a[4] = {ds[4 * kk], ds[4 * kk + 1], ds[4 * kk + 2], ds[4 * kk + 3]};
          sm90::wgmma_rs<T, D>(dq, a, sm90::desc_advance(kd, kk * 16 * 128), 1);
        }
        sm90::wgmma_commit();
        sm90::wgmma_wait<0>();
        sm90::pin(dq);
        sm90::mbar_arrive(k_empty() + s);
      }
    }
    store_dq(dq, row0, lane);
  }

  // dS = P (dP - D), P = exp2(S scale log2e - LSE2), as 16-bit pairs in the A operand's layout
  // (the accumulator's: sm90/wgmma.cuh). kMasked: keys a row may not see give P = 0 (past Nk,
  // past the diagonal or a window's right side, before its left side); the thread's element e
  // sits at key key0 + 8 (e >> 2) + (e & 1) of row h = (e >> 1) & 1.
  template <bool kMasked>
  __device__ void ds_of(const float (&s)[NS], const float (&dp)[NS], const float (&lse2)[2],
                        const float (&dd)[2], int it, int row0, int lane,
                        uint32_t (&ds)[NP]) const {
    const int key0 = sc.kv_block<kBanded>(it) * Bc + 2 * (lane % 4);
    int first[2], last[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int diag = row0 + 8 * h + sv.offset;
      last[h] = (kBanded ? min(sv.nk - 1, diag + p.f.band_right) : sv.nk - 1) - key0;
      first[h] = kBanded ? diag - p.f.band_left - key0 : 0;
    }
#pragma unroll
    for (int e = 0; e < NS; e += 2) {
      float x[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int h = ((e + i) >> 1) & 1, c = 8 * ((e + i) >> 2) + ((e + i) & 1);
        float pr = fast_exp2(fmaf(s[e + i], p.f.scale_log2, -lse2[h]));
        if (kMasked && (c > last[h] || c < first[h])) pr = 0.f;
        x[i] = pr * (dp[e + i] - dd[h]);
      }
      ds[e / 2] = ElemTraits<T>::pack(x[0], x[1]);
    }
  }

  // dQ = scale dS K, each pair of neighbouring columns one 32-bit store; rows past the sequence
  // (or above its first) are padding and stay unwritten.
  __device__ void store_dq(const float (&dq)[NQ], int row0, int lane) const {
    T* out = static_cast<T*>(p.dq);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + 8 * h;
      if (r < 0 || r >= sv.nq) continue;
      const int64_t at = kPacked ? (static_cast<int64_t>(sv.q_tok + r) * p.f.heads + tl.head) * D
                                 : (static_cast<int64_t>(tl.head) * p.f.Nq + r) * D;
#pragma unroll
      for (int e = 2 * h; e < NQ; e += 4) {
        const int c = 8 * (e >> 2) + 2 * (lane % 4);
        *reinterpret_cast<uint32_t*>(out + at + c) =
            ElemTraits<T>::pack(dq[e] * p.scale, dq[e + 1] * p.scale);
      }
    }
  }
};

// Registers after setmaxnreg, as the outer-K kernel's: 128 x 24 + 256 x 240 = 64512.
template <class T, bool kBanded, bool kPacked>
__global__ void __launch_bounds__(DqTraits::kThreads, 1)
    dq_kernel(const __grid_constant__ DqParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tr = DqTraits;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  DqPass<T, kBanded, kPacked> pass{p, smem_raw + ((1024 - (a & 1023)) & 1023)};
  if (threadIdx.x == 0) {
    sm90::mbar_init(pass.q_full(), 1);
    for (int s = 0; s < Tr::kKStages; ++s) {
      sm90::mbar_init(pass.k_full() + s, 1);
      sm90::mbar_init(pass.k_empty() + s, 256);  // every consumer thread releases
    }
    sm90::mbar_init(pass.v_full(), 1);
    sm90::mbar_init(pass.v_empty(), 256);
    sm90::mbar_fence_init();
  }
  __syncthreads();
  // Causal and windowed heads: the Q blocks with the most keys first (fwd_schedule.cuh).
  pass.tl = hopper_fwd::tile_of<kBanded, kPacked, Tr::Br>(p.f, blockIdx.x);
  pass.sv = hopper_fwd::seq_view<kPacked>(p.f, pass.tl.seq);
  pass.sc = hopper_fwd::block_schedule<Tr::Br, Tr::Bc, kBanded>(p.f, pass.sv, pass.tl.q_block);
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (wg == 0) {
    sm90::setmaxnreg_dec<24>();
    if (t == 0 && pass.sc.n_kv > 0) pass.produce();
    return;
  }
  sm90::setmaxnreg_inc<240>();
  pass.consume(wg - 1, t);
#endif
}

// One block per tile (p.f.tiles of them).
template <class T, bool kBanded, bool kPacked>
void launch_dq_pass(const DqParams& p, cudaStream_t stream) {
  auto* kernel = &dq_kernel<T, kBanded, kPacked>;
  FLASHLAB_CUDA_CHECK(opt_in_smem(kernel, DqLayout::kLaunchBytes));  // once per kernel and device
  if (p.f.tiles == 0) return;
  kernel<<<p.f.tiles, DqTraits::kThreads, DqLayout::kLaunchBytes, stream>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
