// One instantiation per file (dtype x head dim) so the heavy kernels compile in parallel.
#include "common/fa2_bwd/dq_outer_q.cuh"

namespace flashlab::cuda {
template void launch_bwd_dq_outer_q<__nv_bfloat16, 128>(const BwdParams&, void*);
}  // namespace flashlab::cuda
