# Optional build needs of this folder, read by kernels/versions.cmake. Leave them unset to build
# the folder like every other (FLASHLAB_CUDA_GENCODE, the usual flags).
#
# Compile this folder's .cu files only for these architectures (each kept when the build's
# FLASHLAB_CUDA_GENCODE has its compute_XX; with none kept the CUDA side is left out and
# `flashlab list` says why):
#   set(VERSION_CUDA_ARCHS 90a)
# Extra nvcc flags for this folder's .cu files, and extra g++ flags for its .cpp files:
#   set(VERSION_CUDA_FLAGS --use_fast_math)
#   set(VERSION_CXX_FLAGS -funroll-loops)
# The folder's explicit template instantiations, one generated .cu each (kernels/versions.cmake):
#   flashlab_instances(fwd INCLUDE fwd_kernel.cuh NAMESPACE flashlab::cuda::FLASHLAB_FOLDER
#     VARY T=__half,__nv_bfloat16 D=64,128
#     LINES "template void launch_fwd<@T@, @D@>(const FwdParams&, cudaStream_t)")
