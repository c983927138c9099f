#!/usr/bin/env bash
# Builds the binaries that calls 7, 8 and 9 carry, on a machine with nvcc (no GPU needed), as
# build/carry/LETTER.txz (flashlab and flashlab_gpu_tests, stripped, in an xz tar):
#   m   the checkout's own sources (main);
#   lc  m with lag128_causal_only.patch;
#   pb  m with pack_before_rescale.patch;
#   e   e006e3a (main before the four steps), optional: only call 7's check of desc alone needs it.
# Usage, from the repository root: bash docs/results/steps/stack/build_carry.sh [LETTER...]
# (default: m lc pb). lc, pb and e are built in their own git worktrees under build/wt/, so the
# checkout is left as it is; with ccache and CCACHE_BASEDIR=/ they share its objects wherever the
# sources are the same. `scripts/sass_md5.py --compare` against this folder's sass_md5_*.txt tells
# whether a build's kernels are the ones analysed here.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
here=docs/results/steps/stack
export PATH="/usr/local/cuda/bin:$PATH" CCACHE_BASEDIR=/
gencode=-gencode=arch=compute_90a,code=sm_90a
mkdir -p build/carry build/wt
for x in ${*:-m lc pb}; do
  case $x in
    m) src=. ;;
    lc | pb | e)
      src=build/wt/$x
      rm -rf "$src"
      git worktree prune
      if [ "$x" = e ]; then git worktree add -q --detach "$src" e006e3a; else git worktree add -q --detach "$src" HEAD; fi
      case $x in
        lc) git -C "$src" apply "$PWD/$here/lag128_causal_only.patch" ;;
        pb) git -C "$src" apply "$PWD/$here/pack_before_rescale.patch" ;;
      esac
      ;;
    *) echo "build_carry.sh: no binary is named $x (m, lc, pb or e)" >&2; exit 2 ;;
  esac
  b=$src/build/cuda-carry
  t=$SECONDS
  cmake -S "$src" -B "$b" -G Ninja -DFLASHLAB_CUDA=ON -DFLASHLAB_CUDA_GENCODE="$gencode" >/dev/null
  cmake --build "$b" -j"${JOBS:-2}" --target flashlab flashlab_gpu_tests >"build/carry/$x.build.log" 2>&1 ||
    { echo "build_carry.sh: $x did not build (build/carry/$x.build.log)" >&2; exit 1; }
  rm -rf "build/carry/$x"
  mkdir -p "build/carry/$x"
  cp "$b/flashlab" "$b/tests/flashlab_gpu_tests" "build/carry/$x/"
  strip "build/carry/$x/flashlab" "build/carry/$x/flashlab_gpu_tests"
  (cd "build/carry/$x" && tar cf - flashlab flashlab_gpu_tests) | xz -T2 -9e >"build/carry/$x.txz"
  echo "$x: $("build/carry/$x/flashlab" --version) built in $((SECONDS - t))s, $(du -h "build/carry/$x.txz" | cut -f1)"
done
