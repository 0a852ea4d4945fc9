"""A measured DRAM copy bandwidth for NVIDIA GPUs, stored with a capture as an empirical ceiling.

The datasheet ceiling of an H200 (4.8 TB/s) is a bus rate no kernel reaches; the roofline is more
honest against what a plain copy achieves on the same GPU. ``rocroof collect --profiler ncu``
runs this probe once, pinned like the application (``python -m rocroof.analysis.bandwidth --out FILE``
in the application's environment), and writes ``bandwidth.json`` into the capture; the reader
takes it as the run's DRAM ceiling (mark ``measured``), ahead of ``configs/peaks.yaml``.

Method (as CUDA's ``bandwidthTest`` sample measures device-to-device bandwidth): one
``cuMemcpyDtoD`` of ``nbytes`` between two device buffers, timed with CUDA events, after one
untimed warm-up copy; the copy reads ``nbytes`` and writes ``nbytes``, so the DRAM traffic is
``2 * nbytes``. Buffers of 1 GiB by default, far beyond any L2 (60 MiB on the H200), so the copy
streams from and to DRAM. The best of ``repeats`` copies is the ceiling; the median is recorded too.

Only the CUDA driver API (``libcuda.so.1``, installed with the NVIDIA driver) is used, through
ctypes: no compiler, no CUDA toolkit, no Python GPU package. Function names and signatures:
CUDA Driver API reference (``cuInit``, ``cuDeviceGet``, ``cuDevicePrimaryCtxRetain``,
``cuCtxSetCurrent``, ``cuMemAlloc_v2``, ``cuMemcpyDtoD_v2``, ``cuEventCreate``,
``cuEventRecord``, ``cuEventSynchronize``, ``cuEventElapsedTime``, ``cuMemFree_v2``).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import ProfilerFailed, RocroofError

#: File name of the probe's result inside a capture.
BANDWIDTH_FILE = "bandwidth.json"
#: The smallest copy a probe result may use: a copy must dwarf the last-level cache to time DRAM;
#: 256 MiB is 4x the H200's 60 MiB L2 (the probe runs on NVIDIA GPUs; its default is 1 GiB).
MIN_PROBE_BYTES = 256 << 20
#: No GPU memory is near this (HBM3e parts are at 8 TB/s); a larger probe value is a broken file.
MAX_PLAUSIBLE_GBPS = 100_000.0
DEFAULT_BYTES = 1 << 30
DEFAULT_REPEATS = 10


@dataclass(frozen=True)
class CopyBandwidth:
    """One probe's result.

    Attributes:
        gbps_best: DRAM bandwidth of the fastest copy, GB/s (1e9 B/s), counting read + write.
        gbps_median: the same for the median copy.
        bytes_per_copy: bytes copied per copy (DRAM traffic is twice that).
        repeats: timed copies.
        device: the GPU's name as the driver reports it.
        method: how it was measured.
    """

    gbps_best: float
    gbps_median: float
    bytes_per_copy: int
    repeats: int
    device: str
    method: str = "cuMemcpyDtoD, 2 x bytes per copy / CUDA event time, best of repeats"


def copy_gbps(nbytes: int, elapsed_ms: float) -> float:
    """DRAM GB/s of one device-to-device copy of ``nbytes`` that took ``elapsed_ms`` milliseconds.

    The copy reads and writes ``nbytes`` each: ``2 * nbytes / (elapsed_ms * 1e-3) / 1e9``.

    Raises:
        ValueError: a non-positive time or size.
    """
    if nbytes <= 0 or elapsed_ms <= 0:
        raise ValueError(f"copy of {nbytes} bytes in {elapsed_ms} ms: both must be positive")
    return 2 * nbytes / (elapsed_ms * 1e-3) / 1e9


class _Driver:
    """The few CUDA driver calls the probe needs, each checked (a non-zero CUresult raises)."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib

    def __call__(self, name: str, *args: Any) -> None:
        status = getattr(self.lib, name)(*args)
        if status != 0:
            text = ctypes.c_char_p()
            describe = getattr(self.lib, "cuGetErrorString", None)
            if describe is not None and describe(status, ctypes.byref(text)) == 0 and text.value:
                detail = text.value.decode(errors="replace")
            else:
                detail = f"CUresult {status}"
            raise ProfilerFailed(["libcuda", name], int(status), f"{name} failed: {detail}")


def load_driver() -> Any:
    """``libcuda.so.1`` through ctypes.

    Raises:
        RocroofError: no NVIDIA driver library on this machine.
    """
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise RocroofError(
            f"bandwidth probe: cannot load libcuda.so.1 (is the NVIDIA driver installed?): {exc}"
        ) from exc


def measure_copy_bandwidth(
    nbytes: int = DEFAULT_BYTES, repeats: int = DEFAULT_REPEATS, *, device: int = 0, lib: Any = None
) -> CopyBandwidth:
    """Time ``repeats`` device-to-device copies of ``nbytes`` on CUDA device ``device``.

    Args:
        nbytes: bytes per copy (default 1 GiB; keep it far above the L2 size).
        repeats: timed copies after one warm-up copy.
        device: CUDA device ordinal as this process sees it (after ``CUDA_VISIBLE_DEVICES``).
        lib: the driver library (default :func:`load_driver`; tests pass a stand-in).

    Returns:
        The best and median bandwidth (module docstring for the method).

    Raises:
        RocroofError: no driver; ProfilerFailed: a driver call failed (e.g. out of memory).
        ValueError: ``nbytes`` or ``repeats`` below 1.
    """
    if nbytes < 1 or repeats < 1:
        raise ValueError(f"nbytes {nbytes} and repeats {repeats} must be at least 1")
    lib = load_driver() if lib is None else lib
    cu = _Driver(lib)
    cu("cuInit", ctypes.c_uint(0))
    dev = ctypes.c_int()
    cu("cuDeviceGet", ctypes.byref(dev), ctypes.c_int(device))
    name_buf = ctypes.create_string_buffer(256)
    cu("cuDeviceGetName", name_buf, ctypes.c_int(256), dev)
    ctx = ctypes.c_void_p()
    cu("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    src, dst = ctypes.c_uint64(), ctypes.c_uint64()
    start, stop = ctypes.c_void_p(), ctypes.c_void_p()
    times: list[float] = []
    try:
        cu("cuCtxSetCurrent", ctx)
        cu("cuMemAlloc_v2", ctypes.byref(src), ctypes.c_size_t(nbytes))
        cu("cuMemAlloc_v2", ctypes.byref(dst), ctypes.c_size_t(nbytes))
        cu("cuEventCreate", ctypes.byref(start), ctypes.c_uint(0))
        cu("cuEventCreate", ctypes.byref(stop), ctypes.c_uint(0))
        for i in range(repeats + 1):
            cu("cuEventRecord", start, ctypes.c_void_p(0))
            cu("cuMemcpyDtoD_v2", dst, src, ctypes.c_size_t(nbytes))
            cu("cuEventRecord", stop, ctypes.c_void_p(0))
            cu("cuEventSynchronize", stop)
            ms = ctypes.c_float()
            cu("cuEventElapsedTime", ctypes.byref(ms), start, stop)
            if i:  # the first copy warms up (page mapping, clocks)
                times.append(float(ms.value))
    finally:
        for ptr in (src, dst):
            if ptr.value:
                lib.cuMemFree_v2(ptr)
        for ev in (start, stop):
            if ev.value:
                lib.cuEventDestroy_v2(ev)
        lib.cuDevicePrimaryCtxRelease_v2(dev)
    return CopyBandwidth(
        gbps_best=copy_gbps(nbytes, min(times)),
        gbps_median=copy_gbps(nbytes, statistics.median(times)),
        bytes_per_copy=nbytes,
        repeats=repeats,
        device=name_buf.value.decode(errors="replace"),
    )


def read_bandwidth(path: Path) -> CopyBandwidth:
    """A probe result written by ``python -m rocroof.analysis.bandwidth --out PATH``.

    Raises:
        ParseError: not JSON, or not a probe result (the missing or bad key named): a value that
            is not a positive finite number, a median above the best, or a bandwidth beyond
            :data:`MAX_PLAUSIBLE_GBPS` (a copy under :data:`MIN_PROBE_BYTES` reads; the reader of a
            capture declines it with a warning).
    """
    from ..errors import ParseError
    from ..fileio import read_text

    text = read_text(path, limit_bytes=1 << 16)
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ParseError(path, f"invalid JSON ({exc}); expected a rocroof bandwidth probe result") from exc
    if not isinstance(doc, dict):
        raise ParseError(path, "expected a JSON object (rocroof bandwidth probe result)")
    missing = [k for k in ("gbps_best", "gbps_median", "bytes_per_copy", "repeats", "device") if k not in doc]
    if missing:
        expected = "gbps_best, gbps_median, bytes_per_copy, repeats, device"
        raise ParseError(path, f"missing key {missing[0]!r} (expected {expected})")
    values: dict[str, float] = {}
    for key in ("gbps_best", "gbps_median", "bytes_per_copy", "repeats"):
        v = doc[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            raise ParseError(path, f"{key} is {v!r}; expected a positive number")
        values[key] = float(v)
    best, median = values["gbps_best"], values["gbps_median"]
    if not float(values["bytes_per_copy"]).is_integer() or not float(values["repeats"]).is_integer():
        raise ParseError(path, "bytes_per_copy and repeats must be whole numbers")
    nbytes, repeats = int(values["bytes_per_copy"]), int(values["repeats"])
    if median > best * (1 + 1e-9):
        raise ParseError(path, f"gbps_median {median:g} is above gbps_best {best:g}; the best copy is the fastest")
    if best > MAX_PLAUSIBLE_GBPS:
        raise ParseError(path, f"gbps_best {best:,.0f} GB/s is beyond any GPU memory ({MAX_PLAUSIBLE_GBPS:,.0f} GB/s)")
    device, method = str(doc["device"]), str(doc.get("method", CopyBandwidth.method))
    return CopyBandwidth(best, median, nbytes, repeats, device, method)


def main(argv: list[str] | None = None) -> int:
    """``python -m rocroof.analysis.bandwidth --out FILE [--bytes N] [--repeats R]``: run the probe, write JSON."""
    parser = argparse.ArgumentParser(prog="python -m rocroof.analysis.bandwidth", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--bytes", type=int, default=DEFAULT_BYTES, help="bytes per copy (default 1 GiB)")
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="timed copies (default 10)")
    args = parser.parse_args(argv)
    if args.bytes < MIN_PROBE_BYTES or args.repeats < 1:
        parser.error(f"--bytes must be at least {MIN_PROBE_BYTES} (to time DRAM, not caches), --repeats at least 1")
    try:
        result = measure_copy_bandwidth(args.bytes, args.repeats)
    except (RocroofError, ValueError) as exc:
        print(f"rocroof bandwidth probe: {exc}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"tool": "rocroof bandwidth probe", **asdict(result)}, indent=1) + "\n")
    print(
        f"{result.device}: {result.gbps_best:,.1f} GB/s best, {result.gbps_median:,.1f} GB/s median "
        f"({result.repeats} copies of {result.bytes_per_copy:,} B)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
