#!/usr/bin/env python3
"""The machine code of every CUDA kernel in a binary, one MD5 per kernel and architecture, to show
that a change left the SASS alone (or to name the kernels it changed).

    scripts/sass_md5.py build/cuda/flashlab > after.txt
    scripts/sass_md5.py --compare before.txt after.txt

It reads the binary itself, with no CUDA tool: every fat binary in its .nv_fatbin section, every
uncompressed cubin (ELF) in those, and in each cubin the code section of each kernel,
.text.<mangled name>: identical bytes are identical SASS (`cuobjdump -sass` prints those bytes).
Each output line is `md5  sm_XX  kernel`; a kernel instantiated in two objects appears twice.
--compare prints the kernels whose code differs or that exist on one side only, and exits 1 when
there are any.
"""
import argparse
import hashlib
import re
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
# An anonymous namespace's mangled name carries hashes of the file's path: two trees that differ
# only in where a file lies give it different names. The key keeps the file's own name only.
ANON = re.compile(r"_GLOBAL__N__[0-9a-f]{8}_(\d+_\w+?)_[0-9a-f]{8}")


def sections(elf):
    """(name, bytes) of every section of an ELF64 image."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    heads = []
    for i in range(shnum):
        name, _, _, _, off, size = struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
        heads.append((name, off, size))
    _, stroff, strsize = heads[shstrndx]
    strtab = elf[stroff:stroff + strsize]
    for name, off, size in heads:
        end = strtab.index(b"\0", name)
        yield strtab[name:end].decode(), elf[off:off + size]


def section_of(binary, wanted):
    for name, data in sections(binary):
        if name == wanted:
            return data
    return b""


def cubins(fatbins):
    """(arch, ELF) of every uncompressed cubin in a run of fat binaries."""
    off = 0
    while off + 16 <= len(fatbins):
        magic, _, header, size = struct.unpack_from("<IHHQ", fatbins, off)
        if magic != FATBIN_MAGIC:
            off += 8  # fat binaries are 8-byte aligned; skip padding
            continue
        entry, end = off + header, off + header + size
        while entry < end:
            kind, _, eheader, payload = struct.unpack_from("<HHIQ", fatbins, entry)
            arch, = struct.unpack_from("<I", fatbins, entry + 0x1C)
            data = fatbins[entry + eheader:entry + eheader + payload]
            if kind == 2 and data[:4] == b"\x7fELF":
                yield f"sm_{arch}", data
            elif kind == 2:
                sys.exit(f"a compressed cubin for sm_{arch}: build with -Xfatbin=-compress=false")
            entry += eheader + payload
        off = end


def kernels(path):
    with open(path, "rb") as f:
        binary = f.read()
    table = {}
    for arch, elf in cubins(section_of(binary, ".nv_fatbin")):
        for name, data in sections(elf):
            if name.startswith(".text."):
                key = (arch, ANON.sub(r"_GLOBAL__N__\1", name[6:]))
                table.setdefault(key, []).append(hashlib.md5(data).hexdigest())
    return {k: sorted(v) for k, v in table.items()}


def write(path):
    table = kernels(path)
    if not table:
        sys.exit(f"{path}: no CUDA kernel found")
    for (arch, name), hashes in sorted(table.items()):
        for h in hashes:
            print(f"{h}  {arch}  {name}")


def read(path):
    table = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            h, arch, name = line.split()
            table.setdefault((arch, name), []).append(h)
    return {k: sorted(v) for k, v in table.items()}


def compare(before, after):
    a, b = read(before), read(after)
    differ = 0
    for key in sorted(set(a) | set(b)):
        if key not in a:
            print(f"only after:  {key[0]} {key[1]}")
        elif key not in b:
            print(f"only before: {key[0]} {key[1]}")
        elif a[key] != b[key]:
            print(f"differs:     {key[0]} {key[1]}")
        else:
            continue
        differ += 1
    same = sum(1 for k in set(a) & set(b) if a[k] == b[k])
    print(f"{same} kernels identical, {differ} differ or are on one side only "
          f"({len(a)} before, {len(b)} after)")
    return 1 if differ else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary", nargs="?")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if not args.binary:
        ap.error("give a binary, or --compare BEFORE AFTER")
    write(args.binary)


if __name__ == "__main__":
    main()
