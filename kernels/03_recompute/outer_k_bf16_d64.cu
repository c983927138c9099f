// One instantiation per file (dtype x head dim) so the heavy kernels compile in parallel.
#include "common/fa2_bwd/outer_k.cuh"

namespace flashlab::cuda {
template void launch_bwd_outer_k<__nv_bfloat16, 64, DqMode::none>(const BwdParams&, void*);
}  // namespace flashlab::cuda
