#include "core/rng.h"

#include <cmath>

#include "core/dtype.h"

namespace flashlab {

namespace {
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

Rng::Rng(uint64_t seed, uint64_t stream) {
  uint64_t s = seed ^ (stream * 0xd1b54a32d192ed03ull);
  state_ = splitmix(s);
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
  for (int k = 1; k < 40; k += 2) {
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

HostTensor random_normal(uint64_t seed, uint64_t stream, int64_t n, DType dtype) {
  Rng rng(seed, stream);
  HostTensor x(static_cast<size_t>(n));
  for (double& v : x) v = rng.normal();
  round_all(dtype, x);
  return x;
}

Inputs make_inputs(const Problem& p, uint64_t seed) {
  Inputs in;
  in.Q = random_normal(seed, 1, p.shape.q_elems(), p.dtype);
  in.K = random_normal(seed, 2, p.shape.kv_elems(), p.dtype);
  in.V = random_normal(seed, 3, p.shape.kv_elems(), p.dtype);
  in.dO = random_normal(seed, 4, p.shape.q_elems(), p.dtype);
  return in;
}

}  // namespace flashlab
