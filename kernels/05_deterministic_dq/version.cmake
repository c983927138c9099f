# The outer-K pass writing dQ splits, for every (dtype, head dim), one object each (the build writes
# them; kernels/versions.cmake, flashlab_instances).
flashlab_instances(outer_k INCLUDE common/fa2_bwd/outer_k.cuh NAMESPACE flashlab::cuda
  VARY T=__half,__nv_bfloat16 D=64,128,256
  LINES "template void launch_bwd_outer_k<@T@, @D@, DqMode::split>(const BwdParams&, void*)")
