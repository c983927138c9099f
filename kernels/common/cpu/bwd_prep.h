// What every CPU backward does around its main pass, whatever its schedule: check that the
// forward's O and LSE and dO are there, size the gradients, and the preprocess D = rowsum(O * dO).
// The passes of the ladder that follow it are in bwd.h.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "common/cpu/tiles.h"

namespace flashlab::cpu {

// Throws unless the forward outputs the FA backward reads (O, LSE) and dO are there.
inline void check_backward(const Problem& p, const Inputs& in, const Forward& fwd,
                           const char* who) {
  check_inputs(p, in, who);
  const Shape& s = p.shape;
  if (in.dO.size() != static_cast<size_t>(s.q_elems()))
    throw std::invalid_argument(std::string(who) + ": dO does not match the problem's shape");
  if (fwd.O.size() != static_cast<size_t>(s.q_elems()) ||
      fwd.LSE.size() != static_cast<size_t>(s.lse_elems()))
    throw std::invalid_argument(std::string(who) + ": needs the forward's O and LSE");
}

// Dry runs leave the gradients empty; real runs size them (every element is then written).
inline void prepare_gradients(const Problem& p, bool dry, Gradients& g) {
  if (dry) {
    g = Gradients{};
    return;
  }
  g.dQ.resize(static_cast<size_t>(p.shape.q_elems()));
  g.dK.resize(static_cast<size_t>(p.shape.kv_elems()));
  g.dV.resize(static_cast<size_t>(p.shape.kv_elems()));
}

// Preprocess: D = rowsum(O * dO) for every query row. Reads O and dO, writes D.
template <class T>
std::vector<T> preprocess_D(const Problem& p, const Inputs& in, const Forward& fwd,
                            const CpuOptions& o, Counters& cnt) {
  const Shape& s = p.shape;
  cnt.elems_read += 2 * s.q_elems();
  cnt.elems_written += s.lse_elems();
  if (o.dry_run) return {};
  std::vector<T> D(static_cast<size_t>(s.lse_elems()));
#pragma omp parallel for num_threads(thread_count(o, p))
  for (int64_t row = 0; row < s.lse_elems(); ++row) {
    T sum = 0;
    for (int64_t k = 0; k < s.d; ++k)
      sum += static_cast<T>(fwd.O[row * s.d + k]) * static_cast<T>(in.dO[row * s.d + k]);
    D[row] = sum;
  }
  return D;
}

}  // namespace flashlab::cpu
