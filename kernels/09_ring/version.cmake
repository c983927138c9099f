# The ring's GPU side passes its blocks with NCCL: its header when the build found one (the top
# CMakeLists.txt, FLASHLAB_NCCL), the library opened at run time (nccl_api.h). Without the header
# cuda.cu builds a stub whose entry says "built without NCCL".
if(FLASHLAB_WITH_NCCL)
  set(VERSION_CUDA_FLAGS -DFLASHLAB_HAVE_NCCL=1 -I${FLASHLAB_NCCL_INCLUDE})
endif()
