// What every FA2 backward kernel of the ladder (recompute, atomic-dq, deterministic-dq) is told:
// one plain struct of pointers and sizes, filled once on the host, passed by value to each kernel.
//
// Workspace layout (fp32), per (batch, head) the query axis is padded to kRowPad rows so a block of
// Br rows never reads past the end of LSE2 or D:
//
//   [ LSE2: B*H*Nq_pad ][ D: B*H*Nq_pad ][ dQ accumulator: splits * B*H*Nq*d ]   (256-byte aligned)
//
//   LSE2 = LSE * log2(e), and +inf where LSE = -inf (a row that sees no key), so that
//          P = exp2(S * scale * log2(e) - LSE2) is exactly 0 there instead of NaN.
//   D    = rowsum(O * dO), the chapter's identity (16.1).
//   splits = 0 (recompute), 1 (atomic-dq), nsplits = bwd_dq_splits(...) (deterministic-dq).
//   The accumulator's rows hold their d columns permuted in groups of 8 (sm80/tiles.cuh:
//   dq_accum_col), which lets the outer-K kernel store a block's dQ to shared memory without bank
//   conflicts and copy it out in one piece; only the convert kernel reads it.
//
// A packed batch (cu_q set; common/packed.h) keeps every workspace piece head-major, so that a
// block of one sequence's rows stays contiguous (one bulk copy of dQ, one cp.async row of LSE2):
//
//   LSE2, D:  [H][lse_rows]: sequence b's rows start at bwd_packed_lse_start(cu_q[b], b), a
//             multiple of 4 (16-byte cp.async), and at least kRowPad padding rows (+inf, 0)
//             follow them, enough for its last block of any Br <= kRowPad
//   dQ accumulator: [splits][H][total_q][d], sequence b's rows at token cu_q[b] of each head,
//             their columns permuted by the row's index inside the sequence
//
// while Q, dO, dQ and K, V, dK, dV are token-major ([total, H, d], [total, Hkv, d]).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/band.h"
#include "common/fa2_bwd/blocks.h"  // outer_k_bc, outer_k_br: the outer-K pass's blocks
#include "common/shape_check.h"
#include "core/device.h"
#include "core/problem.h"

namespace flashlab::cuda {

// Padding of the query axis in LSE2 and D: a multiple of every Br used by the backward kernels.
inline constexpr int kRowPad = 128;

struct BwdParams {
  const void* Q;
  const void* K;
  const void* V;
  const void* O;
  const void* dO;
  const float* LSE;  // natural log, [B,H,Nq]
  void* dQ;
  void* dK;
  void* dV;
  float* LSE2;      // workspace, [B*H, Nq_pad]
  float* D;         // workspace, [B*H, Nq_pad]
  float* dQ_accum;  // workspace, [splits, B*H, Nq, d]; null for recompute
  int BH;           // B * H: query heads (Q, dO, dQ, LSE2, D)
  int group;        // query heads per K/V head: query head h reads K/V head h / group
  int Nq, Nk, Nq_pad;
  int offset;  // Nk - Nq: query i sees key j iff j <= i + offset (bottom-right causal)
  bool causal;
  Band band;   // the keys each row sees (common/band.h): causal, window, both or neither
  float scale;           // softmax scale
  float scale_log2;      // scale * log2(e): exp(x * scale) = exp2(x * scale_log2)
  int64_t split_stride;  // elements between two dQ splits: B*H*Nq*d
  int dq_splits;         // deterministic-dq: CTAs per head of the outer-K kernel, one split each
  bool dq_strided;       // which K blocks write split s: s, s + S, ... (hopper-deterministic) or
                         // one per group of S in snake order (deterministic-dq; common/band.h)
  // A packed batch only (null for a dense one): B + 1 offsets each, on the device; Nq and Nk
  // above are then the longest lengths and band the problem's (common/packed.h: seq_band).
  const int32_t* cu_q = nullptr;
  const int32_t* cu_k = nullptr;
  int B = 0, H = 0, Hkv = 0;  // sequences, query heads and K/V heads of one token
  int total_q = 0;            // query tokens of the batch
  int lse_rows = 0;           // rows of one head in LSE2 and D: total_q + B * kRowPad
};

// How the outer-K kernel delivers its dQ partials.
enum class DqMode {
  none,    // recompute: no dQ here, a separate outer-Q kernel computes it
  atomic,  // atomic-dq: atomicAdd into one fp32 accumulator, order (and result bits) vary
  split,   // deterministic-dq: CTA s walks K blocks s, ... and sums into its own fp32 split s
};

// Byte sizes of the workspace pieces (see the layout above).
inline int64_t bwd_row_pad(int64_t Nq) {
  return (Nq + kRowPad - 1) / kRowPad * kRowPad;
}
inline int64_t bwd_align(int64_t bytes) {
  return (bytes + 255) / 256 * 256;
}
// A packed batch's LSE2 and D (the layout above): where sequence b's rows start, given its first
// token cu = cu_q[b], and the rows of one query head. Sequence b is given kRowPad + 4 rows beyond
// its own: up to 3 are lost to the rounding up of the next start to a multiple of 4.
FLASHLAB_BAND_HD int64_t bwd_packed_lse_start(int64_t cu, int b) {
  return (cu + 3) / 4 * 4 + static_cast<int64_t>(b) * (kRowPad + 4);
}
// The padding rows after sequence b's last row, up to the next sequence's first (or the end):
// kRowPad + 4 given, plus 0 to 3 from the next start's rounding. At most kPackedPadRows.
inline constexpr int kPackedPadRows = kRowPad + 4 + 3;
inline int64_t bwd_packed_lse_rows(const Problem& p) {
  return (p.shape.total_q() + 3) / 4 * 4 + p.shape.B * (kRowPad + 4);
}
inline int64_t bwd_rows_bytes(const Problem& p) {
  if (p.shape.packed()) return bwd_align(p.shape.H * bwd_packed_lse_rows(p) * 4);
  return bwd_align(p.shape.heads() * bwd_row_pad(p.shape.Nq) * 4);
}
inline size_t bwd_workspace_bytes(const Problem& p, int64_t splits) {
  return static_cast<size_t>(2 * bwd_rows_bytes(p) + splits * p.shape.q_elems() * 4);
}

// How many dQ splits deterministic-dq uses: the number of outer-K CTAs per K/V head, each of which
// walks ceil(Tc / nsplits) K blocks (Tc = ceil(Nk / Bc)) and owns one fp32 split. More splits
// cost workspace and convert traffic; fewer leave SMs idle. The outer-K kernel runs one CTA per
// SM (its registers and shared memory allow no second), so with `sms` SMs the kernel takes about
//
//   waves * per_cta = ceil(nsplits * B*Hkv / sms) * ceil(Tc / nsplits)    K-block steps,
//
// and nsplits is the smallest value in [1, min(Tc, sms)] within 1/32 of the least such time (the
// bound can never beat B*Hkv*Tc/sms; the slack keeps a 3% gain from costing dozens of splits). A pure
// function of the problem and the SM count: dQ is bitwise reproducible run to run on one GPU
// model, but another SM count may pick another nsplits and give other bits.
// sms <= 0 (no device to ask) gives the unbounded Tc, one split per K block.
inline int64_t bwd_dq_splits(const Problem& p, int sms, int64_t Bc) {
  const int64_t tc = (p.shape.Nk + Bc - 1) / Bc;
  if (sms <= 0) return tc;
  const int64_t bh = p.shape.kv_head_count(), n_max = tc < sms ? tc : sms;
  const auto steps = [&](int64_t n) { return (n * bh + sms - 1) / sms * ((tc + n - 1) / n); };
  int64_t least = steps(1);
  for (int64_t n = 2; n <= n_max; ++n) least = steps(n) < least ? steps(n) : least;
  int64_t n = 1;
  while (32 * steps(n) > 33 * least) ++n;
  return n;
}

// Whether the outer-K kernel stages dQ in shared memory and adds it with bulk copies: the device
// is sm_90 or later (outer_k.cuh; and the staging blocks fit, which they do not at d = 256).
inline bool bwd_staged_dq() {
  return device_info().cc_major >= 9;
}

// What the kernels here (preprocess, outer-K, outer-Q, convert) support: head dims 64, 128 and 256
// (blocks.h: the block shape of each), and 32-bit row and element offsets inside one head. Every version that runs them checks a problem
// against these, under its own name (common/shape_check.h), and a packed batch against
// bwd_packed_check.
inline constexpr ShapeLimits kFa2BwdLimits{.head_dims = {64, 128, 256},
                                           .max_head_elems = int64_t{1} << 31};

// A packed batch: the offsets are int32, and so are the rows of one head in LSE2 and D.
inline std::string bwd_packed_check(const Problem& p, std::string_view version) {
  if (!p.shape.packed()) return {};
  if (std::max(bwd_packed_lse_rows(p), p.shape.total_k()) >= (int64_t{1} << 31))
    return std::string(version) + " on CUDA needs fewer than 2^31 tokens, counting " +
           std::to_string(kRowPad + 4) + " padding rows per sequence, in a packed batch";
  return {};
}

// Fills the params from the runner's device tensors (defined in host.cu).
struct DeviceTensors;
BwdParams bwd_make_params(const DeviceTensors& t);

// Launchers. Preprocess and convert are instantiated once per (dtype, head dim), in host.cu; the outer-K pass (per mode)
// and the outer-Q pass per (dtype, head dim) are written by the build from each version's
// version.cmake (flashlab_instances). T is __half or __nv_bfloat16; each launches on `stream` and
// checks the launch.
template <class T, int kD>
void launch_bwd_preprocess(const BwdParams& p, void* stream);
template <class T, int kD, DqMode kMode>
void launch_bwd_outer_k(const BwdParams& p, void* stream);
template <class T, int kD>
void launch_bwd_dq_outer_q(const BwdParams& p, void* stream);
// mode: atomic (one zeroed buffer) or split (sums only the splits that were written).
template <class T, int kD>
void launch_bwd_convert_dq(const BwdParams& p, DqMode mode, int64_t splits, void* stream);

}  // namespace flashlab::cuda
