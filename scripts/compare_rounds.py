#!/usr/bin/env python3
"""Two binaries timed in alternation in one call, side by side: a change measured against its base.

A device script runs `flashlab bench --json DIR/PREFIX<binary><round>.json` for the base binary and
the changed one in turn, for a few rounds (h1, q1, h2, q2, ...), so that both see the same board,
clock and temperature. This reads those reports and prints, per shape (dtype, d, causal, N, pass),
each run's TFLOP/s of the version, the changed binary's rate over the base's (the sums over the
rounds) and the base's last round over its first (the spread of two runs of one binary, against
which a change is read); then the geometric mean, the lowest and the highest ratio.

    python3 scripts/compare_rounds.py OUT --prefix fwd_ --base h --new q --version hopper

Bad input (a missing or unreadable report, no shape timed in every run) gets one line on stderr
and exit 1.
"""
import argparse
import json
import math
import os
import sys


def fail(msg):
    print(f"compare_rounds.py: {msg}", file=sys.stderr)
    sys.exit(1)


def rates(path, version):
    """(dtype, d, causal, N, pass) -> TFLOP/s of `version` in one bench report."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        out = {}
        for table in doc["tables"]:
            for row in table.get("rows", []):
                if row.get("version") != version or row.get("tflops") is None:
                    continue
                key = (row["dtype"], row["d"], row["causal"], row["N"], row["pass"])
                out[key] = float(row["tflops"])
        return out
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    except (ValueError, KeyError, TypeError, AttributeError):
        fail(f"{path} is not a flashlab bench report (--json)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="the folder holding the reports")
    ap.add_argument("--prefix", required=True, help="the reports' names before <binary><round>")
    ap.add_argument("--base", required=True, help="the base binary's letter (e.g. h)")
    ap.add_argument("--new", required=True, help="the changed binary's letter (e.g. q)")
    ap.add_argument("--version", required=True, help="the version whose rates are compared")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of alternation (default 2)")
    a = ap.parse_args()
    if a.rounds < 1:
        fail(f"--rounds must be at least 1 (got {a.rounds})")
    names = [f"{b}{r}" for r in range(1, a.rounds + 1) for b in (a.base, a.new)]
    runs = {n: rates(os.path.join(a.dir, f"{a.prefix}{n}.json"), a.version) for n in names}
    shapes = sorted(set.intersection(*(set(r) for r in runs.values())), key=str)
    if not shapes:
        fail(f"no shape of {a.version} is timed in every one of {', '.join(names)}")
    first, last = f"{a.base}1", f"{a.base}{a.rounds}"
    print(f"{a.version} TFLOP/s: dtype d causal N pass |", *names,
          f"| {a.new}/{a.base} (sums of the rounds), {last}/{first}")
    ratios = []
    for k in shapes:
        new = sum(runs[f"{a.new}{r}"][k] for r in range(1, a.rounds + 1))
        base = sum(runs[f"{a.base}{r}"][k] for r in range(1, a.rounds + 1))
        ratios.append(new / base)
        print(*k, "|", *(f"{runs[n][k]:.1f}" for n in names),
              f"| {new / base:.3f} {runs[last][k] / runs[first][k]:.3f}")
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"geometric mean over {len(ratios)} shapes: {a.new}/{a.base} {g:.3f}; "
          f"lowest {min(ratios):.3f}, highest {max(ratios):.3f}")


if __name__ == "__main__":
    main()
