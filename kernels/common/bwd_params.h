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
//   splits = 0 (recompute), 1 (atomic-dq), ceil(Nk / Bc) (deterministic-dq).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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
  int BH;           // B * H
  int Nq, Nk, Nq_pad;
  int offset;  // Nk - Nq: query i sees key j iff j <= i + offset (bottom-right causal)
  bool causal;
  float scale;           // softmax scale
  float scale_log2;      // scale * log2(e): exp(x * scale) = exp2(x * scale_log2)
  int64_t split_stride;  // elements between two dQ splits: B*H*Nq*d
};

// How the outer-K kernel delivers its dQ partials.
enum class DqMode {
  none,    // recompute: no dQ here, a separate outer-Q kernel computes it
  atomic,  // atomic-dq: atomicAdd into one fp32 accumulator, order (and result bits) vary
  split,   // deterministic-dq: K block j stores into its own fp32 split j
};

// Byte sizes of the workspace pieces (see the layout above).
inline int64_t bwd_row_pad(int64_t Nq) {
  return (Nq + kRowPad - 1) / kRowPad * kRowPad;
}
inline int64_t bwd_align(int64_t bytes) {
  return (bytes + 255) / 256 * 256;
}
inline int64_t bwd_rows_bytes(const Problem& p) {
  return bwd_align(p.shape.heads() * bwd_row_pad(p.shape.Nq) * 4);
}
inline size_t bwd_workspace_bytes(const Problem& p, int64_t splits) {
  return static_cast<size_t>(2 * bwd_rows_bytes(p) + splits * p.shape.q_elems() * 4);
}

// The shape checks the three backward versions share. Empty when supported.
std::string bwd_check(const Problem& p);

// Fills the params from the runner's device tensors (defined in bwd_host.cu).
struct DeviceTensors;
BwdParams bwd_make_params(const DeviceTensors& t);

// Launchers, one explicit instantiation per (dtype, head dim[, mode]) in the versions' folders.
// T is __half or __nv_bfloat16; each launches on `stream` and checks the launch.
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
