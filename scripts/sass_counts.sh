#!/bin/bash
# Run where cuobjdump is (the GPU machine); e.g. scripts/sass_counts.sh build/device-bin/flashlab bwd_kernel
# sass_counts.sh BINARY REGEX: per kernel matching REGEX: instructions, warpgroup MMAs (HGMMA,
# or QGMMA for FP8), HMMA, local loads/stores.
cuobjdump -sass "$1" | awk -v re="$2" '
  /Function :/ { if (f != "") print n, g, h, l, f; f = ""; if ($3 ~ re) { f = $3; n = 0; g = 0; h = 0; l = 0 } next }
  f != "" && /\/\*[0-9a-f]+\*\// { n++; if (/[HQ]GMMA/) g++; if (/ HMMA/) h++; if (/LDL|STL/) l++ }
  END { if (f != "") print n, g, h, l, f }' | sort -k5 | cu++filt
