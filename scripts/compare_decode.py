#!/usr/bin/env python3
"""Decoding beside PyTorch's SDPA on the same GPU, in the same run: one query row against a long
K/V cache, where the cost is reading the cache once.

For each point (B, H query heads, Hkv K/V heads, cache length Nk; d = 128, bf16, Nq = 1) it runs
`flashlab run --backend cuda --versions ... --Nq 1 --Nk Nk --check sample --json` (the versions'
outputs checked against the fp64 reference there, on three (batch, K/V head) slices; the time the
median of --repeats runs, L2 flushed before each),
once with a contiguous cache and once with a paged one (--page-size, pages shuffled by the
generator), then times PyTorch's scaled_dot_product_attention with the cuDNN backend
(SDPBackend.CUDNN_ATTENTION) on q [B, H, 1, d], k and v [B, Hkv, Nk, d] (enable_gqa=True where
grouped), by the method of scripts/compare_torch.py (seeded inputs, warm-up, L2 flushed by reading
4x its size before every timed run, CUDA events, median).

Bandwidth = the bytes that must be read, K and V once: 2 B Hkv Nk d 2 bytes, over the median time.
The read ceiling is flashlab's own micro-benchmark (cuda/ceilings.h, hbm_read: a 1 GiB read,
16-byte loads, 8 in flight per thread), taken from a `flashlab lab decode --json` report
(--ceiling-from), which measures it in the same process as its own points.

The README's table is generated from the committed JSON, never written by hand:
  python3 scripts/compare_decode.py --table-from docs/results/compare_decode_split_kv.json

Usage (on a machine with the GPU, from the repository root):
  python3 scripts/compare_decode.py --flashlab build/device-bin/flashlab --out docs/results/decode.json
  python3 scripts/compare_decode.py --points 1x32x8:32768,8x32x32:8192 --page-size 64
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

from compare_torch import TorchTimer  # noqa: E402 (beside this script): the same timing method

# The points: B x H x Hkv : cache length.
DEFAULT_POINTS = ("1x32x8:32768,1x32x8:131072,1x32x8:262144,"
                  "1x32x32:32768,1x32x32:131072,1x32x32:262144,"
                  "8x32x32:8192,8x32x32:65536")


def parse_points(text):
    out = []
    for item in text.split(","):
        heads, nk = item.split(":")
        B, H, Hkv = (int(x) for x in heads.split("x"))
        out.append((B, H, Hkv, int(nk)))
    return out


def table_rows(doc, table_id):
    for t in doc.get("tables", []):
        if t.get("id") == table_id:
            cols = [c["key"] if isinstance(c, dict) else c for c in t.get("columns", [])]
            rows = []
            for r in t.get("rows", []):
                rows.append(dict(zip(cols, r)) if isinstance(r, list) else r)
            return rows
    return []


def run_flashlab(args, B, H, Hkv, Nk, page):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.json")
        cmd = [args.flashlab, "run", "--backend", "cuda", "--versions", args.versions,
               "--dtype", "bf16", "-d", "128", "-B", str(B), "-H", str(H), "--heads-kv", str(Hkv),
               "--Nq", "1", "--Nk", str(Nk), "--repeats", str(args.repeats),
               "--warmup", str(args.warmup), "--bitwise-repeats", "1", "--check", args.check,
               "--json", path]
        if page:
            cmd += ["--page-size", str(page)]
        print("+", " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(proc.stdout[-3000:], flush=True)
        if not os.path.exists(path):
            return None, proc.returncode
        with open(path) as f:
            return json.load(f), proc.returncode


def time_cudnn(torch, timer, B, H, Hkv, Nk, d=128):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    gen = torch.Generator(device="cuda").manual_seed(1234)
    q = torch.randn((B, H, 1, d), device="cuda", dtype=torch.bfloat16, generator=gen)
    k = torch.randn((B, Hkv, Nk, d), device="cuda", dtype=torch.bfloat16, generator=gen)
    v = torch.randn((B, Hkv, Nk, d), device="cuda", dtype=torch.bfloat16, generator=gen)
    gqa = {"enable_gqa": True} if Hkv != H else {}
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]), torch.no_grad():
        t = timer.time(lambda: F.scaled_dot_product_attention(q, k, v, **gqa))
    del q, k, v
    torch.cuda.empty_cache()
    return t


def read_ceiling(args):
    """The hbm_read ceiling in B/s from a `flashlab lab decode --json` report (its figure
    read_ceiling_tbps), or None."""
    if not args.ceiling_from or not os.path.exists(args.ceiling_from):
        return None, None
    with open(args.ceiling_from) as f:
        doc = json.load(f)
    fig = doc.get("figures", {}).get("read_ceiling_tbps")
    if not fig:
        return None, None
    return fig["value"] * 1e12, f"lab decode's hbm_read ({args.ceiling_from})"


README_BEGIN, README_END = "<!-- decode-table:begin -->", "<!-- decode-table:end -->"


def readme_table(doc, version="split-kv"):
    """The README's table of a comparison JSON: the contiguous cache's time beside cuDNN's, and
    the paged cache's time over the contiguous one's where the comparison ran one."""
    pages = sorted({k for p in doc["points"] for k in p["flashlab"] if k.startswith("page")})
    paged = pages[0] if pages else None  # the paged run's layout key, "page64"
    head = "| B × H / HKV | cache | split-kv | cuDNN | time / cuDNN | split-kv reads |"
    rule = "|---|---|---|---|---|---|"
    if paged:
        head += f" pages of {paged[4:]}, time / contiguous |"
        rule += "---|"
    lines = [head, rule]
    for p in doc["points"]:
        r = p["flashlab"].get("contiguous", {}).get(version)
        c = p.get("cudnn", {})
        if not r or not c.get("median_ms"):
            continue
        line = (f"| {p['B']} × {p['H']} / {p['Hkv']} | {p['Nk']:,} | {r['median_ms']:.4f} ms | "
                f"{c['median_ms']:.4f} ms | {r['median_ms'] / c['median_ms']:.3f} | "
                f"{r['TBps']:.2f} TB/s |")
        if paged:
            q = p["flashlab"].get(paged, {}).get(version)
            line += f" {q['median_ms'] / r['median_ms']:.3f} |" if q else " – |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def write_readme_table(json_path, readme):
    with open(json_path) as f:
        doc = json.load(f)
    with open(readme) as f:
        text = f.read()
    if README_BEGIN not in text or README_END not in text:
        sys.exit(f"{readme} has no {README_BEGIN} ... {README_END} markers")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    with open(readme, "w") as f:
        f.write(head + README_BEGIN + "\n" + readme_table(doc) + README_END + tail)
    print(f"{readme}: the decoding table from {json_path}")


def write_doc(args, rows, ceiling, ceiling_how, torch):
    out = args.out or f"docs/results/compare_decode_{datetime.date.today().isoformat()}.json"
    commits = {r.get("git_commit") for p in rows for r in p["flashlab"].values()
               if isinstance(r, dict) and r.get("git_commit")}
    doc = {"what": "decoding: flashlab run vs PyTorch cuDNN SDPA, bf16, d = 128, Nq = 1",
           "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "flashlab_commit": sorted(commits)[0] if len(commits) == 1 else sorted(commits) or None,
           "read_ceiling_Bps": ceiling, "read_ceiling_how": ceiling_how,
           "torch": getattr(torch, "__version__", None),
           "gpu": torch.cuda.get_device_name(0) if torch is not None else None,
           "repeats": args.repeats, "warmup": args.warmup, "points": rows}
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    tmp = out + ".part"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, out)
    print("wrote", out, f"({len(rows)} point(s))", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashlab", default="build/cuda/flashlab")
    ap.add_argument("--points", default=DEFAULT_POINTS, help="BxHxHkv:Nk,... (d = 128, bf16, Nq = 1)")
    ap.add_argument("--versions", default="split-kv", help="flashlab versions to run (comma list)")
    ap.add_argument("--page-size", type=int, default=64, help="the paged run's page (0: none)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--check", default="sample", choices=["sample", "full"],
                    help="flashlab run's --check: sample (a few (batch, K/V head) slices against "
                         "the fp64 reference, the default) or full")
    ap.add_argument("--ceiling-from", default=None,
                    help="a `flashlab lab decode --json` report whose read ceiling to use")
    ap.add_argument("--table-from", default=None,
                    help="run nothing: write this comparison JSON's table into --readme, between "
                         f"{README_BEGIN} and {README_END}")
    ap.add_argument("--readme", default="README.md")
    args = ap.parse_args()
    if args.table_from:
        return write_readme_table(args.table_from, args.readme)

    ceiling, ceiling_how = read_ceiling(args)
    torch = timer = None
    if not args.skip_torch:
        import torch as torch_mod
        torch = torch_mod
        timer = TorchTimer(torch, args.repeats, args.warmup)

    rows = []
    for (B, H, Hkv, Nk) in parse_points(args.points):
        bytes_kv = 2.0 * B * Hkv * Nk * 128 * 2
        point = {"B": B, "H": H, "Hkv": Hkv, "Nk": Nk, "bytes_kv": bytes_kv, "flashlab": {}}
        for page in ([0, args.page_size] if args.page_size else [0]):
            doc, rc = run_flashlab(args, B, H, Hkv, Nk, page)
            layout = f"page{page}" if page else "contiguous"
            if doc is None:
                point["flashlab"][layout] = {"error": f"exit {rc}, no JSON"}
                continue
            errs = {(r["version"], r["output"]): r for r in table_rows(doc, "errors")}
            for r in table_rows(doc, "timing"):
                if r.get("pass") != "fwd":
                    continue
                ms = r["median_ms"]
                point["flashlab"].setdefault(layout, {})[r["version"]] = {
                    "median_ms": ms, "min_ms": r["min_ms"], "max_ms": r["max_ms"],
                    "TBps": bytes_kv / (ms * 1e-3) / 1e12 if ms else None,
                    "ok": r["ok"], "workspace_bytes": r["workspace_bytes"],
                    "O_rel": errs.get((r["version"], "O"), {}).get("rel")}
            point["flashlab"][layout]["observations"] = doc.get("observations", [])
            # The commit the binary's sources were at, as its own report says (a copy of the tree
            # on the GPU machine need not have the history to say it).
            point["flashlab"][layout]["git_commit"] = doc.get("tool", {}).get("git_commit")
        if torch is not None:
            try:
                med, lo, hi, c0, c1 = time_cudnn(torch, timer, B, H, Hkv, Nk)
                point["cudnn"] = {"median_ms": med, "min_ms": lo, "max_ms": hi,
                                  "mhz_before": c0, "mhz_after": c1,
                                  "TBps": bytes_kv / (med * 1e-3) / 1e12}
            except Exception as e:  # one failing point is one line, not the end of the sweep
                point["cudnn"] = {"error": str(e)}
        rows.append(point)
        write_doc(args, rows, ceiling, ceiling_how, torch)  # a run stopped early keeps its points

    # The table: flashlab / cuDNN time (< 1: flashlab is faster), bandwidth against the ceiling.
    print()
    print(f"read ceiling (hbm_read): {ceiling / 1e12:.2f} TB/s" if ceiling else "read ceiling: not measured")
    hdr = "| B x H / Hkv | Nk | version | layout | ms | TB/s | of ceiling | cuDNN ms | time / cuDNN |"
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for p in rows:
        c = p.get("cudnn", {})
        for layout, vs in p["flashlab"].items():
            for vid, r in vs.items():
                if vid == "observations" or not isinstance(r, dict) or "median_ms" not in r:
                    continue
                frac = r["TBps"] * 1e12 / ceiling if ceiling and r["TBps"] else None
                ratio = r["median_ms"] / c["median_ms"] if c.get("median_ms") else None
                print(f"| {p['B']} x {p['H']} / {p['Hkv']} | {p['Nk']} | {vid} | {layout} | "
                      f"{r['median_ms']:.4f} | {r['TBps']:.2f} | "
                      f"{'%.1f%%' % (100 * frac) if frac else '-'} | "
                      f"{'%.4f' % c['median_ms'] if c.get('median_ms') else '-'} | "
                      f"{'%.3f' % ratio if ratio else '-'} |")


if __name__ == "__main__":
    sys.exit(main())
