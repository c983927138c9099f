#!/usr/bin/env bash
# Regenerates the README's generated sections from real runs of the built binary:
#   - the version table (from the registry, via `flashlab list --format markdown --table versions`;
#     a test checks it is up to date)
#   - the tour of commands (real output; times differ from run to run)
#   - the lab list (a test checks it), and README.zh.md's version table and lab list (so do they)
# usage: scripts/gen_readme.sh [path/to/flashlab]   (default: build/cpu/flashlab)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build/cpu/flashlab}"
if [ ! -x "$bin" ]; then
  echo "gen_readme.sh: no flashlab binary at $bin (build it: cmake --preset cpu && cmake --build --preset cpu)" >&2
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

"$bin" list --format markdown --table versions >"$tmp/versions.md"
"$bin" lab list --format markdown --table labs >"$tmp/labs.md"
"$bin" lab list --lang zh --format markdown --table labs >"$tmp/labs_zh.md"

tour() {
  {
    echo '```text'
    echo "\$ flashlab $*"
    "$bin" "$@" 2>&1 || true
    echo '```'
    echo
  } >>"$tmp/tour.md"
}
: >"$tmp/tour.md"
tour list --table backends
tour run -B 1 -H 2 -N 512 -d 64
tour run --versions tiled,deterministic-dq --Nq 100 --Nk 333 -d 16 --dtype bf16 --causal --table errors
tour run --dtype fp8 -N 1024 -d 128 --inputs outliers --table errors
tour gradcheck
tour lab memory --table kept
tour bench --backend cpu --causal no
tour run -N 0

/usr/bin/python3 - "$tmp" <<'PY'
import pathlib
import sys

tmp = pathlib.Path(sys.argv[1])
readme = pathlib.Path("README.md")
text = readme.read_text(encoding="utf-8")


def replace(text, begin, end, body):
    b = text.index(begin) + len(begin)
    e = text.index(end, b)
    return text[:b] + "\n" + body + "\n" + text[e:]


text = replace(text, "<!-- BEGIN flashlab list --format markdown --table versions -->\n",
               "<!-- END flashlab list -->", (tmp / "versions.md").read_text(encoding="utf-8"))
text = replace(text, "<!-- BEGIN flashlab lab list --format markdown --table labs -->\n",
               "<!-- END flashlab lab list -->", (tmp / "labs.md").read_text(encoding="utf-8"))
text = replace(text, "<!-- BEGIN tour -->\n", "<!-- END tour -->",
               (tmp / "tour.md").read_text(encoding="utf-8").rstrip("\n") + "\n")
readme.write_text(text, encoding="utf-8")

zh = pathlib.Path("README.zh.md")
text = zh.read_text(encoding="utf-8")
text = replace(text, "<!-- BEGIN flashlab list --format markdown --table versions -->\n",
               "<!-- END flashlab list -->", (tmp / "versions.md").read_text(encoding="utf-8"))
text = replace(text, "<!-- BEGIN flashlab lab list --lang zh --format markdown --table labs -->\n",
               "<!-- END flashlab lab list -->", (tmp / "labs_zh.md").read_text(encoding="utf-8"))
zh.write_text(text, encoding="utf-8")
PY
echo "gen_readme.sh: README.md and README.zh.md updated"
