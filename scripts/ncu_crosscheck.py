#!/usr/bin/env python3
"""Nsight Compute's DRAM bytes for one kernel beside the figures flashlab's own counters (CUPTI)
recorded for the same kernel and shape in a `flashlab lab io` report, and their ratio.

usage: ncu_crosscheck.py NCU.csv LAB_IO.json --version tiled --kernel fwd_kernel --d 128 --N 4096
       ncu_crosscheck.py --self-test

NCU.csv is `ncu --csv` output with dram__bytes_read.sum, dram__bytes_write.sum and
launch__grid_size, either page (raw: one row per kernel; details: one row per metric). Of the
launches whose name contains --kernel, the first one with the largest grid is taken (the sweep
point, not the small correctness check that `flashlab bench` runs first). Exits 0 when both
figures agree within --tolerance (default 5 %), 1 when they do not, 2 when one is missing.
"""

import argparse
import csv
import io
import json
import sys

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
SCALE = {"": 1, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
         "KB": 1e3, "MB": 1e6, "GB": 1e9}


def number(text, unit=""):
    text = (text or "").replace(",", "").strip()
    if not text or text.lower() == "n/a":
        return None
    return float(text) * SCALE.get(unit, 1)


def grid_size(text):
    """'(32, 64, 1)', '2048' or '2,048' (the raw page's thousands separator) -> 2048."""
    text = (text or "").strip()
    if not text:
        return None
    if not text.startswith("("):
        return int(number(text))
    size = 1
    for part in text.strip("()").split(","):
        size *= int(float(part.replace(" ", "") or 1))
    return size


def ncu_launches(text):
    """Every profiled launch in ncu's CSV: [{id, name, grid, read, write}] in launch order."""
    lines = [l for l in text.splitlines() if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        return []
    head = rows[0]
    col = {name: i for i, name in enumerate(head)}
    launches = {}
    if "Metric Name" in col:  # the details page: one row per metric
        for r in rows[1:]:
            if len(r) != len(head):
                continue
            k = launches.setdefault(r[col["ID"]], {"id": r[col["ID"]], "name": r[col["Kernel Name"]],
                                                   "grid": grid_size(r[col.get("Grid Size", 0)])
                                                   if "Grid Size" in col else None})
            metric, unit, value = r[col["Metric Name"]], r[col["Metric Unit"]], r[col["Metric Value"]]
            if metric == "dram__bytes_read.sum":
                k["read"] = number(value, unit)
            elif metric == "dram__bytes_write.sum":
                k["write"] = number(value, unit)
            elif metric == "launch__grid_size":
                k["grid"] = grid_size(value)
    else:  # the raw page: a row of units under the header, then one row per kernel
        units = {}
        for r in rows[1:]:
            if len(r) != len(head):
                continue
            if not r[col["ID"]].strip():
                units = {name: r[i] for name, i in col.items()}
                continue
            launches[r[col["ID"]]] = {
                "id": r[col["ID"]],
                "name": r[col["Kernel Name"]],
                "grid": grid_size(r[col["launch__grid_size"]]) if "launch__grid_size" in col
                else None,
                "read": number(r[col[METRICS[0]]], units.get(METRICS[0], "")) if METRICS[0] in col
                else None,
                "write": number(r[col[METRICS[1]]], units.get(METRICS[1], "")) if METRICS[1] in col
                else None,
            }
    return sorted(launches.values(), key=lambda k: int(k["id"]) if k["id"].isdigit() else 0)


def pick(launches, kernel):
    """The first launch of `kernel` with the largest grid."""
    mine = [k for k in launches if kernel in k["name"]]
    if not mine:
        return None
    largest = max((k.get("grid") or 0) for k in mine)
    return next(k for k in mine if (k.get("grid") or 0) == largest)


def lab_figures(doc, version, kernel, d, n):
    for t in doc.get("tables", []):
        if t.get("id") != "kernels":
            continue
        for r in t["rows"]:
            if (r.get("version") == version and r.get("kernel") == kernel and r.get("d") == d
                    and r.get("N") == n):
                return r.get("dram_read_bytes"), r.get("dram_write_bytes")
    return None, None


def compare(ncu, lab, tolerance):
    """Lines to print and whether both figures agree."""
    lines, ok = [], True
    for what, a, b in (("read", ncu.get("read"), lab[0]), ("written", ncu.get("write"), lab[1])):
        if a is None or b is None or a <= 0:
            lines.append(f"DRAM {what}: Nsight Compute {a}, CUPTI {b}: cannot compare")
            ok = False
            continue
        r = b / a
        ok = ok and abs(r - 1) <= tolerance
        lines.append(f"DRAM {what}: Nsight Compute {a / 1e6:.3f} MB, CUPTI {b / 1e6:.3f} MB, "
                     f"CUPTI / ncu = {r:.4f}")
    return lines, ok


def self_test():
    raw = ('==PROF== Connected to process\n'
           '"ID","Process ID","Kernel Name","launch__grid_size","dram__bytes_read.sum",'
           '"dram__bytes_write.sum"\n'
           '"","","","","byte","byte"\n'
           '"0","7","void fwd_kernel<bf16, 128>(FwdParams)","16","1,048,576","65,536"\n'
           '"1","7","void fwd_kernel<bf16, 128>(FwdParams)","2,048","201,850,000","67,200,000"\n'
           '"2","7","void fwd_kernel<bf16, 128>(FwdParams)","2,048","199,000,000","67,100,000"\n')
    k = pick(ncu_launches(raw), "fwd_kernel")
    assert k["id"] == "1" and k["grid"] == 2048, k
    assert k["read"] == 201850000 and k["write"] == 67200000, k
    details = ('"ID","Kernel Name","Grid Size","Section Name","Metric Name","Metric Unit",'
               '"Metric Value"\n'
               '"0","fwd_kernel","(8, 2, 1)","Command line profiler metrics",'
               '"dram__bytes_read.sum","Mbyte","1.05"\n'
               '"0","fwd_kernel","(8, 2, 1)","Command line profiler metrics",'
               '"dram__bytes_write.sum","Kbyte","65.54"\n'
               '"1","fwd_kernel","(32, 64, 1)","Command line profiler metrics",'
               '"dram__bytes_read.sum","Gbyte","0.20185"\n'
               '"1","fwd_kernel","(32, 64, 1)","Command line profiler metrics",'
               '"dram__bytes_write.sum","Mbyte","67.2"\n')
    k = pick(ncu_launches(details), "fwd_kernel")
    assert k["id"] == "1" and k["grid"] == 2048 and abs(k["read"] - 201850000) < 1, k
    doc = {"tables": [{"id": "kernels", "rows": [
        {"version": "tiled", "kernel": "fwd_kernel", "d": 128, "N": 4096,
         "dram_read_bytes": 2.0e8, "dram_write_bytes": 6.75e7}]}]}
    lines, ok = compare(k, lab_figures(doc, "tiled", "fwd_kernel", 128, 4096), 0.05)
    assert ok and "CUPTI / ncu = 0.9908" in lines[0], lines
    _, ok = compare(k, (1.0e8, 6.75e7), 0.05)
    assert not ok
    _, ok = compare(k, (None, None), 0.05)
    assert not ok
    print("ncu_crosscheck.py: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ncu_csv", nargs="?")
    ap.add_argument("lab_json", nargs="?")
    ap.add_argument("--version", default="tiled")
    ap.add_argument("--kernel", default="fwd_kernel")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--N", type=int, default=4096)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not a.ncu_csv or not a.lab_json:
        ap.error("NCU.csv and LAB_IO.json are required")
    with open(a.ncu_csv, encoding="utf-8", errors="replace") as f:
        launches = ncu_launches(f.read())
    k = pick(launches, a.kernel)
    if k is None:
        print(f"cross-check: Nsight Compute profiled no launch of {a.kernel} "
              f"({len(launches)} launches in {a.ncu_csv})")
        return 2
    with open(a.lab_json, encoding="utf-8") as f:
        lab = lab_figures(json.load(f), a.version, a.kernel, a.d, a.N)
    print(f"cross-check: {a.version} {a.kernel}, d = {a.d}, N = {a.N} (ncu launch {k['id']}, "
          f"grid {k.get('grid')})")
    lines, ok = compare(k, lab, a.tolerance)
    for line in lines:
        print("  " + line)
    print(f"  agree within {a.tolerance:.0%}: {'yes' if ok else 'NO'}")
    return 0 if ok else (2 if lab == (None, None) else 1)


if __name__ == "__main__":
    sys.exit(main())
