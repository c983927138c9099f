// naive — attention as the textbook writes it, on the GPU: S and P are materialised in device
// memory, N x N fp32 per head, and the backward reads P back.
//
// This rung exists to show the memory wall. Every product is one launch of a plain 16x16
// shared-memory-tiled matmul (fp32 math, no tensor cores), and every N x N matrix makes a round
// trip through HBM:
//
//   forward:   S = scale Q K^T  ->  [row softmax: P, LSE]  ->  O = P V
//   backward:  dV = P^T dO,  dP = dO V^T,  [D = rowsum(P * dP), dS = P * (dP - D)],
//              dQ = scale dS K,  dK = scale dS^T Q
//
//   workspace (per head):  S / dP / dS  [Nq x Nk] fp32   (one buffer, overwritten in turn)
//                          P            [Nq x Nk] fp32   (kept from forward to backward)
//                          D            [Nq]      fp32
//
// The mask (causal, a sliding window, or both; bottom-right aligned, common/band.h) lives in the
// softmax only: masked scores get P = 0, so every later product ignores them. A row that sees no
// key has O = 0, LSE = -inf, zero gradients. Grouped heads: query head h reads K/V head h / g
// (g = H / Hkv), and dK, dV of a K/V head sum over its g query heads in one longer product.
//
// Limits: fp16/bf16 storage, any head dim up to 256, B*H <= 65535, Nq and Nk up to 10^6; no packed
// batch (check() says so: its S and P are dense [B, H, Nq, Nk] matrices). The
// workspace grows as Nq*Nk: check() refuses a problem whose workspace exceeds the device's memory,
// and the runner compares the whole run with the free memory before allocating anything.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "common/band.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "core/device_api.h"

namespace flashlab::cuda {

namespace {

constexpr int kTile = 16;

__device__ __forceinline__ float to_f(float x) {
  return x;
}
__device__ __forceinline__ float to_f(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_f(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ void store_f(float* p, float x) {
  *p = x;
}
__device__ __forceinline__ void store_f(__half* p, float x) {
  *p = __float2half_rn(x);
}
__device__ __forceinline__ void store_f(__nv_bfloat16* p, float x) {
  *p = __float2bfloat16_rn(x);
}

// A strided view of one operand: element (r, c) of head z is at p[(z / div)*batch + r*rs + c*cs],
// so one kernel serves Q K^T, P V, P^T dO, dO V^T, dS K and dS^T Q. div > 1: grouped heads, where
// `div` query heads read one K/V head.
template <class T>
struct View {
  const T* p;
  int64_t batch, rs, cs;
  int div = 1;
};

// C[z] (M x N, row-major) = alpha * A[z] (M x K) . B[z] (K x N), fp32 accumulation.
template <class TA, class TB, class TC>
__global__ void matmul_kernel(View<TA> A, View<TB> B, TC* C, int M, int N, int K, float alpha) {
  __shared__ float As[kTile][kTile + 1], Bs[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m = blockIdx.y * kTile + ty, n = blockIdx.x * kTile + tx;
  const int64_t z = blockIdx.z;
  const TA* a = A.p + (z / A.div) * A.batch;
  const TB* b = B.p + (z / B.div) * B.batch;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    const int ka = k0 + tx, kb = k0 + ty;
    As[ty][tx] = (m < M && ka < K) ? to_f(a[m * A.rs + ka * A.cs]) : 0.f;
    Bs[ty][tx] = (kb < K && n < N) ? to_f(b[kb * B.rs + n * B.cs]) : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (m < M && n < N) store_f(C + z * M * N + static_cast<int64_t>(m) * N + n, alpha * acc);
}

template <class TA, class TB, class TC>
void matmul(cudaStream_t st, int heads, int M, int N, int K, float alpha, View<TA> A, View<TB> B,
            TC* C) {
  const dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile, heads);
  matmul_kernel<<<grid, dim3(kTile, kTile), 0, st>>>(A, B, C, M, N, K, alpha);
  FLASHLAB_CHECK_LAUNCH();
}

constexpr int kRowThreads = 256;

// Reduces over the block; every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float x) {
  __shared__ float part[kRowThreads / 32];
  __shared__ float result;
  for (int o = 16; o > 0; o /= 2) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = kMax ? fmaxf(x, y) : x + y;
  }
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = x;
  __syncthreads();
  if (threadIdx.x == 0) {
    float r = part[0];
    for (int w = 1; w < kRowThreads / 32; ++w) r = kMax ? fmaxf(r, part[w]) : r + part[w];
    result = r;
  }
  __syncthreads();
  return result;
}

// One block per query row: P = softmax of the visible scores, LSE = max + ln(sum). Row i sees
// the keys [lo, hi) of its band (common/band.h: causal, window, both or neither).
__global__ void softmax_rows(const float* S, float* P, float* LSE, Band band) {
  const int Nq = band.Nq, Nk = band.Nk;
  const int64_t row = blockIdx.x;
  const int i = static_cast<int>(row % Nq);
  const int lo = max(0, i + band.offset - band.left);
  const int hi = max(lo, min(Nk, i + band.offset + band.right + 1));
  const float* s = S + row * Nk;
  float* pr = P + row * Nk;
  float mx = -INFINITY;
  for (int j = lo + threadIdx.x; j < hi; j += kRowThreads) mx = fmaxf(mx, s[j]);
  mx = block_reduce<true>(mx);
  if (hi == lo) {
    for (int j = threadIdx.x; j < Nk; j += kRowThreads) pr[j] = 0.f;
    if (threadIdx.x == 0) LSE[row] = -INFINITY;
    return;
  }
  float sum = 0.f;
  for (int j = lo + threadIdx.x; j < hi; j += kRowThreads) sum += expf(s[j] - mx);
  sum = block_reduce<false>(sum);
  const float inv = 1.f / sum;
  for (int j = threadIdx.x; j < Nk; j += kRowThreads)
    pr[j] = j >= lo && j < hi ? expf(s[j] - mx) * inv : 0.f;
  if (threadIdx.x == 0) LSE[row] = mx + logf(sum);
}

// One block per query row: D = rowsum(P * dP), then dS = P * (dP - D) in place of dP.
__global__ void softmax_grad_rows(const float* P, float* dP, float* D, int Nk) {
  const int64_t row = blockIdx.x;
  const float* pr = P + row * Nk;
  float* g = dP + row * Nk;
  float acc = 0.f;
  for (int j = threadIdx.x; j < Nk; j += kRowThreads) acc += pr[j] * g[j];
  const float Dr = block_reduce<false>(acc);
  for (int j = threadIdx.x; j < Nk; j += kRowThreads) g[j] = pr[j] * (g[j] - Dr);
  if (threadIdx.x == 0) D[row] = Dr;
}

struct Workspace {
  float *S, *P, *D;
};

Workspace split(const DeviceTensors& t) {
  const Shape& s = t.problem.shape;
  auto* base = static_cast<float*>(t.workspace);
  const int64_t nn = s.heads() * s.Nq * s.Nk;
  return {base, base + nn, base + 2 * nn};
}

template <class T>
void forward_t(const DeviceTensors& t) {
  const Problem& p = t.problem;
  const Shape& s = p.shape;
  const int heads = static_cast<int>(s.heads()), Nq = static_cast<int>(s.Nq),
            Nk = static_cast<int>(s.Nk), d = static_cast<int>(s.d);
  const float scale = static_cast<float>(p.softmax_scale());
  auto st = static_cast<cudaStream_t>(t.stream);
  const Workspace w = split(t);
  const auto* Q = static_cast<const T*>(t.Q);
  const auto* K = static_cast<const T*>(t.K);
  const auto* V = static_cast<const T*>(t.V);
  const int64_t qs = s.Nq * s.d, ks = s.Nk * s.d, ss = s.Nq * s.Nk;
  const int g = static_cast<int>(s.group());  // query heads per K/V head

  // S = scale Q K^T: K read by rows as the columns of K^T (query head z reads K/V head z / g).
  matmul<T, T, float>(st, heads, Nq, Nk, d, scale, View<T>{Q, qs, d, 1},
                      View<T>{K, ks, 1, d, g}, w.S);
  softmax_rows<<<static_cast<unsigned>(heads * s.Nq), kRowThreads, 0, st>>>(w.S, w.P, t.LSE,
                                                                           band_of(p));
  FLASHLAB_CHECK_LAUNCH();
  // O = P V
  matmul<float, T, T>(st, heads, Nq, d, Nk, 1.f, View<float>{w.P, ss, Nk, 1},
                      View<T>{V, ks, d, 1, g}, static_cast<T*>(t.O));
}

template <class T>
void backward_t(const DeviceTensors& t) {
  const Problem& p = t.problem;
  const Shape& s = p.shape;
  const int heads = static_cast<int>(s.heads()), Nq = static_cast<int>(s.Nq),
            Nk = static_cast<int>(s.Nk), d = static_cast<int>(s.d);
  const float scale = static_cast<float>(p.softmax_scale());
  auto st = static_cast<cudaStream_t>(t.stream);
  const Workspace w = split(t);
  const auto* Q = static_cast<const T*>(t.Q);
  const auto* K = static_cast<const T*>(t.K);
  const auto* V = static_cast<const T*>(t.V);
  const auto* dO = static_cast<const T*>(t.dO);
  const int64_t qs = s.Nq * s.d, ks = s.Nk * s.d, ss = s.Nq * s.Nk;
  // Grouped heads: the g query heads of K/V head z are heads z g .. z g + g - 1, whose rows of P,
  // dS, dO and Q follow one another in memory; dK and dV of head z sum over all g Nq of them, one
  // product with a reduction g Nq long.
  const int g = static_cast<int>(s.group());
  const int kv_heads = static_cast<int>(s.kv_head_count());

  // dV = P^T dO: P read by columns.
  matmul<float, T, T>(st, kv_heads, Nk, d, g * Nq, 1.f, View<float>{w.P, g * ss, 1, Nk},
                      View<T>{dO, g * qs, d, 1}, static_cast<T*>(t.dV));
  // dP = dO V^T, into the S buffer.
  matmul<T, T, float>(st, heads, Nq, Nk, d, 1.f, View<T>{dO, qs, d, 1},
                      View<T>{V, ks, 1, d, g}, w.S);
  // dS = P * (dP - D), in place.
  softmax_grad_rows<<<static_cast<unsigned>(heads * s.Nq), kRowThreads, 0, st>>>(w.P, w.S, w.D, Nk);
  FLASHLAB_CHECK_LAUNCH();
  // dQ = scale dS K, dK = scale dS^T Q.
  matmul<float, T, T>(st, heads, Nq, d, Nk, scale, View<float>{w.S, ss, Nk, 1},
                      View<T>{K, ks, d, 1, g}, static_cast<T*>(t.dQ));
  matmul<float, T, T>(st, kv_heads, Nk, d, g * Nq, scale, View<float>{w.S, g * ss, 1, Nk},
                      View<T>{Q, g * qs, d, 1}, static_cast<T*>(t.dK));
}

size_t naive_workspace(const Problem& p, const LaunchOptions&) {
  const Shape& s = p.shape;
  return static_cast<size_t>(2 * s.heads() * s.Nq * s.Nk * 4 + s.lse_elems() * 4);
}

std::string naive_check(const Problem& p) {
  const Shape& s = p.shape;
  if (p.dtype != DType::f16 && p.dtype != DType::bf16)
    return "naive on CUDA stores fp16 or bf16, not " + to_string(p.dtype);
  if (s.d < 1 || s.d > 256)
    return "naive's CUDA kernels take head dims 1 to 256, not " + std::to_string(s.d);
  if (s.packed())
    return "naive's CUDA kernels keep S and P as B x H dense Nq x Nk matrices and take no packed "
           "batch (--seqlens); tiled and the rungs after it do";
  if (s.B < 1 || s.H < 1 || s.Nq < 1 || s.Nk < 1) return "B, H, Nq and Nk must be at least 1";
  if (s.heads() > 65535) return "naive's CUDA kernels handle at most 65535 heads (B*H)";
  if (s.Nq > 1000000 || s.Nk > 1000000) return "naive's CUDA kernels take Nq, Nk up to 1,000,000";
  if (s.heads() * s.Nq >= (int64_t{1} << 31)) return "naive's CUDA kernels take B*H*Nq < 2^31";
  const DeviceInfo& dev = device_info();
  const auto ws = static_cast<int64_t>(naive_workspace(p, {}));
  if (dev.present && ws > dev.total_bytes)
    return "naive stores S and P (" + std::to_string(ws >> 20) +
           " MiB for this shape), more than the " + std::to_string(dev.total_bytes >> 20) +
           " MiB the device has";
  return {};
}

void naive_forward(const DeviceTensors& t) {
  if (t.problem.dtype == DType::f16)
    forward_t<__half>(t);
  else
    forward_t<__nv_bfloat16>(t);
}

void naive_backward(const DeviceTensors& t) {
  if (t.problem.dtype == DType::f16)
    backward_t<__half>(t);
  else
    backward_t<__nv_bfloat16>(t);
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = naive_check,
                       .workspace_bytes = naive_workspace,
                       .forward = naive_forward,
                       .backward = naive_backward,
                       .axes = kGroupedHeads | kWindow});
