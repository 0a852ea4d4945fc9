#!/usr/bin/env bash
# Make a small, patched llama.cpp source tarball for machines without network access.
#
#   tools/llama.cpp/trim.sh OUT.tar.gz                # patched with core + sidecar (ggml-markers.patch)
#   tools/llama.cpp/trim.sh OUT.tar.gz --no-sidecar   # patched with the core only
#
# Keeps what the CUDA and HIP builds of llama-bench / llama-completion / llama-mtmd-cli / llama-cli
# need (CMake files, ggml core + CPU + CUDA + HIP backends, src, include, common, vendor, tools, the
# server code llama-cli is built on, scripts/ui-assets.cmake) and drops documentation, bundled
# vocabularies, tests, the web UI's sources and the other GPU backends.
# Build the result with: build.sh --src <unpacked dir> (it is patched already).
set -euo pipefail
out="${1:?usage: trim.sh OUT.tar.gz [--no-sidecar]}"
shift
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$("$HERE/fetch.sh" "$@")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/llama.cpp"
(cd "$src" && tar -cf - \
  --exclude=./docs --exclude=./models --exclude=./tests --exclude=./benches --exclude=./examples \
  --exclude=./pocs --exclude=./gguf-py --exclude=./conversion --exclude=./media --exclude=./.github \
  --exclude=./tools/ui/src --exclude=./tools/ui/tests --exclude=./tools/ui/static --exclude=./app \
  --exclude=./tools/server/tests --exclude=./tools/server/public_legacy --exclude=./tools/server/themes \
  --exclude='./ggml/src/ggml-vulkan' --exclude='./ggml/src/ggml-metal' --exclude='./ggml/src/ggml-sycl' \
  --exclude='./ggml/src/ggml-opencl' --exclude='./ggml/src/ggml-webgpu' --exclude='./ggml/src/ggml-cann' \
  --exclude='./ggml/src/ggml-hexagon' --exclude='./ggml/src/ggml-openvino' --exclude='./ggml/src/ggml-et' \
  --exclude='./ggml/src/ggml-virtgpu' --exclude='./ggml/src/ggml-zdnn' --exclude='./ggml/src/ggml-zendnn' \
  .) | (cd "$work/llama.cpp" && tar -xf -)
# CMake still adds these directories; empty stand-ins keep configure happy when the options are off
mkdir -p "$work/llama.cpp/tests" "$work/llama.cpp/examples" "$work/llama.cpp/pocs"
tar -czf "$out" -C "$work" llama.cpp
du -h "$out"
