#!/usr/bin/env bash
# Call 4 (outputs: call4/): 80-row steps under the causal mask, a probe. The wide kernel takes a
# band as the 64-row one does (its schedule and masks are written in terms of Br), but cuda.cu
# gives it only the problems without one; w was built with probe_causal.patch on top of
# wide.patch, which gives hopper (not hopper-deterministic) the causal problems too when
# FLASHLAB_PROBE_WIDE_CAUSAL is set. bench's own check (B = 1, H = 2, N = 1024 against fp64) is
# the probe's only test of correctness. Causal d = 128 backward shapes of the sweep, alternating h
# (main: e.tgz), w (the same kernels as h under the causal mask: the spread) and wc (w with the
# variable set), two rounds, each pass after a 1 s pause. Prediction: the long causal sequences,
# where most steps are whole tiles below the diagonal, gain what the non-causal ones gain in call
# 2; N = 1024 and 2048 lose (the diagonal of a 128-key block crosses two or three 80-row blocks
# where it crossed two 64-row ones). Needs build/carry/e.tgz and w.tgz.
set -uo pipefail
mkdir -p "$OUT/logs" bins/h bins/w
tar xzf build/carry/e.tgz -C bins/h; tar xzf build/carry/w.tgz -C bins/w
L="$OUT/logs"; t0=$SECONDS
bench() {  # letter, binary, then the environment's extra words
  local name=$1 bin=$2; shift 2
  env "$@" timeout 80 bins/$bin/flashlab bench --backend cuda --versions hopper --passes bwd -N 1024,2048,4096,8192,16384 -d 128 --dtype fp16,bf16 --causal yes --hidden 2048 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/bwd_$name.json" > "$L/bwd_$name.log" 2>&1
  echo "$name rc=$? $((SECONDS-t0))s"
}
for r in 1 2; do
  bench h$r h
  bench w$r w
  bench c$r w FLASHLAB_PROBE_WIDE_CAUSAL=1
done
python3 scripts/compare_rounds.py "$OUT" --prefix bwd_ --base h --new w --version hopper | tee "$OUT/compare_hw.txt"
python3 scripts/compare_rounds.py "$OUT" --prefix bwd_ --base h --new c --version hopper | tee "$OUT/compare_hc.txt"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call4.tgz logs $(ls *.json 2>/dev/null) compare_*.txt && rm -rf logs *.json && ls
