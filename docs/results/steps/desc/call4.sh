#!/usr/bin/env bash
# Call 4 (outputs: call4/), once calls 1 and 2 have passed: the backward's speed. e (main's SASS),
# w (wf.tgz: main with wide.patch and the inert probe_causal.patch) and s (sf.tgz: all five
# patches) in turn, two rounds: `hopper` and `hopper-deterministic` backward, bf16, N = 4096 and
# 16384, d = 64, 128 and 256, causal and not, hidden 2048, each pass after a 1 s pause. Without the
# causal mask at d = 128, w / e is wide's step and s / w desc's; everywhere else s / e is desc's
# (w's kernels are e's there). Predictions (docs/perf.md): wide +4 to +11 % at d = 128 non-causal;
# desc 0 to +3 %. Then the grouped heads beside cuDNN on s.
set -uo pipefail
mkdir -p "$OUT/logs" bins/e bins/w bins/s
tar xzf build/carry/e.tgz -C bins/e; tar xzf build/carry/wf.tgz -C bins/w; tar xzf build/carry/sf.tgz -C bins/s
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
  for b in e w s; do
    run_for 150 bins/$b/flashlab bench --backend cuda --versions hopper,hopper-deterministic --passes bwd -N 4096,16384 -d 64,128,256 --dtype bf16 --causal no,yes --hidden 2048 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/bwd_$b$r.json" > "$L/bwd_$b$r.log" 2>&1
    echo "bwd $b$r rc=$? $((SECONDS-t0))s"
  done
done
# The grouped heads beside PyTorch's cuDNN on s (issue 22's last line: the grouped backward at
# 1.0x cuDNN or above), as bwd80/call2.sh runs it on w.
run_for 150 python3 scripts/compare_torch.py --flashlab bins/s/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --pause 1000 --out "$OUT/compare_torch_gqa_hopper.json" > "$L/compare_gqa.log" 2>&1
echo "compare gqa rc=$? $((SECONDS-t0))s"; tail -12 "$L/compare_gqa.log"
for v in hopper hopper-deterministic; do
  python3 scripts/compare_rounds.py "$OUT" --prefix bwd_ --base e --new s --version $v | tee "$OUT/compare_bwd_s_e_$v.txt"
  python3 scripts/compare_rounds.py "$OUT" --prefix bwd_ --base e --new w --version $v | tee "$OUT/compare_bwd_w_e_$v.txt"
  python3 scripts/compare_rounds.py "$OUT" --prefix bwd_ --base w --new s --version $v | tee "$OUT/compare_bwd_s_w_$v.txt"
done
gzip -f "$L"/*.log
cd "$OUT" && tar czf call4.tgz logs $(ls *.json 2>/dev/null) compare_*.txt && rm -rf logs *.json && ls
echo "elapsed $((SECONDS-t0))s"
