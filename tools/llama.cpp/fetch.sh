#!/usr/bin/env bash
# Download the pinned llama.cpp (vendored in the PyPI sdist of llama-cpp-python), unpack it into
# the cache and apply the marker hook; print the patched source directory.
#
#   tools/llama.cpp/fetch.sh                # core + sidecar (ggml-markers.patch)
#   tools/llama.cpp/fetch.sh --no-sidecar   # the core only (ggml-markers-core.patch), in its own copy
#   tools/llama.cpp/fetch.sh --sdist        # only download the sdist; print its path
#
# cache: $ROCROOF_CACHE or ~/.cache/rocroof
set -euo pipefail
SDIST_VERSION=0.3.36                                   # llama-cpp-python on PyPI
LLAMA_COMMIT=0c1e57098bba43ac29e6e3b677cdceebdd22334f  # the llama.cpp it vendors (2026-10-01)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${ROCROOF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rocroof}"
patch_name=ggml-markers.patch suffix="" sdist_only=""
case "${1:-}" in
  "") ;;
  --no-sidecar) patch_name=ggml-markers-core.patch suffix=-core ;;
  --sdist) sdist_only=1 ;;
  -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "fetch.sh: unknown option $1" >&2; exit 2 ;;
esac
sdist="$cache/llama_cpp_python-$SDIST_VERSION.tar.gz"
if [ ! -f "$sdist" ]; then
  mkdir -p "$cache"
  python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$SDIST_VERSION" -d "$cache" >&2
fi
if [ -n "$sdist_only" ]; then echo "$sdist"; exit 0; fi
dest="$cache/llama.cpp-$LLAMA_COMMIT$suffix"
# the stamp names the patch's hash: a changed patch re-creates the patched copy
stamp="llama-cpp-python==$SDIST_VERSION llama.cpp@$LLAMA_COMMIT + $patch_name $(sha256sum "$HERE/$patch_name" | cut -c1-16)"
if [ "$(cat "$dest/.rocroof-patched" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$dest" "$cache/unpack" && mkdir -p "$cache/unpack"
  tar -xzf "$sdist" -C "$cache/unpack" "llama_cpp_python-$SDIST_VERSION/vendor/llama.cpp"
  mv "$cache/unpack/llama_cpp_python-$SDIST_VERSION/vendor/llama.cpp" "$dest"
  rm -rf "$cache/unpack" "$dest/.git"
  (cd "$dest" && patch -p1 --quiet --forward < "$HERE/$patch_name") >&2
  echo "$stamp" > "$dest/.rocroof-patched"
fi
echo "$dest"
