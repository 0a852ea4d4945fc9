"""The llama.cpp marker hook applies to the pinned source (tools/llama.cpp/ggml-markers.patch).

The source is the llama.cpp vendored in the PyPI sdist of llama-cpp-python (pinned in
tools/llama.cpp/fetch.sh). The sdist is taken from the rocroof cache when present, else
downloaded with pip; without either the test skips and says why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from .conftest import REPO

TOOLS = REPO / "tools" / "llama.cpp"
PATCH = TOOLS / "ggml-markers.patch"


def _pins() -> tuple[str, str]:
    text = (TOOLS / "fetch.sh").read_text()
    version = re.search(r"^SDIST_VERSION=(\S+)", text, re.M)
    commit = re.search(r"^LLAMA_COMMIT=([0-9a-f]{40})", text, re.M)
    assert version and commit
    return version.group(1), commit.group(1)


def _sdist(tmp_path: Path) -> Path:
    version, _ = _pins()
    cache = Path(os.environ.get("ROCROOF_CACHE", Path.home() / ".cache" / "rocroof"))
    name = f"llama_cpp_python-{version}.tar.gz"
    if (cache / name).is_file():
        return cache / name
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"llama-cpp-python=={version}",
            "-d",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"llama-cpp-python=={version} sdist not cached in {cache} and pip could not download it")
    return tmp_path / name


def _patched_paths() -> list[str]:
    return sorted(set(re.findall(r"^\+\+\+ b/(\S+)", PATCH.read_text(), re.M)))


def test_patch_applies_to_the_pinned_llama_cpp(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    version, _ = _pins()
    prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
    wanted = {prefix + p for p in _patched_paths()}
    src = tmp_path / "llama.cpp"
    src.mkdir()
    with tarfile.open(_sdist(tmp_path)) as tar:
        for member in tar.getmembers():
            if member.name in wanted and member.isfile():
                target = src / member.name[len(prefix) :]
                target.parent.mkdir(parents=True, exist_ok=True)
                extracted = tar.extractfile(member)
                assert extracted is not None
                target.write_bytes(extracted.read())
    proc = subprocess.run(["git", "apply", "--check", "-v", str(PATCH)], cwd=src, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_patch_stays_small_and_off_by_default() -> None:
    text = PATCH.read_text()
    added = [line for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert len(added) < 400
    # compiled out unless asked for, and nothing happens at run time unless GGML_CUDA_MARKERS is set
    assert re.search(r'option\(GGML_CUDA_MARKERS\s+"[^"]*"\s+OFF\)', text)
    hooks = [line for line in added if "ggml_cuda_markers_" in line and "GGML_CUDA_MARKERS" not in line]
    assert hooks, "the hook calls must exist"
    for path in ("ggml/src/ggml-cuda/ggml-cuda.cu",):
        block = text.split(f"+++ b/{path}")[1].split("diff --git")[0]
        assert block.count("#ifdef GGML_CUDA_MARKERS") >= 3  # begin, end (fused and single), registry


def test_hook_emits_the_grammar_rocroof_parses() -> None:
    """The range/mark formats in the C++ source match rocroof.capture.markers' grammar."""
    from rocroof.capture.markers import parse_fused, parse_range

    text = PATCH.read_text()
    source = "\n".join(
        line[1:] for line in text.split("+++ b/ggml/src/ggml-cuda/markers.cu\n")[1].split("diff --git")[0].splitlines()
    )
    begin = _function(source, "void ggml_cuda_markers_begin(")
    end = _function(source, "void ggml_cuda_markers_end(")
    # the range message, rebuilt from the copies the C++ code makes, read back by rocroof's parser
    pieces = {"ggml_op_desc(node)": "MUL_MAT", "node->name": "Qcur-0", "tl_invocation": "17"}
    message = "".join(_put_args(begin.split("tl_invocation = ")[1].split("MARKER_PUSH")[0], pieces))
    assert message == "ggml:MUL_MAT:Qcur-0:17"
    got = parse_range(message)
    assert got is not None and (got.op, got.node_name, got.invocation) == ("MUL_MAT", "Qcur-0", 17)
    # the fused-group mark of two nodes: one pass over the ops, one over the names
    fused_code = end.split("if (n_nodes > 1)")[1].split("MARKER_MARK")[0]
    head, ops_loop, names_loop = fused_code.split("for (int k = 0; k < n_nodes; k++)")
    nodes = [("RMS_NORM", "norm-0"), ("MUL", "attn_norm-0")]
    line = "".join(_put_args(head, {"tl_invocation": "17"}))
    for k, (op, _) in enumerate(nodes):
        sep = {'k ? "+" : ":"': "+" if k else ":"}
        line += "".join(_put_args(ops_loop, {**sep, "ggml_op_desc(cgraph->nodes[i + k])": op}))
    for k, (_, name) in enumerate(nodes):
        sep = {'k ? "|" : ":"': "|" if k else ":"}
        line += "".join(_put_args(names_loop, {**sep, "cgraph->nodes[i + k]->name": name}))
    assert line == "ggml-fused:17:RMS_NORM+MUL:norm-0|attn_norm-0"
    group = parse_fused(line)
    assert group is not None and (group.invocation, group.op_list, list(group.node_names)) == (
        17,
        "RMS_NORM+MUL",
        ["norm-0", "attn_norm-0"],
    )
    assert 'MARKER_MARK("ggml reset")' in source


def _function(source: str, signature: str) -> str:
    """The body of the C++ function that starts with ``signature`` (up to the next top-level ``}``)."""
    return source.split(signature)[1].split("\n}\n")[0]


def _put_args(code: str, values: dict[str, str]) -> list[str]:
    """The text that the ``put``/``put_u64`` calls in ``code`` append, in order: string literals
    as written, other arguments looked up in ``values`` (a KeyError names an unknown one)."""
    out = []
    for arg in re.findall(r"put(?:_u64)?\(\w+, \w+, (.+?)\);", code):
        out.append(arg[1:-1] if arg.startswith('"') and arg.endswith('"') else values[arg])
    return out


# Stand-ins for what markers.cu takes from the CUDA/HIP toolchains: the names it calls, with the
# signatures of the CUDA runtime / NVTX / roctx documentation (no behaviour: syntax check only).
_STUB_COMMON = """#pragma once
#include "ggml.h"
#include "ggml-impl.h"
#include <cstdio>
#include <cstdlib>
typedef void * cudaStream_t;
enum cudaMemcpyKind { cudaMemcpyDeviceToHost = 2 };
int cudaMemcpy2DAsync(void *, size_t, const void *, size_t, size_t, size_t, cudaMemcpyKind, cudaStream_t);
int cudaStreamSynchronize(cudaStream_t);
#define CUDA_CHECK(x) (void) (x)
struct ggml_backend_cuda_context { cudaStream_t stream() { return nullptr; } };
struct ggml_cuda_device_info { int device_count; struct { int cc; } devices[16]; };
const ggml_cuda_device_info & ggml_cuda_info();
"""
_STUB_NVTX = "#pragma once\nint nvtxRangePushA(const char *);\nint nvtxRangePop();\nvoid nvtxMarkA(const char *);\n"
_STUB_ROCTX = "#pragma once\nint roctxRangePushA(const char *);\nint roctxRangePop();\nvoid roctxMarkA(const char *);\n"


@pytest.mark.parametrize("branch", ["cuda", "hip"])
def test_the_hook_compiles_as_cpp_on_both_branches(tmp_path: Path, branch: str) -> None:
    """markers.cu, as the patch adds it, passes ``g++ -fsyntax-only -Wall -Wextra -Werror`` against the
    pinned ggml headers, in its CUDA (NVTX) and its HIP (roctx) branch. No CUDA or ROCm toolchain is
    here: their few calls are declared by stand-ins, so this checks the hook's own C++ only."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed")
    version, _ = _pins()
    prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/ggml/"
    inc = tmp_path / "ggml"
    with tarfile.open(_sdist(tmp_path)) as tar:
        for member in tar.getmembers():
            rel = member.name[len(prefix) :]
            if member.name.startswith(prefix) and member.isfile() and rel.startswith(("include/", "src/ggml-impl.h")):
                (inc / rel).parent.mkdir(parents=True, exist_ok=True)
                extracted = tar.extractfile(member)
                assert extracted is not None
                (inc / rel).write_bytes(extracted.read())
    work = tmp_path / "hook"
    text = PATCH.read_text()
    for name in ("markers.cu", "markers.cuh"):
        block = text.split(f"+++ b/ggml/src/ggml-cuda/{name}\n")[1].split("\ndiff --git")[0]
        lines = [line[1:] for line in block.splitlines()[1:] if line.startswith("+")]  # after the @@ line
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("\n".join(lines) + "\n")
    (work / "common.cuh").write_text(_STUB_COMMON)
    for header, body in (("nvtx3/nvToolsExt.h", _STUB_NVTX), ("rocprofiler-sdk-roctx/roctx.h", _STUB_ROCTX)):
        (work / header).parent.mkdir(parents=True, exist_ok=True)
        (work / header).write_text(body)
    defines = ["-DGGML_CUDA_MARKERS"] + (["-DGGML_USE_HIP"] if branch == "hip" else [])
    cmd = [gxx, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", *defines, "-x", "c++"]
    cmd += ["-I", str(work), "-I", str(inc / "include"), "-I", str(inc / "src"), str(work / "markers.cu")]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
