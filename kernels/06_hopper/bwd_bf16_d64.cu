// Instantiation: the Hopper backward (hopper), bf16, d = 64 (sm_90a only).
#include "bwd_kernel.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

template void launch_bwd<__nv_bfloat16, 64, false>(const BwdParams&, cudaStream_t);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
