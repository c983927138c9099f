#!/usr/bin/env bash
# Call 2: how the backward's time follows the clock under sustained load. 200 timed runs of
# hopper's backward (bf16 d = 128 non-causal N = 16384) and of cuDNN's at the same shape, each with
# its GPU timeline and nvidia-smi every 20 ms; and the packed batch's passes.
set -u
mkdir -p bins/m; tar xzf build/carry/m.tgz -C bins/m
source scripts/cupti_env.sh
TL=$PWD/bins/timeline.so
g++ -std=c++17 -O2 -shared -fPIC scripts/timeline/timeline.cpp -o $TL -I/usr/local/cuda/include \
  -I/usr/local/cuda/extras/CUPTI/include -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 \
  -lcupti || cp build/carry/timeline.so $TL
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=power.limit,power.default_limit,power.max_limit,clocks.max.sm --format=csv > $R/limits.csv
smi() { nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 20 > $R/$1.smi & SMI=$!; }
bench() {  # tag, then bench's arguments
  local tag=$1; shift
  smi $tag; sleep 0.5
  FLASHLAB_TIMELINE=$R/$tag.csv CUDA_INJECTION64_PATH=$TL timeout 120 bins/m/flashlab bench \
    --backend cuda --dtype bf16 -d 128 "$@" > $R/$tag.log 2>&1
  echo "$tag rc=$?"; sleep 0.3; kill $SMI
  python3 scripts/timeline/gaps.py $R/$tag.csv --last 2 > $R/$tag.gaps 2>&1; tail -2 $R/$tag.gaps | cut -c1-400
}
bench hopper_bwd_200 --versions hopper --passes bwd -N 16384 --causal no --repeats 200 --warmup 2
sleep 2
smi cudnn_bwd_200; sleep 0.5
FLASHLAB_TIMELINE=$R/cudnn_bwd_200.csv CUDA_INJECTION64_PATH=$TL timeout 120 python3 - > $R/cudnn_bwd_200.log 2>&1 <<'PY'
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = [torch.randn(1, 16, 16384, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
           for _ in range(3)]
buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    o = F.scaled_dot_product_attention(q, k, v)
    do = torch.randn_like(o)
    torch.cuda.synchronize()
    for i in range(202):
        buf.fill_(i)
        torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
torch.cuda.synchronize()
print("done")
PY
echo "cudnn rc=$?"; sleep 0.3; kill $SMI
python3 scripts/timeline/gaps.py $R/cudnn_bwd_200.csv --flush FillFunctor --poison "" --last 1 > $R/cudnn_bwd_200.gaps 2>&1; tail -2 $R/cudnn_bwd_200.gaps | cut -c1-400
sleep 2
bench packed_bwd --versions hopper --passes bwd --causal yes --varlen 24,128,4096 --repeats 10 --warmup 2
bench packed_fwd --versions hopper --passes fwd --causal yes --varlen 24,128,4096 --repeats 10 --warmup 2
bench gqa_nc16k_bwd --versions hopper --passes bwd -N 16384 --causal no --hidden 4096 --heads-kv 8 --repeats 10 --warmup 2
cat $R/limits.csv
tar czf $OUT/call2.tgz -C $R .
