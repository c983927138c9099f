// tiled — the FlashAttention-2 forward on tensor cores.
//
// What changes from `naive`: S and P never leave the chip. Each thread block owns Br query rows
// and walks the K/V sequence in tiles of Bc keys, keeping a running max m and a running sum l per
// row (online softmax), rescaling its O accumulator when m grows, and writes only O and
// LSE = m + ln l. HBM traffic drops from O(N^2) to O(N^2 d / Br) reads of K and V.
//
// The picture for d = 128 (8 warps; d = 64 uses 4 warps of 32 rows, two m16 tiles each):
//
//             K/V tile j (Bc = 64 keys), in shared memory, 2 stages (cp.async, double-buffered)
//             +----------------+
//   Q block   |  S = Q K^T     |        O (Br x d) accumulates in registers
//  (Br = 128) |  warp 0: 16 rows ----> P = exp2(S*scale*log2e - m) --> O += P V
//   rows in   |  warp 1: 16 rows      (S accumulators repacked to 16 bits become P's A
//  registers  |   ...                  fragments: no shared-memory round trip)
//   (as mma   |  warp 7: 16 rows
//   A frags)  +----------------+
//
//   per warp, per tile: S 16x64 = 8 mma n8-tiles x 8 k16 steps over d   (ldmatrix of K)
//                       O 16x128 += P 16x64 . V 64x128: 16 n8-tiles x 4 k16 steps (ldmatrix.trans)
//
// Pipeline: tile j+1's K and V are copied by cp.async (zero-filled past Nk) while tile j is
// computed; one __syncthreads per tile. Shared tiles are XOR-swizzled in 16-byte chunks, so both
// the cp.async writes and the ldmatrix reads are free of bank conflicts.
// Masks: causal tiles entirely above the diagonal are never visited; only tiles that cross the
// diagonal, and the ragged last tile (keys >= Nk), pay for a mask (-inf before the softmax).
// Rows past Nq are computed on zero-filled Q and never written.
//
// Limits: fp16 and bf16 storage, fp32 accumulation; head dims 64 and 128 (FwdTraits in
// fwd_kernel.cuh: other head dims are rejected by check()); B*H <= 65535; positive scale.
// mma.sync runs on sm_80 and later; on Hopper the faster wgmma path is a later rung's job.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "02_tiled/fwd_launch.h"
#include "cuda/device_api.h"

namespace flashlab::cuda {

namespace {

std::string tiled_check(const Problem& p) {
  const Shape& s = p.shape;
  if (p.dtype != DType::f16 && p.dtype != DType::bf16)
    return "tiled on CUDA stores fp16 or bf16, not " + to_string(p.dtype);
  if (s.d != 64 && s.d != 128)
    return "tiled's CUDA kernel is built for head dims 64 and 128; d = " + std::to_string(s.d) +
           " is not one of them";
  if (s.B < 1 || s.H < 1 || s.Nq < 1 || s.Nk < 1) return "B, H, Nq and Nk must be at least 1";
  if (s.heads() > 65535) return "tiled's CUDA kernel handles at most 65535 heads (B*H)";
  if (s.Nq > (1 << 30) || s.Nk > (1 << 30)) return "tiled's CUDA kernel needs Nq, Nk < 2^30";
  if (!(p.softmax_scale() > 0.0)) return "tiled's CUDA kernel needs a positive softmax scale";
  return {};
}

size_t tiled_workspace(const Problem&) {
  return 0;
}

template <class T, int D>
void forward_for(const tiled_fwd::FwdParams& fp, const Problem& p, cudaStream_t st) {
  const int heads = static_cast<int>(p.shape.heads());
  if (p.causal)
    tiled_fwd::launch_fwd<T, D, true>(fp, heads, st);
  else
    tiled_fwd::launch_fwd<T, D, false>(fp, heads, st);
}

template <class T>
void forward_dtype(const tiled_fwd::FwdParams& fp, const Problem& p, cudaStream_t st) {
  if (p.shape.d == 64)
    forward_for<T, 64>(fp, p, st);
  else
    forward_for<T, 128>(fp, p, st);
}

void tiled_forward(const DeviceTensors& t) {
  const Problem& p = t.problem;
  tiled_fwd::FwdParams fp;
  fp.q = t.Q;
  fp.k = t.K;
  fp.v = t.V;
  fp.o = t.O;
  fp.lse = t.LSE;
  fp.Nq = static_cast<int>(p.shape.Nq);
  fp.Nk = static_cast<int>(p.shape.Nk);
  fp.causal_offset = static_cast<int>(p.causal_offset());
  fp.scale_log2 = static_cast<float>(p.softmax_scale() * 1.4426950408889634);
  auto st = static_cast<cudaStream_t>(t.stream);
  if (p.dtype == DType::f16)
    forward_dtype<__half>(fp, p, st);
  else
    forward_dtype<__nv_bfloat16>(fp, p, st);
}

}  // namespace

const Version tiled{tiled_check, tiled_workspace, tiled_forward, nullptr};

}  // namespace flashlab::cuda
