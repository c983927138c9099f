#include "core/rng.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "core/paged.h"

namespace flashlab {

namespace {
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

Rng::Rng(uint64_t seed, uint64_t stream, uint64_t substream) {
  uint64_t s = seed ^ (stream * 0xd1b54a32d192ed03ull);
  state_ = splitmix(s);
  if (substream != 0) {
    uint64_t t = state_ ^ (substream * 0x8cb92ba72f3d8dd7ull);
    state_ = splitmix(t);
  }
}

uint64_t Rng::next_u64() { return splitmix(state_); }

double Rng::uniform() {
  // 53 random bits, shifted off zero so log() is finite.
  return (static_cast<double>(next_u64() >> 11) + 0.5) * 0x1.0p-53;
}

// Natural log from +, *, / and frexp only, so every machine gets the same bits (libm's log may
// differ in the last place between libraries): ln x = e ln2 + 2 atanh((m-1)/(m+1)).
static double portable_log(double x) {
  int e = 0;
  double m = std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752) {
    m *= 2.0;
    e -= 1;
  }
  const double z = (m - 1.0) / (m + 1.0), z2 = z * z;
  double term = z, sum = 0.0;
  for (int k = 1; k < 27; k += 2) {  // z^2 < 0.0295: 13 terms reach the last bit
    sum += term / k;
    term *= z2;
  }
  return e * 0.69314718055994530942 + 2.0 * sum;
}

// Marsaglia's polar method: two normals per accepted pair; needs only log and sqrt (sqrt is
// correctly rounded by IEEE 754).
double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u, v, s;
  do {
    u = 2.0 * uniform() - 1.0;
    v = 2.0 * uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double f = std::sqrt(-2.0 * portable_log(s) / s);
  spare_ = v * f;
  has_spare_ = true;
  return u * f;
}

int64_t Rng::below(int64_t n) { return static_cast<int64_t>(next_u64() % static_cast<uint64_t>(n)); }

// Counter-based: the pair (2k, 2k+1) comes from its own substream k, so the values do not depend
// on how many threads fill the tensor (large inputs are generated in parallel).
HostTensor random_normal(uint64_t seed, uint64_t stream, int64_t n, DType dtype) {
  HostTensor x(static_cast<size_t>(n));
  const int64_t pairs = (n + 1) / 2;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t k = 0; k < pairs; ++k) {
    Rng rng(seed, stream, static_cast<uint64_t>(k) + 1);
    x[2 * k] = round_to(dtype, rng.normal());
    if (2 * k + 1 < n) x[2 * k + 1] = round_to(dtype, rng.normal());
  }
  return x;
}

namespace {

// The outliers' streams sit past every tensor's own (1..5).
constexpr uint64_t kOutlierStreams = 16;

}  // namespace

std::string to_string(InputKind k) {
  return k == InputKind::outliers ? "outliers" : "normal";
}

bool parse_input_kind(const std::string& s, InputKind& out) {
  if (s == "normal") out = InputKind::normal;
  else if (s == "outliers") out = InputKind::outliers;
  else return false;
  return true;
}

// Element i of pair k is an outlier when a uniform draw of pair k's own substream falls below
// kOutlierShare; its extra term is the next normal of that substream.
HostTensor random_with_outliers(uint64_t seed, uint64_t stream, int64_t n, DType dtype) {
  HostTensor x = random_normal(seed, stream, n, DType::f64);
  const int64_t pairs = (n + 1) / 2;
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t k = 0; k < pairs; ++k) {
    Rng rng(seed, stream + kOutlierStreams, static_cast<uint64_t>(k) + 1);
    for (int64_t i = 2 * k; i < std::min(2 * k + 2, n); ++i) {
      if (rng.uniform() < kOutlierShare) x[i] += kOutlierStd * rng.normal();
      x[i] = round_to(dtype, x[i]);
    }
  }
  return x;
}

Inputs make_inputs(const Problem& p, uint64_t seed, InputKind kind) {
  const auto qkv = [&](uint64_t stream, int64_t n) {
    return kind == InputKind::outliers ? random_with_outliers(seed, stream, n, p.dtype)
                                       : random_normal(seed, stream, n, p.dtype);
  };
  Inputs in;
  in.Q = qkv(1, p.shape.q_elems());
  in.dO = random_normal(seed, 4, p.shape.q_elems(), p.dtype);
  if (!p.shape.paged()) {
    in.K = qkv(2, p.shape.kv_elems());
    in.V = qkv(3, p.shape.kv_elems());
    return in;
  }
  // A paged cache: the contiguous problem's K and V, laid out in shuffled pages (core/paged.h).
  const Shape& s = p.shape;
  const int64_t n = s.B * s.kv_heads() * s.Nk * s.d;
  const double unused = std::numeric_limits<double>::quiet_NaN();
  in.block_table = shuffled_block_table(s, seed);
  in.K = to_pages(s, qkv(2, n), in.block_table, unused);
  in.V = to_pages(s, qkv(3, n), in.block_table, unused);
  return in;
}

}  // namespace flashlab
