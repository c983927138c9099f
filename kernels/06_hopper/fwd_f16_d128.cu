// Instantiation: Hopper forward, f16, d = 128, causal and not (sm_90a only).
#include "fwd_kernel.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd {

template void launch_fwd<__half, 128, false, kAllIdeas>(const FwdParams&, cudaStream_t);
template void launch_fwd<__half, 128, true, kAllIdeas>(const FwdParams&, cudaStream_t);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
