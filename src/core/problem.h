// The attention problem every part of the lab speaks about: shapes, dtypes, the host tensors a
// version reads and writes, and the counters its CPU twin keeps.
//
// Layout: Q, O, dO, dQ are [B, H, Nq, d] contiguous; K, V, dK, dV are [B, Hkv, Nk, d] (grouped
// heads: Hkv divides H, and query head h reads K/V head h / (H / Hkv)); LSE and D are [B, H, Nq].
//
// A packed batch (FlashAttention's varlen layout) holds B sequences of their own lengths: sequence
// b has lens_q[b] query rows and lens_k[b] keys, stored one after another, token-major:
//   Q, O, dO, dQ [total_q, H, d]    K, V, dK, dV [total_k, Hkv, d]    LSE, D [H, total_q]
// Sequence b's rows start at token q_start(b) = lens_q[0] + ... + lens_q[b-1] (the cumulative
// offsets cu_seqlens of FA's API are q_start(0..B)). Every mask is aligned per sequence, and a
// sequence is a problem of its own (packed.h): a length of 0 is allowed; a sequence with no query
// rows writes nothing and its dK, dV are 0; one with no keys gets O = 0, LSE = -inf, dQ = 0. Nq
// and Nk are the longest lengths.
//
// A paged K/V cache (decoding; the layout serving engines keep): K and V live in a pool of pages
// of page_size keys each, and a block table maps page i of sequence b to a page of the pool:
//   K, V (and dK, dV) [num_pages, Hkv, page_size, d]    block_table [B, pages_per_seq] (int32)
// Key j of K/V head h of sequence b is row j % page_size of head h of page
// block_table[b][j / page_size]; the slots of a sequence's last page past its Nk keys belong to
// no key (paged.h). Q, O, LSE keep their dense layout. A paged cache holds B sequences of Nk keys each (not a packed batch).
//
// Which keys a query row sees, all aligned bottom-right (off = Nk - Nq, as FlashAttention >= 2.1):
//   causal          key j <= i + off
//   window (L, R)   i + off - L <= j <= i + off + R   (-1: no bound on that side)
// Both compose: under the causal mask a window's right side is at most 0.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace flashlab {

// fp8: the FP8 forward's problem. Its inputs are stored in bf16 (rounded once, like the others) and
// so is O; the version quantizes Q, K, V and P to e4m3 itself, with scales of its own (core/fp8.h,
// kernels/common/cpu/fp8_quant.h). Only versions that say so (VersionEntry::fp8) take it.
enum class DType { f64, f32, f16, bf16, fp8 };

struct Shape {
  int64_t B = 1, H = 1, Nq = 1, Nk = 1, d = 64;
  int64_t Hkv = 0;  // K/V heads; 0 means H (one K/V head per query head)
  // A packed batch: B lengths each (empty: every sequence has Nq queries and Nk keys).
  std::vector<int64_t> lens_q = {}, lens_k = {};
  // A paged K/V cache: keys per page (0: K and V are contiguous).
  int64_t page_size = 0;

  bool packed() const { return !lens_q.empty(); }
  bool paged() const { return page_size > 0; }
  // A paged cache: the pages of one sequence (a row of the block table), and of the whole pool.
  int64_t pages_per_seq() const { return paged() ? (Nk + page_size - 1) / page_size : 0; }
  int64_t num_pages() const { return B * pages_per_seq(); }
  int64_t len_q(int64_t b) const { return packed() ? lens_q[b] : Nq; }
  int64_t len_k(int64_t b) const { return packed() ? lens_k[b] : Nk; }
  // The first query row (key) of sequence b, counted in tokens over the batch: q_start(B) is the
  // batch's query tokens in all. Each call sums the lengths before b; a walk over the sequences
  // keeps running offsets instead (core/packed.h: for_each_sequence).
  int64_t q_start(int64_t b) const { return start_of(lens_q, b, Nq); }
  int64_t k_start(int64_t b) const { return start_of(lens_k, b, Nk); }
  int64_t total_q() const { return q_start(B); }
  int64_t total_k() const { return k_start(B); }

  int64_t kv_heads() const { return Hkv > 0 ? Hkv : H; }
  bool grouped() const { return kv_heads() != H; }
  int64_t group() const { return H / kv_heads(); }  // query heads that share one K/V head
  int64_t heads() const { return B * H; }           // query heads of the batch, flattened
  int64_t kv_head_count() const { return B * kv_heads(); }
  // The K/V head (flattened over the batch) that query head h (flattened) reads.
  int64_t kv_of(int64_t h) const { return (h / H) * kv_heads() + (h % H) / group(); }
  // The first query head (flattened) of K/V head kh's group.
  int64_t first_q_of(int64_t kh) const {
    return (kh / kv_heads()) * H + (kh % kv_heads()) * group();
  }
  int64_t q_elems() const { return total_q() * H * d; }            // Q, O, dO, dQ
  // K, V, dK, dV: a paged cache's whole pool, the slots past each sequence's last key included.
  int64_t kv_elems() const {
    return (paged() ? num_pages() * page_size : total_k()) * kv_heads() * d;
  }
  int64_t lse_elems() const { return total_q() * H; }              // LSE, D

 private:
  static int64_t start_of(const std::vector<int64_t>& lens, int64_t b, int64_t n) {
    if (lens.empty()) return b * n;
    int64_t t = 0;
    for (int64_t i = 0; i < b; ++i) t += lens[i];
    return t;
  }
};

// Makes s a packed batch of these lengths: B is their count, Nq and Nk the longest.
inline void set_packed(Shape& s, std::vector<int64_t> lens_q, std::vector<int64_t> lens_k) {
  s.B = static_cast<int64_t>(lens_q.size());
  s.Nq = lens_q.empty() ? 0 : *std::max_element(lens_q.begin(), lens_q.end());
  s.Nk = lens_k.empty() ? 0 : *std::max_element(lens_k.begin(), lens_k.end());
  s.lens_q = std::move(lens_q);
  s.lens_k = std::move(lens_k);
}

// The axes a problem may have beyond dense multi-head attention. A version declares the ones it
// takes (VersionEntry::axes); the runner refuses the others with one line.
enum Axis : unsigned {
  kGroupedHeads = 1u << 0,  // Hkv < H
  kWindow = 1u << 1,        // a sliding window
  kPacked = 1u << 2,        // a packed batch of sequences of their own lengths
  kPaged = 1u << 3,         // a paged K/V cache with a block table
};
// "grouped K/V heads (--heads-kv)", "a sliding window (--window)": the first axis in `axes`.
const char* axis_name(unsigned axes);

struct Problem {
  Shape shape;
  bool causal = false;
  double scale = 0.0;  // 0 means 1/sqrt(d); use softmax_scale()
  DType dtype = DType::f32;
  int64_t window_left = -1, window_right = -1;  // -1: unbounded on that side

  bool windowed() const { return window_left >= 0 || window_right >= 0; }
  double softmax_scale() const {
    return scale != 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(shape.d));
  }
  // Offset added to a query index to get the last key it may see (bottom-right alignment).
  int64_t causal_offset() const { return shape.Nk - shape.Nq; }
  // The axes beyond dense multi-head attention this problem uses (Axis flags).
  unsigned axes() const {
    return (shape.grouped() ? kGroupedHeads : 0u) | (windowed() ? kWindow : 0u) |
           (shape.packed() ? kPacked : 0u) | (shape.paged() ? kPaged : 0u);
  }
  // The keys query row r sees: [first_key(r), last_key(r)], empty when first_key(r) > last_key(r).
  // Both are nondecreasing in r.
  int64_t first_key(int64_t r) const {
    return window_left < 0 ? 0 : std::max<int64_t>(0, r + causal_offset() - window_left);
  }
  int64_t last_key(int64_t r) const {
    int64_t last = shape.Nk - 1;
    if (causal) last = std::min(last, r + causal_offset());
    if (window_right >= 0) last = std::min(last, r + causal_offset() + window_right);
    return last;
  }
};

// Host tensors hold doubles whose values are already representable in the problem's dtype
// (rounded once on the host), so the fp64 reference sees exactly what a kernel sees.
using HostTensor = std::vector<double>;

struct Inputs {
  HostTensor Q, K, V, dO;
  // A paged cache (Shape::paged): the pool page of each sequence's pages, [B, pages_per_seq].
  std::vector<int32_t> block_table;
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
  int64_t tiles_skipped = 0;   // pairs skipped whole: no row sees any key (causal, window)

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
  int splits = 0;        // a version that splits the keys (split-kv): this many (0: its own rule)
  int ranks = 0;         // a version that runs over ranks (ring): this many (0: one)
};

// The most K/V splits a version is asked for (--splits): its combine reads every split's partial
// of a row.
inline constexpr int kMaxKvSplits = 128;

std::string to_string(DType t);
bool parse_dtype(const std::string& s, DType& out);
int dtype_bytes(DType t);
// Unit roundoff of the storage dtype (2^-53, 2^-24, 2^-11, 2^-8; fp8: e4m3's 2^-4, the rounding
// its products see, not the bf16 its inputs and O are stored in).
double unit_roundoff(DType t);

}  // namespace flashlab
