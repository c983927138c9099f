#!/usr/bin/env bash
# call 2: the backward kernels that changed, timed beside main's binary (head), alternating, two
# rounds: A (no spills), B (A with hopper-deterministic d = 128 at 24 / 240 registers)
set -uo pipefail
mkdir -p bins "$OUT/logs"
for b in head a b; do [ -f build/carry/$b.tgz ] && { mkdir -p bins/$b; tar xzf build/carry/$b.tgz -C bins/$b; }; done
L="$OUT/logs"; t0=$SECONDS
for n in head a b head2 a2 b2; do
  F=bins/${n%2}/flashlab
  [ -x $F ] || continue
  timeout 40 $F bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 4096,16384 -d 64,128 --dtype bf16 --causal no,yes --repeats 7 --warmup 2 --json "$OUT/dense_$n.json" > "$L/dense_$n.log" 2>&1
  r1=$?
  for d in 64 128; do
    timeout 25 $F bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -d $d --hidden $((16*d)) --dtype bf16 --causal yes --varlen 24,128,4096 --repeats 7 --warmup 2 --json "$OUT/pb${d}_$n.json" > "$L/pb${d}_$n.log" 2>&1
  done
  echo "$n rc=$r1 $((SECONDS-t0))s"
  [ $((SECONDS-t0)) -gt 480 ] && break
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
def rows(n):
    r = {}
    for f in sorted(glob.glob(f"{out}/*_{n}.json")):
        for x in json.load(open(f))["tables"][0]["rows"]:
            kind = "dense" if os.path.basename(f).startswith("dense") else "packed"
            r[(x["version"], x["pass"], x["d"], "causal" if x["causal"] else "nc", x["N"], kind)] = x["tflops"]
    return r
names = [n for n in ["head", "a", "b", "head2", "a2", "b2"] if glob.glob(f"{out}/dense_{n}.json")]
R = {n: rows(n) for n in names}
print("version pass d mask N kind |", *names, "| each / its round's head")
for k in sorted(R["head"], key=str):
    v = [R[n].get(k) for n in names]
    rat = [f"{n}:{R[n][k] / R['head2' if n.endswith('2') else 'head'][k]:.3f}" for n in names if not n.startswith("head") and R[n].get(k)]
    print(*k, "|", *[f"{x:.1f}" if x else "-" for x in v], "|", *rat)
PY
cd "$OUT" && tar czf call2.tgz logs *.json && rm -rf logs *.json
