# Sourced by the device scripts that read hardware counters: puts the CUDA toolkit's bin on PATH
# and libcupti (and the libnvperf_* it loads) on LD_LIBRARY_PATH.
export PATH="$PATH:/usr/local/cuda/bin"
for dir in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64 \
  /usr/local/cuda/targets/x86_64-linux/lib; do
  if [ -e "$dir/libcupti.so.13" ] || [ -e "$dir/libcupti.so" ]; then
    export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    break
  fi
done
