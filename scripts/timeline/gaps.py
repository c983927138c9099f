#!/usr/bin/env python3
"""Reads a timeline (scripts/timeline/timeline.cpp's CSV) of a `flashlab bench` run and splits it
into the timed passes: each pass starts where the L2 flush before it ends (the bench records its
start event right after the flush) and ends where the next poison or flush begins. For every pass
of the largest grid it prints each activity's duration, the idle gap before it, and the pass's
span against the sum of its activities.

  scripts/timeline/gaps.py timeline.csv[.gz] [--last N] [--flush NAME --poison NAME]

--flush and --poison name the kernels that bound a pass in another program's timeline (for
example a PyTorch loop that empties L2 with a fill between its runs).
"""
import argparse
import csv
import gzip
import statistics
import sys

FLUSH = "read_sweep"  # bench's L2 flush (src/cuda/l2_flush.cu)
POISON = "fill_"  # bench's poison fill and its input generator


def load(path):
    rows = []
    with (gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")) as f:
        for r in csv.DictReader(f):
            rows.append(dict(kind=r["kind"], start=int(r["start_ns"]), end=int(r["end_ns"]),
                             grid=int(r["grid"]), name=r["name"]))
    rows.sort(key=lambda r: r["start"])
    return rows


def short(name, width=70):
    base = name.split("(")[0]
    return base if len(base) <= width else base[: width - 3] + "..."


def passes(rows, flush, poison):
    """Activities between the end of each flush and the next flush or poison kernel; a memset
    after the pass's largest kernel (bench poisons its outputs with memsets) also ends it."""
    out, cur, in_pass, flush_end = [], [], False, 0

    def close():
        if in_pass and cur:
            big = max(range(len(cur)), key=lambda i: cur[i]["grid"])
            tail = [i for i in range(big + 1, len(cur)) if cur[i]["kind"] == "memset"]
            out.append((flush_end, cur[: tail[0]] if tail else cur))

    for r in rows:
        is_flush = flush in r["name"]
        is_poison = bool(poison) and poison in r["name"]
        if is_flush or is_poison:
            close()
            cur, in_pass = [], is_flush
            if is_flush:
                flush_end = r["end"]
            continue
        if in_pass:
            cur.append(r)
    close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--last", type=int, default=3, help="passes printed in full")
    ap.add_argument("--flush", default=FLUSH, help="name (part) of the kernel before each pass")
    ap.add_argument("--poison", default=POISON, help="name (part) of a kernel that ends a pass")
    a = ap.parse_args()
    ps = passes(load(a.csv), a.flush, a.poison)
    if not ps:
        sys.exit("no timed pass found (no L2 flush in the timeline?)")
    big = max(max(r["grid"] for r in acts) for _, acts in ps)
    ps = [(t0, acts) for t0, acts in ps if max(r["grid"] for r in acts) == big]
    spans, busy, main_runs = [], [], []
    for i, (t0, acts) in enumerate(ps):
        span = acts[-1]["end"] - t0
        work = sum(r["end"] - r["start"] for r in acts)
        spans.append(span / 1e6)
        busy.append(work / 1e6)
        top = max(acts, key=lambda r: r["end"] - r["start"])
        main_runs.append((top["end"] - top["start"]) / 1e6)
        if i >= len(ps) - a.last:
            print(f"pass {i}: span {span / 1e6:.3f} ms, activities {work / 1e6:.3f} ms, "
                  f"idle {(span - work) / 1e6:.3f} ms")
            prev = t0
            for r in acts:
                print(f"  gap {(r['start'] - prev) / 1e3:9.1f} us  run {(r['end'] - r['start']) / 1e3:10.1f} us"
                      f"  grid {r['grid']:6d}  {r['kind']:6s} {short(r['name'])}")
                prev = r["end"]
    print(f"{len(ps)} passes of grid {big}: span median {statistics.median(spans):.3f} ms "
          f"(min {min(spans):.3f}), activities median {statistics.median(busy):.3f} ms")
    by_name = {}
    for _, acts in ps:
        for r in acts:
            key = f"{r['kind']} {short(r['name'], 60)}"
            by_name.setdefault(key, []).append((r["end"] - r["start"]) / 1e3)
    for key, ts in by_name.items():
        print(f"  median {statistics.median(ts):10.1f} us  min {min(ts):10.1f}  max {max(ts):10.1f}"
              f"  ({len(ts)} runs)  {key}")
    print(f"longest activity of each pass, ms, sorted: " +
          " ".join(f"{t:.3f}" for t in sorted(main_runs)))


if __name__ == "__main__":
    main()
