#!/usr/bin/env bash
# Make a small, patched llama.cpp source tarball for machines without network access.
#
#   tools/llama.cpp/trim.sh OUT.tar.gz
#
# Keeps what the CUDA and HIP builds of llama-bench / llama-completion / llama-mtmd-cli need
# (CMake files, ggml core + CPU + CUDA + HIP backends, src, include, common, vendor, tools) and
# drops documentation, bundled vocabularies, tests, the web UI and the other GPU backends.
# Build the result with: build.sh --src <unpacked dir> (it is patched already).
set -euo pipefail
out="${1:?usage: trim.sh OUT.tar.gz}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$("$HERE/fetch.sh")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/llama.cpp"
(cd "$src" && tar -cf - \
  --exclude=./docs --exclude=./models --exclude=./tests --exclude=./benches --exclude=./examples \
  --exclude=./pocs --exclude=./gguf-py --exclude=./conversion --exclude=./media --exclude=./.github \
  --exclude=./scripts --exclude=./tools/ui --exclude=./tools/server --exclude=./app \
  --exclude='./ggml/src/ggml-vulkan' --exclude='./ggml/src/ggml-metal' --exclude='./ggml/src/ggml-sycl' \
  --exclude='./ggml/src/ggml-opencl' --exclude='./ggml/src/ggml-webgpu' --exclude='./ggml/src/ggml-cann' \
  --exclude='./ggml/src/ggml-hexagon' --exclude='./ggml/src/ggml-openvino' --exclude='./ggml/src/ggml-et' \
  --exclude='./ggml/src/ggml-virtgpu' --exclude='./ggml/src/ggml-zdnn' --exclude='./ggml/src/ggml-zendnn' \
  .) | (cd "$work/llama.cpp" && tar -xf -)
# CMake still adds these directories; empty stand-ins keep configure happy when the options are off
mkdir -p "$work/llama.cpp/tests" "$work/llama.cpp/examples" "$work/llama.cpp/pocs"
tar -czf "$out" -C "$work" llama.cpp
du -h "$out"
