# FP8 wgmma exists only on sm_90a: the folder's .cu (the quantization pass and the forward,
# quant.cuh and fwd_kernel.cuh, one object) is compiled for that target alone, and left out (the
# three ids then run as their CPU twin, and `flashlab list` says why) when the build does not
# target it.
set(VERSION_CUDA_ARCHS 90a)
