// hopper-fp8 — FA3's FP8 forward on sm_90a, the host side of the rung's three ids (hopper-fp8,
// hopper-fp8-no-hadamard, hopper-fp8-per-tensor): one forward = two steps, both timed.
//
//   1. the quantization pass (quant.cuh): bf16 Q, K, V -> e4m3 codes and fp32 scales in the
//      workspace, with the twin's Hadamard signs, blocks and roundings; V written transposed
//   2. the forward (fwd_kernel.cuh): e4m3 wgmma for S = Q K^T and O += P V, the online softmax in
//      fp32 with the block scales folded in, P rounded as e4m3(2^8 P), O to bf16, LSE in fp32
//
// The CPU twin (cpu.cpp) makes every rounding these kernels make, at the same places; the GPU
// differs from it only by fp32 roundings (the rotation in fp32 instead of fp64, exp2 instead of
// exp, the tensor cores' order of sums), far below e4m3's.
//
// Workspace (one layout for the three ids; workspace_bytes below is its single source):
//
//   Q8      B H Nq d bytes            [B H][Nq][d]
//   K8      B Hkv Nk d bytes          [B Hkv][Nk][d]
//   V8^T    B Hkv d Nk16 bytes        [B Hkv][d][Nk16], Nk16 = Nk rounded up to 16 (the copy
//                                     engine's row stride unit; the extra keys are zeros), the
//                                     keys of each 16 permuted for P's operand (quant.cuh:
//                                     v_column)
//   scales  fp32: sQ [B H][ceil(Nq/128)], sK and sV [B Hkv][ceil(Nk/192)]; per tensor: 3 floats
//
// Limits: sm_90a only; --dtype fp8 only (bf16 inputs and O); head dims 64 and 128; dense batches
// with grouped heads (no window, no packed batch, no paged cache: what the twin refuses);
// B*H <= 65535; Nq, Nk <= 2^30.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "common/cpu/fp8_quant.h"
#include "common/sm90/tensor_map.h"
#include "common/smem_opt_in.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "core/device_api.h"
#include "fwd_kernel.cuh"
#include "quant.cuh"
#include "variants.h"

namespace flashlab::cuda {

namespace {

namespace fp8_fwd = FLASHLAB_FOLDER::fp8_fwd;
namespace fp8_quant = FLASHLAB_FOLDER::fp8_quant;
using Variant = ::flashlab::FLASHLAB_FOLDER::Fp8Variant;
constexpr const Variant& kRung = ::flashlab::FLASHLAB_FOLDER::kRung;
constexpr const Variant& kNoHadamard = ::flashlab::FLASHLAB_FOLDER::kNoHadamard;
constexpr const Variant& kPerTensor = ::flashlab::FLASHLAB_FOLDER::kPerTensor;

// Rows of a scale block: Q's are the forward's Br rows, K's and V's its Bc keys.
constexpr int64_t kQBlock = fp8_quant::kQRows, kKVBlock = fp8_quant::kKVRows;
static_assert(kQBlock == fp8_fwd::kQBlock && kKVBlock == fp8_fwd::Bc, "the forward's blocks");

int64_t blocks_of(int64_t n, int64_t block) {
  return (n + block - 1) / block;
}

// Byte offsets of the workspace's parts (the picture above).
struct Layout {
  int64_t nk16;
  size_t k8, vt8, sq, sk, sv, bytes;
};

Layout layout_of(const Problem& p, bool block_scales) {
  const Shape& s = p.shape;
  Layout w{};
  w.nk16 = (s.Nk + 15) / 16 * 16;
  w.k8 = static_cast<size_t>(s.q_elems());
  w.vt8 = w.k8 + static_cast<size_t>(s.kv_elems());
  w.sq = w.vt8 + static_cast<size_t>(s.B * s.kv_heads() * s.d * w.nk16);
  const size_t nq = block_scales ? static_cast<size_t>(s.heads() * blocks_of(s.Nq, kQBlock)) : 1;
  const size_t nk =
      block_scales ? static_cast<size_t>(s.kv_head_count() * blocks_of(s.Nk, kKVBlock)) : 1;
  w.sk = w.sq + 4 * nq;
  w.sv = w.sk + 4 * nk;
  w.bytes = w.sv + 4 * nk;
  return w;
}

size_t block_workspace(const Problem& p, const LaunchOptions&) {
  return layout_of(p, true).bytes;
}
size_t tensor_workspace(const Problem& p, const LaunchOptions&) {
  return layout_of(p, false).bytes;
}

std::string fp8_unavailable(int cc_major, int cc_minor) {
  if (cc_major != 9 || cc_minor != 0)
    return "needs an sm_90 GPU (H100, H200: e4m3 wgmma); this one is sm_" +
           std::to_string(cc_major) + std::to_string(cc_minor);
  return {};
}

// What the twin refuses, and what the kernels are not built for, in one line each.
std::string fp8_check(const Problem& p, const Variant& v) {
  const Shape& s = p.shape;
  const std::string who = std::string(v.id) + " on CUDA";
  if (p.dtype != DType::fp8)
    return who + " takes --dtype fp8 only (bf16 inputs it quantizes to e4m3 itself), not " +
           to_string(p.dtype);
  if (s.d != 64 && s.d != 128)
    return who + " is built for head dims 64 and 128; d = " + std::to_string(s.d) +
           " is not one of them";
  if (v.incoherent && (s.d & (s.d - 1)) != 0)
    return who + ": incoherent processing needs d a power of two";
  if (s.packed()) return who + " takes dense batches only, not a packed batch";
  if (s.paged()) return who + " takes a contiguous K/V cache only, not a paged one";
  if (p.windowed()) return who + " takes no sliding window";
  if (s.B < 1 || s.H < 1 || s.Nq < 1 || s.Nk < 1) return "B, H, Nq and Nk must be at least 1";
  if (s.heads() > 65535) return who + " handles at most 65535 heads (B*H)";
  if (s.Nq > (int64_t{1} << 30) || s.Nk > (int64_t{1} << 30))
    return who + " needs Nq, Nk <= 2^30";
  const DeviceInfo& d = device_info();
  return d.present ? fp8_unavailable(d.cc_major, d.cc_minor) : std::string();
}
std::string rung_check(const Problem& p) {
  return fp8_check(p, kRung);
}
std::string no_hadamard_check(const Problem& p) {
  return fp8_check(p, kNoHadamard);
}
std::string per_tensor_check(const Problem& p) {
  return fp8_check(p, kPerTensor);
}

// The twin's d signs as a bit set (bit c: column c's sign is -1), drawn once per head dim.
template <int D>
const std::array<uint32_t, 4>& sign_bits() {
  static const std::array<uint32_t, 4> bits = [] {
    std::array<uint32_t, 4> b{};
    const std::vector<double> signs =
        cpu::hadamard_signs(::flashlab::FLASHLAB_FOLDER::kSignSeed, D);
    for (int c = 0; c < D; ++c)
      if (signs[static_cast<size_t>(c)] < 0) b[c / 32] |= 1u << (c % 32);
    return b;
  }();
  return bits;
}

template <int D>
void quantize(const DeviceTensors& t, const Variant& v, const Layout& w, cudaStream_t st) {
  const Shape& s = t.problem.shape;
  auto* ws = static_cast<unsigned char*>(t.workspace);
  fp8_quant::Params qp{};
  const int heads = static_cast<int>(s.heads()), kv = static_cast<int>(s.kv_head_count());
  qp.t[0] = {static_cast<const __nv_bfloat16*>(t.Q), ws, reinterpret_cast<float*>(ws + w.sq),
             heads, static_cast<int>(s.Nq), fp8_quant::kQRows, 0, v.incoherent, false};
  qp.t[1] = {static_cast<const __nv_bfloat16*>(t.K), ws + w.k8,
             reinterpret_cast<float*>(ws + w.sk), kv, static_cast<int>(s.Nk), fp8_quant::kKVRows,
             0, v.incoherent, false};
  qp.t[2] = {static_cast<const __nv_bfloat16*>(t.V), ws + w.vt8,
             reinterpret_cast<float*>(ws + w.sv), kv, static_cast<int>(s.Nk), fp8_quant::kKVRows,
             static_cast<int>(w.nk16), false, true};
  const std::array<uint32_t, 4>& signs = sign_bits<D>();
  for (int i = 0; i < 4; ++i) qp.signs[i] = signs[static_cast<size_t>(i)];
  const int64_t grid_x = std::max(s.heads() * blocks_of(s.Nq, kQBlock),
                                  s.kv_head_count() * blocks_of(s.Nk, kKVBlock));
  const dim3 grid(static_cast<unsigned>(grid_x), 3);
  constexpr int kThreads = fp8_quant::kThreads, kSmem = fp8_quant::Staging<D>::kBytes;
  const auto pass = [&](auto* kernel) {
    FLASHLAB_CUDA_CHECK(opt_in_smem(kernel, kSmem));  // 52,224 bytes at d = 128
    kernel<<<grid, kThreads, kSmem, st>>>(qp);
    FLASHLAB_CHECK_LAUNCH();
  };
  if (v.block_scales) {
    pass(&fp8_quant::quant_kernel<D, fp8_quant::kBlockScales>);
    return;
  }
  // Per tensor: the three amax slots from zero, every block folded in, turned into scales, codes.
  FLASHLAB_CUDA_CHECK(cudaMemsetAsync(ws + w.sq, 0, 12, st));
  pass(&fp8_quant::quant_kernel<D, fp8_quant::kTensorAmax>);
  fp8_quant::tensor_scales_kernel<<<1, 3, 0, st>>>(qp.t[0].scales, qp.t[1].scales,
                                                   qp.t[2].scales);
  FLASHLAB_CHECK_LAUNCH();
  pass(&fp8_quant::quant_kernel<D, fp8_quant::kTensorCodes>);
}

template <int D>
void forward_d(const DeviceTensors& t, const Variant& v) {
  const Problem& p = t.problem;
  const Shape& s = p.shape;
  auto st = static_cast<cudaStream_t>(t.stream);
  const Layout w = layout_of(p, v.block_scales);
  quantize<D>(t, v, w, st);

  auto* ws = static_cast<unsigned char*>(t.workspace);
  fp8_fwd::FwdParams fp{};
  fp.q_map = sm90::tensor_map_bytes_3d(ws, D, s.Nq, s.heads(), D, fp8_fwd::Br);
  fp.k_map = sm90::tensor_map_bytes_3d(ws + w.k8, D, s.Nk, s.kv_head_count(), D, fp8_fwd::Bc);
  fp.vt_map =
      sm90::tensor_map_bytes_3d(ws + w.vt8, w.nk16, D, s.kv_head_count(), fp8_fwd::kVPanel, D);
  fp.sq = reinterpret_cast<const float*>(ws + w.sq);
  fp.sk = reinterpret_cast<const float*>(ws + w.sk);
  fp.sv = reinterpret_cast<const float*>(ws + w.sv);
  fp.o = static_cast<__nv_bfloat16*>(t.O);
  fp.lse = t.LSE;
  fp.Nq = static_cast<int>(s.Nq);
  fp.Nk = static_cast<int>(s.Nk);
  fp.group = static_cast<int>(s.group());
  fp.causal_offset = static_cast<int>(s.Nk - s.Nq);
  fp.scale_log2 = static_cast<float>(p.softmax_scale() * 1.4426950408889634);
  fp.q_blocks = static_cast<int>(blocks_of(s.Nq, kQBlock));
  fp.k_blocks = static_cast<int>(blocks_of(s.Nk, kKVBlock));
  fp.per_tensor = v.block_scales ? 0 : 1;
  const int heads = static_cast<int>(s.heads());
  if (p.causal)
    fp8_fwd::launch_fwd<D, true>(fp, heads, st);
  else
    fp8_fwd::launch_fwd<D, false>(fp, heads, st);
}

void forward(const DeviceTensors& t, const Variant& v) {
  if (t.problem.shape.d == 64)
    forward_d<64>(t, v);
  else
    forward_d<128>(t, v);
}
void rung_forward(const DeviceTensors& t) {
  forward(t, kRung);
}
void no_hadamard_forward(const DeviceTensors& t) {
  forward(t, kNoHadamard);
}
void per_tensor_forward(const DeviceTensors& t) {
  forward(t, kPerTensor);
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = rung_check,
                       .workspace_bytes = block_workspace,
                       .forward = rung_forward,
                       .unavailable = fp8_unavailable,
                       .axes = kGroupedHeads});
FLASHLAB_CUDA_VARIANT(no_hadamard, {.check = no_hadamard_check,
                                    .workspace_bytes = block_workspace,
                                    .forward = no_hadamard_forward,
                                    .unavailable = fp8_unavailable,
                                    .axes = kGroupedHeads});
FLASHLAB_CUDA_VARIANT(per_tensor, {.check = per_tensor_check,
                                   .workspace_bytes = tensor_workspace,
                                   .forward = per_tensor_forward,
                                   .unavailable = fp8_unavailable,
                                   .axes = kGroupedHeads});
