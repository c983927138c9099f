// Instantiation: the Hopper backward (hopper-deterministic), bf16, d = 128 (sm_90a only).
#include "bwd_kernel.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd {

template void launch_bwd<__nv_bfloat16, 128, true>(const BwdParams&, cudaStream_t);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
