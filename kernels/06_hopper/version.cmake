# The Hopper rung exists only on sm_90a (wgmma, setmaxnreg): its .cu files are compiled for that
# target alone, and left out (the rung then runs as its CPU twin, and `flashlab list` says why)
# when the build does not target it.
set(VERSION_CUDA_ARCHS 90a)

# Its heavy kernels, one object each (the build writes them; kernels/versions.cmake,
# flashlab_instances): the forward and the backward for every (dtype, head dim: 64, 128, 256),
# dense and packed; hopper-deterministic's outer-K kernel at d = 64 and 128 (at d = 256 both
# backwards run the same kernels: the outer-K kernel without dQ, then the dQ pass); and the
# ablation's forwards, each with one idea switched off (ablation.h), at bf16, d = 128 only.
flashlab_instances(fwd INCLUDE fwd_kernel.cuh NAMESPACE flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
  VARY T=__half,__nv_bfloat16 D=64,128,256
  LINES "template void launch_fwd<@T@, @D@, false, kAllIdeas>(const FwdParams&, cudaStream_t)"
        "template void launch_fwd<@T@, @D@, true, kAllIdeas>(const FwdParams&, cudaStream_t)"
        "template void launch_fwd<@T@, @D@, true, kAllIdeas | kLeftSide>(const FwdParams&, cudaStream_t)")
# A packed batch's forwards (fwd_params.h: kPackedBatch), apart from the dense ones so that those
# keep their objects and machine code.
flashlab_instances(fwd_packed INCLUDE fwd_kernel.cuh
  NAMESPACE flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
  VARY T=__half,__nv_bfloat16 D=64,128,256
  LINES "template void launch_fwd<@T@, @D@, false, kAllIdeas | kPackedBatch>(const FwdParams&, cudaStream_t)"
        "template void launch_fwd<@T@, @D@, true, kAllIdeas | kPackedBatch>(const FwdParams&, cudaStream_t)"
        "template void launch_fwd<@T@, @D@, true, kAllIdeas | kLeftSide | kPackedBatch>(const FwdParams&, cudaStream_t)")
flashlab_instances(bwd INCLUDE bwd_kernel.cuh NAMESPACE flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
  VARY T=__half,__nv_bfloat16 D=64,128,256
  LINES "template void launch_bwd<@T@, @D@, false, false>(const BwdParams&, int, cudaStream_t)")
flashlab_instances(bwd_det INCLUDE bwd_kernel.cuh
  NAMESPACE flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
  VARY T=__half,__nv_bfloat16 D=64,128
  LINES "template void launch_bwd<@T@, @D@, true, false>(const BwdParams&, int, cudaStream_t)")
# A packed batch's backwards (bwd_kernel.cuh: kPacked), apart from the dense ones as the forwards.
flashlab_instances(bwd_packed INCLUDE bwd_kernel.cuh
  NAMESPACE flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
  VARY T=__half,__nv_bfloat16 D=64,128,256
  LINES "template void launch_bwd<@T@, @D@, false, true>(const BwdParams&, int, cudaStream_t)")
flashlab_instances(bwd_packed_det INCLUDE bwd_kernel.cuh
  NAMESPACE flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
  VARY T=__half,__nv_bfloat16 D=64,128
  LINES "template void launch_bwd<@T@, @D@, true, true>(const BwdParams&, int, cudaStream_t)")
# The dQ pass at d = 256 (bwd_dq_pass.cuh), dense and packed, with a mask (causal, windows) or not.
flashlab_instances(bwd_dq INCLUDE bwd_dq_pass.cuh
  NAMESPACE flashlab::cuda::FLASHLAB_FOLDER::hopper_bwd
  VARY T=__half,__nv_bfloat16 MASK=false,true
  LINES "template void launch_dq_pass<@T@, @MASK@, false>(const DqParams&, cudaStream_t)"
        "template void launch_dq_pass<@T@, @MASK@, true>(const DqParams&, cudaStream_t)")
flashlab_instances(ablation INCLUDE fwd_kernel.cuh
  NAMESPACE flashlab::cuda::FLASHLAB_FOLDER::hopper_fwd
  VARY IDEAS=kWithoutTma,kWithoutAsyncWgmma,kWithoutWarpSpecialization,kWithoutPingpong,kWithoutIntraOverlap,kWithoutTmaEpilogue,kWithoutHeavyFirst,kWithoutPersistent
  LINES "template void launch_fwd<__nv_bfloat16, 128, false, @IDEAS@>(const FwdParams&, cudaStream_t)"
        "template void launch_fwd<__nv_bfloat16, 128, true, @IDEAS@>(const FwdParams&, cudaStream_t)")
