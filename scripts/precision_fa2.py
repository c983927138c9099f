#!/usr/bin/env python3
"""flashlab's gradients beside PyTorch's FlashAttention-2 on the same inputs, both measured against
the fp64 reference.

For each problem (dtype, d, causal, Nq, Nk) it runs
  flashlab run --backend cuda --versions LIST --dump DIR ...
which writes the inputs (already rounded to the storage dtype), the fp64 reference and every
version's outputs as .npy. It loads Q, K, V, dO into PyTorch on the GPU, runs FA2
(scaled_dot_product_attention under sdpa_kernel(SDPBackend.FLASH_ATTENTION), the problem's softmax
scale) forward and backward, and prints for every version and problem

  rel(x) = ||x - ref||_2 / ||ref||_2     of O (versions with a forward), dQ, dK, dV,

beside FA2's rel on the same outputs, and the ratio version / FA2 (above 1: less accurate than FA2).
A backward-only version's gradients start from the tiled forward's O and LSE, a version with its
own forward from that (as `flashlab run` does); FA2's from FA2's forward.

Causal masks: flashlab aligns them bottom-right (query i sees key j iff j <= i + Nk - Nq). For
Nq == Nk that is is_causal=True; for Nq != Nk the script passes
torch.nn.attention.bias.causal_lower_right(Nq, Nk), which PyTorch hands to the flash kernel with
its own bottom-right causal flag; where PyTorch refuses (no flash kernel for it), the problem's FA2
side is skipped and the reason printed and recorded.

The versions default to every version with a backward that `flashlab list` reports as available
on this GPU (never a list written here). bf16 inputs are dumped as <f4 holding exact bf16 values.

Writes one JSON document (flashlab commit, GPU, torch version, every problem and figure) and a
short markdown table (per version and output: the worst and the geometric-mean ratio to FA2).

Usage (on a machine with the GPU, from the repository root):
  python3 scripts/precision_fa2.py --flashlab build/device-bin/flashlab \\
      --out docs/results/precision_fa2.json --md docs/results/precision_fa2.md
  python3 scripts/precision_fa2.py --versions atomic-dq --dtype bf16 -d 128 --causal yes   # a subset
  python3 scripts/precision_fa2.py --self-test --flashlab build/cpu/flashlab   # no GPU, no torch
"""

import argparse
import array
import ast
import datetime
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

OUTPUTS = ("O", "dQ", "dK", "dV")
GRADS = ("dQ", "dK", "dV")
# (Nq, Nk, B, H) per (dtype, d, causal): square, a longer square, Nq < Nk and Nq > Nk (both ragged:
# no multiple of any tile size). B*H*Nq*Nk stays small so the fp64 reference is quick.
DEFAULT_SHAPES = [(1024, 1024, 2, 2), (2048, 2048, 1, 2), (640, 1531, 1, 3), (1499, 576, 2, 1)]


# ---- .npy without NumPy (the PyTorch beside the GPU need not have it) ----

NPY_TYPES = {"<f2": ("e", 2), "<f4": ("f", 4), "<f8": ("d", 8)}


def read_npy(path):
    """(descr, shape, data bytes) of a version 1.0 .npy file, as flashlab writes them."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    major = raw[6]
    if major == 1:
        hlen, start = struct.unpack("<H", raw[8:10])[0], 10
    else:
        hlen, start = struct.unpack("<I", raw[8:12])[0], 12
    header = ast.literal_eval(raw[start:start + hlen].decode("latin1"))
    if header.get("fortran_order"):
        raise ValueError(f"{path}: Fortran order is not supported")
    descr, shape = header["descr"], tuple(header["shape"])
    if descr not in NPY_TYPES:
        raise ValueError(f"{path}: unsupported dtype {descr}")
    data = raw[start + hlen:]
    n = math.prod(shape)
    if len(data) != n * NPY_TYPES[descr][1]:
        raise ValueError(f"{path}: {len(data)} data bytes for shape {shape} of {descr}")
    return descr, shape, data


def write_npy(path, values, shape, descr):
    """The inverse of read_npy (for the self-test)."""
    code, _ = NPY_TYPES[descr]
    dims = ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "")
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}"
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * (pad % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack(f"<{len(values)}{code}", *values))


def npy_values(path):
    """The values of a .npy file as a flat list of Python floats."""
    descr, _, data = read_npy(path)
    code, size = NPY_TYPES[descr]
    if code == "e":
        return list(struct.unpack(f"<{len(data) // size}e", data))
    a = array.array(code)
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tolist()


def npy_tensor(torch, path, device):
    descr, shape, data = read_npy(path)
    tdtype = {"<f2": torch.float16, "<f4": torch.float32, "<f8": torch.float64}[descr]
    return torch.frombuffer(bytearray(data), dtype=tdtype).reshape(shape).to(device)


# ---- the error and the ratio ----

def rel_error(x, ref):
    """||x - ref||_2 / ||ref||_2, in fp64 (torch tensors or sequences of floats); NaN if x holds a
    NaN or Inf, as flashlab's runner reports it; ||x|| when ||ref|| = 0."""
    if hasattr(x, "double"):  # torch
        x, ref = x.double(), ref.double()
        if not bool(x.isfinite().all()):
            return float("nan")
        num, den = float((x - ref).norm()), float(ref.norm())
    else:
        if any(not math.isfinite(v) for v in x):
            return float("nan")
        num = math.sqrt(math.fsum((a - b) ** 2 for a, b in zip(x, ref, strict=True)))
        den = math.sqrt(math.fsum(b * b for b in ref))
    return num / den if den > 0 else num


def ratio(rel, fa2_rel):
    if rel is None or fa2_rel is None or not (fa2_rel > 0) or math.isnan(rel):
        return None
    return rel / fa2_rel


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


# ---- the problems and flashlab ----

from sweep_args import causal_list, csv_ints, csv_strs  # noqa: E402 (beside this script)


def shape_list(s):
    """'Nq:Nk:B:H,...' -> [(Nq, Nk, B, H), ...]"""
    out = []
    for item in csv_strs(s):
        parts = [int(x) for x in item.split(":")]
        if len(parts) != 4:
            raise argparse.ArgumentTypeError(f"shape '{item}' is not Nq:Nk:B:H")
        out.append(tuple(parts))
    return out


def problems(args):
    return [{"dtype": dt, "d": d, "causal": causal, "Nq": nq, "Nk": nk, "B": b, "H": h}
            for dt in args.dtype for d in args.d for causal in args.causal
            for (nq, nk, b, h) in args.shapes]


def problem_label(p):
    return (f"{p['dtype']} d={p['d']} {'causal' if p['causal'] else 'full'} "
            f"Nq={p['Nq']} Nk={p['Nk']} B={p['B']} H={p['H']}")


def list_versions(flashlab):
    """Ids of the versions with a backward whose CUDA side is available here (flashlab list)."""
    proc = subprocess.run([flashlab, "list", "--json", "-"], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"flashlab list failed ({proc.returncode}): {proc.stderr.strip()}")
    tables = {t["id"]: t["rows"] for t in json.loads(proc.stdout)["tables"]}
    available = {r["id"] for r in tables["cuda"] if r["status"] == "available"}
    return [r["id"] for r in tables["versions"]
            if r["pass"] in ("bwd", "fwd+bwd") and r["id"] in available]


def flashlab_cmd(args, p, versions, dump_dir, json_path, backend="cuda"):
    cmd = [args.flashlab, "run", "--backend", backend, "--versions", ",".join(versions),
           "--dtype", p["dtype"], "-B", str(p["B"]), "-H", str(p["H"]), "--Nq", str(p["Nq"]),
           "--Nk", str(p["Nk"]), "-d", str(p["d"]), "--seed", str(args.seed),
           "--repeats", "1", "--warmup", "0", "--dump", dump_dir, "--json", json_path]
    if p["causal"]:
        cmd.append("--causal")
    return cmd


def table_rows(doc, table_id):
    for t in doc.get("tables", []):
        if t.get("id") == table_id:
            return t.get("rows", [])
    return []


def dump_files(dump_dir):
    """{(version, tensor): file} from the dump's index.json ('input' and 'reference' included)."""
    with open(os.path.join(dump_dir, "index.json")) as f:
        index = json.load(f)
    return index, {(e["version"], e["tensor"]): os.path.join(dump_dir, e["file"])
                   for e in index["files"]}


# ---- FA2 ----

def mask_plan(Nq, Nk, causal):
    """How flashlab's bottom-right causal mask is asked of PyTorch: 'none', 'is_causal' (the same
    for Nq == Nk) or 'lower_right' (CausalBias; PyTorch's own is_causal is top-left)."""
    if not causal:
        return "none"
    return "is_causal" if Nq == Nk else "lower_right"


def fa2_outputs(torch, files, p, scale):
    """FA2's O, dQ, dK, dV on the dumped inputs, or raises with PyTorch's reason."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[p["dtype"]]
    # bf16 values come as <f4 and convert exactly; fp16 as <f2.
    q, k, v, do = (npy_tensor(torch, files[("input", n)], "cuda").to(tdtype) for n in
                   ("Q", "K", "V", "dO"))
    q, k, v = (x.requires_grad_(True) for x in (q, k, v))
    plan = mask_plan(p["Nq"], p["Nk"], p["causal"])
    kw = {"scale": scale}
    if plan == "is_causal":
        kw["is_causal"] = True
    elif plan == "lower_right":
        from torch.nn.attention.bias import causal_lower_right
        kw["attn_mask"] = causal_lower_right(p["Nq"], p["Nk"])
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        o = F.scaled_dot_product_attention(q, k, v, **kw)
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    torch.cuda.synchronize()
    return {"O": o.detach(), "dQ": dq, "dK": dk, "dV": dv}, plan


# ---- one problem ----

def measure(args, torch, p, versions, tmp):
    dump_dir = tempfile.mkdtemp(dir=tmp)
    json_path = os.path.join(tmp, "run.json")
    cmd = flashlab_cmd(args, p, versions, dump_dir, json_path)
    print("+", " ".join(cmd), flush=True)
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    res = {"problem": p, "flashlab_exit": proc.returncode, "flashlab_s": round(time.time() - t0, 2)}
    if proc.returncode not in (0, 1) or not os.path.exists(os.path.join(dump_dir, "index.json")):
        # 1 = a version over its budget: the dump is still there and worth reading.
        res["error"] = f"flashlab run exited {proc.returncode}: {proc.stderr.strip()[-2000:]}"
        print("  " + res["error"], flush=True)
        shutil.rmtree(dump_dir, ignore_errors=True)
        return res, None
    with open(json_path) as f:
        doc = json.load(f)
    index, files = dump_files(dump_dir)
    scale = index["config"]["scale"]
    res["scale"] = scale
    # flashlab's own figures, to cross-check the ones computed here.
    flashlab_rel = {(r["version"], r["output"]): r["rel"] for r in table_rows(doc, "errors")}
    budget = {r["output"]: r for r in table_rows(doc, "budget")}

    ref = {n: npy_tensor(torch, files[("reference", n)], "cuda") for n in OUTPUTS}
    try:
        fa2, plan = fa2_outputs(torch, files, p, scale)
        res["fa2_mask"] = plan
        res["fa2"] = {n: rel_error(fa2[n], ref[n]) for n in OUTPUTS}
    except Exception as e:  # PyTorch has no flash kernel for this problem
        fa2 = None
        res["fa2_skipped"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
        print(f"  FA2 skipped: {res['fa2_skipped']}", flush=True)
    res["versions"] = {}
    for ver in versions:
        vr = {}
        for n in OUTPUTS:
            if (ver, n) not in files:
                continue  # a backward-only version has no O, a forward-only one no gradients
            x = npy_tensor(torch, files[(ver, n)], "cuda")
            rel = rel_error(x, ref[n])
            vr[n] = {"rel": rel, "flashlab_rel": flashlab_rel.get((ver, n)),
                     "budget_rel": (budget.get(n) or {}).get("budget_rel"),
                     "lowp_rel": (budget.get(n) or {}).get("lowp_rel"),
                     "fa2_rel": res["fa2"][n] if fa2 is not None else None}
            vr[n]["ratio"] = ratio(rel, vr[n]["fa2_rel"])
            fl = vr[n]["flashlab_rel"]
            if isinstance(fl, (int, float)) and not math.isclose(rel, fl, rel_tol=1e-6, abs_tol=1e-12):
                print(f"  warning: {ver} {n}: rel {rel:.6e} here, {fl:.6e} in flashlab's report",
                      flush=True)
        res["versions"][ver] = vr
    res["budget"] = budget
    shutil.rmtree(dump_dir, ignore_errors=True)
    return res, doc


def fmt(x, spec):
    return "-" if x is None else (f"{x:{spec}}" if not (isinstance(x, float) and math.isnan(x)) else "nan")


def print_problem(res):
    print(f"{problem_label(res['problem'])}   (FA2 mask: {res.get('fa2_mask', '-')})")
    print(f"  {'version':22}" + "".join(f" {n + ' rel':>10} {'FA2':>9} {'ratio':>6}" for n in OUTPUTS))
    for ver, vr in res.get("versions", {}).items():
        line = f"  {ver:22}"
        for n in OUTPUTS:
            c = vr.get(n)
            line += (f" {fmt(c['rel'], '.3e'):>10} {fmt(c['fa2_rel'], '.2e'):>9} "
                     f"{fmt(c['ratio'], '.3f'):>6}") if c else f" {'-':>10} {'-':>9} {'-':>6}"
        print(line, flush=True)


def summarize(results, versions, limit):
    """Per version and output: worst and geometric-mean ratio over the problems, and whether every
    gradient is within `limit` x FA2's error."""
    summary = {}
    for ver in versions:
        for n in OUTPUTS:
            pts = [(r["versions"][ver][n]["ratio"], problem_label(r["problem"]))
                   for r in results if ver in r.get("versions", {}) and n in r["versions"][ver]]
            if not pts:
                continue
            vals = [x for x, _ in pts if x is not None]
            worst = max(pts, key=lambda t: -1 if t[0] is None else t[0])
            summary[f"{ver} {n}"] = {
                "version": ver, "output": n, "problems": len(pts), "compared": len(vals),
                "max_ratio": worst[0], "worst_problem": worst[1] if worst[0] is not None else None,
                "geomean_ratio": geomean(vals),
                "within_limit": all(x <= limit for x in vals) if vals else None}
    return summary


def markdown(doc):
    lines = [f"flashlab `{doc['flashlab_commit']}` beside PyTorch {doc['torch_version']}'s "
             f"FlashAttention-2 on {doc['gpu']}: relative error ||x - ref|| / ||ref|| against the "
             f"fp64 reference, as a ratio to FA2's on the same inputs (above 1: less accurate). "
             f"{len(doc['problems'])} problems: dtype {', '.join(doc['config']['dtype'])}; "
             f"d {', '.join(map(str, doc['config']['d']))}; causal and not; "
             f"(Nq, Nk) = {', '.join(f'({s[0]}, {s[1]})' for s in doc['config']['shapes'])}.",
             "",
             "| version | output | max ratio | geomean ratio | worst problem |",
             "|---|---|---|---|---|"]
    for s in doc["summary"].values():
        lines.append(f"| `{s['version']}` | {s['output']} | {fmt(s['max_ratio'], '.3f')} | "
                     f"{fmt(s['geomean_ratio'], '.3f')} | {s['worst_problem'] or '-'} |")
    skipped = [r for r in doc["problems"] if r.get("fa2_skipped") or r.get("error")]
    if skipped:
        lines.append("")
        for r in skipped:
            lines.append(f"- {problem_label(r['problem'])}: "
                         f"{r.get('error') or 'FA2 skipped: ' + r['fa2_skipped']}")
    lim = doc["config"]["limit"]
    bad = [s for s in doc["summary"].values() if s["output"] in GRADS and s["within_limit"] is False]
    lines.append("")
    lines.append(f"Gradients within {lim}x FA2's error everywhere: "
                 + ("yes" if not bad else "no (" + ", ".join(f"{s['version']} {s['output']} "
                                                             f"{s['max_ratio']:.3f}" for s in bad) + ")"))
    return "\n".join(lines) + "\n"


# ---- self-test: what can be checked without a GPU or PyTorch ----

def self_test(args):
    failures = []

    def check(cond, what):
        print(("ok    " if cond else "FAIL  ") + what)
        if not cond:
            failures.append(what)

    # Known errors: x = ref * (1 + eps) has rel = eps; a perturbation e orthogonal-free of known
    # norm has rel = ||e|| / ||ref||.
    ref = [math.sin(0.37 * i) + 0.5 for i in range(1000)]
    check(math.isclose(rel_error([r * 1.001 for r in ref], ref), 1e-3, rel_tol=1e-9),
          "rel_error of ref * (1 + 1e-3) is 1e-3")
    e = [(1e-4 if i % 2 else -1e-4) for i in range(1000)]
    want = math.sqrt(1000) * 1e-4 / math.sqrt(sum(r * r for r in ref))
    check(math.isclose(rel_error([a + b for a, b in zip(ref, e)], ref), want, rel_tol=1e-9),
          "rel_error of ref + e is ||e|| / ||ref||")
    check(rel_error(ref, ref) == 0.0, "rel_error of ref itself is 0")
    check(math.isnan(rel_error(ref[:-1] + [float("inf")], ref)), "an Inf in x gives NaN")
    check(ratio(2e-3, 1e-3) == 2.0 and ratio(1e-3, 0.0) is None and ratio(None, 1.0) is None,
          "ratio: version / FA2, None without a positive FA2 error")
    check(math.isclose(geomean([1.0, 4.0, None]), 2.0), "geomean skips None")
    check([mask_plan(8, 8, True), mask_plan(8, 16, True), mask_plan(16, 8, True),
           mask_plan(8, 16, False)] == ["is_causal", "lower_right", "lower_right", "none"],
          "causal masks: is_causal only where Nq == Nk")

    try:  # the GPU run's path: the same numbers through torch (CPU tensors will do)
        import torch
        tx, tref = torch.tensor([r * 1.001 for r in ref]), torch.tensor(ref, dtype=torch.float64)
        check(math.isclose(rel_error(tx, tref), rel_error(tx.tolist(), ref), rel_tol=1e-12),
              "rel_error: torch and Python agree")
    except ImportError:
        print("skip  rel_error through torch (no torch here)")

    # The summary and the markdown on made-up results: worst and geometric-mean ratios, the
    # limit, a skipped FA2 side.
    def fake(nq, rels, fa2_rels, skipped=None):
        p = {"dtype": "bf16", "d": 64, "causal": True, "Nq": nq, "Nk": 256, "B": 1, "H": 1}
        r = {"problem": p, "versions": {"v": {n: {"rel": rels[n], "fa2_rel": fa2_rels.get(n),
                                                  "ratio": ratio(rels[n], fa2_rels.get(n))}
                                              for n in rels}}}
        if skipped:
            r["fa2_skipped"] = skipped
        return r
    results = [fake(256, {"dQ": 2e-3, "dK": 1e-3}, {"dQ": 1e-3, "dK": 1e-3}),
               fake(128, {"dQ": 1e-3, "dK": 1e-3}, {"dQ": 2e-3, "dK": 1e-3}),
               fake(64, {"dQ": 1e-3, "dK": 1e-3}, {}, skipped="RuntimeError: no kernel")]
    s = summarize(results, ["v"], 1.05)
    check(s["v dQ"]["max_ratio"] == 2.0 and "Nq=256" in s["v dQ"]["worst_problem"] and
          math.isclose(s["v dQ"]["geomean_ratio"], 1.0) and s["v dQ"]["compared"] == 2 and
          s["v dQ"]["problems"] == 3 and s["v dQ"]["within_limit"] is False and
          s["v dK"]["within_limit"] is True and "v O" not in s,
          "summary: worst and geometric-mean ratio, the limit")
    md = markdown({"flashlab_commit": "abc", "torch_version": "2.x", "gpu": "none",
                   "problems": results, "summary": s,
                   "config": {"dtype": ["bf16"], "d": [64], "shapes": [[256, 256, 1, 1]],
                              "limit": 1.05}})
    check("| `v` | dQ | 2.000 | 1.000 |" in md and "FA2 skipped: RuntimeError" in md and
          "no (v dQ 2.000)" in md, "markdown table")

    tmp = tempfile.mkdtemp()
    try:
        # .npy round trip in each dtype flashlab writes.
        vals = [0.5, -1.25, 3.0, 1.0 / 3.0, -2.0, 1e-3]
        for descr in NPY_TYPES:
            path = os.path.join(tmp, f"t{descr[1:]}.npy")
            write_npy(path, vals, (2, 3), descr)
            got = npy_values(path)
            code = NPY_TYPES[descr][0]
            want = list(struct.unpack(f"<6{code}", struct.pack(f"<6{code}", *vals)))
            check(got == want and read_npy(path)[1] == (2, 3), f".npy {descr} round trip")

        # A real dump from the CPU backend: every output's rel computed here must be the one
        # flashlab's runner reports (the same definition on the same numbers).
        if args.flashlab and os.path.exists(args.flashlab):
            p = {"dtype": "bf16", "d": 16, "causal": True, "Nq": 40, "Nk": 72, "B": 1, "H": 2}
            dump_dir, json_path = os.path.join(tmp, "dump"), os.path.join(tmp, "run.json")
            cmd = flashlab_cmd(args, p, ["naive", "tiled", "recompute"], dump_dir, json_path,
                               backend="cpu") + ["--br", "16", "--bc", "16", "--threads", "1"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            check(proc.returncode == 0, "flashlab run --backend cpu --dump: exit 0 "
                  f"({proc.returncode}: {proc.stderr.strip()[-300:]})")
            if proc.returncode == 0:
                with open(json_path) as f:
                    doc = json.load(f)
                index, files = dump_files(dump_dir)
                for n in OUTPUTS:
                    check(("reference", n) in files and read_npy(files[("reference", n)])[0] == "<f8",
                          f"the dump holds the fp64 reference {n}")
                check(math.isclose(index["config"]["scale"], 0.25), "the dump records the scale")
                reported = {(r["version"], r["output"]): r["rel"] for r in table_rows(doc, "errors")}
                compared = 0
                for (ver, n), rel in reported.items():
                    if n == "LSE":
                        continue
                    mine = rel_error(npy_values(files[(ver, n)]), npy_values(files[("reference", n)]))
                    check(math.isclose(mine, rel, rel_tol=1e-9, abs_tol=1e-15),
                          f"{ver} {n}: rel {mine:.6e} here = {rel:.6e} in flashlab's report")
                    compared += 1
                check(compared == 4 + 1 + 3, "naive O dQ dK dV, tiled O, recompute dQ dK dV")
                inputs_ok = all(read_npy(files[("input", n)])[0] == "<f4" for n in ("Q", "K", "V", "dO"))
                check(inputs_ok, "bf16 inputs are dumped as <f4")
        else:
            print("skip  the dump check (no --flashlab binary)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"self-test: {len(failures)} failure(s)")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flashlab", default="build/device-bin/flashlab", help="the flashlab binary")
    ap.add_argument("--versions", type=csv_strs, default=None,
                    help="comma-separated ids (default: every backward version available on this GPU)")
    ap.add_argument("--dtype", type=csv_strs, default=["bf16", "fp16"])
    ap.add_argument("-d", dest="d", type=csv_ints, default=[64, 128], help="head dimensions (default 64,128)")
    ap.add_argument("--d", dest="d", type=csv_ints, default=argparse.SUPPRESS,
                    help=argparse.SUPPRESS)  # the older spelling, not listed
    ap.add_argument("--causal", type=causal_list, default=[False, True],
                    help="causal masks, as flashlab spells them: yes, no or no,yes (default no,yes)")
    ap.add_argument("--shapes", type=shape_list, default=DEFAULT_SHAPES,
                    help="Nq:Nk:B:H,... (default " + ",".join(":".join(map(str, s)) for s in DEFAULT_SHAPES) + ")")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=float, default=1.05,
                    help="a gradient passes when its rel error is at most this many times FA2's")
    ap.add_argument("--out", default=None, help="JSON to write (default docs/results/precision_fa2_<date>.json)")
    ap.add_argument("--md", default=None, help="markdown table to write (default: beside --out, .md)")
    ap.add_argument("--self-test", action="store_true",
                    help="check the .npy reader, the error math and (with --flashlab) a CPU dump; no GPU")
    args = ap.parse_args()
    if args.self_test:
        return self_test(args)

    import torch

    if not torch.cuda.is_available():
        sys.exit("precision_fa2: no CUDA device for PyTorch")
    now = datetime.datetime.now(datetime.timezone.utc)
    out_path = args.out or os.path.join("docs", "results", f"precision_fa2_{now:%Y%m%d}.json")
    md_path = args.md or os.path.splitext(out_path)[0] + ".md"
    versions = args.versions or list_versions(args.flashlab)
    if not versions:
        sys.exit("precision_fa2: no version with a backward is available on this GPU")
    print(f"versions: {', '.join(versions)}", flush=True)

    results, first_doc = [], None
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for p in problems(args):
            res, doc = measure(args, torch, p, versions, tmp)
            first_doc = first_doc or doc
            results.append(res)
            print_problem(res)
            torch.cuda.empty_cache()
    elapsed = time.time() - t0

    tool = (first_doc or {}).get("tool") or {}
    summary = summarize(results, versions, args.limit)
    doc = {
        "schema": "flashlab.precision_fa2/v1",
        "created_utc": now.isoformat(timespec="seconds"),
        "flashlab_commit": tool.get("git_commit"),
        "flashlab_version": tool.get("version"),
        "torch_version": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "method": {
            "rel": "||x - ref||_2 / ||ref||_2 against the fp64 reference of `flashlab run` (on the "
                   "inputs rounded to the dtype); NaN when x holds a NaN or Inf",
            "fa2": "torch.nn.functional.scaled_dot_product_attention under "
                   "sdpa_kernel(SDPBackend.FLASH_ATTENTION), the problem's scale; forward then "
                   "torch.autograd.grad with the dumped dO",
            "mask": "flashlab's causal mask is bottom-right aligned: is_causal=True where Nq == Nk, "
                    "attn_mask=causal_lower_right(Nq, Nk) where not",
            "ratio": "version rel / FA2 rel (above 1: less accurate than FA2)",
            "backward_input": "a backward-only version's backward starts from the tiled forward's O "
                              "and LSE, a version with a forward from its own; FA2's from FA2's",
        },
        "config": {"versions": versions, "dtype": args.dtype, "d": args.d,
                   "causal": args.causal, "shapes": [list(s) for s in args.shapes],
                   "seed": args.seed, "limit": args.limit},
        "elapsed_s": round(elapsed, 1),
        "summary": summary,
        "problems": results,
    }
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    md = markdown(doc)
    with open(md_path, "w") as f:
        f.write(md)
    print("\n" + md)
    print(f"{len(results)} problems in {elapsed:.0f} s; wrote {out_path} and {md_path}")
    failed = [r for r in results if r.get("error")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
