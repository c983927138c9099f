# The Hopper rung exists only on sm_90a (wgmma, setmaxnreg): its .cu files are compiled for that
# target alone, and left out (the rung then runs as its CPU twin, and `flashlab list` says why)
# when the build does not target it.
set(VERSION_CUDA_ARCHS 90a)
