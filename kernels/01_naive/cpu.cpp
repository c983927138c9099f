// Placeholder until the CPU twin lands.
#include <stdexcept>
#include "cpu_versions.h"
namespace flashlab::cpu {
void naive_forward(const Problem&, const Inputs&, const CpuOptions&, Forward&, Counters&) { throw std::logic_error("naive_forward: not built yet"); }
void naive_backward(const Problem&, const Inputs&, const Forward&, const CpuOptions&, Gradients&, Counters&) { throw std::logic_error("naive_backward: not built yet"); }
}
