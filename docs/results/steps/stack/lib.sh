# Sourced by this folder's call scripts (run from the repository root, with OUT set): the pieces
# every call shares. Before sourcing, a script may set BUDGET (the seconds its commands may use in
# all, default 540). After sourcing, L is the log folder and t0 the start: the budget counts from
# here, so the unpacking of the carried binaries is inside it (the call's own limit counts it too).
mkdir -p "$OUT/logs"
L="$OUT/logs"
t0=$SECONDS
: "${BUDGET:=540}"

# unpack ARCHIVE LETTER: build/carry/ARCHIVE.txz (an xz tar, a third of gzip's size) into
# bins/LETTER; Python's tarfile where tar has no xz.
unpack() {
  if [ ! -f "build/carry/$1.txz" ]; then echo "no build/carry/$1.txz: $2 is left out"; return 1; fi
  mkdir -p "bins/$2"
  tar xJf "build/carry/$1.txz" -C "bins/$2" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "build/carry/$1.txz" "bins/$2"
}

# run_for LIMIT COMMAND...: the command under a time limit cut to what is left of BUDGET; with
# under 5 s left it is skipped (exit 125), so that the archive at the end is always made.
run_for() {
  local left=$((BUDGET - SECONDS + t0)) n=$1
  shift
  [ "$left" -lt "$n" ] && n=$left
  if [ "$n" -lt 5 ]; then echo "skipped (no time left): $*"; return 125; fi
  timeout -k 10 "$n" "$@"
}

# run_tests NAME LIMIT FILTER [LETTER]: bins/LETTER/flashlab_gpu_tests (default m) on a gtest
# filter, its log in $L/tests_NAME.log; prints the summary and the first failures.
run_tests() {
  run_for "$2" "bins/${4:-m}/flashlab_gpu_tests" --gtest_color=no --gtest_filter="$3" \
    > "$L/tests_$1.log" 2>&1
  echo "tests $1 rc=$? $((SECONDS - t0))s: $(grep -E '^\[  (PASSED|FAILED)  \]|tests from .* ran' "$L/tests_$1.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$L/tests_$1.log" | head -5
}
