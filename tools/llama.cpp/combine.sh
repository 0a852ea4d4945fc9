#!/usr/bin/env bash
# Rebuild ggml-markers.patch (the single patch that fetch.sh and build.sh apply) from its two parts:
# ggml-markers-core.patch, then ggml-markers-sidecar.patch on top, as one `git diff` against the
# pinned llama.cpp. Run it after editing either part; tests/test_llama_patch.py checks that the
# three agree.
#
#   tools/llama.cpp/combine.sh           # rewrite ggml-markers.patch
#   tools/llama.cpp/combine.sh --check   # exit 1 if ggml-markers.patch is not core + sidecar
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
check=""
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "combine.sh: unknown option $1" >&2; exit 2 ;;
esac
sdist="$("$HERE/fetch.sh" --sdist)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# the files the core touches (the sidecar only changes files the core adds or touches)
mapfile -t files < <(sed -n 's|^--- a/||p' "$HERE/ggml-markers-core.patch")
tar -xzf "$sdist" -C "$work" --strip-components=3 --wildcards "${files[@]/#/*/vendor/llama.cpp/}"
git() { command git -C "$work" -c user.name=rocroof -c user.email=rocroof@localhost -c core.abbrev=7 "$@"; }
git init -q && git add -A && git commit -q -m pinned
git apply "$HERE/ggml-markers-core.patch"
git apply "$HERE/ggml-markers-sidecar.patch"
git add -A
git diff --cached --no-color --no-ext-diff --no-renames --diff-algorithm=myers -U3 \
  --src-prefix=a/ --dst-prefix=b/ HEAD > "$work/combined.patch"
if [ -z "$check" ]; then
  cp "$work/combined.patch" "$HERE/ggml-markers.patch"
elif ! cmp -s "$work/combined.patch" "$HERE/ggml-markers.patch"; then
  echo "combine.sh: ggml-markers.patch is not core + sidecar; run tools/llama.cpp/combine.sh" >&2
  exit 1
fi
