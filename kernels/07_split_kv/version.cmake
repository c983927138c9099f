# The split pass for every (dtype, head dim), contiguous and paged caches, and the combine, one
# object per (dtype, head dim) (the build writes them; kernels/versions.cmake, flashlab_instances).
flashlab_instances(split INCLUDE split_kernel.cuh NAMESPACE flashlab::cuda::FLASHLAB_FOLDER::split_fwd
  VARY T=__half,__nv_bfloat16 D=64,128,256
  LINES "template void launch_split<@T@, @D@, false>(const SplitParams&, int, int, cudaStream_t)"
        "template void launch_split<@T@, @D@, true>(const SplitParams&, int, int, cudaStream_t)"
        "template void launch_combine<@T@, @D@>(const SplitParams&, int, cudaStream_t)")
