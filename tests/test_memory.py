"""rocroof.memory: when the freed memory of an ingest goes back to the operating system."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

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


# /proc/PID/smaps as proc(5) lays it out: a header line per mapping (range, permissions, offset,
# device, inode, path), then its fields in kB. Trimmed to the fields the parser reads, and one
# it ignores. The sizes below are picked by hand.
_SMAPS = """\
55d0a0000000-55d0a0200000 r-xp 00000000 fd:01 1001                       /usr/lib/libpolars.so
Size:               2048 kB
Rss:                 512 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me sd
55d0a0200000-55d0a0210000 r--p 00200000 fd:01 1001                       /usr/lib/libpolars.so
Size:                 64 kB
Rss:                  64 kB
Anonymous:            64 kB
VmFlags: rd mr mw me ac sd
55d0a0210000-55d0a0220000 rw-p 00210000 fd:01 1001                       /usr/lib/libpolars.so
Size:                 64 kB
Rss:                  16 kB
Anonymous:            16 kB
VmFlags: rd wr mr mw me ac sd
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                1024 kB
Anonymous:          1024 kB
VmFlags: rd wr mr mw me ac sd
7f0000100000-7f0000104000 r--s 00000000 00:1f 77                         /tmp/#77 (deleted)
Size:                 16 kB
Rss:                   8 kB
Anonymous:             0 kB
VmFlags: rd mr me ms sd
7f0000104000-7f0000105000 r--p 00000000 fd:01 1002                       /usr/lib/locale/C.utf8/LC_CTYPE
Size:                  4 kB
Rss:                   0 kB
Anonymous:             0 kB
VmFlags: rd mr mw me sd
7f0000105000-7f0000106000 r--s 00000000 00:05 9                          /dev/dri/card0
Size:                  4 kB
Rss:                   4 kB
Anonymous:             0 kB
VmFlags: rd mr me ms io pf sd
7f0000106000-7f0000108000 r-xp 00000000 fd:01 1003                       /usr/lib/libpinned.so
Size:                  8 kB
Rss:                   8 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me lo sd
7ffc00000000-7ffc00001000 r-xp 00000000 00:00 0                          [vdso]
Size:                  4 kB
Rss:                   4 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me de sd
"""


def test_clean_file_mappings_takes_read_only_file_pages_with_no_private_copy() -> None:
    # kept: the library's code (r-xp, 512 kB resident) and the spill file's mapping (r--s, 8 kB).
    # Left: the relocated read-only data (64 kB written before it turned read-only), the writable
    # data, anonymous memory, a mapping with nothing resident, a device's, a locked one, [vdso].
    assert memory.clean_file_mappings(_SMAPS) == [
        (0x55D0A0000000, 0x200000, 512 * 1024),
        (0x7F0000100000, 0x4000, 8 * 1024),
    ]


def test_clean_file_mappings_of_nothing_is_nothing() -> None:
    assert memory.clean_file_mappings("") == []


def _resident_kb(start: int) -> int:
    """Rss (kB) of this process's mapping that starts at ``start``, from /proc/self/smaps."""
    inside = False
    with open("/proc/self/smaps") as fh:
        for line in fh:
            first = line.split(" ", 1)[0]
            if not first.endswith(":"):
                inside = int(first.split("-")[0], 16) == start
            elif inside and first == "Rss:":
                return int(line.split()[1])
    raise AssertionError(f"no mapping at {start:#x}")


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
def test_release_file_pages_drops_a_read_only_file_mapping_and_keeps_its_data(tmp_path: Path) -> None:
    page = mmap.PAGESIZE
    data = bytes(range(256)) * (64 * page // 256)  # 64 pages, each byte its offset mod 256
    path = tmp_path / "column.bin"
    path.write_bytes(data)
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), len(data), access=mmap.ACCESS_READ) as mapped:
        view = np.frombuffer(mapped, dtype=np.uint8)
        assert int(view[::page].sum()) == 0  # touch every page: byte 0 of each page is 0
        start = view.__array_interface__["data"][0]
        assert _resident_kb(start) == 64 * page // 1024
        assert memory.release_file_pages() >= 64 * page
        assert _resident_kb(start) == 0
        assert view.tobytes() == data  # read again from the file: the same bytes
        del view
