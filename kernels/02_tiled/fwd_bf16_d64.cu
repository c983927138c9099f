// Instantiation: tiled forward, bf16, d = 64, causal and not.
#include "fwd_kernel.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::tiled_fwd {

template void launch_fwd<__nv_bfloat16, 64, false>(const FwdParams&, int, cudaStream_t);
template void launch_fwd<__nv_bfloat16, 64, true>(const FwdParams&, int, cudaStream_t);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::tiled_fwd
