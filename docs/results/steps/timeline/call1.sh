#!/usr/bin/env bash
# Call 1: GPU timelines (scripts/timeline) of the d = 128 backward as bench times it, main's binary.
set -u
mkdir -p bins/m; tar xzf build/carry/m.tgz -C bins/m
source scripts/cupti_env.sh
TL=$PWD/bins/timeline.so  # built here against this machine's libcupti, else the carried one
g++ -std=c++17 -O2 -shared -fPIC scripts/timeline/timeline.cpp -o $TL -I/usr/local/cuda/include -I/usr/local/cuda/extras/CUPTI/include \
  -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti || cp build/carry/timeline.so $TL
run() {  # tag, then bench's arguments
  local tag=$1; shift
  FLASHLAB_TIMELINE=$OUT/$tag.csv CUDA_INJECTION64_PATH=$TL timeout 120 bins/m/flashlab bench \
    --backend cuda --dtype bf16 -d 128 --repeats 10 --warmup 2 "$@" > $OUT/$tag.log 2>&1
  echo "$tag rc=$?"
  python3 scripts/timeline/gaps.py $OUT/$tag.csv --last 2 > $OUT/$tag.gaps 2>&1; tail -1 $OUT/$tag.gaps
}
run hopper_bwd_nc16k --versions hopper --passes bwd -N 16384 --causal no
run det_bwd_nc16k --versions hopper-deterministic --passes bwd -N 16384 --causal no
run hopper_fwd_nc16k --versions hopper --passes fwd -N 16384 --causal no
run hopper_bwd_gqa_c4k --versions hopper --passes bwd -N 4096 --causal yes --hidden 4096 --heads-kv 8
run hopper_bwd_packed --versions hopper --passes bwd --causal yes --varlen 24,128,4096
# PyTorch's cuDNN backward at the same shape, runs separated by a 256 MB fill
FLASHLAB_TIMELINE=$OUT/cudnn_bwd_nc16k.csv CUDA_INJECTION64_PATH=$TL timeout 120 python3 - > $OUT/cudnn_bwd_nc16k.log 2>&1 <<'PY'
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = [torch.randn(1, 16, 16384, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
           for _ in range(3)]
buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    o = F.scaled_dot_product_attention(q, k, v)
    do = torch.randn_like(o)
    for i in range(12):
        buf.fill_(i)
        torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
torch.cuda.synchronize()
print("done")
PY
echo "cudnn rc=$?"
python3 scripts/timeline/gaps.py $OUT/cudnn_bwd_nc16k.csv --flush FillFunctor --poison "" --last 2 > $OUT/cudnn_bwd_nc16k.gaps 2>&1; tail -1 $OUT/cudnn_bwd_nc16k.gaps
# the same bench without the timeline library, for its own times
bins/m/flashlab bench --backend cuda --dtype bf16 -d 128 --repeats 10 --warmup 2 --versions hopper --passes bwd -N 16384 --causal no > $OUT/plain_hopper_bwd_nc16k.log 2>&1
grep -h "hopper" $OUT/*.log | head -20
