"""The NVIDIA copy-bandwidth probe (rocroof.analysis.bandwidth) against a stand-in CUDA driver library."""

from __future__ import annotations

import ctypes
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocroof.analysis.bandwidth import copy_gbps, main, measure_copy_bandwidth, read_bandwidth
from rocroof.errors import ParseError, ProfilerFailed


class FakeDriver:
    """Answers the driver calls the probe makes; event times come from ``times`` (ms)."""

    def __init__(self, times: list[float], fail: str | None = None) -> None:
        self.times: Iterator[float] = iter(times)
        self.fail = fail
        self.calls: list[str] = []
        self.copies: list[int] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> int:
            self.calls.append(name)
            if name == self.fail:
                return 2  # CUDA_ERROR_OUT_OF_MEMORY
            if name == "cuGetErrorString":
                args[1]._obj.value = b"out of memory"
            elif name == "cuDeviceGetName":
                args[0].value = b"NVIDIA H200"
            elif name == "cuMemAlloc_v2":
                args[0]._obj.value = 0x7F0000000000 + 0x1000 * len(self.calls)
            elif name == "cuEventCreate":
                args[0]._obj.value = len(self.calls)
            elif name == "cuMemcpyDtoD_v2":
                self.copies.append(args[2].value)
            elif name == "cuEventElapsedTime":
                args[0]._obj.value = next(self.times)
            return 0

        return call


def test_copy_gbps_counts_the_read_and_the_write() -> None:
    # 1 GiB copied in 0.5 ms moves 2 GiB through DRAM: 2 * 1,073,741,824 B / 0.5e-3 s = 4,294.97 GB/s
    assert copy_gbps(1 << 30, 0.5) == pytest.approx(4294.967296)
    with pytest.raises(ValueError):
        copy_gbps(1 << 30, 0.0)


def test_probe_times_copies_after_a_warm_up_and_frees_what_it_took() -> None:
    fake = FakeDriver([9.0, 0.50, 0.45, 0.55])  # the first (warm-up) copy is not counted
    got = measure_copy_bandwidth(1 << 30, 3, lib=fake)
    assert fake.copies == [1 << 30] * 4
    assert got.gbps_best == pytest.approx(2 * (1 << 30) / 0.45e-3 / 1e9)  # 4,772.2 GB/s
    assert got.gbps_median == pytest.approx(2 * (1 << 30) / 0.50e-3 / 1e9)
    assert got.device == "NVIDIA H200" and got.repeats == 3 and got.bytes_per_copy == 1 << 30
    assert fake.calls.count("cuMemFree_v2") == 2 and fake.calls.count("cuEventDestroy_v2") == 2
    assert fake.calls[-1] == "cuDevicePrimaryCtxRelease_v2"


def test_a_failing_driver_call_is_named_and_nothing_leaks() -> None:
    fake = FakeDriver([], fail="cuMemAlloc_v2")
    with pytest.raises(ProfilerFailed, match="cuMemAlloc_v2 failed: out of memory"):
        measure_copy_bandwidth(1 << 40, 2, lib=fake)
    assert "cuDevicePrimaryCtxRelease_v2" in fake.calls and "cuMemcpyDtoD_v2" not in fake.calls


def _probe(**values: str) -> str:
    """A probe result as JSON text: 4,000 / 3,900 GB/s over 10 copies of 1 GiB, ``values`` replaced (JSON text)."""
    fields = {"gbps_best": "4000", "gbps_median": "3900", "bytes_per_copy": str(1 << 30), "repeats": "10"}
    fields.update(values)
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + ', "device": "NVIDIA H200"}'


def test_written_result_reads_back_and_bad_files_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeDriver([3.0, 0.46, 0.44])
    monkeypatch.setattr(ctypes, "CDLL", lambda name: fake)
    out = tmp_path / "cap" / "bandwidth.json"
    assert main(["--out", str(out), "--bytes", str(1 << 28), "--repeats", "2"]) == 0
    got = read_bandwidth(out)
    assert got.gbps_best == pytest.approx(2 * (1 << 28) / 0.44e-3 / 1e9)
    assert json.loads(out.read_text())["tool"] == "rocroof bandwidth probe"
    bad = tmp_path / "bad.json"
    for text, expected in (
        ("{", "invalid JSON"),
        ("[]", "expected a JSON object"),
        ('{"gbps_best": 1}', "missing key"),
        (_probe(gbps_best='"x"'), "gbps_best is 'x'; expected a positive number"),
        (_probe(gbps_best="0"), "gbps_best is 0; expected a positive number"),
        (_probe(gbps_best="true"), "gbps_best is True; expected a positive number"),
        (_probe(gbps_best="Infinity"), "gbps_best is inf; expected a positive number"),
        (_probe(gbps_median="-1"), "gbps_median is -1; expected a positive number"),
        (_probe(repeats="0"), "repeats is 0; expected a positive number"),
        (_probe(gbps_median="5000"), "gbps_median 5000 is above gbps_best 4000"),
        (_probe(gbps_best="4194828280", gbps_median="4000"), "beyond any GPU memory"),
    ):
        bad.write_text(text)
        with pytest.raises(ParseError, match=expected):
            read_bandwidth(bad)
