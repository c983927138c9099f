// hopper-fp8: FA3's third idea, the forward with its products on FP8 tensor cores (twice the bf16
// rate on Hopper). Q, K, V and P are rounded to e4m3 (1 sign, 4 exponent, 3 mantissa bits: about
// two significant digits, core/fp8.h), so the rung is about what that costs and what buys it back:
// block scales, and incoherent processing. This file is the CPU twin of the kernel
// (cuda.cu): every rounding the kernel makes is made here, at the same place, on the same
// blocks, so the CPU shows the GPU's error behaviour.
//
// 1. The quantization pass (part of the version, and of its time on the GPU), over bf16 inputs:
//
//      incoherent processing   every row of Q and K: x <- H D x / sqrt(d), D the d signs drawn
//      (hopper-fp8 only)       from kSignSeed, H the Walsh-Hadamard matrix (common/cpu/
//                              fp8_quant.h). (H D / sqrt d) is orthogonal and the same for Q and K,
//                              so Q K^T is unchanged, but an outlier of one column is spread over
//                              all d columns: its row's largest entry, and its block's scale, drop.
//                              V is not rotated (P V would need V's rotation undone on O).
//      block scales            Q: one scale per (query head, block of kBr = 128 rows); K and V: one
//                              per (K/V head, block of kBc = 192 keys) -- the kernel's tiles, so
//                              each tile product takes one scale from each side:
//                                s = amax(block) / 448 (fp32), code = e4m3(x (1 / s)) (fp32,
//                                1 / s rounded once; nearest even, saturating), x ~ code * s
//      per tensor              one scale for all of Q, one for K, one for V (the plain FP8
//      (hopper-fp8-per-tensor) forward: a single outlier anywhere sets everyone's scale)
//
//      Q codes [B, H, Nq, d]  sQ [B H][ceil(Nq/128)]     K, V codes [B, Hkv, Nk, d]  sK, sV
//      [B Hkv][ceil(Nk/192)] (e4m3 and fp32 on the GPU; V's codes transposed there: an FP8 wgmma
//      reads its B operand with the reduction dimension, the keys, contiguous)
//
// 2. The forward, one worker per (head, Q block i of 128 rows) -- a CTA of two consumer
//    warpgroups of 64 rows on the GPU:
//
//      for j from the last K block row block i sees down to the first    (FA3's order: the blocks
//                                                                          that need a mask first)
//        S   = (Q8_i K8_j^T, e4m3 products summed in fp32) * (scale sQ_i sK_j),  masked in a
//              diagonal or ragged block
//        m'  = max(m, rowmax S);   P = exp(S - m')  (fp32, at most 1)
//        l   = exp(m - m') l + rowsum P             (from the fp32 P, as FA3's softmax)
//        P8  = e4m3(2^8 P)
//        O   = exp(m - m') O + (P8 V8_j, summed in fp32) * sV_j
//      O = O / (2^8 l) rounded to bf16;  LSE = m + log l (fp32)
//
//    Why P is scaled by 2^8, and by a constant: P's row maximum is exactly 1 (exp(S - m'), m' the
//    running max), so no amax pass is needed. Unscaled, every P below 2^-6 would be an e4m3
//    subnormal (fewer bits) and every P below 2^-10 would be 0; times 2^8 the largest lands on 256
//    (below 448: nothing saturates), P keeps 4 significant bits down to 2^-14 and is not 0 above
//    2^-18. A power of two multiplies exactly, and is undone exactly with the division by l.
//
// The twin runs on the kernel's 128 x 192 tiles whatever --br and --bc say: the running max at
// each K block sets where P is rounded, so the tiles are part of the numbers, not a schedule
// choice. It computes in fp32 where the kernel does; the Hadamard rotation runs in fp64 here (fp32
// on the GPU), and the fp32 sums run in another order than the tensor cores': both move results
// by fp32 roundings, far below e4m3's. Counters: the quantization pass reads Q, K, V and writes
// their codes; the forward reads codes and writes O and LSE (elements, as every twin counts; the
// scales, one per block of rows, are left out).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cpu/fp8_quant.h"
#include "common/cpu/fwd.h"
#include "common/cpu/tiles.h"
#include "core/dtype.h"
#include "core/fp8.h"
#include "core/version.h"
#include "variants.h"

namespace flashlab::cpu {

namespace {

using Variant = ::flashlab::FLASHLAB_FOLDER::Fp8Variant;

constexpr int64_t kBr = 128;          // query rows of a Q block: the kernel's tile, Q's scale block
constexpr int64_t kBc = 192;          // keys of a K/V block: the kernel's tile, K's and V's
constexpr float kPShift = 256.0f;     // P is rounded to e4m3 as 2^8 P (above: why)
using ::flashlab::FLASHLAB_FOLDER::kSignSeed;  // the Hadamard signs (variants.h)

int64_t blocks_of(int64_t n, int64_t b) {
  return (n + b - 1) / b;
}

// The quantization pass's output: each element's e4m3 value (the code as a number) and one fp32
// scale per (head, block of rows) -- per tensor, every block holds the tensor's one scale.
struct Quantized {
  HostTensor q, k, v;
  std::vector<float> sq, sk, sv;
};

// x ([heads][n][d]) -> codes and scales, in blocks of `block` rows of each head.
void quantize(const HostTensor& x, int64_t heads, int64_t n, int64_t d, int64_t block,
              bool per_block, HostTensor& codes, std::vector<float>& scales, int threads) {
  const int64_t nb = blocks_of(n, block);
  // At least the smallest normal float, so that 1 / s stays finite (quant.cuh: scale_of).
  const auto scale_of = [](double amax) {
    return amax > 0 ? std::max(static_cast<float>(amax) / static_cast<float>(kE4m3Max),
                               std::numeric_limits<float>::min())
                    : 1.0f;
  };
  scales.assign(static_cast<size_t>(heads * nb), 0.0f);
  if (per_block) {
#pragma omp parallel for num_threads(threads)
    for (int64_t hb = 0; hb < heads * nb; ++hb) {
      const int64_t h = hb / nb, r0 = (hb % nb) * block, rows = std::min(block, n - r0);
      const double* b = &x[static_cast<size_t>((h * n + r0) * d)];
      double amax = 0;
      for (int64_t e = 0; e < rows * d; ++e) amax = std::max(amax, std::fabs(b[e]));
      scales[static_cast<size_t>(hb)] = scale_of(amax);
    }
  } else {
    double amax = 0;
    for (double e : x) amax = std::max(amax, std::fabs(e));
    std::fill(scales.begin(), scales.end(), scale_of(amax));
  }
  codes.resize(x.size());
#pragma omp parallel for num_threads(threads)
  for (int64_t hr = 0; hr < heads * n; ++hr) {
    const float s = scales[static_cast<size_t>((hr / n) * nb + (hr % n) / block)];
    const float inv_s = 1.0f / s;  // rounded once, as the CUDA pass does (quant.cuh)
    for (int64_t c = 0; c < d; ++c) {
      const size_t e = static_cast<size_t>(hr * d + c);
      codes[e] = e4m3_value(e4m3_code(static_cast<float>(x[e]) * inv_s));
    }
  }
}

Quantized quantize_inputs(const Problem& p, const Inputs& in, const Variant& v, int threads) {
  const Shape& s = p.shape;
  Quantized z;
  if (v.incoherent) {
    const std::vector<double> signs = hadamard_signs(kSignSeed, s.d);
    HostTensor q = in.Q, k = in.K;
    rotate_rows(q, s.d, signs);
    rotate_rows(k, s.d, signs);
    quantize(q, s.heads(), s.Nq, s.d, kBr, v.block_scales, z.q, z.sq, threads);
    quantize(k, s.kv_head_count(), s.Nk, s.d, kBc, v.block_scales, z.k, z.sk, threads);
  } else {
    quantize(in.Q, s.heads(), s.Nq, s.d, kBr, v.block_scales, z.q, z.sq, threads);
    quantize(in.K, s.kv_head_count(), s.Nk, s.d, kBc, v.block_scales, z.k, z.sk, threads);
  }
  quantize(in.V, s.kv_head_count(), s.Nk, s.d, kBc, v.block_scales, z.v, z.sv, threads);
  return z;
}

// One step of the online softmax with P in e4m3: folds S (rows x cols, scaled and masked) into
// m, l and O, with O += (P8 V8_j) * sV_j. pv holds the product before its scale.
void fp8_softmax_step(FwdTile<float>& t, std::vector<float>& pv, int64_t rows, int64_t cols,
                      int64_t d, float sv) {
  online_softmax_rescale(t, rows, cols, d);  // l from the fp32 P, as FA3's softmax
  for (int64_t e = 0; e < rows * cols; ++e)
    t.S[e] = static_cast<float>(round_to_e4m3(kPShift * t.S[e]));
  std::fill(pv.begin(), pv.begin() + rows * d, 0.0f);
  mm_nn(pv.data(), d, t.S.data(), cols, t.V.data(), d, rows, d, cols);  // P8 V8_j
  for (int64_t e = 0; e < rows * d; ++e) t.O[e] += sv * pv[e];
}

void check_fp8(const Problem& p, const CpuOptions& o, const Variant& v) {
  check_problem(p, o, v.id);
  if (p.dtype != DType::fp8)
    throw std::invalid_argument(std::string(v.id) + ": takes --dtype fp8 only (got " +
                                to_string(p.dtype) + ")");
  if (v.incoherent && (p.shape.d & (p.shape.d - 1)) != 0)
    throw std::invalid_argument(std::string(v.id) + ": incoherent processing needs d a power of two");
}

void fp8_forward(const Variant& v, const Problem& p, const Inputs& in, const CpuOptions& o,
                 Forward& out, Counters& cnt) {
  check_fp8(p, o, v);
  const bool dry = o.dry_run;
  if (!dry) check_inputs(p, in, v.id);
  const Shape& s = p.shape;
  const int64_t d = s.d, q_blocks = blocks_of(s.Nq, kBr), k_blocks = blocks_of(s.Nk, kBc);
  const Blocks qb{s.Nq, kBr}, kb{s.Nk, kBc};
  const int threads = thread_count(o, p);
  prepare_forward(p, dry, out);
  Counters total;
  total.elems_read += s.q_elems() + 2 * s.kv_elems();  // the quantization pass
  total.elems_written += s.q_elems() + 2 * s.kv_elems();
  const Quantized z = dry ? Quantized{} : quantize_inputs(p, in, v, threads);
  const float scale = static_cast<float>(p.softmax_scale());

#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    FwdTile<float> t(dry ? 0 : kBr, dry ? 0 : kBc, dry ? 0 : d);
    std::vector<float> pv(dry ? 0 : kBr * d);
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t h = 0; h < s.heads(); ++h)
      for (int64_t i = 0; i < q_blocks; ++i) {
        const int64_t r0 = qb.begin(i), rows = qb.size(i), kh = s.kv_of(h);
        total.elems_read += rows * d;  // Q8_i
        if (!dry) t.start(&z.q[(h * s.Nq + r0) * d], rows, d);
        const float sq = dry ? 0.0f : z.sq[h * q_blocks + i];
        for (int64_t j = k_blocks - 1; j >= 0; --j) {
          const int64_t c0 = kb.begin(j), cols = kb.size(j);
          const TileMask mask = tile_mask(p, r0, rows, c0, cols);
          if (!count_tile(total, mask)) continue;
          total.elems_read += 2 * cols * d;                 // K8_j, V8_j
          total.matmul_flops += 2 * (2 * rows * cols * d);  // Q K^T and P V
          if (dry) continue;
          t.scores(&z.k[(kh * s.Nk + c0) * d], &z.v[(kh * s.Nk + c0) * d], rows, cols, d);
          scale_and_mask(t.S.data(), rows, cols, scale * sq * z.sk[kh * k_blocks + j], mask, p,
                         r0, c0);
          fp8_softmax_step(t, pv, rows, cols, d, z.sv[kh * k_blocks + j]);
        }
        total.elems_written += rows * d + rows;  // O_i, LSE_i
        if (dry) continue;
        double* o_rows = &out.O[(h * s.Nq + r0) * d];
        double* lse = &out.LSE[h * s.Nq + r0];
        for (int64_t r = 0; r < rows; ++r) {  // a row that saw no key: O = 0, LSE = -inf
          const bool saw_none = t.l[r] == 0.0f;
          const float div = kPShift * t.l[r];
          for (int64_t k = 0; k < d; ++k)
            o_rows[r * d + k] =
                saw_none ? 0.0 : round_to(p.dtype, static_cast<double>(t.O[r * d + k] / div));
          lse[r] = saw_none ? -std::numeric_limits<double>::infinity()
                            : static_cast<double>(t.m[r] + std::log(t.l[r]));
        }
      }
  }
  cnt += total;
}

void rung_forward(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out,
                  Counters& cnt) {
  fp8_forward(::flashlab::FLASHLAB_FOLDER::kRung, p, in, o, out, cnt);
}
void no_hadamard_forward(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out,
                         Counters& cnt) {
  fp8_forward(::flashlab::FLASHLAB_FOLDER::kNoHadamard, p, in, o, out, cnt);
}
void per_tensor_forward(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out,
                        Counters& cnt) {
  fp8_forward(::flashlab::FLASHLAB_FOLDER::kPerTensor, p, in, o, out, cnt);
}

// The Hadamard rotation's one limit, said before anything is allocated.
std::string hadamard_check(const Problem& p) {
  const int64_t d = p.shape.d;
  if ((d & (d - 1)) == 0) return {};
  return "incoherent processing rotates Q and K by a d x d Walsh-Hadamard matrix, which needs d "
         "a power of two (got d = " +
         std::to_string(d) + "; hopper-fp8-no-hadamard takes any d)";
}

// The kernel's (cuda.cu: layout_of, whose workspace_bytes a GPU test holds these to): e4m3 codes
// of Q, K and of V transposed, its keys padded to 16 (the copy engine's row stride unit), and an
// fp32 scale per (head, block) of each: Q's blocks of kBr rows, K's and V's of kBc keys.
int64_t codes_bytes(const Shape& s) {
  return s.q_elems() + s.kv_elems() + s.kv_head_count() * s.d * blocks_of(s.Nk, 16) * 16;
}
int64_t block_workspace(const Problem& p, const CpuOptions&) {
  const Shape& s = p.shape;
  return codes_bytes(s) +
         4 * (s.heads() * blocks_of(s.Nq, kBr) + 2 * s.kv_head_count() * blocks_of(s.Nk, kBc));
}
// ... and one fp32 scale per tensor.
int64_t tensor_workspace(const Problem& p, const CpuOptions&) {
  return codes_bytes(p.shape) + 4 * 3;
}

// The twin's: the codes (as doubles) and scales, rotated copies of Q and K, each thread's tiles.
int64_t scratch_bytes(const Problem& p, const CpuOptions& o) {
  const Shape& s = p.shape;
  const int64_t codes = 8 * 2 * (s.q_elems() + 2 * s.kv_elems());
  const int64_t scales =
      4 * (s.heads() * blocks_of(s.Nq, kBr) + 2 * s.kv_head_count() * blocks_of(s.Nk, kBc));
  const int64_t tile = 2 * kBr * s.d + 2 * kBc * s.d + kBr * kBc + 2 * kBr + kBr * s.d;
  return codes + scales + 4 * thread_count(o, p) * tile;
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = ::flashlab::FLASHLAB_FOLDER::kRung.id,
    .pass = Pass::fwd,
    .idea = ::flashlab::FLASHLAB_FOLDER::kRung.what,
    .deterministic = true,
    .workspace = "B*H*Nq*d + B*Hkv*Nk*d + B*Hkv*d*16*ceil(Nk/16) (e4m3 Q, K, V^T) + "
                 "4*(B*H*ceil(Nq/128) + 2*B*Hkv*ceil(Nk/192)) (fp32 block scales)",
    .workspace_bytes = cpu::block_workspace,
    .cpu_forward = cpu::rung_forward,
    .cpu_backward = nullptr,
    .cpu_scratch_bytes = cpu::scratch_bytes,
    .axes = kGroupedHeads,
    .fp8 = true,
    .cpu_check = cpu::hadamard_check,
});
FLASHLAB_VARIANT(no_hadamard, {
    .id = ::flashlab::FLASHLAB_FOLDER::kNoHadamard.id,
    .pass = Pass::fwd,
    .idea = ::flashlab::FLASHLAB_FOLDER::kNoHadamard.what,
    .deterministic = true,
    .workspace = "B*H*Nq*d + B*Hkv*Nk*d + B*Hkv*d*16*ceil(Nk/16) (e4m3 Q, K, V^T) + "
                 "4*(B*H*ceil(Nq/128) + 2*B*Hkv*ceil(Nk/192)) (fp32 block scales)",
    .workspace_bytes = cpu::block_workspace,
    .cpu_forward = cpu::no_hadamard_forward,
    .cpu_backward = nullptr,
    .cpu_scratch_bytes = cpu::scratch_bytes,
    .axes = kGroupedHeads,
    .fp8 = true,
});
FLASHLAB_VARIANT(per_tensor, {
    .id = ::flashlab::FLASHLAB_FOLDER::kPerTensor.id,
    .pass = Pass::fwd,
    .idea = ::flashlab::FLASHLAB_FOLDER::kPerTensor.what,
    .deterministic = true,
    .workspace = "B*H*Nq*d + B*Hkv*Nk*d + B*Hkv*d*16*ceil(Nk/16) (e4m3 Q, K, V^T) + 12 (three "
                 "fp32 scales)",
    .workspace_bytes = cpu::tensor_workspace,
    .cpu_forward = cpu::per_tensor_forward,
    .cpu_backward = nullptr,
    .cpu_scratch_bytes = cpu::scratch_bytes,
    .axes = kGroupedHeads,
    .fp8 = true,
});
