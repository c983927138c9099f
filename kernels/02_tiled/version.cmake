# The forward kernel for every (dtype, head dim), without a mask, with the band's right side only
# (the causal mask, a window without a left side) and with both sides, one object per (dtype, head
# dim) (the build writes them; kernels/versions.cmake, flashlab_instances).
flashlab_instances(fwd INCLUDE fwd_kernel.cuh NAMESPACE flashlab::cuda::FLASHLAB_FOLDER::tiled_fwd
  VARY T=__half,__nv_bfloat16 D=64,128,256
  LINES "template void launch_fwd<@T@, @D@, MaskKind::none>(const FwdParams&, int, cudaStream_t)"
        "template void launch_fwd<@T@, @D@, MaskKind::right>(const FwdParams&, int, cudaStream_t)"
        "template void launch_fwd<@T@, @D@, MaskKind::both>(const FwdParams&, int, cudaStream_t)")
