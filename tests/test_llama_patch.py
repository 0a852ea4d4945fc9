"""The llama.cpp marker hook (tools/llama.cpp) applies to the pinned source and compiles.

The hook comes as two patches: ``ggml-markers-core.patch`` (the ranges, the fused-group marks, the
reset mark, the CMake option and NVTX/roctx linking) and ``ggml-markers-sidecar.patch`` on top of it
(the ``GGML_CUDA_OP_META`` op-metadata sidecar and the MoE expert-id read-back). ``ggml-markers.patch``
is the two as one diff: what fetch.sh and build.sh apply by default, rebuilt by combine.sh.

The source is the llama.cpp vendored in the PyPI sdist of llama-cpp-python (pinned in
tools/llama.cpp/fetch.sh), taken from the rocroof cache when present, else downloaded with pip. Without
it, or without hipcc, the tests skip and say why; with ``ROCROOF_REQUIRE_HIPCC`` set (.ci/run sets it)
they fail instead: CI must compile the HIP branch with the real hipcc.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from .conftest import REPO
from .conftest import llama_pins as _pins
from .conftest import require_or_skip as _skip

TOOLS = REPO / "tools" / "llama.cpp"
CORE = TOOLS / "ggml-markers-core.patch"
SIDECAR = TOOLS / "ggml-markers-sidecar.patch"
COMBINED = TOOLS / "ggml-markers.patch"
#: the core's budget: what upstream can review in one sitting (added + removed lines, as git diff --stat)
CORE_BUDGET = 250
#: the applied trees the tests compare and compile: patches applied in order to the pinned source
VARIANTS = {"core": (CORE,), "core+sidecar": (CORE, SIDECAR), "combined": (COMBINED,)}
#: pinned files the compile checks read besides the patched ones
HEADERS = (
    "ggml/include/",
    "ggml/src/ggml-impl.h",
    "ggml/src/ggml-cuda/common.cuh",
    "ggml/src/ggml-cuda/vendors/hip.h",
)


def _patched_paths(*patches: Path) -> list[str]:
    return sorted({p for patch in patches for p in re.findall(r"^\+\+\+ b/(\S+)", patch.read_text(), re.M)})


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # GIT_CEILING_DIRECTORIES: never mistake a repository around the temporary directory for the tree
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(cwd.parent)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)


class Trees:
    """The pinned source ("pinned": the files the patches touch and the headers the compile checks need)
    and, on first use, a copy of it per entry of VARIANTS with those patches applied in order (a patch
    that does not apply fails the tests that use its variant, not the others)."""

    def __init__(self, root: Path, sdist: Path) -> None:
        version, _ = _pins()
        prefix = f"llama_cpp_python-{version}/vendor/llama.cpp/"
        wanted = set(_patched_paths(CORE, SIDECAR, COMBINED))
        self.root, self.pinned, self.applied = root, root / "pinned", {"pinned": root / "pinned"}
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                rel = member.name[len(prefix) :]
                if member.isfile() and member.name.startswith(prefix) and (rel in wanted or rel.startswith(HEADERS)):
                    (self.pinned / rel).parent.mkdir(parents=True, exist_ok=True)
                    extracted = tar.extractfile(member)
                    assert extracted is not None
                    (self.pinned / rel).write_bytes(extracted.read())

    def __getitem__(self, name: str) -> Path:
        if name not in self.applied:
            patches = VARIANTS[name]
            tree = self.root / name.replace("+", "-")
            shutil.rmtree(tree, ignore_errors=True)
            shutil.copytree(self.pinned, tree)
            for patch in patches:
                proc = _git("apply", "-v", str(patch), cwd=tree)
                assert proc.returncode == 0, (
                    f"{' then '.join(p.name for p in patches)}: {patch.name} does not apply:\n{proc.stderr}"
                )
            self.applied[name] = tree
        return self.applied[name]


@pytest.fixture(scope="module")
def trees(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Trees:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    return Trees(tmp_path_factory.mktemp("llama.cpp"), sdist)


def test_core_applies_alone_and_the_sidecar_on_top_gives_the_combined_patch(trees: Trees) -> None:
    """The core applies to the pinned source by itself, the sidecar on top of it, and the two leave exactly
    the files that ggml-markers.patch (the single patch fetch.sh and build.sh apply) leaves."""
    assert (trees["core"] / "ggml/src/ggml-cuda/markers.cu").is_file()
    for path in _patched_paths(CORE, SIDECAR, COMBINED):
        two, one = trees["core+sidecar"] / path, trees["combined"] / path
        assert two.is_file() and one.is_file(), path
        assert two.read_bytes() == one.read_bytes(), f"{path}: core + sidecar differs from ggml-markers.patch"
    # the sidecar needs the core: it changes markers.cu, which the pinned source does not have
    assert _git("apply", "--check", str(SIDECAR), cwd=trees["pinned"]).returncode != 0


def test_combine_sh_rebuilds_the_combined_patch(sdist: Path, tmp_path: Path) -> None:
    """combine.sh (core, then sidecar, as one git diff) reproduces ggml-markers.patch byte for byte."""
    if shutil.which("git") is None or shutil.which("bash") is None:
        pytest.skip("git and bash are needed")
    (tmp_path / sdist.name).symlink_to(sdist)  # the cache combine.sh reads the sdist from
    proc = subprocess.run(
        ["bash", str(TOOLS / "combine.sh"), "--check"],
        env={**os.environ, "ROCROOF_CACHE": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def _changed_lines(patch: str) -> tuple[int, int]:
    """Added and removed lines of a unified diff, counted as ``git diff --stat`` counts them: the
    ``+``/``-`` lines of the hunk bodies (read by the hunk headers' line counts, so that a removed
    line starting with ``--`` is not taken for a file header)."""
    added = removed = 0
    lines = patch.splitlines()
    i = 0
    while i < len(lines):
        hunk = re.match(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", lines[i])
        i += 1
        if not hunk:
            continue
        old, new = (int(n) if n is not None else 1 for n in hunk.groups())
        while old > 0 or new > 0:
            line = lines[i]
            i += 1
            if line.startswith("+"):
                added, new = added + 1, new - 1
            elif line.startswith("-"):
                removed, old = removed + 1, old - 1
            elif not line.startswith("\\"):  # "\ No newline at end of file" counts for neither side
                old, new = old - 1, new - 1
    return added, removed


def _hunk_lines(patch: str, path: str) -> list[str]:
    """The body lines of ``path``'s hunks in ``patch``."""
    block = patch.split(f"+++ b/{path}\n")[1].split("\ndiff --git")[0]
    return block.splitlines()


def test_core_stays_small_and_off_by_default(tmp_path: Path) -> None:
    core, sidecar, combined = CORE.read_text(), SIDECAR.read_text(), COMBINED.read_text()
    added, removed = _changed_lines(core)
    assert added + removed <= CORE_BUDGET, f"the core changes {added + removed} lines, over {CORE_BUDGET}"
    # the same count from git itself, run outside any repository (inside one, git counts only its paths)
    if shutil.which("git"):
        numstat = _git("apply", "--numstat", str(CORE), cwd=tmp_path)
        counts = [line.split("\t")[:2] for line in numstat.stdout.splitlines()]
        assert len(counts) == len(_patched_paths(CORE)), numstat.stderr
        assert (sum(int(a) for a, _ in counts), sum(int(r) for _, r in counts)) == (added, removed)
    assert sum(_changed_lines(combined)) < 400
    # compiled out unless asked for, and nothing happens at run time unless GGML_CUDA_MARKERS is set
    assert re.search(r'option\(GGML_CUDA_MARKERS\s+"[^"]*"\s+OFF\)', core)
    hooks = [line for line in _hunk_lines(core, "ggml/src/ggml-cuda/ggml-cuda.cu") if line.startswith("+")]
    assert sum(line == "+#ifdef GGML_CUDA_MARKERS" for line in hooks) >= 3  # begin, end (fused and single), registry
    # the core has none of the sidecar: no metadata file, no MoE read-back
    core_added = "\n".join(line for line in core.splitlines() if line.startswith("+"))
    for sidecar_only in (
        "GGML_CUDA_OP_META",
        "cudaMemcpy2DAsync",
        "cudaStreamSynchronize",
        "tokens_per_expert",
        "fopen",
    ):
        assert sidecar_only not in core_added, sidecar_only
        assert sidecar_only in sidecar, sidecar_only
    # and the sidecar needs no build-system change: it only touches the CUDA/HIP backend's sources
    assert set(_patched_paths(SIDECAR)) <= {
        f"ggml/src/ggml-cuda/{n}" for n in ("ggml-cuda.cu", "markers.cu", "markers.cuh")
    }


@pytest.mark.parametrize("variant", ["core", "core+sidecar"])
def test_hook_emits_the_grammar_rocroof_parses(trees: Trees, variant: str) -> None:
    """The range/mark formats in the C++ source match rocroof.capture.markers' grammar."""
    from rocroof.capture.markers import parse_fused, parse_range

    source = (trees[variant] / "ggml/src/ggml-cuda/markers.cu").read_text()
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


def _hook_dir(tree: Path, work: Path, headers: dict[str, str]) -> Path:
    """``work`` with the hook's markers.cu/.cuh from ``tree`` and the given stand-in headers beside them
    (markers.cuh includes "common.cuh" from its own directory first)."""
    for name in ("markers.cu", "markers.cuh"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tree / "ggml/src/ggml-cuda" / name, work / name)
    for header, body in headers.items():
        (work / header).parent.mkdir(parents=True, exist_ok=True)
        (work / header).write_text(body)
    return work


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
@pytest.mark.parametrize("variant", ["core", "core+sidecar"])
def test_the_hook_compiles_as_cpp_on_both_branches(trees: Trees, tmp_path: Path, variant: str, branch: str) -> None:
    """markers.cu, as the core alone and the core with the sidecar leave it, passes ``g++ -fsyntax-only
    -Wall -Wextra -Werror`` against the pinned ggml headers, in its CUDA (NVTX) and its HIP (roctx)
    branch. The CUDA runtime, NVTX and roctx calls are declared by stand-ins, so this checks the hook's own
    C++ on any machine; test_the_hip_branch_compiles_with_hipcc compiles the HIP branch for real."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed")
    tree = trees[variant]
    stubs = {"common.cuh": _STUB_COMMON, "nvtx3/nvToolsExt.h": _STUB_NVTX, "rocprofiler-sdk-roctx/roctx.h": _STUB_ROCTX}
    work = _hook_dir(tree, tmp_path / "hook", stubs)
    defines = ["-DGGML_CUDA_MARKERS"] + (["-DGGML_USE_HIP"] if branch == "hip" else [])
    cmd = [gxx, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", *defines, "-x", "c++"]
    cmd += ["-I", str(work), "-I", str(tree / "ggml/include"), "-I", str(tree / "ggml/src"), str(work / "markers.cu")]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


# --- the HIP branch, compiled by the real hipcc ------------------------------------------------------
#
# Debian (bookworm: 5.2.3) and Ubuntu package ROCm's HIP compiler and runtime: apt-get install hipcc
# libamdhip64-dev. What the packages lack is stood in for, nothing else:
#
# - roctx: neither rocprofiler-sdk-roctx nor roctracer is packaged. The stand-ins declare the three calls
#   the hook makes as ROCm/rocprofiler-sdk source/include/rocprofiler-sdk-roctx/roctx.h declares them
#   (C linkage, the message nonnull) and as ROCm/roctracer inc/roctx.h does (C linkage; installed as
#   roctracer/roctx.h). Where ROCm has the real header, the real one is used.
# - ggml-cuda/common.cuh: the pinned one needs ROCm >= 6.1 (ggml-hip/CMakeLists.txt stops below it):
#   vendors/hip.h includes hipblas/hipblas.h and hip/hip_bf16.h, and common.cuh uses half-precision
#   intrinsics HIP 5.2 lacks. The stand-in takes from the pinned source itself what the hook uses:
#   the CUDA->HIP names as vendors/hip.h defines them, CUDA_CHECK and ggml_cuda_device_info as
#   common.cuh defines them; ggml_backend_cuda_context is reduced to the one method the hook calls.

#: CUDA runtime names the hook uses (directly or through CUDA_CHECK), mapped to HIP by vendors/hip.h
_CUDA_NAMES = (
    "cudaError_t",
    "cudaGetErrorString",
    "cudaMemcpy2DAsync",
    "cudaMemcpyDeviceToHost",
    "cudaStreamSynchronize",
    "cudaStream_t",
    "cudaSuccess",
)
_ROCTX_SDK = """#pragma once
// stand-in: the calls ggml-cuda/markers.cu makes, as ROCm/rocprofiler-sdk
// source/include/rocprofiler-sdk-roctx/roctx.h declares them (ROCTX_API is empty when importing)
#ifdef __cplusplus
extern "C" {
#endif
void roctxMarkA(const char* message) __attribute__((nonnull(1)));
int roctxRangePushA(const char* message) __attribute__((nonnull(1)));
int roctxRangePop();
#ifdef __cplusplus
}
#endif
"""
_ROCTX_LEGACY = """#pragma once
// stand-in: the calls ggml-cuda/markers.cu makes, as ROCm/roctracer inc/roctx.h declares them
#ifdef __cplusplus
extern "C" {
#endif
void roctxMarkA(const char* message);
int roctxRangePushA(const char* message);
int roctxRangePop();
#ifdef __cplusplus
}
#endif
"""
#: ggml's own warnings for clang C++ (ggml/src/CMakeLists.txt, ggml/cmake/common.cmake), as errors
_GGML_CLANG_WARNINGS = (
    "-Wall -Wextra -Wpedantic -Wcast-qual -Wno-unused-function -Wmissing-declarations -Wmissing-noreturn "
    "-Wunreachable-code-break -Wunreachable-code-return -Wmissing-prototypes -Wextra-semi -Werror"
).split()
#: AMD targets, newest first: gfx942 (MI300X) needs LLVM >= 17; ROCm 5.2's clang 15 knows gfx940 (MI300
#: family); gfx90a (MI200) for compilers that have neither
_ARCHS = ("gfx942", "gfx940", "gfx90a")


def _hip_common(tree: Path) -> str:
    hip_h = (tree / "ggml/src/ggml-cuda/vendors/hip.h").read_text()
    common = (tree / "ggml/src/ggml-cuda/common.cuh").read_text()
    names = [rf"^#define {name} \w+$" for name in _CUDA_NAMES]
    defines = [m.group(0) for pattern in names for m in [re.search(pattern, hip_h, re.M)] if m]
    assert len(defines) == len(_CUDA_NAMES), f"vendors/hip.h maps only {defines}"
    check = re.search(r"^void ggml_cuda_error\(.*?^#define CUDA_CHECK\(err\) [^\n]*", common, re.M | re.S)
    info = re.search(
        r"^struct ggml_cuda_device_info \{.*?^const ggml_cuda_device_info & ggml_cuda_info\(\);", common, re.M | re.S
    )
    assert check and info, "CUDA_CHECK or ggml_cuda_device_info not found in the pinned common.cuh"
    return "\n".join(
        [
            "#pragma once",
            "// stand-in for ggml-cuda/common.cuh, which needs ROCm >= 6.1 and hipBLAS (see test_llama_patch.py)",
            "#include <array>",
            "#include <cstdlib>",
            "#include <hip/hip_runtime.h>",
            '#include "ggml.h"',
            '#include "ggml-impl.h"',
            '#include "ggml-cuda.h"',
            "// from the pinned ggml-cuda/vendors/hip.h",
            *defines,
            "// from the pinned ggml-cuda/common.cuh",
            check.group(0),
            info.group(0),
            "struct ggml_backend_cuda_context { cudaStream_t stream(); };  // the one method the hook calls",
            "",
        ]
    )


def _hip_env() -> dict[str, str]:
    # ggml's HIP backend is AMD only; hipcc would pick the NVIDIA platform when it finds nvcc
    return {**os.environ, "HIP_PLATFORM": "amd"}


@functools.cache
def _offload_arch(hipcc: str) -> str:
    """The newest of _ARCHS that this hipcc's clang knows."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "empty.hip").write_text("")
        for arch in _ARCHS:
            cmd = [hipcc, "-x", "hip", f"--offload-arch={arch}", "-c", "empty.hip", "-o", "empty.o"]
            if subprocess.run(cmd, cwd=tmp, env=_hip_env(), capture_output=True, check=False).returncode == 0:
                return arch
    pytest.fail(f"{hipcc} compiles for none of {', '.join(_ARCHS)}")


def _rocm_has(header: str) -> bool:
    roots = [os.environ.get("ROCM_PATH", ""), os.environ.get("HIP_PATH", ""), "/opt/rocm", "/usr"]
    return any(root and (Path(root) / "include" / header).is_file() for root in roots)


def _symbols(obj: Path, *flags: str) -> set[str]:
    proc = subprocess.run(["nm", *flags, str(obj)], capture_output=True, text=True, check=True)
    return {line.split()[-1].split("@")[0] for line in proc.stdout.splitlines() if line.strip()}  # name@@version


@pytest.mark.parametrize(
    ("variant", "roctx"),
    [("core", "rocprofiler-sdk"), ("core+sidecar", "rocprofiler-sdk"), ("core+sidecar", "roctracer")],
)
def test_the_hip_branch_compiles_with_hipcc(trees: Trees, tmp_path: Path, variant: str, roctx: str) -> None:
    """The HIP branch of markers.cu, compiled by the real hipcc to an object for an AMD target (HIP
    language, host and device passes) with ggml's own clang warnings as errors; the object defines the
    hook's four functions and calls roctx (C linkage, as the roctx libraries export it), not NVTX, and
    the sidecar's read-back calls the HIP runtime functions the packaged libamdhip64 exports."""
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        _skip("hipcc is not installed (Debian/Ubuntu: apt-get install hipcc libamdhip64-dev)")
    tree = trees[variant]
    header = "rocprofiler-sdk-roctx/roctx.h" if roctx == "rocprofiler-sdk" else "roctracer/roctx.h"
    stubs = {"common.cuh": _hip_common(tree)}
    if not _rocm_has(header):
        stubs[header] = _ROCTX_SDK if roctx == "rocprofiler-sdk" else _ROCTX_LEGACY
    work = _hook_dir(tree, tmp_path / "hook", stubs)
    defines = ["-DGGML_USE_HIP", "-DGGML_CUDA_MARKERS"] + (["-DGGML_ROCTX_LEGACY"] if roctx == "roctracer" else [])
    obj = tmp_path / "markers.o"
    cmd = [hipcc, "-x", "hip", f"--offload-arch={_offload_arch(hipcc)}", "-std=c++17", *_GGML_CLANG_WARNINGS]
    cmd += [*defines, "-I", str(work), "-I", str(tree / "ggml/include"), "-I", str(tree / "ggml/src")]
    cmd += ["-c", str(work / "markers.cu"), "-o", str(obj)]
    proc = subprocess.run(cmd, env=_hip_env(), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    if shutil.which("nm") is None:
        return
    defined, undefined = _symbols(obj, "--defined-only"), _symbols(obj, "--undefined-only")
    for function in ("enabled", "begin", "end", "reset"):
        assert any(f"ggml_cuda_markers_{function}" in s for s in defined), function
    assert {"roctxRangePushA", "roctxRangePop", "roctxMarkA"} <= undefined
    assert not any("nvtx" in s for s in defined | undefined)
    hip_calls = {s for s in undefined if s.startswith("hip")}
    if "sidecar" in variant:  # the MoE read-back, and CUDA_CHECK's error string
        assert {"hipMemcpy2DAsync", "hipStreamSynchronize", "hipGetErrorString"} <= hip_calls
    else:  # the core makes no runtime call
        assert not hip_calls
    # the HIP runtime functions the object calls exist in the packaged runtime library
    lib = subprocess.run(
        [hipcc, "-print-file-name=libamdhip64.so"], env=_hip_env(), capture_output=True, text=True, check=False
    )
    if hip_calls and Path(lib.stdout.strip()).is_absolute() and Path(lib.stdout.strip()).exists():
        assert hip_calls <= _symbols(Path(lib.stdout.strip()), "-D", "--defined-only")
