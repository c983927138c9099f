#!/usr/bin/env python3
"""Registers, shared memory, stack and spills of every CUDA kernel, from a build log made with
-Xptxas=-v (scripts/device_build.sh does that). Prints a markdown table; kernels that spill are
marked. Usage: python3 scripts/ptxas_report.py build/cuda/build.log > docs/ptxas_report.md
"""

import re
import shutil
import subprocess
import sys

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def demangle(names):
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), text=True, stdout=subprocess.PIPE).stdout
    return dict(zip(names, out.splitlines()))


def main():
    kernels = {}
    cur = None
    for line in open(sys.argv[1], errors="replace"):
        m = ENTRY.search(line)
        if m:
            cur = (m.group(1), m.group(2))
            kernels[cur] = {"stack": 0, "spill_st": 0, "spill_ld": 0, "regs": None, "smem": 0}
            continue
        if cur is None:
            continue
        m = SPILL.search(line)
        if m:
            k = kernels[cur]
            k["stack"], k["spill_st"], k["spill_ld"] = map(int, m.groups())
            continue
        m = USED.search(line)
        if m:
            kernels[cur]["regs"] = int(m.group(1))
            kernels[cur]["smem"] = int(m.group(2) or 0)
    names = demangle(sorted({n for n, _ in kernels}))
    print("| kernel | arch | registers | static smem (B) | stack (B) | spill st/ld (B) |")
    print("|---|---|---|---|---|---|")
    for (n, arch), k in sorted(kernels.items(), key=lambda kv: names[kv[0][0]]):
        short = re.sub(r"\([^()]*\)$", "", names[n]).replace("flashlab::cuda::", "")
        flag = " **spills**" if k["spill_st"] or k["spill_ld"] else ""
        print(f"| `{short}` | {arch} | {k['regs']} | {k['smem']} | {k['stack']} | "
              f"{k['spill_st']}/{k['spill_ld']}{flag} |")
    print(f"\n{len(kernels)} kernels; dynamic shared memory (the K/V stages) is not in this report.")


if __name__ == "__main__":
    main()
