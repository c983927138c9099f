#!/usr/bin/env bash
# Call 2 (outputs: call2/), once call 1 has passed: speed. The sweep's 20 forward shapes at d = 64
# (hopper; N = 1024 ... 16384, fp16 and bf16, causal and not; B*N = 16k tokens, hidden 2048),
# alternating h (main: build/carry/e.tgz, e006e3a's binary, the same SASS as main), p4 (main with
# poly.patch: one exponential in four by the polynomial) and p8 (the same with kPolyExp2Every = 8:
# one in eight), two rounds, each pass after a 0.5 s pause. Prediction (docs/perf.md): 0 to +5 %
# at d = 64 for both, most at the long non-causal sequences; up to -2 % if the extra instructions
# crowd the issue slots, which the SASS count (perf.md, the correction under the section) makes the
# likelier outcome for p4, less so for p8. Needs build/carry/e.tgz, p4f.tgz and p8f.tgz (stripped
# flashlab each).
set -uo pipefail
mkdir -p "$OUT/logs" bins/h bins/p4 bins/p8
tar xzf build/carry/e.tgz -C bins/h; tar xzf build/carry/p4f.tgz -C bins/p4; tar xzf build/carry/p8f.tgz -C bins/p8
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in h p4 p8; do
    timeout 90 bins/$b/flashlab bench --backend cuda --versions hopper --passes fwd -N 1024,2048,4096,8192,16384 -d 64 --dtype fp16,bf16 --causal yes,no --hidden 2048 --repeats 10 --warmup 3 --pause 500 --json "$OUT/fwd_$b$r.json" > "$L/fwd_$b$r.log" 2>&1
    echo "$b$r rc=$? $((SECONDS-t0))s"
  done
done
for n in p4 p8; do
  python3 scripts/compare_rounds.py "$OUT" --prefix fwd_ --base h --new $n --version hopper | tee "$OUT/compare_$n.txt"
done
gzip -f "$L"/*.log
cd "$OUT" && tar czf call2.tgz logs $(ls *.json 2>/dev/null) compare_*.txt && rm -rf logs *.json && ls
