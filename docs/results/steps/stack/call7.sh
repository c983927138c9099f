#!/usr/bin/env bash
# Call 7 (outputs: call7/), the next one to run: main after the four steps were taken (m:
# build/carry/m.txz, flashlab and flashlab_gpu_tests, version 3b273ce17dd8), and m with
# lag128_causal_only.patch (lc: build/carry/lc.txz, both binaries, version 6a11413d207c-dirty: at
# d = 128 the reference max lags only under the causal mask; its 12 non-causal d = 128 forward
# kernels are desc alone, every other kernel is m's), beside e (main before the steps;
# build/carry/e.txz); and m with pack_before_rescale.patch (pb: build/carry/pb.txz, flashlab only,
# version dd9485bcec46-dirty: P packed before O's rescale, so that with the lagging reference the
# packing stays among the exponentials instead of behind the rescale's branch; 50 forward kernels
# change).
#   1. m's d = 64 forward: its 12 kernels (fp16 and bf16; dense, with a left side, packed, packed
#      with a left side; causal and not) are the only ones of main whose SASS no GPU has run
#      (README): a smoke run, memcheck on three of them, the GPU tests at d = 64 of the suites that
#      run the Hopper forward.
#   2. The `hopper` forward at d = 64 and 128, bf16, N = 4096 and 16384, causal and not, hidden
#      2048: e, m, lc, pb in turn, two rounds. At d = 128 without the mask lc / e is desc alone and
#      m / lc the lag (l / e was 0.981 there); m / e at d = 64 is desc alone; pb / m the packing's
#      place (bench checks each configuration against the fp64 reference; pb's GPU test suites come
#      later, if it is kept).
#   3. m's runner and counter tests; lc's GPU tests at d = 128 (4 of its 12 new kernels: fp16 and
#      bf16, dense and packed; the other 8 are bf16 ablation variants, which `lab hopper` runs and
#      holds to the rung's answer).
# Prediction: desc alone at d = 128 0 to +2 %. If m / lc < 1 without the mask, the lag is the cost
# there; if pb / m makes that up, the packing's place was why (pack_before_rescale.patch, once its
# tests pass), else lag128_causal_only.patch goes in (its kernels are m's and lc's, run here).
# pb / m elsewhere: 0 to +1 %.
set -uo pipefail
BUDGET=${BUDGET:-540}
source docs/results/steps/stack/lib.sh || { echo "run this from the repository root" >&2; exit 1; }
# m is needed; e, lc and pb are timed where their archives came (a fresh build of e, main before
# the steps, is the one to leave out when the build time is short: lc / m and pb / m answer the
# question, lc / e and m / e are desc alone as a check).
have=""
for b in e m lc pb; do unpack $b $b && have="$have $b"; done
case " $have " in *" m "*) ;; *) echo "m is needed: stopping"; exit 1;; esac
export PATH="$PATH:/usr/local/cuda/bin"
archive() { gzip -f "$L"/*.log; cd "$OUT" && tar czf call7.tgz logs $(ls *.json 2>/dev/null) $(ls compare*.txt 2>/dev/null) && rm -rf logs *.json && ls; }
for b in $have; do echo "$b: $(bins/$b/flashlab --version)"; done
run_for 30 bins/m/flashlab run --backend cuda --versions hopper -d 64 -B 2 -H 3 --Nq 17 --Nk 17 --causal --dtype fp16 --repeats 1 --warmup 0 > "$L/smoke_d64.log" 2>&1
rc=$?; echo "smoke d=64 rc=$rc: $(grep -E 'within their|FAIL' "$L/smoke_d64.log" | head -2 | tr '\n' ' ')"
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "the smoke run hung: stopping"; archive; exit 1; fi
memcheck() {  # name, shape...
  local name=$1; shift
  run_for 40 compute-sanitizer --tool memcheck --error-exitcode 3 bins/m/flashlab run --backend cuda --versions hopper -d 64 "$@" --repeats 1 --warmup 0 --bitwise-repeats 0 > "$L/memcheck_$name.log" 2>&1
  echo "memcheck d=64 $name rc=$?: $(grep -E 'ERROR SUMMARY|within their' "$L/memcheck_$name.log" | tr '\n' ' ')"
}
memcheck causal --Nq 177 --Nk 300 -H 6 --heads-kv 2 --dtype bf16 --causal
memcheck dense --Nq 300 --Nk 177 -H 6 --heads-kv 3 --dtype fp16
memcheck packed_window --seqlens 1,17,128,300 -H 4 --heads-kv 2 --dtype fp16 --causal --window 64,0
run_tests d64 100 'Matrix/CudaVersions.*_d64_*:Axes/CudaVersionsAxes.*_d64_*:Packed/CudaPacked.*_d64_*'
common="--backend cuda --dtype bf16 --hidden 2048 --repeats 10 --warmup 3 --pause 500 --versions hopper --passes fwd -N 4096,16384 --causal no,yes"
for r in 1 2; do
  for b in $have; do
    run_for 40 bins/$b/flashlab bench $common -d 64,128 --json "$OUT/fwd_$b$r.json" > "$L/fwd_$b$r.log" 2>&1
    echo "fwd $b$r rc=$? $((SECONDS-t0))s"
  done
done
for pair in e:m e:lc lc:m m:pb; do
  base=${pair%:*} new=${pair#*:}
  case " $have " in *" $base "*) ;; *) continue;; esac
  case " $have " in *" $new "*) ;; *) continue;; esac
  python3 scripts/compare_rounds.py "$OUT" --prefix fwd_ --base $base --new $new --version hopper
done > "$OUT/compare.txt" 2>&1
cat "$OUT/compare.txt"
run_tests runner 20 'CudaRunner.*:Counters.*'
if [ -x bins/lc/flashlab_gpu_tests ]; then
  run_tests lc_d128 145 'Matrix/CudaVersions.*_d128_*:Axes/CudaVersionsAxes.*_d128_*:Packed/CudaPacked.*_d128_*' lc
  run_for 60 bins/lc/flashlab lab hopper --backend cuda > "$L/lab_hopper_lc.log" 2>&1
  echo "lab hopper lc rc=$? $((SECONDS-t0))s: $(grep -ciE 'FAIL' "$L/lab_hopper_lc.log") FAIL lines"
fi
archive
echo "elapsed $((SECONDS-t0))s"
