// The FP8 rung on the GPU (kernels/08_hopper_fp8/cuda.cu): each of its three ids within the fp8
// error budget (run/budget.h: 4x the larger of the plain per-tensor FP8 forward's error and the
// expected error of e4m3's rounding of the scores, as `flashlab run --dtype fp8` holds them; the
// one-row case with outliers, seed 5113, is the floor's) against the fp64 reference, and close
// to its CPU twin, on d 64 and 128, causal and not, ragged N, Nq != Nk (both ways, and rows that
// see no key), grouped heads, normal and outlier inputs. Seeded inputs; the runner poisons O, LSE
// and the workspace with NaN first. And the quantization pass against the twin's codes and scales, read from the workspace.
//
// The entry's own tests (ids, axes, refusals, workspace formula) need no device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "common/cpu/fp8_quant.h"
#include "core/dtype.h"
#include "core/fp8.h"
#include "core/rng.h"
#include "gpu_check.h"
#include "reference/attention.h"
#include "run/budget.h"
#include "run/compare.h"
#include "run/registry.h"

namespace flashlab {
namespace {

const char* const kIds[] = {"hopper-fp8", "hopper-fp8-no-hadamard", "hopper-fp8-per-tensor"};
// The Hadamard signs' seed (kernels/08_hopper_fp8/variants.h: kSignSeed), written again here so
// that a change of it on one side shows as codes that differ.
constexpr uint64_t kSignSeed = 2024;

struct Fp8Case {
  int64_t d;
  bool causal;
  int64_t B, H, Hkv, Nq, Nk;
  InputKind inputs;
};

std::string case_name(const Fp8Case& c) {
  std::string n = "d";
  n += std::to_string(c.d);
  n += c.causal ? "_causal_B" : "_full_B";
  n += std::to_string(c.B) + "H" + std::to_string(c.H) + "Hkv" + std::to_string(c.Hkv);
  n += "_Nq" + std::to_string(c.Nq) + "_Nk" + std::to_string(c.Nk) + "_" + to_string(c.inputs);
  return n;
}

void PrintTo(const Fp8Case& c, std::ostream* os) {
  *os << case_name(c);
}

Problem problem_of(const Fp8Case& c) {
  Problem p;
  p.shape = Shape{c.B, c.H, c.Nq, c.Nk, c.d};
  p.shape.Hkv = c.Hkv;
  p.causal = c.causal;
  p.dtype = DType::fp8;
  return p;
}

// Ragged against the tiles (1000 = 7 x 128 + 104 rows, 5 x 192 + 40 keys), Nq < Nk and Nq > Nk
// (causal: rows 0..129 of 300 over 170 keys see none), one row, grouped heads (8 over 2), B > 1.
std::vector<Fp8Case> all_cases() {
  std::vector<Fp8Case> cases;
  for (InputKind kind : {InputKind::normal, InputKind::outliers})
    for (int64_t d : {64, 128})
      for (bool causal : {false, true}) {
        cases.push_back({d, causal, 1, 2, 2, 1000, 1000, kind});
        cases.push_back({d, causal, 1, 2, 2, 77, 1000, kind});
        cases.push_back({d, causal, 2, 2, 1, 300, 170, kind});
        cases.push_back({d, causal, 1, 8, 2, 256, 384, kind});
        cases.push_back({d, causal, 1, 1, 1, 1, 129, kind});
      }
  return cases;
}

class CudaHopperFp8 : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(CudaHopperFp8, EveryIdWithinTheFp8BudgetAndNearItsTwin) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  const Fp8Case& c = GetParam();
  const Problem p = problem_of(c);
  const Inputs in = make_inputs(p, 4400 + static_cast<uint64_t>(c.Nq * 3 + c.Nk * 5 + c.d + c.H),
                                c.inputs);
  const Forward ref = reference::forward(p, in, false);
  const ErrorBudget budget = compute_budget(p, in, ref, Gradients{}, false);
  const double o_budget = budget.of("O").budget_rel, lse_budget = budget.of("LSE").budget_rel;
  int tested = 0;
  for (const char* id : kIds) {
    SCOPED_TRACE(id);
    const VersionInfo* v = find_version(id);
    ASSERT_NE(v, nullptr);
    ASSERT_NE(v->cuda, nullptr) << v->cuda_absent;
    if (const std::string why = cuda_unavailable(*v); !why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(v->cuda->check(p), "");
    cuda::RunOptions o = gpu_test::once();
    o.bitwise_repeats = 1;  // deterministic: no atomics on the outputs
    const cuda::RunResult r = cuda::run(*v->cuda, p, in, nullptr, o);
    const ErrorStats eo = compare(r.fwd.O, ref.O), el = compare_lse(r.fwd.LSE, ref.LSE);
    EXPECT_TRUE(eo.finite) << "O has NaN or Inf (an element never written?)";
    EXPECT_TRUE(el.finite) << "LSE has NaN or a misplaced Inf";
    EXPECT_LE(eo.rel, o_budget);
    EXPECT_LE(el.rel, lse_budget);
    EXPECT_TRUE(r.bitwise_repeatable);
    EXPECT_EQ(r.workspace_bytes, static_cast<int64_t>(v->cuda->workspace_bytes(p, {})));
    // The twin makes the same roundings: the two differ by fp32 roundings and by the e4m3
    // roundings those move across a boundary, well under the error both have.
    Forward twin;
    Counters cnt;
    v->cpu_forward(p, in, CpuOptions{}, twin, cnt);
    const ErrorStats et = compare(r.fwd.O, twin.O), ec = compare(twin.O, ref.O);
    EXPECT_LE(et.rel, 0.5 * ec.rel + 1e-3) << "GPU against its twin " << et.rel
                                           << ", twin against fp64 " << ec.rel;
    std::cout << "[" << id << "] " << case_name(c) << "\n    O   rel " << eo.rel << " (budget "
              << o_budget << "), twin's " << ec.rel << ", GPU vs twin " << et.rel
              << "\n    LSE rel " << el.rel << " (budget " << lse_budget << ")\n";
    ++tested;
  }
  EXPECT_EQ(tested, 3);
}

INSTANTIATE_TEST_SUITE_P(HopperFp8, CudaHopperFp8, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Fp8Case>& i) {
                           return case_name(i.param);
                         });

// ---- the quantization pass against the twin ------------------------------------------------------

// A device buffer for the test's own launch of the forward.
struct Buffer {
  void* ptr = nullptr;
  explicit Buffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&ptr, std::max<size_t>(bytes, 16)), cudaSuccess); }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

std::vector<uint16_t> bf16_words(const HostTensor& x) {
  std::vector<uint16_t> w(x.size());
  for (size_t i = 0; i < x.size(); ++i) w[i] = float_to_bf16_bits(static_cast<float>(x[i]));
  return w;
}

// The twin's codes and scales of one tensor ([heads][n][d]), from fp8_quant.h's steps, in blocks of
// `block` rows (Q: 128, K and V: 192, the forward's tiles).
struct TwinCodes {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};
TwinCodes twin_codes(HostTensor x, int64_t heads, int64_t n, int64_t d, int64_t block, bool rotate,
                     bool block_scales) {
  if (rotate) cpu::rotate_rows(x, d, cpu::hadamard_signs(kSignSeed, d));
  const int64_t nb = (n + block - 1) / block;
  TwinCodes t;
  t.scales.assign(static_cast<size_t>(heads * nb), 0.f);
  double all = 0;
  for (double e : x) all = std::max(all, std::fabs(e));
  for (int64_t hb = 0; hb < heads * nb; ++hb) {
    const int64_t h = hb / nb, r0 = (hb % nb) * block, rows = std::min<int64_t>(block, n - r0);
    double amax = block_scales ? 0 : all;
    if (block_scales)
      for (int64_t e = 0; e < rows * d; ++e)
        amax = std::max(amax, std::fabs(x[static_cast<size_t>((h * n + r0) * d + e)]));
    t.scales[static_cast<size_t>(hb)] =
        amax > 0 ? std::max(static_cast<float>(amax) / static_cast<float>(kE4m3Max),
                            std::numeric_limits<float>::min())
                 : 1.0f;
  }
  t.codes.resize(x.size());
  for (size_t e = 0; e < x.size(); ++e) {
    const int64_t hr = static_cast<int64_t>(e) / d;
    const float s = t.scales[static_cast<size_t>((hr / n) * nb + (hr % n) / block)];
    t.codes[e] = e4m3_code(static_cast<float>(x[e]) * (1.0f / s));  // quant.cuh's two roundings
  }
  return t;
}

// Codes that differ by one step of e4m3 (a value the fp32 rotation put on the other side of a
// rounding boundary than the twin's fp64 one) are allowed with the rotation, and only rarely.
void expect_codes(const char* what, const std::vector<uint8_t>& gpu, const TwinCodes& twin,
                  bool rotated) {
  ASSERT_EQ(gpu.size(), twin.codes.size());
  int64_t off_by_one = 0, wrong = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (gpu[i] == twin.codes[i]) continue;
    const bool neighbours = (gpu[i] & 0x80) == (twin.codes[i] & 0x80) &&
                            std::abs(int(gpu[i] & 0x7F) - int(twin.codes[i] & 0x7F)) == 1;
    if (rotated && neighbours) {
      ++off_by_one;
    } else if (wrong++ == 0) {
      ADD_FAILURE() << what << " code " << i << ": GPU " << e4m3_value(gpu[i]) << ", twin "
                    << e4m3_value(twin.codes[i]);
    }
  }
  EXPECT_EQ(wrong, 0) << what;
  EXPECT_LE(off_by_one, static_cast<int64_t>(gpu.size() / 1000)) << what;
}

TEST(CudaHopperFp8Quantization, CodesAndScalesAreTheTwins) {
  FLASHLAB_SKIP_WITHOUT_DEVICE();
  for (const char* id : kIds)
    for (int64_t d : {64, 128}) {
      SCOPED_TRACE(std::string(id) + " d" + std::to_string(d));
      const VersionInfo* v = find_version(id);
      ASSERT_TRUE(v && v->cuda && v->cuda->forward);
      if (const std::string why = cuda_unavailable(*v); !why.empty()) GTEST_SKIP() << why;
      const bool rotate = std::string(id) == "hopper-fp8";
      const bool blocks = std::string(id) != "hopper-fp8-per-tensor";
      Problem p;
      p.shape = Shape{2, 4, 200, 330, d};  // ragged both ways; Nk16 = 336 > Nk
      p.shape.Hkv = 2;
      p.dtype = DType::fp8;
      const Inputs in = make_inputs(p, 77, InputKind::outliers);
      const Shape& s = p.shape;
      const size_t q = static_cast<size_t>(s.q_elems()), kv = static_cast<size_t>(s.kv_elems());
      const size_t ws_bytes = v->cuda->workspace_bytes(p, {});
      Buffer Q(2 * q), K(2 * kv), V(2 * kv), O(2 * q), LSE(4 * static_cast<size_t>(s.lse_elems())),
          W(ws_bytes);
      ASSERT_EQ(cudaMemcpy(Q.ptr, bf16_words(in.Q).data(), 2 * q, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(K.ptr, bf16_words(in.K).data(), 2 * kv, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(V.ptr, bf16_words(in.V).data(), 2 * kv, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemset(W.ptr, 0xFF, ws_bytes), cudaSuccess);  // poisoned, as the runner does
      cuda::DeviceTensors t;
      t.problem = p;
      t.Q = Q.ptr;
      t.K = K.ptr;
      t.V = V.ptr;
      t.O = O.ptr;
      t.LSE = static_cast<float*>(LSE.ptr);
      t.workspace = W.ptr;
      v->cuda->forward(t);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> ws(ws_bytes);
      ASSERT_EQ(cudaMemcpy(ws.data(), W.ptr, ws_bytes, cudaMemcpyDeviceToHost), cudaSuccess);

      // The layout of cuda.cu: Q8, K8, V8^T [B Hkv][d][Nk16], then the scales.
      const int64_t nk16 = (s.Nk + 15) / 16 * 16;
      const size_t k8 = q, vt8 = k8 + kv, sq = vt8 + static_cast<size_t>(s.kv_head_count() * d * nk16);
      const TwinCodes tq = twin_codes(in.Q, s.heads(), s.Nq, d, 128, rotate, blocks);
      const TwinCodes tk = twin_codes(in.K, s.kv_head_count(), s.Nk, d, 192, rotate, blocks);
      const TwinCodes tv = twin_codes(in.V, s.kv_head_count(), s.Nk, d, 192, false, blocks);
      expect_codes("Q", std::vector<uint8_t>(ws.begin(), ws.begin() + k8), tq, rotate);
      expect_codes("K", std::vector<uint8_t>(ws.begin() + k8, ws.begin() + vt8), tk, rotate);
      // V8^T back to [B Hkv][Nk][d]; the padding keys are 0. Key k sits at column v_column(k):
      // within each 16, key 2q + e at 4q + e and key 8 + 2q + e at 4q + 2 + e (quant.cuh, the
      // order of the forward's P operand), written out again here so that a change on either
      // side shows.
      const auto v_column = [](int64_t k) {
        const int64_t r = k % 16;
        return k - r + 4 * ((r % 8) / 2) + r % 2 + 2 * (r / 8);
      };
      std::vector<uint8_t> v_rows(kv);
      for (int64_t h = 0; h < s.kv_head_count(); ++h)
        for (int64_t c = 0; c < d; ++c)
          for (int64_t k = 0; k < nk16; ++k) {
            const uint8_t code = ws[vt8 + static_cast<size_t>((h * d + c) * nk16 + v_column(k))];
            if (k < s.Nk)
              v_rows[static_cast<size_t>((h * s.Nk + k) * d + c)] = code;
            else
              ASSERT_EQ(code, 0) << "padding key " << k << " of V8^T";
          }
      expect_codes("V", v_rows, tv, false);
      // Scales: sQ, sK, sV (one each per tensor).
      const size_t nq = blocks ? tq.scales.size() : 1, nk = blocks ? tk.scales.size() : 1;
      ASSERT_EQ(ws_bytes, sq + 4 * (nq + 2 * nk));
      const auto* scales = reinterpret_cast<const float*>(ws.data() + sq);
      const auto expect_scales = [&](const char* what, const float* got, const TwinCodes& tw,
                                     size_t count) {
        for (size_t i = 0; i < count; ++i) {
          if (rotate)  // amax of an fp32 rotation against the fp64 one
            EXPECT_NEAR(got[i], tw.scales[i], 1e-6 * tw.scales[i]) << what << " " << i;
          else
            EXPECT_EQ(got[i], tw.scales[i]) << what << " " << i;
        }
      };
      expect_scales("sQ", scales, tq, nq);
      expect_scales("sK", scales + nq, tk, nk);
      expect_scales("sV", scales + nq + nk, tv, nk);
    }
}

// ---- the entry, on any machine --------------------------------------------------------------------

TEST(GpuHopperFp8Entry, ForwardOnlyGroupedHeadsFp8Only) {
  for (const char* id : kIds) {
    SCOPED_TRACE(id);
    const VersionInfo* v = find_version(id);
    ASSERT_NE(v, nullptr);
    ASSERT_NE(v->cuda, nullptr) << v->cuda_absent;
    EXPECT_NE(v->cuda->forward, nullptr);
    EXPECT_EQ(v->cuda->backward, nullptr);
    EXPECT_EQ(v->cuda->axes, unsigned{kGroupedHeads});
    Problem p = problem_of({128, false, 1, 2, 2, 256, 256, InputKind::normal});
    const cuda::DeviceInfo& dev = cuda::device_info();
    if (!dev.present || (dev.cc_major == 9 && dev.cc_minor == 0)) {
      EXPECT_EQ(v->cuda->check(p), "");
    }
    for (const auto& [change, words] :
         std::vector<std::pair<std::function<void(Problem&)>, std::string>>{
             {[](Problem& q) { q.dtype = DType::bf16; }, "--dtype fp8 only"},
             {[](Problem& q) { q.shape.d = 96; }, "head dims 64 and 128"},
             {[](Problem& q) { q.window_left = 16; }, "sliding window"},
         }) {
      Problem q = p;
      change(q);
      const std::string why = v->cuda->check(q);
      EXPECT_NE(why.find(words), std::string::npos) << why;
      EXPECT_EQ(why.find('\n'), std::string::npos) << "one line";
    }
  }
  // The workspace: codes of Q, K and V^T (keys padded to 16), then the scales: two blocks of each
  // (Q: 200 = 128 + 72 rows; K and V: 330 = 192 + 138 keys, 336 with the padding).
  Problem p = problem_of({64, false, 2, 4, 2, 200, 330, InputKind::normal});
  const size_t codes = 2 * 4 * 200 * 64 + 2 * 2 * 330 * 64 + 2 * 2 * 64 * 336;
  EXPECT_EQ(find_version("hopper-fp8")->cuda->workspace_bytes(p, {}),
            codes + 4 * (2 * 4 * 2 + 2 * 2 * 2 * 2));
  EXPECT_EQ(find_version("hopper-fp8-per-tensor")->cuda->workspace_bytes(p, {}), codes + 12);
  // The registry's formula (cpu.cpp, what `flashlab list` and the memory lab show) is the kernel's.
  for (const Fp8Case& c : all_cases())
    for (const char* id : kIds) {
      const VersionInfo* v = find_version(id);
      const Problem q = problem_of(c);
      EXPECT_EQ(static_cast<int64_t>(v->cuda->workspace_bytes(q, {})),
                v->workspace_bytes(q, CpuOptions{}))
          << id << " " << case_name(c);
    }
}

}  // namespace
}  // namespace flashlab
