#!/usr/bin/env bash
# Build llama.cpp with rocroof's per-op marker hook (ggml-markers.patch: core + op-metadata sidecar).
#
# The source is the llama.cpp vendored in the PyPI sdist of llama-cpp-python, pinned in fetch.sh
# (downloaded with pip, the only network access, and unpacked into a cache outside the repository).
# On a machine without network, pass --src with a tree made by trim.sh (patched already).
#
#   tools/llama.cpp/build.sh --backend cuda --arch 90                 # NVIDIA sm_90 (H100/H200)
#   tools/llama.cpp/build.sh --backend hip --arch gfx942              # AMD MI300X (not yet built by us)
#   tools/llama.cpp/build.sh --backend cuda --arch 90 --no-markers    # the same build without the hook
#   tools/llama.cpp/build.sh --backend cuda --arch 90 --no-sidecar    # the core hook only (ranges, no GGML_CUDA_OP_META)
#   tools/llama.cpp/build.sh --src /tmp/llama.cpp-trimmed --build /tmp/b --backend cuda --arch 90
#   tools/llama.cpp/build.sh --backend cuda --arch 90 --with-cli      # also llama-cli (offline: no web UI)
#
# llama-cli is built on the server code, whose web UI would be downloaded or built with npm at build
# time; --with-cli turns both off (LLAMA_BUILD_UI=OFF, LLAMA_USE_PREBUILT_UI=OFF: the UI is left out,
# which llama-cli does not use). Prints the build directory's bin/ path on its last line.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

backend=cuda arch="" src="" build="" markers=ON sidecar=1 jobs="$(nproc)" server=OFF
cache="${ROCROOF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rocroof}"
targets="llama-bench llama-completion"
extra=()
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) backend="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    --src) src="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --cache) cache="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --no-markers) markers=OFF; shift ;;
    --no-sidecar) sidecar=""; shift ;;
    --with-cli) server=ON; targets="$targets llama-cli"; shift ;;
    --cmake-arg) extra+=("$2"); shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "build.sh: unknown option $1" >&2; usage 2 ;;
  esac
done
case "$backend" in
  cuda) backend_flags=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${arch:-90}") ;;
  hip)  backend_flags=(-DGGML_HIP=ON "-DAMDGPU_TARGETS=${arch:-gfx942}") ;;
  *) echo "build.sh: --backend must be cuda or hip" >&2; exit 2 ;;
esac

if [ -n "$sidecar" ]; then
  patch_file="$HERE/ggml-markers.patch" fetch_args=() variant=""
else
  patch_file="$HERE/ggml-markers-core.patch" fetch_args=(--no-sidecar) variant=-core
fi

export ROCROOF_CACHE="$cache"
if [ -z "$src" ]; then
  src="$("$HERE/fetch.sh" "${fetch_args[@]}")"
elif [ ! -f "$src/.rocroof-patched" ]; then
  (cd "$src" && patch -p1 --quiet --forward < "$patch_file")
  echo "patched by build.sh with $(basename "$patch_file")" > "$src/.rocroof-patched"
elif ! grep -qF "$(basename "$patch_file")" "$src/.rocroof-patched"; then
  echo "build.sh: $src was patched with $(cat "$src/.rocroof-patched"), not $(basename "$patch_file")" >&2
fi
build="${build:-$cache/build-$backend-${arch:-default}-markers-$markers$variant}"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

cmake -S "$src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  "${backend_flags[@]}" -DGGML_CUDA_MARKERS="$markers" -DGGML_NATIVE=OFF \
  -DLLAMA_BUILD_SERVER="$server" -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF "${extra[@]}" >&2
# shellcheck disable=SC2086
cmake --build "$build" -j "$jobs" --target $targets >&2
echo "$build/bin"
