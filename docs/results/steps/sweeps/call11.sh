#!/usr/bin/env bash
# Main with no_left_schedule.patch landed (f) against ec149c0 (o), the binary of the 40-shape
# sweeps before grouped heads, packed batches and windows: the 20 causal shapes of the sweeps (the
# kernels the axes changed; the non-causal ones are 62aeebd's, SASS identical), forward and
# backward, alternating o, f, two rounds, no pause (ec149c0's bench has none; both binaries time
# both passes so that each sees the same load). Then, on f: compute-sanitizer as call5.sh, the
# packed batch of 24 sequences as call3.sh, and the grouped heads beside PyTorch as call3.sh.
# Needs build/carry/o1.tgz (ec149c0's stripped flashlab) and f.tgz (scripts/device_build.sh's
# binaries of f, stripped).
set -uo pipefail
mkdir -p "$OUT/logs" bins/o bins/f build/device-bin
tar xzf build/carry/o1.tgz -C bins/o; tar xzf build/carry/f.tgz -C bins/f
cp bins/f/flashlab bins/f/flashlab_gpu_tests build/device-bin/
L="$OUT/logs"; t0=$SECONDS
for r in 1 2; do
  timeout 110 bins/o/flashlab bench --backend cuda --versions hopper --N 1024 2048 4096 8192 16384 -d 64 128 --dtype fp16 bf16 --causal yes --repeats 10 --warmup 3 --json "$OUT/causal_o$r.json" > "$L/causal_o$r.log" 2>&1
  echo "o$r rc=$? $((SECONDS-t0))s"
  timeout 110 bins/f/flashlab bench --backend cuda --versions hopper -N 1024,2048,4096,8192,16384 -d 64,128 --dtype fp16,bf16 --causal yes --passes fwd,bwd --repeats 10 --warmup 3 --json "$OUT/causal_f$r.json" > "$L/causal_f$r.log" 2>&1
  echo "f$r rc=$? $((SECONDS-t0))s"
done
python3 scripts/compare_rounds.py "$OUT" --prefix causal_ --base o --new f --version hopper | tee "$OUT/compare.txt"
CASES='Matrix/CudaVersions.*/bf16_d*_Nq17_Nk1000'
AXES='Axes/CudaVersionsAxes.*/bf16_d*_B2H8Hkv2_Nq17_Nk17:Axes/CudaVersionsAxes.*/fp16_d*_Nq17_Nk1000_w256_256'
PACKED='Packed/CudaPacked.*/bf16_d*_causal_H4Hkv2_q5_130_0:Packed/CudaPacked.*/fp16_d*_full_H3Hkv1_q300'
WINDOW='Packed/CudaPacked.*/bf16_d*_causal_H4Hkv1_q1000_17_1_128_k1000_128_17_1_w64_0'
SAN_FILTER="$CASES:Matrix/CudaVersions.*/fp16_d*_causal_B1H2_Nq1000_Nk17:$AXES:$PACKED:$WINDOW" \
RACE_FILTER="$CASES:$AXES:$PACKED" SAN_TIMEOUT=170 STAGES="memcheck synccheck racecheck" \
  OUT="$OUT/san" bash scripts/device_check.sh
echo "sanitizers $((SECONDS-t0))s"; cat "$OUT/san/summary.txt"
timeout 60 bins/f/flashlab bench --backend cuda --versions hopper,hopper-deterministic -d 128 --dtype bf16 --hidden 2048 --causal yes --varlen 24,128,4096 --repeats 10 --warmup 3 --pause 1000 --json "$OUT/packed_f.json" > "$L/packed_f.log" 2>&1
echo "packed f rc=$? $((SECONDS-t0))s"; grep -E "^hopper" "$L/packed_f.log" | cut -c1-150
timeout 150 python3 scripts/compare_torch.py --flashlab bins/f/flashlab --versions hopper --dtype bf16 -d 128 -N 4096,16384 --hidden 4096 --heads-kv 8 --pause 1000 --out "$OUT/compare_torch_gqa_hopper.json" > "$L/compare_gqa.log" 2>&1
echo "compare gqa rc=$? $((SECONDS-t0))s"; tail -12 "$L/compare_gqa.log"
gzip -f "$L"/*.log; for f in "$OUT"/san/logs/*.log; do gzip -f "$f"; done
cd "$OUT" && tar czf call11.tgz logs san *.json compare.txt && rm -rf logs san *.json && ls
