// A seeded generator that gives the same numbers on every machine and compiler: SplitMix64 for the
// bits, Box-Muller for normals, all in code we own (std::normal_distribution differs between
// standard libraries). Each tensor gets its own stream from (seed, stream id), so adding a tensor
// never shifts the others.
#pragma once

#include <cstdint>
#include <string>

#include "core/problem.h"

namespace flashlab {

class Rng {
 public:
  // substream 0 is the plain (seed, stream) sequence; others derive an independent one from it.
  explicit Rng(uint64_t seed, uint64_t stream = 0, uint64_t substream = 0);
  uint64_t next_u64();
  double uniform();  // in (0, 1)
  double normal();   // standard normal
  int64_t below(int64_t n);  // uniform integer in [0, n)

 private:
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// What the inputs look like. normal: every entry of Q, K, V, dO a standard normal. outliers (the
// FA3 paper's test of FP8 attention): Q, K and V as normal, plus, on 0.1 % of their entries, an
// independent N(0, 100) term (standard deviation 10) -- the few large activations that set an
// FP8 scale and leave every other value of its block with little of e4m3's precision. dO stays
// normal. Which entries, and their extra terms, come from a stream of their own, so the normal
// part is the same numbers as `normal`'s.
enum class InputKind { normal, outliers };
inline constexpr double kOutlierShare = 1e-3;
inline constexpr double kOutlierStd = 10.0;
std::string to_string(InputKind k);
bool parse_input_kind(const std::string& s, InputKind& out);

// Standard-normal tensor of n elements from stream `stream` of `seed`, rounded to dtype. The same
// (seed, stream, n) gives the same values on every machine, compiler and thread count.
HostTensor random_normal(uint64_t seed, uint64_t stream, int64_t n, DType dtype);
// The same tensor with the outliers of InputKind::outliers added before the rounding (their
// entries and values from stream `stream` + kOutlierStreams, pair by pair like the normals).
HostTensor random_with_outliers(uint64_t seed, uint64_t stream, int64_t n, DType dtype);

// Q, K, V, dO for the problem (streams 1..4), rounded to its dtype. A paged cache: K and V are
// the contiguous problem's, laid out in pages, with a block table drawn from stream 5 (paged.h).
Inputs make_inputs(const Problem& p, uint64_t seed, InputKind kind = InputKind::normal);

}  // namespace flashlab
