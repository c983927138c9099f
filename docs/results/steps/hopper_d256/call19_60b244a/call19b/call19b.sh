#!/usr/bin/env bash
# call 19b (binary 60b244a, on the machine call 19 left warm): call 19's test run stopped at its
# 150 s limit and its log did not come back (a call returns eight files), so the d = 256 backward
# kernels' matrix and the 50 bitwise runs again, alone.
mkdir -p build/device-bin && tar xzf build/carry/bin.tgz -C build/device-bin
timeout 110 build/device-bin/flashlab_gpu_tests --gtest_filter='HeadDim256/BwdKernelsD256.*:Shapes/BwdDeterminism.*' > $OUT/gpu_tests.log 2>&1
echo "rc=$?"; grep -E "^\[  (PASSED|FAILED)  \]|tests ran|^\[  FAILED" $OUT/gpu_tests.log | head -20
