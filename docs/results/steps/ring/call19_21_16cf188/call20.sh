#!/usr/bin/env bash
# call 20 (binary 16cf188): what compute-sanitizer's memcheck reports on the ring at R = 1.
set -uo pipefail
mkdir -p build/device-bin "$OUT/logs"
tar xzf build/carry/bin.tgz -C build/device-bin
B=build/device-bin
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FLASHLAB_NCCL_LIB=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))')
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 --print-limit 20 $B/flashlab run --backend cuda --versions ring --ranks 1 --dtype bf16 -d 64 -B 1 -H 4 --heads-kv 2 -N 77 --causal yes --repeats 1 --warmup 0 --bitwise-repeats 0 > "$OUT/logs/memcheck_ring.log" 2>&1
echo "rc=$?"
grep -E "^========= (Invalid|Program hit|Error|  |Saved host backtrace|ERROR)|=========     at " "$OUT/logs/memcheck_ring.log" | head -n 80
sed -i "s|$PWD/|./|g; s|[^ ]*/site-packages/|<site-packages>/|g" "$OUT/logs/memcheck_ring.log"
