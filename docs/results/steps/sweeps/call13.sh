#!/usr/bin/env bash
# What grouping costs the Hopper backward, apart from the backward's own speed: e006e3a (e) timing
# hopper's backward (bf16, d = 128, 32 query heads, B·N = 16k tokens, N = 4096 and 16384, causal
# and not) with 8 K/V heads (g) and with 32 (m, multi-head: the same FLOPs), alternating g, m, two
# rounds, each pass after a 1 s pause; then PyTorch beside it at the multi-head shapes (both
# passes), to set against cuDNN's grouped backward of calls 11 and 12. Prediction: grouped and
# multi-head within 2 % of each other (a block walks its group's 4 heads one after another, the
# same steps as 4 blocks of one head each), so that the grouped goal rests on the backward's speed.
# Needs build/carry/e.tgz.
set -uo pipefail
mkdir -p bins/e "$OUT/logs"
tar xzf build/carry/e.tgz -C bins/e
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  for b in g m; do
    kv=8; [ $b = m ] && kv=32
    timeout 90 bins/e/flashlab bench --backend cuda --versions hopper --passes bwd -d 128 --dtype bf16 --hidden 4096 --heads-kv $kv -N 4096,16384 --causal both --repeats 10 --warmup 3 --pause 1000 --json "$OUT/bwd_$b$r.json" > "$L/bwd_$b$r.log" 2>&1
    echo "$b$r rc=$? $((SECONDS-t0))s"
  done
done
python3 scripts/compare_rounds.py "$OUT" --prefix bwd_ --base m --new g --version hopper | tee "$OUT/compare.txt"
timeout 150 python3 scripts/compare_torch.py --flashlab bins/e/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --pause 1000 --out "$OUT/compare_torch_mha_hopper.json" > "$L/compare_mha.log" 2>&1
echo "compare mha rc=$? $((SECONDS-t0))s"; tail -12 "$L/compare_mha.log"
gzip -f "$L"/*.log
cd "$OUT" && tar czf call13.tgz logs *.json compare.txt && rm -rf logs && ls
