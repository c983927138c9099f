// Instantiation: the Hopper backward (hopper), f16, d = 128 (sm_90a only).
#include "bwd_kernel.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

template void launch_bwd<__half, 128, false>(const BwdParams&, cudaStream_t);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
