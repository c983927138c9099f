#!/usr/bin/env python3
"""Two sweeps of scripts/compare_torch.py set side by side: did a version regress?

A sweep's absolute figures move between device calls (the board's clock under its power limit,
the machine itself), so a change between two sweeps says something only against that spread. The
spread is measured in the sweeps themselves: PyTorch's own implementation (cuDNN by default, or
its FlashAttention-2 backend) ran the same shapes in both calls, untouched, so its per-shape change
between them is what the calls alone do. For every flashlab version and pass the two sweeps share:

  - its throughput against the reference implementation, geometric mean and lowest point, old
    and new;
  - its own throughput, new / old per shape (range and geometric mean), beside the reference's
    new / old over the same shapes (the spread);
  - every shape where the version's new / old lies below the lowest of the reference's: a change
    larger than the calls explain (a regression, unless the reference's run at that shape was
    the odd one; each line says by how much).

Usage:
  python3 scripts/compare_sweeps.py OLD.json NEW.json [--versus cudnn|flash]
  python3 scripts/compare_sweeps.py --self-test

Exit status: 0 with the report; 1 with one line on stderr when a file cannot be read, is not a
compare_torch.py sweep, or the two share no shape with the reference's timing.
"""
import argparse
import sys

from gen_perf_table import geomean, read_json  # beside this script: the same mean, the same reading

IMPL = {"cudnn": "torch-cudnn", "flash": "torch-flash"}


class SweepError(Exception):
    pass


def shape_key(r):
    # Grouped heads (Hkv) are part of the shape where the sweep records them.
    return (r["pass"], r["dtype"], r["d"], bool(r["causal"]), r["N"], r.get("Hkv", r.get("H")))


def load(path):
    try:
        doc = read_json(path)
    except ValueError as e:
        raise SweepError(str(e))
    check_doc(doc, path)
    return doc


def check_doc(doc, path):
    if not isinstance(doc, dict) or not isinstance(doc.get("comparison"), list) or \
            not isinstance(doc.get("torch"), list):
        raise SweepError(f"{path}: not a compare_torch.py sweep (no 'comparison' and 'torch' lists)")


def index(doc, path, impl):
    """flashlab: {(version, shape): TFLOP/s}; reference: {shape: TFLOP/s}."""
    check_doc(doc, path)
    ours, ref = {}, {}
    try:
        for r in doc["comparison"]:
            if isinstance(r.get("flashlab_tflops"), (int, float)) and r["flashlab_tflops"] > 0:
                ours[(r["version"],) + shape_key(r)] = float(r["flashlab_tflops"])
        for r in doc["torch"]:
            if r.get("impl") == impl and isinstance(r.get("tflops"), (int, float)) and r["tflops"] > 0:
                ref[shape_key(r)] = float(r["tflops"])
    except (KeyError, TypeError) as e:
        raise SweepError(f"{path}: a row lacks a field compare_torch.py writes ({e})")
    return ours, ref


def name(shape):
    p, dtype, d, causal, N, hkv = shape
    return f"{dtype} d={d} {'causal' if causal else 'non-causal'} N={N}"


def compare(old, new, versus="cudnn", old_name="old", new_name="new"):
    """The report's lines for two loaded sweeps."""
    impl = IMPL[versus]
    o_ours, o_ref = index(old, old_name, impl)
    n_ours, n_ref = index(new, new_name, impl)
    groups = sorted({(k[0], k[1]) for k in n_ours} & {(k[0], k[1]) for k in o_ours})
    lines = []
    rows = 0
    for version, pass_ in groups:
        keys = sorted(k for k in n_ours if k[:2] == (version, pass_) and k in o_ours and
                      k[1:] in o_ref and k[1:] in n_ref)
        if not keys:
            continue
        rows += len(keys)
        vs_old = {k: o_ours[k] / o_ref[k[1:]] for k in keys}
        vs_new = {k: n_ours[k] / n_ref[k[1:]] for k in keys}
        own = {k: n_ours[k] / o_ours[k] for k in keys}
        spread = {k: n_ref[k[1:]] / o_ref[k[1:]] for k in keys}
        lo_old = min(keys, key=vs_old.get)
        lo_new = min(keys, key=vs_new.get)
        floor = min(spread.values())
        lines.append(f"{version} {pass_} ({len(keys)} shapes):")
        lines.append(f"  x {versus}: geometric mean {geomean(vs_old.values()):.3f} -> "
                     f"{geomean(vs_new.values()):.3f}; lowest {vs_old[lo_old]:.3f} ({name(lo_old[1:])}) "
                     f"-> {vs_new[lo_new]:.3f} ({name(lo_new[1:])})")
        lines.append(f"  flashlab new/old: {min(own.values()):.3f}..{max(own.values()):.3f} "
                     f"(geometric mean {geomean(own.values()):.3f}); {versus} new/old, the spread: "
                     f"{floor:.3f}..{max(spread.values()):.3f} (geometric mean {geomean(spread.values()):.3f})")
        below = [k for k in keys if own[k] < floor]
        if not below:
            lines.append("  no shape below the spread")
        for k in sorted(below, key=own.get):
            lines.append(f"  below the spread: {name(k[1:])}: {o_ours[k]:.1f} -> {n_ours[k]:.1f} "
                         f"TFLOP/s ({own[k]:.3f}, {(floor - own[k]) * 100:.1f} points under "
                         f"{versus}'s lowest {floor:.3f}; {versus} there {spread[k]:.3f})")
    if rows == 0:
        raise SweepError(f"the two sweeps share no shape of a flashlab version with {impl}'s timing")
    return lines


def self_test():
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(("ok    " if ok else "FAIL  ") + what)
        failures += 0 if ok else 1

    import random
    rng = random.Random(7)

    def sweep(scale_ours, scale_ref):
        comparison, torch = [], []
        for N in (1024, 4096, 16384):
            for causal in (False, True):
                base = rng.uniform(300.0, 700.0)
                s = {"pass": "fwd", "dtype": "bf16", "d": 128, "causal": causal, "N": N, "H": 16}
                for v in ("a", "b"):
                    comparison.append(dict(s, version=v, flashlab_tflops=base * scale_ours(v, N, causal)))
                torch.append(dict(s, impl="torch-cudnn", tflops=base * scale_ref(N, causal)))
                torch.append(dict(s, impl="torch-flash", tflops=base * 0.5))
        return {"comparison": comparison, "torch": torch}

    rng.seed(7)
    old = sweep(lambda v, N, c: 1.0, lambda N, c: 1.0)
    rng.seed(7)  # the same bases: the new sweep differs only by the scales below
    # The reference moves by -2 .. +3 % between the calls; version a stays inside that, version b
    # loses 10 % at one shape.
    ref_moves = {(1024, False): 0.98, (1024, True): 1.01, (4096, False): 1.03, (4096, True): 0.99,
                 (16384, False): 1.0, (16384, True): 1.02}
    new = sweep(lambda v, N, c: 0.90 if (v == "b" and N == 4096 and c) else 1.0,
                lambda N, c: ref_moves[(N, c)])
    lines = compare(old, new)
    text = "\n".join(lines)
    check("a fwd (6 shapes):" in text and "b fwd (6 shapes):" in text, "both versions reported")
    a_part = text.split("b fwd")[0]
    b_part = text.split("b fwd")[1]
    check("no shape below the spread" in a_part, "a change inside the reference's spread is not flagged")
    check("below the spread: bf16 d=128 causal N=4096" in b_part and
          b_part.count("below the spread:") == 1, "a 10 % loss at one shape is flagged, and only it")
    check("the spread: 0.980..1.030" in text, "the spread is the reference's new/old range")
    check("8.0 points under" in b_part, "the distance below the spread is stated (0.900 vs 0.980)")
    # Bad input: one line, a SweepError.
    for doc, why in (({"comparison": []}, "no torch list"), ([1, 2], "not an object"),
                     ({"comparison": [{"version": "a"}], "torch": []}, "a row without its fields")):
        try:
            compare(doc, new)
            check(False, f"refused: {why}")
        except SweepError as e:
            check("\n" not in str(e), f"refused with one line: {why}")
    try:
        compare(old, {"comparison": [], "torch": []})
        check(False, "refused: no shared shape")
    except SweepError:
        check(True, "refused: no shared shape")
    print(f"self-test: {failures} failure(s)")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", nargs="?", help="the earlier sweep (compare_torch.py JSON)")
    ap.add_argument("new", nargs="?", help="the later sweep")
    ap.add_argument("--versus", choices=sorted(IMPL), default="cudnn",
                    help="PyTorch's implementation whose change between the calls is the spread")
    ap.add_argument("--self-test", action="store_true", help="check the arithmetic on made-up sweeps")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.old or not args.new:
        print("compare_sweeps.py: give two sweeps (OLD.json NEW.json), or --self-test", file=sys.stderr)
        return 1
    try:
        old, new = load(args.old), load(args.new)
        lines = compare(old, new, args.versus, args.old, args.new)
    except SweepError as e:
        print(f"compare_sweeps.py: {e}", file=sys.stderr)
        return 1
    meta = lambda d: f"{d.get('flashlab_commit', '?')} ({d.get('created_utc', '?')[:10]})"
    print(f"{args.old}: flashlab {meta(old)}; {args.new}: flashlab {meta(new)}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
