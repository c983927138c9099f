#!/usr/bin/env bash
# Call 3 (outputs: call3/), once calls 1 and 2 have passed: the forward's speed. e (build/carry/
# e.tgz: main's SASS), p (p4f.tgz: main with poly.patch) and s (sf.tgz: all five patches) in turn,
# two rounds: `hopper` forward, bf16, N = 4096 and 16384, d = 64, 128 and 256, causal and not,
# hidden 2048, each pass after a 1 s pause. At d = 128 and 256 s differs from e by desc alone; at
# d = 64 p / e is poly's step and s / p desc's. Then the FP8 forward: b (b9f.tgz: main with
# quant_rcp.patch and bc192.patch) and s (b with desc) in turn, two rounds, d = 128 and 64,
# non-causal, N = 16384. Predictions (docs/perf.md): desc +1 to +4 % at d = 64, 0 to +2 % at d = 128
# and 256, +1 to +3 % on the FP8 forward; poly 0 to +5 % at d = 64 by its first model, more likely
# a loss by the SASS count of its issue slots (perf.md, the correction under its section).
set -uo pipefail
mkdir -p "$OUT/logs" bins/e bins/p bins/s bins/b
tar xzf build/carry/e.tgz -C bins/e; tar xzf build/carry/p4f.tgz -C bins/p
tar xzf build/carry/sf.tgz -C bins/s; tar xzf build/carry/b9f.tgz -C bins/b
L="$OUT/logs"; t0=$SECONDS
# Each command's time limit is cut to what is left of 530 s, and a command that would get less than
# 5 s is skipped (exit 125), so that the archive at the end is always made (a call has 600 s, and
# only 8 files come back).
run_for() {
  local left=$((530 - SECONDS + t0)) n=$1
  shift
  [ "$left" -lt "$n" ] && n=$left
  if [ "$n" -lt 5 ]; then echo "skipped (no time left): $*"; return 125; fi
  timeout -k 10 "$n" "$@"
}
for r in 1 2; do
  for b in e p s; do
    run_for 100 bins/$b/flashlab bench --backend cuda --versions hopper --passes fwd -N 4096,16384 -d 64,128,256 --dtype bf16 --causal no,yes --hidden 2048 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/fwd_$b$r.json" > "$L/fwd_$b$r.log" 2>&1
    echo "fwd $b$r rc=$? $((SECONDS-t0))s"
  done
done
python3 scripts/compare_rounds.py "$OUT" --prefix fwd_ --base e --new s --version hopper | tee "$OUT/compare_fwd_s_e.txt"
python3 scripts/compare_rounds.py "$OUT" --prefix fwd_ --base e --new p --version hopper | tee "$OUT/compare_fwd_p_e.txt"
python3 scripts/compare_rounds.py "$OUT" --prefix fwd_ --base p --new s --version hopper | tee "$OUT/compare_fwd_s_p.txt"
for r in 1 2; do
  for b in b s; do
    for d in 128 64; do
      run_for 45 bins/$b/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H $((2048 / d)) -N 16384 -d $d --check sample --repeats 10 --warmup 2 --bitwise-repeats 0 --json "$OUT/fp8_$b${r}_d$d.json" > "$L/fp8_$b${r}_d$d.log" 2>&1
      echo "fp8 $b$r d=$d rc=$? $((SECONDS-t0))s"
    done
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/compare_fp8.txt"
import json, sys
out = sys.argv[1]
def rate(name):
    try:
        d = json.load(open(f"{out}/{name}.json"))
    except (OSError, ValueError):
        return None
    t = next((t for t in d.get("tables", []) if t.get("id") == "timing"), None)
    rows = [r for r in (t or {}).get("rows", []) if r.get("version") == "hopper-fp8"]
    return rows[0]["tflops"] if rows else None
for d in (128, 64):
    b = [rate(f"fp8_b{r}_d{d}") for r in (1, 2)]
    s = [rate(f"fp8_s{r}_d{d}") for r in (1, 2)]
    line = f"d={d}: b " + " ".join("-" if x is None else f"{x:.1f}" for x in b)
    line += "  s " + " ".join("-" if x is None else f"{x:.1f}" for x in s)
    if None not in b and None not in s:
        line += f"  s/b {sum(s) / sum(b):.3f}"
    print(line)
PY
gzip -f "$L"/*.log
cd "$OUT" && tar czf call3.tgz logs $(ls *.json 2>/dev/null) compare_*.txt && rm -rf logs *.json && ls
echo "elapsed $((SECONDS-t0))s"
