#!/usr/bin/env bash
# Call 2 (outputs: call2/): the stack's speed against main, each binary built from main with some of
# the six prepared patches (build/carry/*.txz):
#   e  main (e006e3a's kernels, main's SASS)      w  + bwd80/wide.patch (and the inert probe)
#   p  + poly_exp2/poly.patch                     q  + fp8/quant_rcp/quant_rcp.patch
#   b  q + fp8/bc192/bc192.patch                  l  all six (version bdf5451)
# in turn, two rounds, each pass after a 0.5 s pause:
#   - `hopper` forward, bf16, N = 4096 and 16384, d = 64, 128, 256, causal and not, hidden 2048:
#     l / e is desc with lag at d = 128 and 256, poly with desc at d = 64; p / e poly alone (d = 64);
#   - `hopper` and `hopper-deterministic` backward, the same shapes: l / e is wide with desc at
#     d = 128 (w / e wide alone), desc alone at d = 64 and 256;
#   - `hopper-fp8`, d = 128, non-causal, N = 16384, with the sampled check: q / e quant_rcp, b / q
#     bc192, l / b desc.
# Predictions (docs/perf.md): forward d = 256 +3 to +8 %, d = 128 +1 to +6 %, poly at d = 64 a loss
# by its issue count; backward d = 128 non-causal +4 to +11 % (wide), desc 0 to +3 %; FP8 q / e +2
# to +3 %, b / q +4 to +9 % (bc192 is dropped if b / q < 1.03), l / b +1 to +3 %.
set -uo pipefail
mkdir -p "$OUT/logs"
# Binaries travel as xz-compressed tar files (a third of gzip's size); tar's -J needs xz, Python's
# tarfile is the fallback.
unpack() {  # archive letter
  mkdir -p "bins/$2"
  tar xJf "build/carry/$1.txz" -C "bins/$2" 2>/dev/null || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "build/carry/$1.txz" "bins/$2"
}
unpack e e; unpack wf w; unpack p4f p; unpack q8f q; unpack b9f b; unpack l l
L="$OUT/logs"; t0=$SECONDS
run_for() {  # the limit cut to what is left of BUDGET s (default 540); under 5 s left, skipped
  local left=$((${BUDGET:-540} - SECONDS + t0)) n=$1
  shift
  [ "$left" -lt "$n" ] && n=$left
  if [ "$n" -lt 5 ]; then echo "skipped (no time left): $*"; return 125; fi
  timeout -k 10 "$n" "$@"
}
for b in e w p q b l; do echo "$b: $(bins/$b/flashlab --version)"; done
common="--backend cuda --dtype bf16 --hidden 2048 --repeats 10 --warmup 3 --pause 500"
for r in 1 2; do
  for b in e p l; do
    ds=64,128,256; [ $b = p ] && ds=64
    run_for 60 bins/$b/flashlab bench $common --versions hopper --passes fwd -N 4096,16384 -d $ds --causal no,yes --json "$OUT/fwd_$b$r.json" > "$L/fwd_$b$r.log" 2>&1
    echo "fwd $b$r rc=$? $((SECONDS-t0))s"
  done
  for b in e w l; do
    ds=64,128,256; [ $b = w ] && ds=128
    run_for 100 bins/$b/flashlab bench $common --versions hopper,hopper-deterministic --passes bwd -N 4096,16384 -d $ds --causal no,yes --json "$OUT/bwd_$b$r.json" > "$L/bwd_$b$r.log" 2>&1
    echo "bwd $b$r rc=$? $((SECONDS-t0))s"
  done
  for b in e q b l; do
    for d in 128; do
      run_for 40 bins/$b/flashlab run --backend cuda --dtype fp8 --versions hopper-fp8 -B 1 -H $((2048 / d)) -N 16384 -d $d --check sample --repeats 10 --warmup 2 --bitwise-repeats 0 --json "$OUT/fp8_$b${r}_d$d.json" > "$L/fp8_$b${r}_d$d.log" 2>&1
      echo "fp8 $b$r d=$d rc=$? $((SECONDS-t0))s"
    done
  done
done
{
  python3 scripts/compare_rounds.py "$OUT" --prefix fwd_ --base e --new l --version hopper
  python3 scripts/compare_rounds.py "$OUT" --prefix fwd_ --base e --new p --version hopper
  python3 scripts/compare_rounds.py "$OUT" --prefix fwd_ --base p --new l --version hopper
  for v in hopper hopper-deterministic; do
    python3 scripts/compare_rounds.py "$OUT" --prefix bwd_ --base e --new l --version $v
    python3 scripts/compare_rounds.py "$OUT" --prefix bwd_ --base e --new w --version $v
    python3 scripts/compare_rounds.py "$OUT" --prefix bwd_ --base w --new l --version $v
  done
  python3 - "$OUT" <<'PY'
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
for d in (128,):
    rates = {b: [rate(f"fp8_{b}{r}_d{d}") for r in (1, 2)] for b in "eqbl"}
    line = f"fp8 d={d}: " + "  ".join(b + " " + " ".join("-" if x is None else f"{x:.1f}" for x in v) for b, v in rates.items())
    for new, base in (("q", "e"), ("b", "q"), ("l", "b"), ("l", "e")):
        if None not in rates[new] + rates[base]:
            line += f"  {new}/{base} {sum(rates[new]) / sum(rates[base]):.3f}"
    print(line)
PY
} > "$OUT/compare.txt" 2>&1
cat "$OUT/compare.txt"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call2.tgz logs $(ls *.json 2>/dev/null) compare.txt && rm -rf logs *.json && ls
echo "elapsed $((SECONDS-t0))s"
