// Host side shared by the FA2 backward versions: the params, and the two light kernels
// (preprocess, convert) instantiated once for every (dtype, head dim).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "common/fa2_bwd/convert.cuh"
#include "common/fa2_bwd/outer_k.cuh"
#include "common/fa2_bwd/params.h"
#include "common/fa2_bwd/preprocess.cuh"
#include "core/cuda_check.h"
#include "core/device_api.h"

namespace flashlab::cuda {

BwdParams bwd_make_params(const DeviceTensors& t) {
  const Problem& pr = t.problem;
  const Shape& s = pr.shape;
  BwdParams p{};
  p.Q = t.Q, p.K = t.K, p.V = t.V, p.O = t.O, p.dO = t.dO, p.LSE = t.LSE;
  p.dQ = t.dQ, p.dK = t.dK, p.dV = t.dV;
  auto* ws = static_cast<unsigned char*>(t.workspace);
  const int64_t rows_bytes = bwd_rows_bytes(pr);
  p.LSE2 = reinterpret_cast<float*>(ws);
  p.D = reinterpret_cast<float*>(ws + rows_bytes);
  p.dQ_accum = reinterpret_cast<float*>(ws + 2 * rows_bytes);
  p.BH = static_cast<int>(s.heads());
  p.group = static_cast<int>(s.group());
  p.Nq = static_cast<int>(s.Nq);
  p.Nk = static_cast<int>(s.Nk);
  p.Nq_pad = static_cast<int>(bwd_row_pad(s.Nq));
  p.offset = static_cast<int>(pr.causal_offset());
  p.causal = pr.causal;
  p.band = band_of(pr);
  p.scale = static_cast<float>(pr.softmax_scale());
  p.scale_log2 = static_cast<float>(pr.softmax_scale() * 1.4426950408889634);
  p.split_stride = s.q_elems();
  p.dq_splits = 1;  // deterministic-dq sets its own (bwd_dq_splits)
  if (s.packed()) {
    p.cu_q = t.cu_q;
    p.cu_k = t.cu_k;
    p.B = static_cast<int>(s.B);
    p.H = static_cast<int>(s.H);
    p.Hkv = static_cast<int>(s.kv_heads());
    p.total_q = static_cast<int>(s.total_q());
    p.lse_rows = static_cast<int>(bwd_packed_lse_rows(pr));
  }
  return p;
}

template <class T, int kD>
void launch_bwd_preprocess(const BwdParams& p, void* stream) {
  // Dense: one group per row of LSE2. Packed: one per (token, head), then the padding rows'
  // blocks (preprocess.cuh).
  constexpr int kRowsPerBlock = bwd::kPrepRowsPerBlock<kD>;
  const int64_t blocks64 =
      p.cu_q != nullptr
          ? bwd::preprocess_packed_blocks<kD>(p.total_q, p.H, p.B)
          : (static_cast<int64_t>(p.BH) * p.Nq_pad + kRowsPerBlock - 1) / kRowsPerBlock;
  const auto blocks = static_cast<unsigned>(blocks64);
  const auto st = static_cast<cudaStream_t>(stream);
  if (p.cu_q != nullptr)
    bwd::preprocess_packed_kernel<T, kD><<<blocks, bwd::kPrepThreads, 0, st>>>(p);
  else
    bwd::preprocess_kernel<T, kD><<<blocks, bwd::kPrepThreads, 0, st>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

template <class T, int kD>
void launch_bwd_convert_dq(const BwdParams& p, DqMode mode, int64_t splits, void* stream) {
  using Tr = bwd::OuterKTraits<kD>;
  const bool packed = p.cu_q != nullptr;
  const int64_t rows = packed ? static_cast<int64_t>(p.total_q) * p.H
                              : static_cast<int64_t>(p.BH) * p.Nq;
  const int64_t chunks = rows * (kD / 8);
  const auto blocks = static_cast<unsigned>((chunks + 255) / 256);
  if (blocks == 0) return;  // a packed batch with no query rows
  const auto st = static_cast<cudaStream_t>(stream);
  if (packed)
    bwd::convert_dq_packed_kernel<T, kD>
        <<<blocks, 256, 0, st>>>(p, mode, static_cast<int>(splits), Tr::Br, Tr::Bc);
  else
    bwd::convert_dq_kernel<T, kD>
        <<<blocks, 256, 0, st>>>(p, mode, static_cast<int>(splits), Tr::Br, Tr::Bc);
  FLASHLAB_CHECK_LAUNCH();
}

#define FLASHLAB_BWD_LIGHT(T, D)                                      \
  template void launch_bwd_preprocess<T, D>(const BwdParams&, void*); \
  template void launch_bwd_convert_dq<T, D>(const BwdParams&, DqMode, int64_t, void*);
FLASHLAB_BWD_LIGHT(__half, 64)
FLASHLAB_BWD_LIGHT(__half, 128)
FLASHLAB_BWD_LIGHT(__half, 256)
FLASHLAB_BWD_LIGHT(__nv_bfloat16, 64)
FLASHLAB_BWD_LIGHT(__nv_bfloat16, 128)
FLASHLAB_BWD_LIGHT(__nv_bfloat16, 256)
#undef FLASHLAB_BWD_LIGHT

}  // namespace flashlab::cuda
