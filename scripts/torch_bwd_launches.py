#!/usr/bin/env python3
"""A few launches of PyTorch's FlashAttention-2 backward, for scripts/profile_bwd.sh to profile.

Usage: torch_bwd_launches.py DTYPE D N CAUSAL     (bf16|fp16, 64|128, sequence length, yes|no)
Shapes as in the sweep: B*N = 16k tokens, H = 2048/d; inputs from a seeded normal distribution.
"""
import sys, torch
from torch.nn.attention import sdpa_kernel, SDPBackend
dt, d, n, causal = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "yes"
dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dt]
B, H = 16384 // n, 2048 // d
g = torch.Generator(device="cuda").manual_seed(1)
q, k, v, do = (torch.randn(B, H, n, d, device="cuda", dtype=dtype, generator=g) for _ in range(4))
for t in (q, k, v):
    t.requires_grad_(True)
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    for _ in range(4):
        torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
torch.cuda.synchronize()
