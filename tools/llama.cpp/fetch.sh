#!/usr/bin/env bash
# Download the pinned llama.cpp (vendored in the PyPI sdist of llama-cpp-python), unpack it into
# the cache and apply ggml-markers.patch; print the patched source directory.
#
#   tools/llama.cpp/fetch.sh            # cache: $ROCROOF_CACHE or ~/.cache/rocroof
set -euo pipefail
SDIST_VERSION=0.3.36                                   # llama-cpp-python on PyPI
LLAMA_COMMIT=0c1e57098bba43ac29e6e3b677cdceebdd22334f  # the llama.cpp it vendors (2026-10-01)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${ROCROOF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rocroof}"
dest="$cache/llama.cpp-$LLAMA_COMMIT"
# the stamp names the patch's hash: a changed patch re-creates the patched copy
stamp="llama-cpp-python==$SDIST_VERSION llama.cpp@$LLAMA_COMMIT + ggml-markers.patch $(sha256sum "$HERE/ggml-markers.patch" | cut -c1-16)"
if [ "$(cat "$dest/.rocroof-patched" 2>/dev/null)" != "$stamp" ]; then
  mkdir -p "$cache"
  sdist="$cache/llama_cpp_python-$SDIST_VERSION.tar.gz"
  if [ ! -f "$sdist" ]; then
    python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$SDIST_VERSION" -d "$cache" >&2
  fi
  rm -rf "$dest" "$cache/unpack" && mkdir -p "$cache/unpack"
  tar -xzf "$sdist" -C "$cache/unpack" "llama_cpp_python-$SDIST_VERSION/vendor/llama.cpp"
  mv "$cache/unpack/llama_cpp_python-$SDIST_VERSION/vendor/llama.cpp" "$dest"
  rm -rf "$cache/unpack" "$dest/.git"
  (cd "$dest" && patch -p1 --quiet --forward < "$HERE/ggml-markers.patch") >&2
  echo "$stamp" > "$dest/.rocroof-patched"
fi
echo "$dest"
