// Placeholder until the CPU twin lands.
#include <stdexcept>
#include "cpu_versions.h"
namespace flashlab::cpu {
void tiled_forward(const Problem&, const Inputs&, const CpuOptions&, Forward&, Counters&) { throw std::logic_error("tiled_forward: not built yet"); }
}
