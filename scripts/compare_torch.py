#!/usr/bin/env python3
"""flashlab beside PyTorch's SDPA on the same GPU, in the same run.

Runs `flashlab bench --backend cuda --json ...` over a sweep, then times PyTorch's
scaled_dot_product_attention with the FlashAttention-2 backend (SDPBackend.FLASH_ATTENTION) and the
cuDNN backend (SDPBackend.CUDNN_ATTENTION) on the same shapes (B*N = tokens, H = hidden/d, as the
bench does), prints the ratio table (flashlab / PyTorch throughput, > 1 means flashlab is faster)
and writes one JSON document with the flashlab commit, torch version, GPU name and date.

How PyTorch is timed (the same method as flashlab's runner):
  - inputs drawn from a seeded normal distribution (never zeros), [B, H, N, d], contiguous;
  - each pass on its own: a pause of --pause milliseconds with the GPU idle (flashlab: bench
    --pause), its warm-up runs, then its `repeats` timed runs, median reported (min and max kept).
    The pause gives every pass the board's whole power budget at its start, whatever ran before
    it: under the power limit a long pass's clock depends on the load before it (docs/perf.md);
  - before every timed run the L2 cache is flushed by reading a buffer of 4x the L2 size (a read
    leaves only clean lines in L2, so the pass pays no write-back of the flush; src/cuda/l2_flush.h);
  - CUDA events around the pass only.
  - forward: sdpa(q, k, v, is_causal) under torch.no_grad();
  - backward: the forward is run once with requires_grad, and each timed run is
    torch.autograd.grad(out, (q, k, v), dO, retain_graph=True) on that saved graph, so the time is
    the backward alone (PyTorch's own preprocessing, such as its rowsum(O*dO), included).
FLOPs by the FA2 convention: forward 4*B*H*N*N*d (halved when causal), backward 2.5x forward.
Causal masks agree because Nq = Nk in the sweep (PyTorch aligns top-left, flashlab bottom-right).
Grouped heads (--heads-kv): K and V are [B, Hkv, N, d] on both sides and PyTorch is called with
enable_gqa=True; FLOPs count the H query heads, as for multi-head attention.

Usage (on a machine with the GPU, from the repository root):
  python3 scripts/compare_torch.py --flashlab build/cuda/flashlab --out docs/results/compare.json
  python3 scripts/compare_torch.py -N 1024,4096 -d 128 --dtype bf16 --causal yes   # a smaller sweep
  python3 scripts/compare_torch.py -N 4096,16384 -d 128 --dtype bf16 --hidden 4096 --heads-kv 8
                                                  # 32 query heads over 8 K/V heads

The sweep's options are spelled as flashlab bench spells them (-N, -d, --dtype, --causal no,yes,
...), which they are handed to; --N, --d and --causal both are kept as older spellings.
"""

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

from sweep_args import causal_list, csv_ints, csv_strs  # noqa: E402 (beside this script)


def fa2_flops(B, H, N, d, causal, pass_):
    f = 4.0 * B * H * N * N * d
    if causal:
        f /= 2
    return f * (2.5 if pass_ == "bwd" else 1.0)


def run_flashlab_bench(args, json_path):
    cmd = [args.flashlab, "bench", "--backend", "cuda", "-N", ",".join(map(str, args.N)),
           "-d", ",".join(map(str, args.d)), "--dtype", ",".join(args.dtype),
           "--causal", ",".join("yes" if c else "no" for c in args.causal),
           "--versions", ",".join(args.versions),
           "--passes", ",".join(args.passes),
           "--tokens", str(args.tokens), "--hidden", str(args.hidden),
           "--repeats", str(args.repeats), "--warmup", str(args.warmup),
           "--pause", str(args.pause), "--json", json_path]
    if args.heads_kv:
        cmd += ["--heads-kv", str(args.heads_kv)]
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd)  # its table and messages go straight to our output
    if not os.path.exists(json_path):
        sys.exit(f"flashlab bench wrote no JSON (exit {proc.returncode})")
    with open(json_path) as f:
        doc = json.load(f)
    rows = []
    for t in doc.get("tables", []):
        if t.get("id") == "bench":
            rows.extend(t.get("rows", []))
    return doc, rows, proc.returncode


class SmClock:
    """The SM clock of CUDA device 0 through NVML (the driver's libnvidia-ml, by ctypes), as
    flashlab's bench reads it before and after its timed runs (src/core/clock.h): a long pass's
    time follows the clock, which the board's power limit lowers under sustained load. None
    where NVML cannot be read."""

    def __init__(self, torch):
        import ctypes
        self.ctypes, self.lib, self.dev = ctypes, None, None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            dev = ctypes.c_void_p()
            props = torch.cuda.get_device_properties(0)
            bus = getattr(props, "pci_bus_id", None)
            if bus is not None:
                bus_id = "%08x:%02x:%02x.0" % (getattr(props, "pci_domain_id", 0), bus,
                                               getattr(props, "pci_device_id", 0))
                rc = lib.nvmlDeviceGetHandleByPciBusId_v2(bus_id.encode(), ctypes.byref(dev))
            else:
                rc = lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev))
            if rc == 0:
                self.lib, self.dev = lib, dev
        except (OSError, AttributeError):
            pass

    def mhz(self):
        if self.lib is None:
            return None
        v = self.ctypes.c_uint()
        return v.value if self.lib.nvmlDeviceGetClockInfo(self.dev, 1, self.ctypes.byref(v)) == 0 else None


class TorchTimer:
    def __init__(self, torch, repeats, warmup, pause_ms=0):
        self.torch = torch
        self.repeats = repeats
        self.warmup = warmup
        self.pause_ms = pause_ms
        self.clock = SmClock(torch)
        props = torch.cuda.get_device_properties(0)
        l2 = getattr(props, "L2_cache_size", 50 * 2**20) or 50 * 2**20
        self.flush_buf = torch.zeros(4 * l2 // 8, dtype=torch.int64, device="cuda")

    def time(self, fn):
        torch = self.torch
        if self.pause_ms > 0:  # as flashlab bench --pause: idle, then the warm-ups
            torch.cuda.synchronize()
            time.sleep(self.pause_ms / 1000)
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.repeats)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.repeats)]
        before = self.clock.mhz()
        for i in range(self.repeats):
            self.flush_buf.sum()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        after = self.clock.mhz()
        ms = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        return statistics.median(ms), min(ms), max(ms), before, after


def time_torch(torch, timer, backend_name, dtype, B, H, N, d, causal, passes, Hkv=0):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend_name]
    tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(1234)
    Hkv = Hkv or H
    qshape, kvshape = (B, H, N, d), (B, Hkv, N, d)
    q, do = (torch.randn(qshape, device="cuda", dtype=tdtype, generator=gen) for _ in range(2))
    k, v = (torch.randn(kvshape, device="cuda", dtype=tdtype, generator=gen) for _ in range(2))
    gqa = {"enable_gqa": True} if Hkv != H else {}
    out = {}
    with sdpa_kernel([backend]):
        if "fwd" in passes:
            with torch.no_grad():
                out["fwd"] = timer.time(
                    lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa))
        if "bwd" in passes:
            qg, kg, vg = (x.detach().requires_grad_(True) for x in (q, k, v))
            o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, **gqa)
            out["bwd"] = timer.time(
                lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True))
            del qg, kg, vg, o
    del q, k, v, do
    torch.cuda.empty_cache()
    return out


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashlab", default="build/cuda/flashlab", help="the flashlab binary")
    ap.add_argument("-N", dest="N", type=csv_ints, default=[512, 1024, 2048, 4096, 8192, 16384],
                    help="sequence lengths (default 512,1024,...,16384)")
    ap.add_argument("-d", dest="d", type=csv_ints, default=[64, 128], help="head dimensions (default 64,128)")
    # The older spellings, not listed: the same values.
    ap.add_argument("--N", dest="N", type=csv_ints, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    ap.add_argument("--d", dest="d", type=csv_ints, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    ap.add_argument("--dtype", type=csv_strs, default=["fp16", "bf16"])
    ap.add_argument("--causal", type=causal_list, default=[False, True],
                    help="causal masks: yes, no or no,yes (default no,yes)")
    ap.add_argument("--versions", type=csv_strs,
                    default=["tiled", "hopper", "recompute", "atomic-dq", "deterministic-dq"])
    ap.add_argument("--passes", type=csv_strs, default=["fwd", "bwd"],
                    help="which passes to time (fwd, bwd), on both sides; a flashlab version none of "
                         "whose passes is asked for is left out")
    ap.add_argument("--tokens", type=int, default=16384, help="B*N (as flashlab bench)")
    ap.add_argument("--hidden", type=int, default=2048, help="H*d (as flashlab bench)")
    ap.add_argument("--heads-kv", dest="heads_kv", type=int, default=0,
                    help="K/V heads (grouped heads, as flashlab bench; default: H)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--pause", type=int, default=1000,
                    help="milliseconds of GPU idle before each pass's warm-ups, on both sides "
                         "(default 1000; 0: none)")
    ap.add_argument("--out", default=None, help="JSON to write (default docs/results/compare_torch_<date>.json)")
    ap.add_argument("--skip-torch", action="store_true", help="flashlab only (no PyTorch timing)")
    args = ap.parse_args()

    now = datetime.datetime.now(datetime.timezone.utc)
    out_path = args.out or os.path.join("docs", "results", f"compare_torch_{now:%Y%m%d}.json")

    with tempfile.TemporaryDirectory() as tmp:
        bench_doc, bench_rows, bench_rc = run_flashlab_bench(args, os.path.join(tmp, "bench.json"))

    torch_rows = []
    torch_version = None
    gpu_name = (bench_doc.get("machine", {}).get("gpu") or {}).get("name")
    if not args.skip_torch:
        import torch

        torch_version = torch.__version__
        gpu_name = torch.cuda.get_device_name(0)
        timer = TorchTimer(torch, args.repeats, args.warmup, args.pause)
        for dtype in args.dtype:
            for d in args.d:
                for causal in args.causal:
                    for N in args.N:
                        B, H = max(1, args.tokens // N), max(1, args.hidden // d)
                        for backend in ("flash", "cudnn"):
                            try:
                                res = time_torch(torch, timer, backend, dtype, B, H, N, d, causal,
                                                 args.passes, args.heads_kv)
                            except Exception as e:  # a backend may not support a shape
                                print(f"torch {backend} {dtype} d={d} causal={causal} N={N}: {e}",
                                      file=sys.stderr)
                                continue
                            for pass_, (med, lo, hi, c0, c1) in res.items():
                                torch_rows.append({
                                    "impl": "torch-" + backend, "pass": pass_, "dtype": dtype,
                                    "d": d, "causal": causal, "B": B, "H": H,
                                    "Hkv": args.heads_kv or H, "N": N,
                                    "median_ms": med, "min_ms": lo, "max_ms": hi,
                                    "mhz_before": c0, "mhz_after": c1,
                                    "tflops": fa2_flops(B, H, N, d, causal, pass_) / (med * 1e-3) / 1e12})

    # Ratio table: each flashlab row against PyTorch's same pass and shape.
    key = lambda r: (r["pass"], r["dtype"], int(r["d"]), bool(r["causal"]), int(r["N"]))
    torch_by = {}
    for r in torch_rows:
        torch_by[(r["impl"],) + key(r)] = r
    ratios = []
    for r in bench_rows:
        if r.get("median_ms") in (None, "") or not isinstance(r.get("median_ms"), (int, float)):
            continue
        row = {"version": r["version"], "pass": r["pass"], "dtype": r["dtype"], "d": int(r["d"]),
               "causal": bool(r["causal"]), "N": int(r["N"]), "B": int(r["B"]), "H": int(r["H"]),
               "flashlab_ms": r["median_ms"], "flashlab_tflops": r["tflops"], "ok": r.get("ok"),
               "flashlab_mhz_after": r.get("mhz_after")}
        for impl in ("torch-flash", "torch-cudnn"):
            t = torch_by.get((impl,) + key(r))
            short = impl.split("-")[1]
            row[f"{short}_ms"] = t["median_ms"] if t else None
            row[f"{short}_tflops"] = t["tflops"] if t else None
            row[f"{short}_mhz_after"] = t.get("mhz_after") if t else None
            row[f"vs_{short}"] = t["median_ms"] / r["median_ms"] if t and r["median_ms"] > 0 else None
        ratios.append(row)

    summary = {}
    for (ver, pass_) in sorted({(r["version"], r["pass"]) for r in ratios}):
        sel = [r for r in ratios if r["version"] == ver and r["pass"] == pass_]
        s = {}
        for short in ("flash", "cudnn"):
            vals = [r[f"vs_{short}"] for r in sel if r[f"vs_{short}"]]
            if vals:
                s[f"geomean_vs_{short}"] = geomean(vals)
                s[f"min_vs_{short}"] = min(vals)
        s["points"] = len(sel)
        summary[f"{ver} {pass_}"] = s

    commit = (bench_doc.get("tool") or {}).get("git_commit")
    doc = {
        "schema": "flashlab.compare_torch/v1",
        "created_utc": now.isoformat(timespec="seconds"),
        "flashlab_commit": commit,
        "torch_version": torch_version,
        "gpu": gpu_name,
        "method": {
            "timing": "each pass on its own: a pause with the GPU idle, warm-ups, then CUDA "
                      "events around each repeat, median; L2 flushed before every repeat",
            "torch_backward": "torch.autograd.grad on a saved graph (retain_graph=True): the "
                              "backward alone",
            "flops": "FA2 convention: fwd 4*B*H*N*N*d (halved when causal), bwd 2.5x fwd",
            "ratio": "PyTorch time / flashlab time (> 1: flashlab faster)",
            "clock": "SM clock (NVML) before and after each pass's timed runs, MHz: mhz_before, "
                     "mhz_after; a long pass under the board's power limit runs at a lower clock "
                     "than in its first tens of milliseconds (docs/perf.md)",
        },
        "config": {"N": args.N, "d": args.d, "dtype": args.dtype, "causal": args.causal,
                   "versions": args.versions, "passes": args.passes, "tokens": args.tokens, "hidden": args.hidden,
                   "heads_kv": args.heads_kv,
                   "repeats": args.repeats, "warmup": args.warmup, "pause_ms": args.pause},
        "flashlab_bench_exit": bench_rc,
        "torch": torch_rows,
        "comparison": ratios,
        "summary": summary,
        "flashlab_report": bench_doc,
    }
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)

    print(f"\nflashlab {commit} vs torch {torch_version} on {gpu_name}")
    hdr = f"{'version':17} {'pass':4} {'dtype':5} {'d':>4} {'causal':6} {'N':>6} {'ms':>8} {'TFLOP/s':>8} {'flash':>8} {'x flash':>8} {'cudnn':>8} {'x cudnn':>8}"
    print(hdr)
    fmt = lambda x, p=2: "-" if x is None else f"{x:.{p}f}"
    for r in ratios:
        print(f"{r['version']:17} {r['pass']:4} {r['dtype']:5} {r['d']:>4} {str(r['causal']):6} {r['N']:>6} "
              f"{fmt(r['flashlab_ms'], 3):>8} {fmt(r['flashlab_tflops'], 1):>8} {fmt(r['flash_tflops'], 1):>8} "
              f"{fmt(r['vs_flash']):>8} {fmt(r['cudnn_tflops'], 1):>8} {fmt(r['vs_cudnn']):>8}")
    print("\ngeometric mean of flashlab/PyTorch throughput (min over points):")
    for k, s in summary.items():
        print(f"  {k:22} vs flash {fmt(s.get('geomean_vs_flash'))} (min {fmt(s.get('min_vs_flash'))})"
              f"   vs cuDNN {fmt(s.get('geomean_vs_cudnn'))} (min {fmt(s.get('min_vs_cudnn'))})")
    print(f"\nwrote {out_path}")
    return 0 if bench_rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
