// Placeholder until the CPU twin lands.
#include <stdexcept>
#include "cpu_versions.h"
namespace flashlab::cpu {
void recompute_backward(const Problem&, const Inputs&, const Forward&, const CpuOptions&, Gradients&, Counters&) { throw std::logic_error("recompute_backward: not built yet"); }
}
