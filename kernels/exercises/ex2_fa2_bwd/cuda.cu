// ex2-fa2-bwd, CUDA (a starter): the chapter's §16.6 backward skeleton as plain CUDA — no tensor
// cores, no cp.async, every product a loop over shared memory — so that each step of the schedule
// is one short loop to read. Its point is the measurement that follows: `flashlab lab bwd-ratio
// --versions ex2-fa2-bwd` times it against the tiled forward (tensor cores: the ratio says more
// about this kernel than about the 2.5x FLOP ratio; compare with atomic-dq's).
//
//   preprocess   one thread per query row: D = rowsum(O ∘ dO)                        given
//   memset       dQaccum = 0                                                          given
//   main         grid (ceil(Nk/Bc), B*H), 256 threads; Br = Bc = 32 rows of fp32 in
//                shared memory: K_j, V_j, dK_j, dV_j (Bc x d), Q_i, dO_i (Br x d),
//                P, dS (Br x Bc), LSE_i, D_i
//                  for each Q block i that sees block j (causal: from the diagonal on):
//                    1-2  S = scale Q_i K_j^T, P = exp(S − LSE_i)                   given
//                    4    dV_j += P^T dO_i                                          step 4
//                    5-6  dS = P ∘ (dO_i V_j^T − D_i)                               steps 5, 6
//                    7    dQaccum[i] += dS K_j        atomicAdd, fp32               step 7
//                    8    dK_j += dS^T Q_i                                          step 8
//                  write dK_j (× scale), dV_j
//   convert      dQ = scale · dQaccum, cast to fp16/bf16                              given
//
// Limits: fp16 and bf16, head dims 1 to 128, any Nq, Nk (tails masked), B*H <= 65535. Shared
// memory: 4 (4 Bc + 2 Br) d + 8 Br Bc + 8 Br bytes, 104 KiB at d = 128 (sm_80 and later).
// dQ is not bitwise reproducible (the atomic adds race).
//
// The starter: steps 4 to 8 of the kernel are yours (each a loop like steps 1-2's). When they are
// written, delete the FLASHLAB_TODO line in backward() below; until then the launcher stops there
// and `flashlab run --backend cuda --versions ex2-fa2-bwd` says so (exit status 1). The CPU twin
// (cpu.cpp) has the same steps, so the schedule can be checked on any machine first.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "core/cuda_check.h"
#include "core/device_api.h"
#include "util/error.h"

namespace flashlab::cuda {

namespace {

constexpr int kBr = 32, kBc = 32, kThreads = 256, kMaxD = 128;

struct Params {
  const void *q, *k, *v, *o, *dO;
  const float* lse;  // natural-log LSE of the forward, -inf for a row that sees no key
  float* D;          // workspace: B*H*Nq
  float* dq_accum;   // workspace: B*H*Nq*d
  void *dq, *dk, *dv;
  int Nq, Nk, d, heads;
  int causal;
  int causal_offset;  // Nk - Nq: query r sees key c iff c <= r + offset
  float scale;
};

__device__ inline float to_float(__half x) {
  return __half2float(x);
}
__device__ inline float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <class T>
__device__ T from_float(float x);
template <>
__device__ inline __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <class T>
__global__ void preprocess_kernel(Params p) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= static_cast<int64_t>(p.heads) * p.Nq) return;
  const T* o = static_cast<const T*>(p.o) + row * p.d;
  const T* dO = static_cast<const T*>(p.dO) + row * p.d;
  float sum = 0.f;
  for (int k = 0; k < p.d; ++k) sum += to_float(o[k]) * to_float(dO[k]);
  p.D[row] = sum;
}

template <class T>
__global__ void outer_k_kernel(Params p) {
  extern __shared__ float smem[];
  const int d = p.d;
  float* sK = smem;  // Bc x d
  float* sV = sK + kBc * d;
  float* sdK = sV + kBc * d;
  float* sdV = sdK + kBc * d;
  float* sQ = sdV + kBc * d;  // Br x d
  float* sdO = sQ + kBr * d;
  float* sP = sdO + kBr * d;  // Br x Bc
  float* sdS = sP + kBr * kBc;
  float* sLSE = sdS + kBr * kBc;  // Br
  float* sD = sLSE + kBr;

  const T* Q = static_cast<const T*>(p.q);
  const T* K = static_cast<const T*>(p.k);
  const T* V = static_cast<const T*>(p.v);
  const T* dO = static_cast<const T*>(p.dO);
  const int head = blockIdx.y, c0 = blockIdx.x * kBc, cols = min(kBc, p.Nk - c0);
  const int64_t q_base = static_cast<int64_t>(head) * p.Nq,
                k_base = static_cast<int64_t>(head) * p.Nk;
  const int tid = threadIdx.x;

  // K_j, V_j on chip (rows past Nk are zero); dK_j = dV_j = 0.
  for (int e = tid; e < kBc * d; e += kThreads) {
    const int c = e / d, x = e % d;
    const bool in = c < cols;
    sK[e] = in ? to_float(K[(k_base + c0 + c) * d + x]) : 0.f;
    sV[e] = in ? to_float(V[(k_base + c0 + c) * d + x]) : 0.f;
    sdK[e] = 0.f;
    sdV[e] = 0.f;
  }

  // Causal: the first query row that sees key c0 is c0 - offset; earlier Q blocks are skipped.
  const int first_row = p.causal ? max(0, c0 - p.causal_offset) : 0;
  for (int r0 = first_row / kBr * kBr; r0 < p.Nq; r0 += kBr) {
    const int rows = min(kBr, p.Nq - r0);
    __syncthreads();  // the previous step's readers are done with sQ, sdO, sP, sdS
    for (int e = tid; e < kBr * d; e += kThreads) {
      const int r = e / d, x = e % d;
      const bool in = r < rows;
      sQ[e] = in ? to_float(Q[(q_base + r0 + r) * d + x]) : 0.f;
      sdO[e] = in ? to_float(dO[(q_base + r0 + r) * d + x]) : 0.f;
    }
    for (int r = tid; r < kBr; r += kThreads) {
      sLSE[r] = r < rows ? p.lse[q_base + r0 + r] : -INFINITY;
      sD[r] = r < rows ? p.D[q_base + r0 + r] : 0.f;
    }
    __syncthreads();

    // Steps 1-2: S = scale Q_i K_j^T and P = exp(S - LSE_i); 0 where masked, past the ends, or
    // on a row that sees no key.
    for (int e = tid; e < kBr * kBc; e += kThreads) {
      const int r = e / kBc, c = e % kBc;
      const bool seen = r < rows && c < cols && sLSE[r] != -INFINITY &&
                        (!p.causal || c0 + c <= r0 + r + p.causal_offset);
      float P = 0.f;
      if (seen) {
        float S = 0.f;
        for (int x = 0; x < d; ++x) S += sQ[r * d + x] * sK[c * d + x];
        P = expf(S * p.scale - sLSE[r]);
      }
      sP[e] = P;
    }
    __syncthreads();

    // Step 4: dV_j += P^T dO_i. Each thread owns elements e of dV_j (c = e / d, x = e % d) and
    // adds sum_r sP[r][c] * sdO[r][x] for r < kBr.
    // TODO(ex2) step 4

    // Steps 5-6: dP = dO_i V_j^T, then dS = P ∘ (dP - D_i) into sdS (Br x Bc), row r's D in sD[r].
    // TODO(ex2) steps 5-6
    __syncthreads();

    // Step 7: dQaccum[i] += dS K_j: rows r < rows, columns c < cols; other K blocks add into the
    // same rows of p.dq_accum at the same time, so each element goes in with atomicAdd.
    // TODO(ex2) step 7

    // Step 8: dK_j += dS^T Q_i, into sdK (the write-out below multiplies it by the scale).
    // TODO(ex2) step 8
  }
  __syncthreads();

  T* dK = static_cast<T*>(p.dk);
  T* dV = static_cast<T*>(p.dv);
  for (int e = tid; e < cols * d; e += kThreads) {
    const int c = e / d, x = e % d;
    dK[(k_base + c0 + c) * d + x] = from_float<T>(p.scale * sdK[e]);
    dV[(k_base + c0 + c) * d + x] = from_float<T>(sdV[e]);
  }
}

template <class T>
__global__ void convert_kernel(Params p) {
  const int64_t n = static_cast<int64_t>(p.heads) * p.Nq * p.d;
  T* dq = static_cast<T*>(p.dq);
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dq[e] = from_float<T>(p.scale * p.dq_accum[e]);
}

size_t smem_bytes(int d) {
  return sizeof(float) * (2 * static_cast<size_t>(kBc + kBr) * d +
                          2 * kBc * static_cast<size_t>(d) + 2 * kBr * kBc + 2 * kBr);
}

// D, then the accumulator at a 256-byte boundary.
size_t d_bytes(const Problem& p) {
  return (static_cast<size_t>(p.shape.lse_elems()) * 4 + 255) / 256 * 256;
}

std::string problem_check(const Problem& p) {
  const Shape& s = p.shape;
  if (p.dtype != DType::f16 && p.dtype != DType::bf16)
    return "ex2-fa2-bwd on CUDA stores fp16 or bf16, not " + to_string(p.dtype);
  if (s.d < 1 || s.d > kMaxD)
    return "ex2-fa2-bwd's CUDA kernel handles head dims 1 to 128; d = " + std::to_string(s.d);
  if (s.heads() > 65535) return "ex2-fa2-bwd's CUDA kernel handles at most 65535 heads (B*H)";
  if (s.Nq > (1 << 30) || s.Nk > (1 << 30)) return "ex2-fa2-bwd's CUDA kernel needs Nq, Nk < 2^30";
  return {};
}

size_t workspace(const Problem& p, const LaunchOptions&) {
  return d_bytes(p) + static_cast<size_t>(p.shape.q_elems()) * 4;
}

template <class T>
void launch(const Params& p, cudaStream_t st) {
  const int rows = p.heads * p.Nq;
  preprocess_kernel<T><<<(rows + 127) / 128, 128, 0, st>>>(p);
  FLASHLAB_CHECK_LAUNCH();
  const size_t smem = smem_bytes(p.d);
  FLASHLAB_CUDA_CHECK(cudaFuncSetAttribute(
      outer_k_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const dim3 grid((p.Nk + kBc - 1) / kBc, p.heads);
  outer_k_kernel<T><<<grid, kThreads, smem, st>>>(p);
  FLASHLAB_CHECK_LAUNCH();
  convert_kernel<T><<<1024, 256, 0, st>>>(p);
  FLASHLAB_CHECK_LAUNCH();
}

void backward(const DeviceTensors& t) {
  const Problem& pr = t.problem;
  Params p{};
  p.q = t.Q, p.k = t.K, p.v = t.V, p.o = t.O, p.dO = t.dO;
  p.lse = t.LSE;
  p.D = static_cast<float*>(t.workspace);
  p.dq_accum = reinterpret_cast<float*>(static_cast<char*>(t.workspace) + d_bytes(pr));
  p.dq = t.dQ, p.dk = t.dK, p.dv = t.dV;
  p.Nq = static_cast<int>(pr.shape.Nq);
  p.Nk = static_cast<int>(pr.shape.Nk);
  p.d = static_cast<int>(pr.shape.d);
  p.heads = static_cast<int>(pr.shape.heads());
  p.causal = pr.causal ? 1 : 0;
  p.causal_offset = static_cast<int>(pr.causal_offset());
  p.scale = static_cast<float>(pr.softmax_scale());
  const cudaStream_t st = static_cast<cudaStream_t>(t.stream);
  FLASHLAB_TODO("ex2 on CUDA: steps 4 to 8 of outer_k_kernel (dV, dP, dS, dQ, dK)");
  FLASHLAB_CUDA_CHECK(
      cudaMemsetAsync(p.dq_accum, 0, static_cast<size_t>(pr.shape.q_elems()) * 4, st));
  if (pr.dtype == DType::f16)
    launch<__half>(p, st);
  else
    launch<__nv_bfloat16>(p, st);
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = problem_check, .workspace_bytes = workspace, .backward = backward});
