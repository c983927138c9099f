// Instantiation for the ablation: the Hopper forward with one idea switched off
// (kWithoutTmaEpilogue), bf16, d = 128, causal and not (sm_90a only).
#include "fwd_kernel.cuh"

namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd {

using T = __nv_bfloat16;
template void launch_fwd<T, 128, false, kWithoutTmaEpilogue>(const FwdParams&, cudaStream_t);
template void launch_fwd<T, 128, true, kWithoutTmaEpilogue>(const FwdParams&, cudaStream_t);

}  // namespace flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
