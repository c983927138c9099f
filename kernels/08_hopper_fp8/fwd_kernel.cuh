// The FP8 forward kernel: the twin's block schedule and roundings on e4m3 tensor cores (wgmma
// m64nNk32, fp32 accumulators), its operands the quantization pass's codes (quant.cuh) brought by
// bulk tensor copies, in the bf16 rung's arrangement (kernels/06_hopper: a producer warpgroup,
// two consumer warpgroups taking turns on the tensor cores, the softmax of one block while the
// products of the next run).
//
// One CTA per (query head, Br = 128 query rows), three warpgroups. (kConsumers = 3, four
// warpgroups with Br = 192 and without the overlap, was measured on key tiles of 128 in perf.md's
// step 7: -2 % at d = 128, +4 % at d = 64. At 160 registers it needs Bc = 128 back, and with it
// m64n128k32 for S in scripts/gen_wgmma.py.)
//
//   warpgroup 0, the producer (24 registers a thread; one thread issues every copy):
//     Q8 once, then for each K/V block of the visiting order (the last block the Q block sees
//     down to the first: the twin's order, because where P is rounded depends on the running
//     max) K8_j into K stage it % kStages and V8_j^T into V stage it % kStages, each on its own
//     `full` barrier, each stage reused once both consumers released it on `empty`
//   warpgroups 1 and 2, the consumers (240 registers a thread), rows 64 w .. 64 w + 63 each:
//
//     wait K_j, V_{j-1}
//     take the turn                      (the other consumer is in its softmax now)
//     S   = Q8 K8_j^T                     issued: e4m3 x e4m3, both from shared memory
//     O  *= r                             the last block's factor, while S runs
//     O  += P8_{j-1} V8_{j-1}             issued: P8 from registers, V8^T from shared memory
//     pass the turn
//     wait for S; release K_j
//     m'  = max(m, f rowmax S)            f = scale log2(e) sQ_i sK_j (> 0, so the max of f S
//     P   = 2^(f S + 8 - m') = 2^8 P       is f times the max of S); masked keys -inf
//     l   = 2^(m - m') l + rowsum P
//     wait for P V; release V_{j-1}
//     r   = 2^(m - m') sV_{j-1} / sV_j    (O is kept in units of the sV of the block it takes
//                                          next, so each product accumulates into it unscaled)
//     P8_j = e4m3(P) packed as the A operand (below)
//
//   O = O sV_0 / l -> bf16 from registers;  LSE = (m - 8) ln 2 + ln l   (l holds 2^8 sum P)
//
//   shared memory (every tile 1024-byte aligned)
//     Q8    [Br][d]                 d bytes a row: 64-byte swizzle at d = 64, 128-byte at d = 128
//     K8    [kStages][Bc][d]
//     V8^T  [kStages][3][d][64]     keys contiguous, in the quantization pass's order (below); a
//                                   row of 192 keys is wider than a swizzle (128 bytes at most),
//                                   so each stage holds three panels of 64 keys, 64-byte swizzle
//     barriers  q_full, k_full[s], k_empty[s], v_full[s], v_empty[s]
//
// Key tiles of 192 (Bc), not 128: a block's fixed cost (the turn, the waits, the descriptors, the
// row max's shuffles, O's rescale: about 220 instructions a thread at d = 128 in the SASS) is the
// same for any Bc, and 192 keys spread it over 1.5 times the keys; S takes 96 registers of the
// consumers' 240 (64 at 128). The twin's K/V blocks and their scales follow (cpu.cpp: kBc), since
// where P is rounded depends on the blocks.
//
// P from registers. For 8-bit types the A operand's register layout differs from the
// accumulator's (sm90/wgmma.cuh): in each 16 keys a thread's accumulator holds keys 2q, 2q+1,
// 8+2q, 9+2q of its row, where the operand wants 4q .. 4q+3. So the four codes of those keys go
// into one register in that order, and the quantization pass stores V^T's keys permuted within
// each 16 the same way (key 8 + 2q at column 4q + 2, ...: quant.cuh's v_column): the products
// P V then pair every P with its own key's V, and no code moves between threads.
//
// Built for sm_90a only.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "common/sm80/mma.cuh"
#include "common/smem_opt_in.h"
#include "common/sm90/sync.cuh"
#include "common/sm90/tma.cuh"
#include "common/sm90/wgmma.cuh"
#include "core/cuda_check.h"

namespace flashlab::cuda::FLASHLAB_FOLDER::fp8_fwd {

constexpr int Bc = 192;            // the twin's K/V blocks: also the blocks of their scales
constexpr int kVPanel = 64;        // keys of a V^T panel (64 bytes a row: the 64-byte swizzle)
constexpr int kQBlock = 128;       // the blocks of Q's scales
constexpr int kStages = 4;         // K and V rings
constexpr int kConsumers = 2;      // warpgroups of 64 rows
constexpr int Br = 64 * kConsumers;  // query rows a CTA (each row's numbers do not depend on it)
constexpr int kThreads = 128 * (1 + kConsumers);
// Two consumers hold S and O and P together, and run the softmax of one block under the P V of
// the last (240 registers); three have 160, so each waits for its P V before its next S.
constexpr bool kOverlap = kConsumers == 2;
static_assert(kConsumers == 2 || Bc == 128,
              "three consumers have 160 registers: S and O fit them at Bc = 128 only");
constexpr float kPShiftLog2 = 8.f;  // P is rounded as 2^8 P (cpu.cpp: why)
// Registers a thread after setmaxnreg: 128 x 24 + 256 x 240 = 64512 of the SM's 65536.
constexpr uint32_t kProducerRegs = 24, kConsumerRegs = kConsumers == 2 ? 240 : 160;
// Named barriers: kTurnBarrier + w is "consumer w's turn on the tensor cores" (0 is
// __syncthreads).
constexpr uint32_t kTurnBarrier = 1;
// The consumers take turns on the tensor cores (off: each issues whenever it is ready).
constexpr bool kPingpong = true;

struct FwdParams {
  CUtensorMap q_map;   // Q8 [B H][Nq][d], boxes d x Br
  CUtensorMap k_map;   // K8 [B Hkv][Nk][d], boxes d x Bc
  CUtensorMap vt_map;  // V8^T [B Hkv][d][Nk16], boxes kVPanel x d (three a stage)
  const float* sq;     // [B H][q_blocks], or one (per tensor)
  const float* sk;     // [B Hkv][k_blocks], or one
  const float* sv;
  __nv_bfloat16* o;  // [B H][Nq][d]
  float* lse;        // [B H][Nq]
  int Nq, Nk;
  int group;          // query heads per K/V head: query head (b H + h) reads K/V head (b H + h) / group
  int causal_offset;  // Nk - Nq: query i sees keys j <= i + causal_offset
  float scale_log2;   // softmax scale * log2(e)
  int q_blocks, k_blocks;
  int per_tensor;  // one scale per tensor: every block reads index 0
};

// Byte offsets in shared memory, from a 1024-aligned base.
template <int D>
struct Smem {
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + Br * D;
  static constexpr int kV = kK + kStages * Bc * D;
  static constexpr int kBars = kV + kStages * D * Bc;
  static constexpr int kBytes = kBars + 8 * (1 + 4 * kStages);
  static constexpr int kLaunchBytes = kBytes + 1024;  // room to align the dynamic base
  static constexpr int kVPanelBytes = D * kVPanel;
  static_assert(kK % 1024 == 0 && kV % 1024 == 0 && kBars % 1024 == 0, "tiles 1024-aligned");
  static_assert(Bc % kVPanel == 0 && kVPanelBytes % 512 == 0, "whole panels, each a swizzle atom");
  static_assert(kLaunchBytes <= 227 * 1024, "more shared memory than a block can have");
};

// A K-major operand tile whose rows are D bytes (Q8, K8): the swizzle the copy engine wrote.
template <int D>
__device__ __forceinline__ uint64_t kmajor_desc(uint32_t addr) {
  if constexpr (D == 64)
    return sm90::smem_desc_sw64(addr);
  else
    return sm90::smem_desc(addr);
}

// Two fp32 values to two e4m3 codes (saturating, nearest even), the first in the low byte.
__device__ __forceinline__ uint32_t e4m3x2(float a, float b) {
  return static_cast<uint32_t>(
      __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
}

template <int D, bool kCausal>
struct Consumer {
  static constexpr int NS = Bc / 2;  // S accumulators a thread (64 x Bc over 128 threads): 96
  static constexpr int NO = D / 2;   // O accumulators a thread
  static constexpr int NP = Bc / 8;  // P codes a thread, four a register
  using L = Smem<D>;

  const FwdParams& p;
  unsigned char* sm;
  int cw;  // consumer warpgroup: 0, 1
  int t;   // thread within it
  int last, kvh, q0;

  float o[NO];
  float s[NS];
  uint32_t pf[NP];
  float m[2], l[2];  // running max (log2 units, scales folded in), this thread's part of 2^8 sum P

  __device__ uint64_t* bars() const { return reinterpret_cast<uint64_t*>(sm + L::kBars); }
  __device__ uint64_t* q_full() const { return bars(); }
  __device__ uint64_t* k_full() const { return bars() + 1; }
  __device__ uint64_t* k_empty() const { return bars() + 1 + kStages; }
  __device__ uint64_t* v_full() const { return bars() + 1 + 2 * kStages; }
  __device__ uint64_t* v_empty() const { return bars() + 1 + 3 * kStages; }

  static __device__ uint32_t parity(int it) { return (it / kStages) & 1; }

  // One turn on the tensor cores: wait for it, issue (the fence first: ordinary code has written
  // registers the products read), pass it on.
  template <class Issue>
  __device__ void on_tensor_cores(Issue&& issue) {
    take_turn();
    sm90::wgmma_fence();
    issue();
    pass_turn();
  }

  __device__ void take_turn() const {
    if constexpr (kPingpong) sm90::named_sync(kTurnBarrier + cw, 256);
  }
  __device__ void pass_turn() const {
    if constexpr (kPingpong) sm90::named_arrive(kTurnBarrier + (cw + 1) % kConsumers, 256);
  }

  // S = Q8 K8^T: 64 x Bc, d / 32 steps of k32, both operands K-major in shared memory.
  __device__ void issue_s(int stage) {
    const uint64_t q_desc = kmajor_desc<D>(smem_addr(sm + L::kQ) + cw * 64 * D);
    const uint64_t k_desc = kmajor_desc<D>(smem_addr(sm + L::kK + stage * Bc * D));
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk)
      sm90::wgmma_ss_e4m3<Bc>(s, sm90::desc_advance(q_desc, 32 * kk),
                              sm90::desc_advance(k_desc, 32 * kk), kk > 0);
    sm90::wgmma_commit();
  }

  // O += P8 V8: 64 x d, Bc / 32 steps of k32, two in each V^T panel; P8 from registers, V8^T
  // K-major in shared memory.
  __device__ void issue_pv(int stage) {
    const uint64_t v_desc = sm90::smem_desc_sw64(smem_addr(sm + L::kV + stage * D * Bc));
#pragma unroll
    for (int kk = 0; kk < Bc / 32; ++kk) {
      const uint32_t a[4] = {pf[4 * kk], pf[4 * kk + 1], pf[4 * kk + 2], pf[4 * kk + 3]};
      constexpr int kSteps = kVPanel / 32;  // k32 steps a panel
      const uint32_t at = (kk / kSteps) * L::kVPanelBytes + 32 * (kk % kSteps);
      sm90::wgmma_rs_e4m3<D>(o, a, sm90::desc_advance(v_desc, at), 1);
    }
    sm90::wgmma_commit();
  }

  // O *= the factor of its row. Pinned first, so that the products run after S is issued: the
  // rescale then sits in the turn, under S, and off the path from the softmax to the next turn.
  __device__ void rescale_o(const float (&f)[2]) {
    sm90::pin(o);
#pragma unroll
    for (int i = 0; i < NO; ++i) o[i] *= f[(i >> 1) & 1];
  }

  // Keys a row may not see get -inf: past Nk, past the row's causal diagonal. Element i of the
  // thread sits at key j Bc + 8 (i / 4) + 2 (lane % 4) + i % 2 of its row h(i) = (i / 2) % 2.
  __device__ void apply_mask(int j) {
    const int lane = t % 32;
    const int key0 = j * Bc + 2 * (lane % 4);
    const int row0 = q0 + 64 * cw + 16 * (t / 32) + lane / 4;
    int lastk[2];  // the last key each of the thread's two rows sees, minus key0
#pragma unroll
    for (int h = 0; h < 2; ++h)
      lastk[h] = (kCausal ? min(p.Nk - 1, row0 + 8 * h + p.causal_offset) : p.Nk - 1) - key0;
#pragma unroll
    for (int i = 0; i < NS; ++i)
      if (8 * (i >> 2) + (i & 1) > lastk[(i >> 1) & 1]) s[i] = -INFINITY;
  }

  // Online softmax (base 2) of the thread's two rows with the block's scale f folded in; P comes
  // out as 2^8 P. A row with nothing visible yet keeps m = -inf and uses 0 in its place, so that
  // its P is 2^-inf = 0, never NaN.
  __device__ void softmax(int j, float f, float (&alpha)[2]) {
    const bool masked = (j + 1) * Bc > p.Nk || (kCausal && (j + 1) * Bc - 1 > q0 + p.causal_offset);
    if (masked) apply_mask(j);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // The row's max as a tree (depth 6, not a chain of 48 dependent steps): 24 pairs folded
      // to 12, 6, 3, then the last three.
      float v[NS / 4];
#pragma unroll
      for (int k = 0; k < NS / 4; ++k) v[k] = fmaxf(s[4 * k + 2 * h], s[4 * k + 2 * h + 1]);
      static_assert(NS / 4 == 24, "the tree below folds 24 pairs");
#pragma unroll
      for (int k = 0; k < 12; ++k) v[k] = fmaxf(v[k], v[k + 12]);
#pragma unroll
      for (int k = 0; k < 6; ++k) v[k] = fmaxf(v[k], v[k + 6]);
#pragma unroll
      for (int k = 0; k < 3; ++k) v[k] = fmaxf(v[k], v[k + 3]);
      const float mx = quad_max(fmaxf(fmaxf(v[0], v[1]), v[2]));
      const float m_new = fmaxf(m[h], mx * f);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      alpha[h] = fast_exp2(m[h] - m_use);
      m[h] = m_new;
      const float bias = kPShiftLog2 - m_use;
      float sum = 0.f;
#pragma unroll
      for (int k = 0; k < NS / 4; ++k)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * k + 2 * h + e];
          x = fast_exp2(fmaf(x, f, bias));
          sum += x;
        }
      l[h] = l[h] * alpha[h] + sum;
    }
  }

  // 2^8 P to e4m3, in the A operand's order: register r of k32 step kk holds, of row h = r % 2,
  // the keys 2q, 2q+1, 8+2q, 9+2q of the step's (r / 2)-th 16 -- accumulators base, base + 1,
  // base + 4, base + 5 with base = 16 kk + 8 (r / 2) + 2 h.
  __device__ void pack_p() {
#pragma unroll
    for (int kk = 0; kk < Bc / 32; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int b = 16 * kk + 8 * (r >> 1) + 2 * (r & 1);
        pf[4 * kk + r] = e4m3x2(s[b], s[b + 1]) | e4m3x2(s[b + 4], s[b + 5]) << 16;
      }
  }

  __device__ float scale_k(int j) const { return p.sk[p.per_tensor ? 0 : kvh * p.k_blocks + j]; }
  __device__ float scale_v(int j) const { return p.sv[p.per_tensor ? 0 : kvh * p.k_blocks + j]; }

  // Without the overlap (three consumers): S, its softmax, then P V, each waited for; the turns
  // go round the three warpgroups twice a block (S, then P V), so that the others' products run
  // while one does its softmax.
  __device__ void run_plain(float f_q) {
    const int n = last + 1;
#pragma unroll
    for (int i = 0; i < NO; ++i) o[i] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    float alpha[2];
    float sv_now = scale_v(last);
    if (kPingpong && cw == kConsumers - 1) sm90::named_arrive(kTurnBarrier + 0, 256);  // opens
    sm90::mbar_wait(q_full(), 0);
    for (int it = 0; it < n; ++it) {
      const int j = last - it, st = it % kStages;
      const float sk = scale_k(j), sv = scale_v(j);
      sm90::mbar_wait(k_full() + st, parity(it));
      on_tensor_cores([&] { issue_s(st); });
      sm90::wgmma_wait<0>();
      sm90::pin(s);
      sm90::mbar_arrive(k_empty() + st);
      softmax(j, f_q * sk, alpha);
      const float to_sv = __fdividef(sv_now, sv);
      sv_now = sv;
      float f[2] = {alpha[0] * to_sv, alpha[1] * to_sv};
      rescale_o(f);
      pack_p();
      sm90::mbar_wait(v_full() + st, parity(it));
      on_tensor_cores([&] { issue_pv(st); });
      sm90::wgmma_wait<0>();
      sm90::pin(o);
      sm90::pin(pf);
      sm90::mbar_arrive(v_empty() + st);
    }
    if (kPingpong && cw == 0) sm90::named_sync(kTurnBarrier + 0, 256);  // the last turn passed
    epilogue(sv_now);
  }

  // O sV / l (l holds 2^8 sum P) to bf16, LSE = (m - 8) ln 2 + ln l; rows past Nq are not
  // stored.
  __device__ void epilogue(float sv_now) {
    constexpr float kLn2 = 0.6931471805599453f;
    const int lane = t % 32;
    const int row_lo = q0 + 64 * cw + 16 * (t / 32) + lane / 4;
    const int qh = blockIdx.y;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float lt = quad_sum(l[h]);
      const int row = row_lo + 8 * h;
      const float inv = lt > 0.f ? sv_now / lt : 0.f;
      if (row < p.Nq) {
        __nv_bfloat16* out = p.o + (static_cast<int64_t>(qh) * p.Nq + row) * D;
#pragma unroll
        for (int i = 2 * h; i < NO; i += 4) {
          const int col = 8 * (i >> 2) + 2 * (lane % 4);
          *reinterpret_cast<__nv_bfloat162*>(out + col) =
              __floats2bfloat162_rn(o[i] * inv, o[i + 1] * inv);
        }
        if (lane % 4 == 0)
          p.lse[static_cast<int64_t>(qh) * p.Nq + row] =
              lt > 0.f ? (m[h] - kPShiftLog2) * kLn2 + logf(lt) : -INFINITY;
      }
    }
  }

  __device__ void run() {
    const int n = last + 1;
    // The Q scale of the warpgroup's rows (rows past Nq take the last block's: never stored).
    const int q_scale_block = min((q0 + 64 * cw) / kQBlock, p.q_blocks - 1);
    const float f_q = p.scale_log2 * p.sq[p.per_tensor ? 0 : blockIdx.y * p.q_blocks + q_scale_block];
    if constexpr (!kOverlap) {
      run_plain(f_q);
      return;
    }
#pragma unroll
    for (int i = 0; i < NO; ++i) o[i] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    float alpha[2];
    float resc[2] = {0.f, 0.f};  // O's factors before the next P V: 2^(m - m') sV_{j+1} / sV_j
    // The scales of the block in hand and of the next (loaded one block ahead).
    float sk = scale_k(last), sv_now = scale_v(last);
    float sk_next = n > 1 ? scale_k(last - 1) : 1.f, sv_next = n > 1 ? scale_v(last - 1) : 1.f;

    if (kPingpong && cw == kConsumers - 1) sm90::named_arrive(kTurnBarrier + 0, 256);  // opens
    sm90::mbar_wait(q_full(), 0);
    // The first block of the visiting order: S alone.
    sm90::mbar_wait(k_full(), 0);
    on_tensor_cores([&] { issue_s(0); });
    sm90::wgmma_wait<0>();
    sm90::pin(s);
    sm90::mbar_arrive(k_empty());
    softmax(last, f_q * sk, alpha);  // O is still 0: nothing to rescale
    pack_p();
    for (int it = 1; it < n; ++it) {
      const int j = last - it, st = it % kStages, prev = (it - 1) % kStages;
      sk = sk_next;
      const float sv = sv_next;
      if (it + 1 < n) {
        sk_next = scale_k(j - 1);
        sv_next = scale_v(j - 1);
      }
      sm90::mbar_wait(k_full() + st, parity(it));
      sm90::mbar_wait(v_full() + prev, parity(it - 1));
      on_tensor_cores([&] {
        issue_s(st);
        rescale_o(resc);  // while S runs: the last softmax's factors, before P V reads O
        sm90::wgmma_fence();
        issue_pv(prev);
      });
      sm90::wgmma_wait<1>();  // S of this block is done; P V of the last one may still run
      sm90::pin(s);
      sm90::mbar_arrive(k_empty() + st);
      softmax(j, f_q * sk, alpha);
      // The softmax is ordinary code: without this the compiler may schedule the wait for P V
      // first, and the softmax would no longer run under the product.
      sm90::pin(s);
      sm90::wgmma_wait<0>();
      sm90::pin(o);
      sm90::pin(pf);  // P8 of the last block is read by then: pack_p may overwrite it
      sm90::mbar_arrive(v_empty() + prev);
      const float to_sv = __fdividef(sv_now, sv);  // the fast division: no slow path per block
      sv_now = sv;
      resc[0] = alpha[0] * to_sv;
      resc[1] = alpha[1] * to_sv;
      pack_p();
    }
    // P V of the last block.
    const int st = (n - 1) % kStages;
    sm90::mbar_wait(v_full() + st, parity(n - 1));
    rescale_o(resc);  // no S to run under: before the turn
    on_tensor_cores([&] { issue_pv(st); });
    sm90::wgmma_wait<0>();
    sm90::pin(o);
    sm90::mbar_arrive(v_empty() + st);
    if (kPingpong && cw == 0) sm90::named_sync(kTurnBarrier + 0, 256);  // the last turn passed

    epilogue(sv_now);
  }
};

template <int D, bool kCausal>
__global__ void __launch_bounds__(kThreads, 1) fwd_kernel(const __grid_constant__ FwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = Smem<D>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* sm = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});

  const int q_block = blockIdx.x, qh = blockIdx.y, kvh = qh / p.group;
  const int q0 = q_block * Br;
  // The K/V blocks the Q block sees: 0 .. last (the causal diagonal of its last real row).
  int last = p.k_blocks - 1;
  if constexpr (kCausal) {
    const int diag = min(q0 + Br, p.Nq) - 1 + p.causal_offset;
    last = diag < 0 ? -1 : min(last, diag / Bc);
  }
  if (last < 0) {  // no row of the block sees a key: O = 0, LSE = -inf
    for (int i = threadIdx.x; i < Br * D / 2; i += kThreads) {
      const int r = q0 + i / (D / 2);
      if (r < p.Nq)
        reinterpret_cast<uint32_t*>(p.o + (static_cast<int64_t>(qh) * p.Nq + r) * D)[i % (D / 2)] = 0;
    }
    if (threadIdx.x < Br && q0 + static_cast<int>(threadIdx.x) < p.Nq)
      p.lse[static_cast<int64_t>(qh) * p.Nq + q0 + threadIdx.x] = -INFINITY;
    return;
  }

  uint64_t* bars = reinterpret_cast<uint64_t*>(sm + L::kBars);
  uint64_t *q_full = bars, *k_full = bars + 1, *k_empty = k_full + kStages,
           *v_full = k_full + 2 * kStages, *v_empty = k_full + 3 * kStages;
  if (threadIdx.x == 0) {
    sm90::mbar_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      sm90::mbar_init(k_full + s, 1);
      sm90::mbar_init(v_full + s, 1);
      sm90::mbar_init(k_empty + s, 128 * kConsumers);  // every consumer thread releases
      sm90::mbar_init(v_empty + s, 128 * kConsumers);
    }
    sm90::mbar_fence_init();
    sm90::tma_prefetch_map(&p.q_map);
    sm90::tma_prefetch_map(&p.k_map);
    sm90::tma_prefetch_map(&p.vt_map);
  }
  __syncthreads();

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (wg == 0) {  // the producer: one thread issues every copy, the others leave
    sm90::setmaxnreg_dec<kProducerRegs>();
    if (t != 0) return;
    sm90::mbar_arrive_expect_tx(q_full, Br * D);
    sm90::tma_load_3d(sm + L::kQ, &p.q_map, 0, q0, qh, q_full);
    // Block `it` of the visiting order (j = last - it) into stage it % kStages, once both
    // consumers released what the stage held kStages blocks ago (the parity flips each lap; the
    // first lap's wait returns at once). A box clipped at Nk arrives whole, its rest as zeros.
    for (int it = 0; it <= last; ++it) {
      const int s = it % kStages, j = last - it;
      const uint32_t free = ((it / kStages) & 1) ^ 1;
      sm90::mbar_wait(k_empty + s, free);
      sm90::mbar_arrive_expect_tx(k_full + s, Bc * D);
      sm90::tma_load_3d(sm + L::kK + s * Bc * D, &p.k_map, 0, j * Bc, kvh, k_full + s);
      sm90::mbar_wait(v_empty + s, free);
      sm90::mbar_arrive_expect_tx(v_full + s, D * Bc);
      for (int panel = 0; panel < Bc / kVPanel; ++panel)
        sm90::tma_load_3d(sm + L::kV + s * D * Bc + panel * L::kVPanelBytes, &p.vt_map,
                          j * Bc + panel * kVPanel, 0, kvh, v_full + s);
    }
    return;
  }
  sm90::setmaxnreg_inc<kConsumerRegs>();
  Consumer<D, kCausal> c{p, sm, wg - 1, t, last, kvh, q0};
  c.run();
#endif
}

// One CTA per (Br query rows, query head): grid ceil(Nq / Br) x heads (B H <= 65535, cuda.cu checks).
template <int D, bool kCausal>
void launch_fwd(const FwdParams& p, int heads, cudaStream_t stream) {
  constexpr int kSmem = Smem<D>::kLaunchBytes;
  auto* kernel = &fwd_kernel<D, kCausal>;
  FLASHLAB_CUDA_CHECK(opt_in_smem(kernel, kSmem));  // above 48 KiB: once per kernel and device
  kernel<<<dim3((p.Nq + Br - 1) / Br, heads), kThreads, kSmem, stream>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::fp8_fwd
