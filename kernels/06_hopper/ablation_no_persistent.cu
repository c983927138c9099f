// Instantiation for the ablation: the Hopper forward with one idea switched off
// (kWithoutPersistent), bf16, d = 128, causal and not (sm_90a only).
#include "fwd_kernel.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd {

using T = __nv_bfloat16;
template void launch_fwd<T, 128, false, kWithoutPersistent>(const FwdParams&, cudaStream_t);
template void launch_fwd<T, 128, true, kWithoutPersistent>(const FwdParams&, cudaStream_t);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
