# The two heavy kernels for every (dtype, head dim), one object each (the build writes them;
# kernels/versions.cmake, flashlab_instances): the outer-K pass without dQ, and dQ's outer-Q pass.
flashlab_instances(outer_k INCLUDE common/fa2_bwd/outer_k.cuh NAMESPACE flashlab::cuda
  VARY T=__half,__nv_bfloat16 D=64,128,256
  LINES "template void launch_bwd_outer_k<@T@, @D@, DqMode::none>(const BwdParams&, void*)")
flashlab_instances(dq_outer_q INCLUDE common/fa2_bwd/dq_outer_q.cuh NAMESPACE flashlab::cuda
  VARY T=__half,__nv_bfloat16 D=64,128,256
  LINES "template void launch_bwd_dq_outer_q<@T@, @D@>(const BwdParams&, void*)")
