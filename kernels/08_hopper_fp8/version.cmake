# FP8 wgmma exists only on sm_90a: the folder's .cu (a declaration until the kernel is written) is
# compiled for that target alone.
set(VERSION_CUDA_ARCHS 90a)
