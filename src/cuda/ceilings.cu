// Micro-benchmarks for the machine's ceilings (ceilings.h): HBM bandwidth by a copy kernel, the
// tensor cores by chains of mma.sync (the instruction the CUDA versions issue) and, on sm_90a, of
// wgmma, and fp32 FMA throughput. Random inputs, never zeros; every benchmark checks its result.
//
//   copy      dst = src over 2 x 1 GiB (16-byte loads and stores, 4 in flight per thread);
//             bytes = read + written; afterwards every word of dst is compared with src
//   read      1 GiB read once (16-byte loads, each block tiles of consecutive words), folded by
//             XOR to one word per block, four ways (cache operator .cs, .cg or .nc; 8 or 16
//             loads in flight per thread): the fastest is the ceiling of a pass that only reads,
//             as decoding's pass over the K/V cache does; each fold is compared with a plain
//             one-load-at-a-time kernel's; L2 emptied before each run, as before a version's
//   mma.sync  8 warps a CTA, 4 CTAs an SM; each warp runs 8 independent accumulator chains of
//             m16n8k16 bf16 -> fp32 on random fragments; 4096 FLOP an instruction
//   wgmma     2 warpgroups a CTA, one CTA an SM; each warpgroup issues m64n256k16 bf16 -> fp32 with
//             A (64 x 64) and B (256 x 64) in shared memory, no swizzle, 4 k-steps a group;
//             524288 FLOP an instruction. A one-instruction run is compared with the host product,
//             which checks the descriptors and the fragment layout
//   ffma      8 independent fmaf chains a thread; 2 FLOP an instruction
//
// Every benchmark is timed as the runner times a version's pass: all runs queued, then waited for.
// time_plain_read and time_empty_kernel (ceilings.h) give the floors of a pass of a given size.
//
// Shared-memory layout of the wgmma operands (K-major, no swizzle; sm90/wgmma.cuh draws it): 8 x 8
// "core matrices" of 128 bytes (8 rows of 16 bytes); core matrices adjacent along M (or N) are 128
// bytes apart (the descriptor's stride byte offset), those adjacent along K a whole column of them
// apart (its leading byte offset: 1024 bytes for A, 4096 for B).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

#include "common/sm80/mma.cuh"
#include "common/sm90/bulk.cuh"
#include "common/sm90/wgmma.cuh"
#include "core/cuda_check.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "cuda/ceilings.h"
#include "cuda/l2_flush.h"
#include "cuda/runner.h"

namespace flashlab::cuda {

namespace {

constexpr int kWarmup = 2, kRepeats = 10;

// Median time of kRepeats launches, after kWarmup untimed ones, timed as the runner times a
// version's pass (cuda/runner.cu): `prepare` (resets, the L2 sweep) runs before each launch's
// first event, outside the time, and every run is queued before any is waited for. (Waiting for
// each run before queueing the next leaves the GPU idle when the first event is recorded, so the
// time would include the host's own launch of the kernel behind it: a few microseconds, 2 % of a
// GiB's read.)
template <class P, class F>
double median_seconds(P&& prepare, F&& launch) {
  constexpr int kRuns = kWarmup + kRepeats;
  std::vector<cudaEvent_t> ev(2 * kRuns);
  for (cudaEvent_t& e : ev) FLASHLAB_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < kRuns; ++i) {
    prepare();
    FLASHLAB_CUDA_CHECK(cudaEventRecord(ev[2 * i]));
    launch();
    FLASHLAB_CUDA_CHECK(cudaEventRecord(ev[2 * i + 1]));
  }
  FLASHLAB_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int i = kWarmup; i < kRuns; ++i) {
    float ms = 0;
    FLASHLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    t.push_back(ms * 1e-3);
  }
  for (cudaEvent_t e : ev) cudaEventDestroy(e);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class F>
double median_seconds(F&& launch) {
  return median_seconds([] {}, launch);
}

// A device buffer that frees itself.
template <class T>
struct Buffer {
  T* p = nullptr;
  size_t n = 0;
  explicit Buffer(size_t count) : n(count) {
    FLASHLAB_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
  }
  ~Buffer() { cudaFree(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// Random bf16 words from the project's generator (never zero in practice: normal samples).
std::vector<uint16_t> random_bf16(size_t n, uint64_t stream) {
  const HostTensor x = random_normal(2026, stream, static_cast<int64_t>(n), DType::bf16);
  std::vector<uint16_t> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = float_to_bf16_bits(static_cast<float>(x[i]));
  return w;
}

template <class T>
void upload(Buffer<T>& dst, const std::vector<T>& src) {
  FLASHLAB_CUDA_CHECK(
      cudaMemcpy(dst.p, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice));
}

Ceiling named(const char* key, const char* name, const char* unit) {
  Ceiling c;
  c.key = key, c.name = name, c.unit = unit;
  return c;
}

// ---- copy ---------------------------------------------------------------------------------------

__global__ void fill_words(uint4* p, size_t n, uint32_t salt) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ salt;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = make_uint4(h | 1u, h * 3u | 1u, h * 5u | 1u, h * 7u | 1u);
  }
}

__global__ void copy_words(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a, dst[i + stride] = b, dst[i + 2 * stride] = c, dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__global__ void count_differences(const uint4* a, const uint4* b, size_t n,
                                  unsigned long long* count) {
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 x = a[i], y = b[i];
    c += (x.x != y.x) + (x.y != y.y) + (x.z != y.z) + (x.w != y.w);
  }
  if (c) atomicAdd(count, c);
}

Ceiling copy_ceiling(const DeviceInfo& dev) {
  Ceiling c = named("hbm_copy", "HBM copy", "B/s");
  size_t bytes = size_t{1} << 30;
  const size_t free_b = static_cast<size_t>(std::max<int64_t>(dev.free_bytes, 0));
  while (bytes > (size_t{64} << 20) && 2 * bytes + (size_t{256} << 20) > free_b) bytes /= 2;
  const size_t n = bytes / 16;
  Buffer<uint4> src(n), dst(n);
  Buffer<unsigned long long> diff(1);
  const int grid = dev.sms * 8;
  fill_words<<<grid, 256>>>(src.p, n, 0x5bd1e995u);
  FLASHLAB_CHECK_LAUNCH();
  fill_words<<<grid, 256>>>(dst.p, n, 0x1b873593u);  // dst differs from src before the copy
  FLASHLAB_CHECK_LAUNCH();
  // No L2 sweep between copies: each copy writes back the lines the one before left dirty, as
  // many as it leaves dirty itself, so its time counts every byte it writes.
  const double s = median_seconds([&] {
    copy_words<<<grid, 256>>>(src.p, dst.p, n);
    FLASHLAB_CHECK_LAUNCH();
  });
  FLASHLAB_CUDA_CHECK(cudaMemset(diff.p, 0, sizeof(unsigned long long)));
  count_differences<<<grid, 256>>>(src.p, dst.p, n, diff.p);
  FLASHLAB_CHECK_LAUNCH();
  unsigned long long differ = 0;
  FLASHLAB_CUDA_CHECK(cudaMemcpy(&differ, diff.p, sizeof differ, cudaMemcpyDeviceToHost));
  c.value = 2.0 * static_cast<double>(bytes) / s;
  c.how = "copy of " + std::to_string(bytes >> 20) + " MiB, bytes read + written, " +
          std::to_string(grid) + " x 256 threads, median of " + std::to_string(kRepeats);
  c.check_ok = differ == 0;
  c.check =
      std::to_string(differ) + " of " + std::to_string(4 * n) + " words differ after the copy";
  return c;
}

// ---- read ---------------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t fold(uint4 w) {
  return w.x ^ w.y ^ w.z ^ w.w;
}

// XOR of every word of the block's share, one atomic per block (a thread's would be 270k atomics
// on one address, as slow as the read).
__device__ __forceinline__ void fold_block(uint32_t acc, unsigned int* out) {
  __shared__ uint32_t warp_acc[32];
  acc = __reduce_xor_sync(0xffffffffu, acc);
  if (threadIdx.x % 32 == 0) warp_acc[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t a = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) a ^= warp_acc[w];
    atomicXor(out, a);
  }
}

// The ways a load can go through the caches (the PTX cache operators): .cs streams (evict
// first), .cg caches in L2 only, .nc through the read-only path.
enum class LoadPath { cs, cg, nc };

template <LoadPath kPath>
__device__ __forceinline__ uint4 load(const uint4* p) {
  if constexpr (kPath == LoadPath::cs) return __ldcs(p);
  if constexpr (kPath == LoadPath::cg) return __ldcg(p);
  return __ldg(p);
}

// Each block reads tiles of kLoads x blockDim consecutive words, a grid's stride of tiles apart:
// kLoads loads in flight per thread, each warp's a contiguous 512 bytes, each block's tile one
// contiguous stretch of memory.
template <int kLoads, LoadPath kPath>
__global__ void read_words(const uint4* __restrict__ src, size_t n, unsigned int* out) {
  const size_t tile = kLoads * static_cast<size_t>(blockDim.x);
  uint32_t acc = 0;
  size_t t0 = blockIdx.x * tile;
  for (; t0 + tile <= n; t0 += gridDim.x * tile) {
    uint4 w[kLoads];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) w[k] = load<kPath>(&src[t0 + k * blockDim.x + threadIdx.x]);
#pragma unroll
    for (int k = 0; k < kLoads; ++k) acc ^= fold(w[k]);
  }
  for (size_t i = t0 + threadIdx.x; i < n && i < t0 + tile; i += blockDim.x) acc ^= fold(src[i]);
  fold_block(acc, out);
}

__global__ void read_words_plainly(const uint4* src, size_t n, unsigned int* out) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    acc ^= fold(src[i]);
  fold_block(acc, out);
}

// The fastest of a few ways to read `bytes` (the cache path, the loads in flight; a single way
// can read below what a kernel with another reaches), each timed with L2 emptied first, each
// way's fold compared with a plain kernel's.
struct BestRead {
  double seconds = 0;
  std::string how;  // every way's rate
  bool agree = true;
};

BestRead best_read(const DeviceInfo& dev, size_t bytes) {
  const size_t n = bytes / 16;
  Buffer<uint4> src(n);
  Buffer<unsigned int> folds(2);
  const int grid = dev.sms * 8;
  fill_words<<<grid, 256>>>(src.p, n, 0x2545f491u);
  FLASHLAB_CHECK_LAUNCH();
  struct Way {
    const char* name;
    void (*kernel)(const uint4*, size_t, unsigned int*);
  };
  const Way ways[] = {{"ld.global.cs, 8 loads in flight", read_words<8, LoadPath::cs>},
                      {"ld.global.cg, 8 loads in flight", read_words<8, LoadPath::cg>},
                      {"ld.global.nc, 16 loads in flight", read_words<16, LoadPath::nc>},
                      {"ld.global.cg, 16 loads in flight", read_words<16, LoadPath::cg>}};
  FLASHLAB_CUDA_CHECK(cudaMemset(folds.p + 1, 0, sizeof(unsigned int)));
  read_words_plainly<<<dev.sms * 3, 128>>>(src.p, n, folds.p + 1);  // another partition
  FLASHLAB_CHECK_LAUNCH();
  const L2Flush l2;
  BestRead best;
  for (const Way& w : ways) {
    const double s = median_seconds(
        [&] {
          FLASHLAB_CUDA_CHECK(cudaMemsetAsync(folds.p, 0, sizeof(unsigned int)));
          l2.sweep(nullptr);
        },
        [&] {
          w.kernel<<<grid, 256>>>(src.p, n, folds.p);
          FLASHLAB_CHECK_LAUNCH();
        });
    unsigned int got[2] = {0, 0};
    FLASHLAB_CUDA_CHECK(cudaMemcpy(got, folds.p, sizeof got, cudaMemcpyDeviceToHost));
    best.agree = best.agree && got[0] == got[1];
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.2f TB/s", best.how.empty() ? "" : "; ", w.name,
                  static_cast<double>(bytes) / s / 1e12);
    best.how += buf;
    if (best.seconds == 0 || s < best.seconds) best.seconds = s;
  }
  return best;
}

Ceiling read_ceiling(const DeviceInfo& dev) {
  Ceiling c = named("hbm_read", "HBM read", "B/s");
  size_t bytes = size_t{1} << 30;
  const size_t free_b = static_cast<size_t>(std::max<int64_t>(dev.free_bytes, 0));
  while (bytes > (size_t{64} << 20) && bytes + (size_t{512} << 20) > free_b) bytes /= 2;
  const BestRead r = best_read(dev, bytes);
  c.value = static_cast<double>(bytes) / r.seconds;
  c.how = "read of " + std::to_string(bytes >> 20) + " MiB (bytes read), " +
          std::to_string(dev.sms * 8) + " x 256 threads, L2 emptied before each run, the fastest of: " +
          r.how + "; median of " + std::to_string(kRepeats) + " each";
  c.check_ok = r.agree;
  c.check = c.check_ok ? "each way's XOR of every word equals a plain kernel's"
                       : "a way's XOR of every word differs from a plain kernel's";
  return c;
}

__global__ void empty_kernel() {}

// ---- mma.sync -----------------------------------------------------------------------------------

constexpr int kMmaChains = 8;

__global__ void __launch_bounds__(256) mma_chains(const uint32_t* frags, int iters, float* out) {
  const int lane = threadIdx.x % 32;
  uint32_t a[4], b0[2], b1[2];
  for (int i = 0; i < 4; ++i) a[i] = frags[lane * 8 + i];
  b0[0] = frags[lane * 8 + 4], b0[1] = frags[lane * 8 + 5];
  b1[0] = frags[lane * 8 + 6], b1[1] = frags[lane * 8 + 7];
  float acc[kMmaChains][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < kMmaChains; ++j) mma_16816<__nv_bfloat16>(acc[j], a, (j & 1) ? b1 : b0);
  }
  float sum = 0;
#pragma unroll
  for (int j = 0; j < kMmaChains; ++j) sum += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// Runs `launch(out)` (one float a thread into `out`) on grid x threads as median_seconds times it;
// returns the seconds and leaves the last run's outputs in `results`.
template <class Launch>
double time_chains(int grid, int threads, Launch&& launch, std::vector<float>& results) {
  Buffer<float> out(static_cast<size_t>(grid) * threads);
  const double s = median_seconds([&] {
    launch(out.p);
    FLASHLAB_CHECK_LAUNCH();
  });
  results.resize(out.n);
  FLASHLAB_CUDA_CHECK(
      cudaMemcpy(results.data(), out.p, results.size() * 4, cudaMemcpyDeviceToHost));
  return s;
}

// True when every value is finite and not all are zero.
bool finite_and_nonzero(const std::vector<float>& v) {
  bool nonzero = false;
  for (float x : v) {
    if (!std::isfinite(x)) return false;
    nonzero = nonzero || x != 0.f;
  }
  return nonzero;
}

Ceiling mma_ceiling(const DeviceInfo& dev) {
  Ceiling c = named("mma_sync_bf16", "mma.sync", "FLOP/s");
  const std::vector<uint16_t> w = random_bf16(32 * 16, 11);
  std::vector<uint32_t> frags(32 * 8);
  for (size_t i = 0; i < frags.size(); ++i) frags[i] = w[2 * i] | uint32_t(w[2 * i + 1]) << 16;
  Buffer<uint32_t> f(frags.size());
  upload(f, frags);
  const int grid = dev.sms * 4, threads = 256, iters = 4096;
  std::vector<float> o;
  const double s = time_chains(
      grid, threads, [&](float* out) { mma_chains<<<grid, threads>>>(f.p, iters, out); }, o);
  const double instructions = double(grid) * (threads / 32) * iters * kMmaChains;
  c.value = instructions * 4096 / s;
  c.how = "bf16 m16n8k16, " + std::to_string(grid) + " CTAs x 8 warps x " + std::to_string(iters) +
          " x " + std::to_string(kMmaChains) + " independent chains, median of " +
          std::to_string(kRepeats);
  c.check_ok = finite_and_nonzero(o);
  c.check = c.check_ok ? "every accumulator finite, not all zero"
                       : "an accumulator is NaN/Inf, or all are zero";
  return c;
}

// ---- wgmma (sm_90a) -----------------------------------------------------------------------------

constexpr int kWgN = 256, kWgK = 64, kWgSteps = kWgK / 16;
constexpr uint32_t kCoreBytes = 128;               // 8 rows x 16 bytes
constexpr uint32_t kLboA = 64 / 8 * kCoreBytes;    // K-adjacent core matrices of A
constexpr uint32_t kLboB = kWgN / 8 * kCoreBytes;  // ... of B
constexpr uint32_t kBytesA = 64 * kWgK * 2, kBytesB = kWgN * kWgK * 2;

// Byte offset of element (row, k) in a K-major, unswizzled operand whose K-adjacent core matrices
// are `lbo` bytes apart.
__host__ __device__ constexpr uint32_t core_offset(int row, int k, uint32_t lbo) {
  return (k / 8) * lbo + (row / 8) * kCoreBytes + (row % 8) * 16 + (k % 8) * 2;
}

__global__ void sm90a_probe(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *out = 1;
#else
  *out = 0;
#endif
}

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Descriptor of an operand at `p` whose K-adjacent core matrices are `lbo` bytes apart.
__device__ __forceinline__ uint64_t operand_desc(const void* p, uint32_t lbo) {
  return sm90::smem_desc_unswizzled(smem_addr(p), lbo, kCoreBytes);
}

// Copies the operand images into shared memory, where wgmma reads them (through the async proxy).
__device__ void load_operands(unsigned char* smem, const uint4* a_image, const uint4* b_image) {
  auto* s = reinterpret_cast<uint4*>(smem);
  for (uint32_t i = threadIdx.x; i < (kBytesA + kBytesB) / 16; i += blockDim.x)
    s[i] = i < kBytesA / 16 ? a_image[i] : b_image[i - kBytesA / 16];
  sm90::fence_proxy_async();
  __syncthreads();
}
#endif

// One instruction, d = A B^T over the first k-step, written out as a 64 x 256 matrix by the
// fragment layout the PTX ISA gives (warp w, lane 4g + q: element i at row 16w + g + 8((i>>1)&1),
// column 8(i>>2) + 2q + (i&1)).
__global__ void __launch_bounds__(128, 1)
    wgmma_once(const uint4* a_image, const uint4* b_image, float* out) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) unsigned char smem[];
  load_operands(smem, a_image, b_image);
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  sm90::wgmma_fence();
  // d (64 x 256, fp32, 128 registers a thread) = A B^T, one instruction
  sm90::wgmma_ss<__nv_bfloat16, kWgN>(d, operand_desc(smem, kLboA),
                                      operand_desc(smem + kBytesA, kLboB), 0);
  sm90::wgmma_commit();
  sm90::wgmma_wait<0>();
  const int w = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, q = threadIdx.x % 4;
#pragma unroll
  for (int i = 0; i < 128; ++i)
    out[(16 * w + g + 8 * ((i >> 1) & 1)) * kWgN + 8 * (i >> 2) + 2 * q + (i & 1)] = d[i];
#else
  (void)a_image, (void)b_image, (void)out;
#endif
}

// `iters` groups of kWgSteps instructions per warpgroup, one group in flight at a time.
__global__ void __launch_bounds__(256, 1)
    wgmma_chains(const uint4* a_image, const uint4* b_image, int iters, float* out) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) unsigned char smem[];
  load_operands(smem, a_image, b_image);
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  for (int it = 0; it < iters; ++it) {
    sm90::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kWgSteps; ++k)
      sm90::wgmma_ss<__nv_bfloat16, kWgN>(d, operand_desc(smem + 2 * k * kLboA, kLboA),
                                          operand_desc(smem + kBytesA + 2 * k * kLboB, kLboB), 1);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
  }
  float sum = 0;
#pragma unroll
  for (int i = 0; i < 128; ++i) sum += d[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
#else
  (void)a_image, (void)b_image, (void)iters, (void)out;
#endif
}

bool built_with_sm90a() {
  Buffer<int> flag(1);
  FLASHLAB_CUDA_CHECK(cudaMemset(flag.p, 0, sizeof(int)));
  sm90a_probe<<<1, 1>>>(flag.p);
  FLASHLAB_CHECK_LAUNCH();
  int v = 0;
  FLASHLAB_CUDA_CHECK(cudaMemcpy(&v, flag.p, sizeof v, cudaMemcpyDeviceToHost));
  return v == 1;
}

Ceiling wgmma_ceiling(const DeviceInfo& dev) {
  Ceiling c = named("wgmma_bf16", "wgmma", "FLOP/s");
  if (dev.cc_major != 9) {
    c.why_not = "wgmma needs an sm_90 GPU (this one is sm_" + std::to_string(dev.cc_major) +
                std::to_string(dev.cc_minor) + ")";
    return c;
  }
  if (!built_with_sm90a()) {
    c.why_not = "this build has no sm_90a code (FLASHLAB_CUDA_GENCODE lacks compute_90a)";
    return c;
  }
  const std::vector<uint16_t> a = random_bf16(kBytesA / 2, 12), b = random_bf16(kBytesB / 2, 13);
  Buffer<uint4> ga(kBytesA / 16), gb(kBytesB / 16);
  FLASHLAB_CUDA_CHECK(cudaMemcpy(ga.p, a.data(), kBytesA, cudaMemcpyHostToDevice));
  FLASHLAB_CUDA_CHECK(cudaMemcpy(gb.p, b.data(), kBytesB, cudaMemcpyHostToDevice));
  const int smem = static_cast<int>(kBytesA + kBytesB);

  // The check: one instruction against the host product of the same words.
  Buffer<float> one(64 * kWgN);
  FLASHLAB_CUDA_CHECK(cudaMemset(one.p, 0xFF, one.n * 4));  // NaN: an unwritten element fails
  wgmma_once<<<1, 128, smem>>>(ga.p, gb.p, one.p);
  FLASHLAB_CHECK_LAUNCH();
  std::vector<float> got(one.n);
  FLASHLAB_CUDA_CHECK(cudaMemcpy(got.data(), one.p, got.size() * 4, cudaMemcpyDeviceToHost));
  double worst = 0, scale = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < kWgN; ++n) {
      double ref = 0;
      for (int k = 0; k < 16; ++k)
        ref += double(bf16_bits_to_float(a[core_offset(m, k, kLboA) / 2])) *
               bf16_bits_to_float(b[core_offset(n, k, kLboB) / 2]);
      const double g = got[m * kWgN + n];
      worst = std::isfinite(g) ? std::max(worst, std::fabs(g - ref)) : INFINITY;
      scale = std::max(scale, std::fabs(ref));
    }
  c.check_ok = worst <= 1e-5 * std::max(scale, 1.0);
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "one instruction against the host product: max |error| %.2e (largest |value| %.2f)",
                worst, scale);
  c.check = buf;

  const int grid = dev.sms, iters = 4096;
  Buffer<float> out(static_cast<size_t>(grid) * 256);
  const double s = median_seconds([&] {
    wgmma_chains<<<grid, 256, smem>>>(ga.p, gb.p, iters, out.p);
    FLASHLAB_CHECK_LAUNCH();
  });
  const double instructions = double(grid) * 2 * iters * kWgSteps;
  c.value = instructions * 2.0 * 64 * kWgN * 16 / s;
  c.how = "bf16 m64n256k16, A and B in shared memory, " + std::to_string(grid) +
          " CTAs x 2 warpgroups x " + std::to_string(iters) + " x " + std::to_string(kWgSteps) +
          ", median of " + std::to_string(kRepeats);
  return c;
}

// ---- fp32 FMA -----------------------------------------------------------------------------------

constexpr int kFmaChains = 8;

__global__ void __launch_bounds__(256) ffma_chains(const float* seed, int iters, float* out) {
  float x[kFmaChains];
  const float a = 0.999f + 1e-4f * seed[threadIdx.x % 32], b = 1e-3f * seed[(threadIdx.x + 7) % 32];
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) x[j] = seed[(threadIdx.x + j) % 32];
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < kFmaChains; ++j) x[j] = fmaf(x[j], a, b);
  }
  float sum = 0;
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) sum += x[j];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

Ceiling ffma_ceiling(const DeviceInfo& dev) {
  Ceiling c = named("ffma_fp32", "fp32 FMA", "FLOP/s");
  const HostTensor r = random_normal(2026, 14, 32, DType::f32);
  std::vector<float> seed(r.begin(), r.end());
  Buffer<float> sd(32);
  upload(sd, seed);
  const int grid = dev.sms * 8, threads = 256, iters = 16384;
  std::vector<float> o;
  const double s = time_chains(
      grid, threads, [&](float* out) { ffma_chains<<<grid, threads>>>(sd.p, iters, out); }, o);
  c.value = double(grid) * threads * iters * kFmaChains * 2 / s;
  c.how = "fmaf on CUDA cores, " + std::to_string(grid) + " CTAs x 256 threads x " +
          std::to_string(iters) + " x " + std::to_string(kFmaChains) +
          " independent chains, median of " + std::to_string(kRepeats);
  c.check_ok = finite_and_nonzero(o);
  c.check = c.check_ok ? "every chain finite, not all zero" : "a chain is NaN/Inf, or all are zero";
  return c;
}

}  // namespace

std::vector<Ceiling> measure_ceilings() {
  const DeviceInfo& dev = device_info();
  if (!dev.present) throw std::runtime_error(dev.why_absent);
  std::vector<Ceiling> out;
  out.push_back(copy_ceiling(dev));
  out.push_back(read_ceiling(dev));
  out.push_back(mma_ceiling(dev));
  out.push_back(wgmma_ceiling(dev));
  out.push_back(ffma_ceiling(dev));
  FLASHLAB_CUDA_CHECK(cudaDeviceSynchronize());
  return out;
}

PassFloor time_plain_read(size_t bytes) {
  const DeviceInfo& dev = device_info();
  if (!dev.present) throw std::runtime_error(dev.why_absent);
  bytes = std::max<size_t>(bytes / 16 * 16, 16);
  const BestRead r = best_read(dev, bytes);
  if (!r.agree) throw std::runtime_error("a plain read's XOR of every word differs from another's");
  return {r.seconds * 1e3, "the fastest of: " + r.how};
}

PassFloor time_empty_kernel(int blocks, int threads, int smem_bytes) {
  const DeviceInfo& dev = device_info();
  if (!dev.present) throw std::runtime_error(dev.why_absent);
  FLASHLAB_CUDA_CHECK(
      cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  const L2Flush l2;
  const double s = median_seconds([&] { l2.sweep(nullptr); },
                                  [&] {
                                    empty_kernel<<<blocks, threads, smem_bytes>>>();
                                    FLASHLAB_CHECK_LAUNCH();
                                  });
  return {s * 1e3, std::to_string(blocks) + " blocks x " + std::to_string(threads) +
                       " threads, " + std::to_string(smem_bytes) +
                       " bytes of shared memory each, doing nothing"};
}

}  // namespace flashlab::cuda
