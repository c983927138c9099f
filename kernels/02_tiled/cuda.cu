// tiled — the FlashAttention-2 forward on tensor cores.
//
// What changes from `naive`: S and P never leave the chip. Each thread block owns Br query rows
// and walks the K/V sequence in tiles of Bc keys, keeping a running max m and a running sum l per
// row (online softmax), rescaling its O accumulator when m grows, and writes only O and
// LSE = m + ln l. HBM traffic drops from O(N^2) to O(N^2 d / Br) reads of K and V.
//
// The picture (d = 64 and 128: 4 warps of 32 rows, two m16 tiles each; d = 256: 8 warps of 16
// rows; FwdTraits in fwd_kernel.cuh holds the shapes):
//
//             K/V tile j (Bc = 64 keys), in shared memory (d = 64: 3 cp.async stages; d = 128: 2)
//             +----------------+
//   Q block   |  S = Q K^T     |        O (Br x d) accumulates in registers
//  (Br = 128) |  warp 0: 32 rows ----> P = exp2(S*scale*log2e - m) --> O += P V
//   rows in   |  warp 1: 32 rows      (S accumulators repacked to 16 bits become P's A
//   shared    |  warp 2: 32 rows       fragments: no shared-memory round trip)
//   memory    |  warp 3: 32 rows
//             +----------------+
//   Q's A fragments: d = 64 holds them in registers for the whole loop; d = 128 and 256 re-read
//   them by ldmatrix at every k16 step (O alone is 128 floats per thread there).
//
//   per warp, per tile: S 32x64 = 2 x 8 mma n8-tiles x d/16 k16 steps    (ldmatrix of K)
//                       O 32xd += P 32x64 . V 64xd: 2 x d/8 n8-tiles x 4 k16 steps (ldmatrix.trans)
//
// Pipeline: tile j+1's K and V are copied by cp.async (zero-filled past Nk) while tile j is
// computed; one __syncthreads per tile. Shared tiles are XOR-swizzled in 16-byte chunks, so both
// the cp.async writes and the ldmatrix reads are free of bank conflicts.
// Masks: tiles no row sees (above the causal diagonal, outside a window) are never visited; only
// tiles that a row's band crosses, and the ragged last tile (keys >= Nk), pay for a mask (-inf
// before the softmax). Grouped heads: query head h reads K/V head h / (H / Hkv).
// Rows past Nq are computed on zero-filled Q and never written.
// Packed batches (common/packed.h): one launch for the whole batch, the grid over the longest
// sequence's Q blocks x heads x sequences; a block reads its sequence's offsets, returns at once
// if it lies past the sequence's end, and otherwise runs the dense code on the sequence's rows
// (row stride H d for Q and O, Hkv d for K and V), lengths and band. Loads are zero-filled and
// stores skipped past the sequence's last row or key, so nothing outside it is read or written.
// A second kernel (fwd_packed_kernel), so the dense kernels keep their registers and code.
//
// Limits: fp16 and bf16 storage, fp32 accumulation; head dims 64, 128 and 256 (FwdTraits in
// fwd_kernel.cuh: other head dims are rejected by check()); B*H <= 65535; positive scale.
// mma.sync runs on sm_80 and later; on Hopper the faster wgmma path is a later rung's job.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/dispatch.cuh"
#include "common/shape_check.h"
#include "core/device_api.h"
#include "fwd_launch.h"

namespace flashlab::cuda {

namespace {

namespace tiled_fwd = FLASHLAB_FOLDER::tiled_fwd;

// Its limits: 32-bit row indices, and a positive scale (the running maximum is taken over the raw
// scores, then scaled); a packed batch's tokens are counted in 32 bits (its offsets are int32).
std::string tiled_check(const Problem& p) {
  std::string why = shape_check(
      p, "tiled", {.head_dims = {64, 128, 256}, .max_rows = int64_t{1} << 30, .positive_scale = true});
  if (why.empty() && p.shape.packed() &&
      std::max(p.shape.total_q(), p.shape.total_k()) >= (int64_t{1} << 31))
    why = "tiled on CUDA needs fewer than 2^31 tokens in a packed batch";
  return why;
}

size_t tiled_workspace(const Problem&, const LaunchOptions&) {
  return 0;
}

template <class T, int D>
void forward_for(const tiled_fwd::FwdParams& fp, const Problem& p, cudaStream_t st) {
  const int heads = static_cast<int>(p.shape.heads());
  // The kernel that tests only the sides the band has (common/band.h: mask_kind_of): the causal
  // mask's diagonal tiles compare each score with the right side alone.
  if (fp.cu_q != nullptr) {  // packed: the one packed kernel, both sides (fwd_launch.h)
    tiled_fwd::launch_fwd<T, D, MaskKind::both>(fp, heads, st);
    return;
  }
  switch (mask_kind_of(p)) {
    case MaskKind::none:
      tiled_fwd::launch_fwd<T, D, MaskKind::none>(fp, heads, st);
      break;
    case MaskKind::right:
      tiled_fwd::launch_fwd<T, D, MaskKind::right>(fp, heads, st);
      break;
    case MaskKind::both:
      tiled_fwd::launch_fwd<T, D, MaskKind::both>(fp, heads, st);
      break;
  }
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
  fp.group = static_cast<int>(p.shape.group());
  fp.band = band_of(p);
  fp.scale_log2 = static_cast<float>(p.softmax_scale() * 1.4426950408889634);
  if (p.shape.packed()) {
    fp.cu_q = t.cu_q;
    fp.cu_k = t.cu_k;
    fp.H = static_cast<int>(p.shape.H);
    fp.Hkv = static_cast<int>(p.shape.kv_heads());
    fp.total_q = static_cast<int>(p.shape.total_q());
  }
  auto st = static_cast<cudaStream_t>(t.stream);
  dispatch_dtype_head_dims<64, 128, 256>(p, [&]<class T, int kD>() { forward_for<T, kD>(fp, p, st); });
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = tiled_check,
                       .workspace_bytes = tiled_workspace,
                       .forward = tiled_forward,
                       .axes = kGroupedHeads | kWindow | kPacked});
