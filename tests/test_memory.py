"""rocroof.memory: when the freed memory of an ingest goes back to the operating system."""

from __future__ import annotations

import numpy as np
import pytest

from rocroof import memory

MB = 1 << 20


@pytest.fixture
def released(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the page drops and heap trims instead of doing them; reset the last release."""
    calls: list[str] = []
    monkeypatch.setattr(memory, "release_pages", lambda: calls.append("pages") or 0)
    monkeypatch.setattr(memory, "_malloc_trim", lambda: lambda pad: calls.append(f"trim {pad}") or 1)
    monkeypatch.setattr(memory, "_resident_after_release", None)
    return calls


def _resident(monkeypatch: pytest.MonkeyPatch, values: list[int]) -> None:
    """resident_bytes() gives ``values`` in turn (bytes)."""
    seq = iter(values)
    monkeypatch.setattr(memory, "resident_bytes", lambda: next(seq))


def test_the_first_release_always_releases(released: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _resident(monkeypatch, [300 * MB, 250 * MB])
    assert memory.release_free_memory() is True
    assert released == ["pages", "trim 0"]
    assert memory._resident_after_release == 250 * MB


def test_a_small_growth_since_the_last_release_is_left(released: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # released at 200 MB; 215 MB is 15 MB more, under the 16 MB threshold; 217 MB is 17 MB more
    _resident(monkeypatch, [210 * MB, 200 * MB, 215 * MB, 217 * MB, 201 * MB])
    assert memory.release_free_memory() is True
    released.clear()
    assert memory.release_free_memory() is False
    assert released == []
    assert memory.release_free_memory() is True
    assert released == ["pages", "trim 0"]
    assert memory._resident_after_release == 201 * MB


def test_growth_counts_from_the_lowest_point_after_a_release(
    released: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # released at 300 MB; a large array unmapped brings it to 150 MB; 170 MB is 20 MB above that
    _resident(monkeypatch, [310 * MB, 300 * MB, 150 * MB, 170 * MB, 160 * MB])
    memory.release_free_memory()
    released.clear()
    assert memory.release_free_memory() is False  # 150 MB: lower, the new base
    assert memory._resident_after_release == 150 * MB
    assert memory.release_free_memory() is True  # 170 - 150 = 20 MB >= 16 MB
    assert released == ["pages", "trim 0"]


def test_force_and_an_unknown_size_release(released: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _resident(monkeypatch, [100 * MB, 100 * MB, 100 * MB, 100 * MB, None, None])
    memory.release_free_memory()
    released.clear()
    assert memory.release_free_memory(force=True) is True  # no growth, forced
    assert released == ["pages", "trim 0"]
    released.clear()
    assert memory.release_free_memory() is True  # the size unknown (no /proc): released
    assert released == ["pages", "trim 0"]


def test_resident_bytes_sees_an_array_touched() -> None:
    before = memory.resident_bytes()
    if before is None:
        pytest.skip("no /proc/self/statm on this system")
    block = np.ones(64 * MB // 8)  # 64 MB written: every page resident
    after = memory.resident_bytes()
    assert after is not None and after - before >= 60 * MB
    del block
