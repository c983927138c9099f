// The attention problem every part of the lab speaks about: shapes, dtypes, the host tensors a
// version reads and writes, and the counters its CPU twin keeps.
//
// Layout: every tensor is [B, H, N, d] contiguous; LSE and D are [B, H, Nq].
// Causal masking is bottom-right aligned: query i sees key j iff j <= i + (Nk - Nq).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace flashlab {

enum class DType { f64, f32, f16, bf16 };

struct Shape {
  int64_t B = 1, H = 1, Nq = 1, Nk = 1, d = 64;

  int64_t heads() const { return B * H; }
  int64_t q_elems() const { return B * H * Nq * d; }   // Q, O, dO, dQ
  int64_t kv_elems() const { return B * H * Nk * d; }  // K, V, dK, dV
  int64_t lse_elems() const { return B * H * Nq; }     // LSE, D
};

struct Problem {
  Shape shape;
  bool causal = false;
  double scale = 0.0;  // 0 means 1/sqrt(d); use softmax_scale()
  DType dtype = DType::f32;

  double softmax_scale() const {
    return scale != 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(shape.d));
  }
  // Offset added to a query index to get the last key it may see (bottom-right alignment).
  int64_t causal_offset() const { return shape.Nk - shape.Nq; }
};

// Host tensors hold doubles whose values are already representable in the problem's dtype
// (rounded once on the host), so the fp64 reference sees exactly what a kernel sees.
using HostTensor = std::vector<double>;

struct Inputs {
  HostTensor Q, K, V, dO;
};

struct Forward {
  HostTensor O;    // [B,H,Nq,d], rounded to the dtype
  HostTensor LSE;  // [B,H,Nq], natural log; -inf for a row that sees no key
  HostTensor P;    // [B,H,Nq,Nk], filled only by versions that store P (naive)
};

struct Gradients {
  HostTensor dQ, dK, dV;
};

// What a CPU twin counts while it walks its block schedule. Elements, not bytes: "read"/"written"
// are elements moved between the tile (on-chip) and the tensors outside it ("HBM"). An atomic add
// counts as one read and one write of its element, plus one atomic.
struct Counters {
  int64_t matmul_flops = 0;  // 2*m*n*k per tile product
  int64_t elems_read = 0;
  int64_t elems_written = 0;
  int64_t atomic_adds = 0;
  int64_t tiles_computed = 0;  // (Q block, K block) pairs that were visited
  int64_t tiles_skipped = 0;   // pairs skipped whole by the causal mask

  int64_t io() const { return elems_read + elems_written; }
  Counters& operator+=(const Counters& o) {
    matmul_flops += o.matmul_flops;
    elems_read += o.elems_read;
    elems_written += o.elems_written;
    atomic_adds += o.atomic_adds;
    tiles_computed += o.tiles_computed;
    tiles_skipped += o.tiles_skipped;
    return *this;
  }
  bool operator==(const Counters&) const = default;
};

// How a CPU twin runs: tile sizes, threads, and whether it only walks the schedule.
struct CpuOptions {
  int Br = 64;
  int Bc = 64;
  int threads = 0;       // 0: OpenMP's default
  bool dry_run = false;  // walk the schedule and count, skip the arithmetic
};

std::string to_string(DType t);
bool parse_dtype(const std::string& s, DType& out);
int dtype_bytes(DType t);
// Unit roundoff of the storage dtype (2^-53, 2^-24, 2^-11, 2^-8).
double unit_roundoff(DType t);

}  // namespace flashlab
