// Instantiation: tiled forward, f16, d = 128, causal and not.
#include "fwd_kernel.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::tiled_fwd {

template void launch_fwd<__half, 128, false>(const FwdParams&, int, cudaStream_t);
template void launch_fwd<__half, 128, true>(const FwdParams&, int, cudaStream_t);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::tiled_fwd
