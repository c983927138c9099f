// A consumer warpgroup: 64 query rows of each tile, their S tile and O accumulator in registers.
//
// Per K/V block, with every idea on (the picture in cuda.cu shows the warpgroups together):
//
//   wait K_j, V_{j-1}       (full barriers)
//   take the turn           (pingpong: the other warpgroups are in their softmax now)
//   S   = Q K_j^T           issued, asynchronous: Q and K from shared memory
//   O  += P_{j-1} V_{j-1}   issued, asynchronous: P from registers, V from shared memory
//   pass the turn
//   wait for S; release K_j (and Q after the tile's last S)
//   softmax of S (m, l, P_j) while P_{j-1} V_{j-1} still runs on the tensor cores
//   wait for P V; release V_{j-1}
//   rescale O by exp2(m_old - m_new) (at d = 128 and 256 only if a row of the warp moved its
//   reference); pack P_j to 16 bits
//
// Switched off, each idea falls back to the plain order: "intra_overlap" off issues S, does the
// softmax, then issues P V of the same block; "async_wgmma" off waits for every product as soon
// as it is issued; "pingpong" off lets the warpgroups issue whenever they are ready.
#pragma once

#include <cmath>

#include "common/sm80/mma.cuh"
#include "common/sm90/bulk.cuh"
#include "common/sm90/sync.cuh"
#include "common/sm90/wgmma.cuh"
#include "fwd_epilogue.cuh"
#include "fwd_producer.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd {

template <class T, int D, bool kCausal, unsigned kIdeaBits>
struct Consumer {
  static constexpr FwdIdeas kIdeas = ideas_of(kIdeaBits);
  using Tr = FwdTraits<D, kCausal>;
  static constexpr int Br = Tr::Br, Bc = Tr::Bc, kStages = Tr::kStages;
  static constexpr int kQBuffers = Tr::kQBuffers;
  static constexpr int W = Tr::kConsumers;  // consumer warpgroups, 64 rows each
  static constexpr int NS = Bc / 2;         // S accumulators per thread (64 x Bc over 128 threads)
  static constexpr int NO = D / 2;          // O accumulators per thread
  static constexpr int NP = Bc / 4;         // P as packed pairs: the A operand of P V
  // Turns on the tensor cores where the block shape gains by them (the traits' kPingpong).
  static constexpr bool kPingpong = kIdeas.pingpong && Tr::kPingpong;
  static constexpr bool kLeft =
      (kIdeaBits & kLeftSide) != 0;  // the band's left side (fwd_params.h)
  static constexpr bool kPacked = (kIdeaBits & kPackedBatch) != 0;  // fwd_params.h
  static_assert(Br == 64 * W && W >= 2 && W <= 4, "two to four consumer warpgroups of 64 rows");
  static_assert(Tr::kOStage != OStage::in_q ||
                    (!Tr::kIdlePadding && kIdeas.tma_epilogue && kIdeas.warp_specialized),
                "O through Q's buffer: every warpgroup stores, through the epilogue that frees Q");

  // d = 64: three consumer warpgroups at 160 registers a thread, which S (64), P (32) and O (32)
  // nearly fill. There the tile's bookkeeping takes fewer registers (kLean): the warpgroup and
  // thread are worked out from threadIdx where used, the two rings' positions are kept modulo two
  // laps (all that buffer indices and parities need) in one register with the dynamic order's
  // count, and the tile's head and sequence share one (a CUDA launch has at most 65535 heads B*H:
  // common/shape_check.h). At d = 128 and 256 the plain members: the packed forms measured slower
  // there. The dense d = 64 kernels gain by it too: with the plain members (no spill either) they ran
  // 1.6-3.2 % slower without the causal mask and 0.1-0.3 % faster with it (docs/perf.md).
  static constexpr bool kLean = W == 3;

  const FwdParams& p;
  const Smem<T, D, kCausal>& sm;
  int wg_;  // consumer warpgroup: 0 .. W-1 (read through wg())
  int t_;   // thread within the warpgroup (t())
  const Loader<T, D, kCausal, kIdeaBits>*
      refill;  // without warp specialisation: the thread that loads

  // The tile in hand.
  BlockSchedule sc;
  int head_, seq_;  // the query head; packed: the tile's sequence (head(), seq())
  int g0_;       // the block's iteration count before this tile: the K/V ring position of its first
  int q_count_;  // tiles with keys before this one: this tile's Q is in buffer q_count % kQBuffers
  uint32_t lean_ids_;    // kLean: head | seq << 16
  // kLean: g0 mod 2 kStages in bits 0-7, q_count mod 2 kQBuffers in 8-15, taken mod 4 from 16.
  uint32_t lean_rings_;
  static constexpr uint32_t kGLaps = 2 * kStages, kQLaps = 2 * kQBuffers, kTakenLaps = 4;

  __device__ int wg() const {
    return kLean ? static_cast<int>(threadIdx.x / 128) - (kIdeas.warp_specialized ? 1 : 0) : wg_;
  }
  __device__ int t() const { return kLean ? static_cast<int>(threadIdx.x % 128) : t_; }
  __device__ int head() const { return kLean ? static_cast<int>(lean_ids_ & 0xffff) : head_; }
  __device__ int seq() const { return kLean ? static_cast<int>(lean_ids_ >> 16) : seq_; }
  __device__ int g0() const { return kLean ? static_cast<int>(lean_rings_ & 0xff) : g0_; }
  __device__ int q_count() const {
    return kLean ? static_cast<int>((lean_rings_ >> 8) & 0xff) : q_count_;
  }
  // The dynamic order's count of tiles taken, modulo two laps of its two-slot ring (kLean only:
  // elsewhere run()'s loop counter is the count).
  __device__ int taken() const { return static_cast<int>(lean_rings_ >> 16); }
  __device__ void count_taken() {
    lean_rings_ = (lean_rings_ & 0xffffu) | static_cast<uint32_t>((taken() + 1) % kTakenLaps) << 16;
  }
  __device__ void set_tile(const Tile& tl) {
    if constexpr (kLean) {
      lean_ids_ = static_cast<uint32_t>(tl.head) | static_cast<uint32_t>(tl.seq) << 16;
    } else {
      head_ = tl.head;
      seq_ = tl.seq;
    }
  }
  // After a tile with keys: the rings move on by its n_kv K/V blocks and one Q buffer.
  __device__ void advance(int n_kv) {
    if constexpr (kLean) {
      lean_rings_ = (lean_rings_ & 0xffff0000u) | (g0() + n_kv) % kGLaps |
                    static_cast<uint32_t>((q_count() + 1) % kQLaps) << 8;
    } else {
      g0_ += n_kv;
      ++q_count_;
    }
  }

  float o[NO];
  float s[NS];
  uint32_t pf[NP];
  // m: each row's reference max (log2 units, scale folded in): the running max at d = 64, one that
  // lags by up to kMaxLagLog2 at d = 128 and 256; l: this thread's part of the sum.
  float m[2], l[2];

  // Every tile of the block, in order. The last warpgroup opens the first turn; at the end the
  // first warpgroup takes the turn passed to it last, so no arrival is left on a barrier.
  __device__ void run() {
    if (kPingpong && wg() == W - 1) sm90::named_arrive(kTurnBarrier + 0, 256);
    q_count_ = 0;
    g0_ = 0;
    lean_rings_ = 0;
    constexpr bool kDynamic = kDynamicOrder<Tr, kIdeaBits>;
    for (int n = 0;; ++n) {
      const int tile = block_tile<kDynamic>(p, sm, kLean && kDynamic ? taken() : n, false);
      if constexpr (kLean && kDynamic) count_taken();
      if (tile >= p.tiles) break;
      const Tile tl = tile_of<kIdeas.heavy_first, kPacked, Br>(p, tile);
      set_tile(tl);
      const SeqView sv = seq_view<kPacked>(p, seq());
      sc = block_schedule<Br, Bc, kCausal, kLeft>(p, sv, tl.q_block);
      if (sc.n_kv == 0) {  // causal, Nq > Nk (or a sequence without keys): no row sees a key
        store_empty_rows<T, D, kPacked>(p, sc, sv, head(), wg(), t());
        continue;
      }
#pragma unroll
      for (int i = 0; i < NO; ++i) o[i] = 0.f;
      m[0] = m[1] = -INFINITY;
      l[0] = l[1] = 0.f;
      if (refill) {  // no producer: this thread starts the tile's loads itself
        refill->load_q(&p.q_map, head(), sc.q0, q_count());
        for (int it = 0; it < kStages && it < sc.n_kv; ++it) {
          refill->load_k(&p.k_map, head() / p.group, sc, it, g0() + it);
          refill->load_v(&p.v_map, head() / p.group, sc, it, g0() + it);
        }
      }
      sm90::mbar_wait(sm.q_full() + q_count() % kQBuffers, (q_count() / kQBuffers) & 1);
      // Every row of the warpgroup above row 0: padding of a causal head's first block.
      const bool idle = Tr::kIdlePadding && sc.q0 + 64 * wg() + 64 <= 0;
      if (idle)
        mainloop_idle();
      else if constexpr (kIdeas.intra_overlap)
        mainloop_overlapped();
      else
        mainloop_plain();
      if (!idle)
        store_o_lse<T, D, kCausal, kIdeaBits>(
            p, sm, sc, kPacked ? p.seq_maps + 4 * seq() + 3 : &p.o_map, seq_view<kPacked>(p, seq()),
            head(), wg(), t(), o, m, l);
      advance(sc.n_kv);
    }
    if (kPingpong && wg() == 0) sm90::named_sync(kTurnBarrier + 0, 256);
    if (kIdeas.tma_epilogue && t() == 0) sm90::bulk_wait_read();  // before shared memory goes
  }

 private:
  static __device__ uint32_t parity(int g) {
    return (g / kStages) & 1;
  }

  // ---- turns on the tensor cores (pingpong, a ring over the W warpgroups) ----
  __device__ void take_turn() const {
    if constexpr (kPingpong) sm90::named_sync(kTurnBarrier + wg(), 256);
  }
  __device__ void pass_turn() const {
    if constexpr (kPingpong) sm90::named_arrive(kTurnBarrier + (wg() + 1) % W, 256);
  }

  // One turn on the tensor cores: wait for it, issue the products (the fence first: ordinary code
  // has written the registers they read), pass it on.
  template <class Issue>
  __device__ void on_tensor_cores(Issue&& issue) {
    take_turn();
    sm90::wgmma_fence();
    issue();
    pass_turn();
  }

  // ---- the two products ----
  // S = Q K^T: 64 x Bc, D/16 steps of k16; both operands K-major in shared memory.
  __device__ void issue_s(int stage) {
    const uint64_t q_desc =
        sm90::smem_desc(smem_addr(sm.q() + q_count() % kQBuffers * Br * D) + wg() * 64 * 128);
    const uint64_t k_desc = sm90::smem_desc(smem_addr(sm.k()) + stage * Bc * D * 2);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t block = kk / 4, step = (kk % 4) * 32;
      sm90::wgmma_ss<T, Bc>(s, sm90::desc_advance(q_desc, block * Br * 128 + step),
                            sm90::desc_advance(k_desc, block * Bc * 128 + step), kk > 0);
    }
    sm90::wgmma_commit();
    if constexpr (!kIdeas.async_wgmma) sm90::wgmma_wait<0>();
  }

  // O += P V: 64 x D, Bc/16 steps of k16; P from registers, V MN-major in shared memory.
  __device__ void issue_pv(int stage) {
    const uint64_t v_desc = sm90::smem_desc(smem_addr(sm.v()) + stage * Bc * D * 2, Bc * 128);
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk) {
      const uint32_t a[4] = {pf[4 * kk], pf[4 * kk + 1], pf[4 * kk + 2], pf[4 * kk + 3]};
      sm90::wgmma_rs<T, D>(o, a, sm90::desc_advance(v_desc, kk * 16 * 128), 1);
    }
    sm90::wgmma_commit();
    if constexpr (!kIdeas.async_wgmma) sm90::wgmma_wait<0>();
  }

  // ---- releases (and, without a producer, the refills they make possible) ----
  __device__ void release_k(int it) {
    sm90::mbar_arrive(sm.k_empty() + (g0() + it) % kStages);
    // The tile's last S has read Q (O through Q's buffer: the epilogue releases it after O's store).
    if (Tr::kOStage != OStage::in_q && it == sc.n_kv - 1)
      sm90::mbar_arrive(sm.q_empty() + q_count() % kQBuffers);
    if (refill && it + kStages < sc.n_kv)
      refill->load_k(&p.k_map, head() / p.group, sc, it + kStages, g0() + it + kStages);
  }
  __device__ void release_v(int it) {
    sm90::mbar_arrive(sm.v_empty() + (g0() + it) % kStages);
    if (refill && it + kStages < sc.n_kv)
      refill->load_v(&p.v_map, head() / p.group, sc, it + kStages, g0() + it + kStages);
  }

  // ---- softmax ----
  // Keys a row may not see get -inf: past Nk, past the row's diagonal or a window's right side,
  // before a window's left side. The thread's element i sits at key key0 + c(i),
  // c(i) = 8 (i / 4) + i % 2, of its row h(i) = (i / 2) % 2; the first and the last key that row
  // sees are limits per row, so each element costs two compares with constants and one select.
  __device__ void apply_mask(int it) {
    const int lane = t() % 32;
    const int key0 = sc.kv_block<kLeft>(it) * Bc + 2 * (lane % 4);
    const int row0 = sc.q0 + 64 * wg() + 16 * (t() / 32) + lane / 4;
    // A packed batch's lengths are read again here (the offsets, from L1), not held in registers
    // through the loop: at d = 256 they cost the kernel a spill.
    const SeqView sv = seq_view<kPacked>(p, seq());
    int first[2], last[2];  // the visible keys of each of the thread's two rows, minus key0
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int diag = row0 + 8 * h + (kPacked ? sv.offset : p.causal_offset);
      const int Nk = kPacked ? sv.nk : p.Nk;
      last[h] = (kCausal ? min(Nk - 1, diag + p.band_right) : Nk - 1) - key0;
      first[h] = kLeft ? diag - p.band_left - key0 : 0;
    }
#pragma unroll
    for (int i = 0; i < NS; ++i) {
      const int c = 8 * (i >> 2) + (i & 1);
      if (c > last[(i >> 1) & 1] || (kLeft && c < first[(i >> 1) & 1])) s[i] = -INFINITY;
    }
  }

  // Online softmax of S in base 2 (p = 2^(s scale log2e - m)); returns the factors that rescale
  // O for each of the thread's two rows. A row with nothing visible yet keeps m = -inf and uses 0
  // in its place, so that its p are exp2(-inf) = 0, never NaN. m is the row's reference: with
  // kMaxLagLog2 > 0 it moves only when the row's max passes it by more than that, so p stays at
  // most 2^kMaxLagLog2 and the factor is exactly 1 in most blocks (rescale_o then skips O).
  __device__ void softmax(int it, float (&alpha)[2]) {
    if (sc.masked<kLeft>(it)) apply_mask(it);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int k = 0; k < NS / 4; ++k)
        mx = fmaxf(mx, fmaxf(s[4 * k + 2 * h], s[4 * k + 2 * h + 1]));
      mx = quad_max(mx) * p.scale_log2;
      float m_new, m_use;
      if constexpr (Tr::kMaxLagLog2 > 0.f) {
        const bool move = mx > m[h] + Tr::kMaxLagLog2;  // from -inf, any visible key moves it
        m_new = move ? mx : m[h];
        m_use = m_new == -INFINITY ? 0.f : m_new;
        alpha[h] = move ? fast_exp2(m[h] - m_use) : 1.f;
      } else {
        m_new = fmaxf(m[h], mx);
        m_use = m_new == -INFINITY ? 0.f : m_new;
        alpha[h] = fast_exp2(m[h] - m_use);
      }
      m[h] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int k = 0; k < NS / 4; ++k)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[4 * k + 2 * h + e];
          x = fast_exp2(fmaf(x, p.scale_log2, -m_use));
          sum += x;
        }
      l[h] = l[h] * alpha[h] + sum;
    }
  }

  // O *= each row's factor; with a lagging reference, skipped when no row of the warp moved.
  __device__ void rescale_o(const float (&alpha)[2]) {
    if (Tr::kMaxLagLog2 > 0.f && !__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f))
      return;
#pragma unroll
    for (int i = 0; i < NO; ++i) o[i] *= alpha[(i >> 1) & 1];
  }

  // The S accumulators, in pairs, become P's A operand (same layout: see sm90/wgmma.cuh).
  __device__ void pack_p() {
#pragma unroll
    for (int k = 0; k < NP; ++k) pf[k] = ElemTraits<T>::pack(s[2 * k], s[2 * k + 1]);
  }

  // ---- the two loops over a tile's K/V blocks ----
  __device__ void mainloop_overlapped() {
    const int n = sc.n_kv;
    float alpha[2];
    // Block 0 of the visiting order: S alone.
    sm90::mbar_wait(sm.k_full() + g0() % kStages, parity(g0()));
    on_tensor_cores([&] { issue_s(g0() % kStages); });
    sm90::wgmma_wait<0>();
    sm90::pin(s);
    release_k(0);
    softmax(0, alpha);  // O is still 0: nothing to rescale
    pack_p();
    for (int it = 1; it < n; ++it) {
      const int g = g0() + it;
      sm90::mbar_wait(sm.k_full() + g % kStages, parity(g));
      sm90::mbar_wait(sm.v_full() + (g - 1) % kStages, parity(g - 1));
      on_tensor_cores([&] {
        issue_s(g % kStages);
        issue_pv((g - 1) % kStages);
      });
      sm90::wgmma_wait<1>();  // S of this block is done; P V of the last one may still run
      sm90::pin(s);
      release_k(it);
      softmax(it, alpha);
      sm90::wgmma_wait<0>();
      sm90::pin(o);
      release_v(it - 1);
      rescale_o(alpha);
      pack_p();
    }
    // P V of the last block.
    const int g = g0() + n - 1;
    sm90::mbar_wait(sm.v_full() + g % kStages, parity(g));
    on_tensor_cores([&] { issue_pv(g % kStages); });
    sm90::wgmma_wait<0>();
    sm90::pin(o);
    release_v(n - 1);
  }

  // A warpgroup whose 64 rows are all padding (schedule.h) computes nothing and stores nothing. It
  // keeps its place in the protocol: it takes as many turns as the others (n + 1 with the overlap,
  // 2 n without), and releases each stage only once it is full (an earlier arrival would count
  // towards the stage's previous fill).
  __device__ void mainloop_idle() {
    const int n = sc.n_kv;
    for (int it = 0; it < n; ++it) {
      const int g = g0() + it;
      sm90::mbar_wait(sm.k_full() + g % kStages, parity(g));
      take_turn();  // S (and the P V before it, with the overlap)
      pass_turn();
      if constexpr (!kIdeas.intra_overlap) {
        take_turn();  // P V
        pass_turn();
      }
      release_k(it);
      sm90::mbar_wait(sm.v_full() + g % kStages, parity(g));
      release_v(it);
    }
    if constexpr (kIdeas.intra_overlap) {
      take_turn();  // the last P V
      pass_turn();
    }
  }

  __device__ void mainloop_plain() {
    const int n = sc.n_kv;
    float alpha[2];
    for (int it = 0; it < n; ++it) {
      const int g = g0() + it;
      sm90::mbar_wait(sm.k_full() + g % kStages, parity(g));
      on_tensor_cores([&] { issue_s(g % kStages); });
      sm90::wgmma_wait<0>();
      sm90::pin(s);
      release_k(it);
      softmax(it, alpha);
      rescale_o(alpha);
      pack_p();
      sm90::mbar_wait(sm.v_full() + g % kStages, parity(g));
      on_tensor_cores([&] { issue_pv(g % kStages); });
      sm90::wgmma_wait<0>();
      sm90::pin(o);
      release_v(it);
    }
  }
};

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
