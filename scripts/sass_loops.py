#!/usr/bin/env python3
"""The main loop of each kernel in a SASS listing: how many instructions a thread runs per pass.

The Hopper and FP8 kernels spend their time in one loop, a K/V block per pass. Its size in the SASS
is what a consumer thread issues per block: the issue slots a scheduler spends on it, beside the
clocks of the block's tensor-core products. This finds, per kernel, the smallest loop (a backward
branch and the code between its target and itself) that holds at least --min-mma warpgroup MMAs
(HGMMA, or QGMMA for FP8) and an exponential (MUFU.EX2: the softmax, so that a tile loop around
the epilogue's products is not taken for it), and prints:

  body      every instruction in the loop
  run       the body less the forward branches inside it that skip more than --skip-over
            instructions (the masked block's code, which the blocks without a mask jump over)
  uniform   instructions on the uniform datapath in the body (U..., R2UR: descriptors, indices)
  total     the kernel's instructions

    python3 scripts/sass_loops.py LISTING [--kernel REGEX]
    python3 scripts/sass_loops.py --compare BEFORE AFTER [--kernel REGEX]
    python3 scripts/sass_loops.py --self-test

A LISTING is the text of `cuobjdump -sass BINARY` (a binary or object is read through cuobjdump
when it is on PATH or named by $CUOBJDUMP). With --compare, kernels are matched by name. Bad input
gets one line on stderr and exit 1.
"""
import argparse
import bisect
import os
import re
import shutil
import subprocess
import sys

FUNC = re.compile(r"Function : (\S+)")
INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
TARGET = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")


def fail(msg):
    print(f"sass_loops.py: {msg}", file=sys.stderr)
    sys.exit(1)


def read_listing(path):
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    if head == b"\x7fELF":
        tool = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
        if not tool:
            fail(f"{path} is a binary and no cuobjdump was found (put it on PATH or set CUOBJDUMP)")
        run = subprocess.run([tool, "-sass", path], capture_output=True, text=True)
        if run.returncode != 0:
            fail(f"cuobjdump -sass {path} failed: {run.stderr.strip().splitlines()[-1:]}")
        return run.stdout
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def kernels(text):
    """name -> [(address, instruction text)] in address order."""
    out, cur = {}, None
    for line in text.splitlines():
        m = FUNC.search(line)
        if m:
            cur = m.group(1)
            out[cur] = []
            continue
        m = INSN.search(line)
        if m and cur is not None:
            out[cur].append((int(m.group(1), 16), m.group(2).strip()))
    return out


def opcode(insn):
    words = insn.split()
    return words[1] if words and words[0].startswith("@") and len(words) > 1 else words[0]


def main_loop(insns, min_mma, skip_over):
    """(body, run, uniform) of the smallest loop with min_mma warpgroup MMAs, or None."""
    addrs = [a for a, _ in insns]
    best = None
    for end, (addr, text) in enumerate(insns):
        m = TARGET.search(text)
        if not m or int(m.group(1), 16) >= addr:
            continue
        body = insns[bisect.bisect_left(addrs, int(m.group(1), 16)):end + 1]
        if sum(1 for _, t in body if opcode(t).startswith(("HGMMA", "QGMMA"))) < min_mma:
            continue
        if not any(opcode(t).startswith("MUFU.EX2") for _, t in body):
            continue
        if best is None or len(body) < len(best):
            best = body
    if best is None:
        return None
    # The forward branches inside the loop that skip more than skip_over instructions.
    skipped = 0
    for a, t in best:
        m = TARGET.search(t)
        if not (m and t.startswith("@")) or not a < int(m.group(1), 16) <= best[-1][0]:
            continue
        inside = bisect.bisect_left(addrs, int(m.group(1), 16)) - bisect.bisect_right(addrs, a)
        if inside > skip_over:
            skipped += inside
    uniform = sum(1 for _, t in best if opcode(t).startswith(("U", "R2UR")))
    return len(best), len(best) - skipped, uniform


def table(text, pattern, min_mma, skip_over):
    rows = {}
    for name, insns in kernels(text).items():
        if pattern and not re.search(pattern, name):
            continue
        loop = main_loop(insns, min_mma, skip_over)
        if loop:
            rows[name] = loop + (len(insns),)
    return rows


SELF_TEST = """
        Function : kernel_a
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   UMOV UR4, 0x400 ;
        /*0020*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ ;
        /*0030*/                   UIADD3 UR8, UR8, 0x2, URZ ;
        /*0040*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;
        /*0050*/              @!P0 BRA 0x90 ;
        /*0060*/                   FSEL R24, R24, -INF , P1 ;
        /*0070*/                   FSEL R25, R25, -INF , P1 ;
        /*0080*/                   FSEL R26, R26, -INF , P1 ;
        /*0090*/                   MUFU.EX2 R24, R24 ;
        /*00a0*/                   R2UR UR12, R4 ;
        /*00b0*/               @P2 BRA 0x20 ;
        /*00c0*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;
        /*00d0*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;
        /*00e0*/               @P3 BRA 0xc0 ;
        /*00f0*/                   EXIT ;
        Function : kernel_b
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   FADD R2, R2, R3 ;
        /*0020*/               @P0 BRA 0x10 ;
        /*0030*/                   EXIT ;
"""


def self_test():
    failures = 0
    rows = table(SELF_TEST, None, 2, 2)

    def check(what, got, want):
        nonlocal failures
        ok = got == want
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {got} (want {want})")

    # kernel_a: the loop 0x20..0xb0 is 10 instructions, 3 of them behind the forward branch (more
    # than 2), UIADD3 and R2UR on the uniform datapath; 16 in all. The smaller loop 0xc0..0xe0 has
    # its two MMAs but no exponential: not the main loop. kernel_b has no MMA in its loop.
    check("kernel_a", rows.get("kernel_a"), (10, 7, 2, 16))
    check("kernel_b", rows.get("kernel_b"), None)
    check("skip over 3", table(SELF_TEST, None, 2, 3).get("kernel_a"), (10, 10, 2, 16))
    check("min mma 3", table(SELF_TEST, None, 3, 2).get("kernel_a"), None)
    print(f"self-test: {failures} failure(s)")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("listing", nargs="?")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--kernel", help="only kernels whose (mangled) name matches this regex")
    ap.add_argument("--min-mma", type=int, default=8)
    ap.add_argument("--skip-over", type=int, default=40)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        sys.exit(1 if self_test() else 0)
    if a.min_mma < 1 or a.skip_over < 0:
        fail("--min-mma must be at least 1 and --skip-over at least 0")
    if a.kernel:
        try:
            re.compile(a.kernel)
        except re.error as e:
            fail(f"--kernel is not a regular expression: {e}")
    if a.compare:
        if a.listing:
            fail("give either one LISTING or --compare BEFORE AFTER")
        before, after = (table(read_listing(p), a.kernel, a.min_mma, a.skip_over) for p in a.compare)
        if not before and not after:
            fail("no kernel with such a loop in either listing")
        print("kernel\tbody\trun\tuniform\ttotal\t->\tbody\trun\tuniform\ttotal")
        for name in sorted(set(before) | set(after)):
            b = "\t".join(map(str, before[name])) if name in before else "-\t-\t-\t-"
            n = "\t".join(map(str, after[name])) if name in after else "-\t-\t-\t-"
            print(f"{name}\t{b}\t->\t{n}")
        return
    if not a.listing:
        fail("give a LISTING (cuobjdump -sass output, or a binary), or --compare BEFORE AFTER")
    rows = table(read_listing(a.listing), a.kernel, a.min_mma, a.skip_over)
    if not rows:
        fail(f"no kernel with a loop of {a.min_mma} or more warpgroup MMAs in {a.listing}")
    print("kernel\tbody\trun\tuniform\ttotal")
    for name in sorted(rows):
        print(name + "\t" + "\t".join(map(str, rows[name])))


if __name__ == "__main__":
    main()
