"""Windows built in a forked child process (rocroof.ingest.forked): what crosses, errors, lifetimes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from rocroof import memory, spill
from rocroof.errors import ParseError, ProfilerFailed
from rocroof.ingest import forked
from rocroof.ingest.forked import WindowBuilderError, built_in_child

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the window builder process is Linux's")


def _children() -> list[int]:
    """This process's live child processes (Linux ``/proc``)."""
    out: list[int] = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as fh:
            out += [int(p) for p in fh.read().split()]
    return out


def _no_child_left(before: list[int]) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not set(_children()) - set(before):
            return True
        time.sleep(0.05)
    return False


_ROWS = pd.Index(np.arange(2000, dtype=np.int64) * 2)


def _windows(n: int, categories: pd.Index) -> Iterator[dict[str, pd.DataFrame]]:
    for k in range(n):
        codes = np.arange(k, k + 3, dtype=np.int32) % len(categories)
        yield {
            "dispatch": pd.DataFrame(
                {
                    "dispatch_index": np.arange(k * 3, k * 3 + 3, dtype=np.int64),
                    "end_ns": pd.array([10 * k, None, 7], dtype="Int64"),
                    "message": pd.Categorical.from_codes(codes, categories=categories),
                    "name": np.array([f"w{k}", "ü", None], dtype=object),
                }
            ),
            # rows of a filtered frame: an integer index of 2,000 entries (one object in every window)
            "marker_range": pd.DataFrame({"depth": np.zeros(2000, np.int64)}, index=_ROWS, copy=False),
        }


def test_windows_cross_with_their_values_and_a_large_index_once() -> None:
    """Each window arrives as built; the pass-wide categories (2,000 messages) cross once and are shared."""
    categories = pd.Index([f"ggml:MUL_MAT:blk.{i}" for i in range(2000)], dtype=object)
    ended: list[Any] = []
    before = _children()
    got = list(built_in_child(lambda: _windows(4, categories), lambda: {"n": 4, "notes": ["a"]}, ended.append))
    assert len(got) == 4 and ended == [{"n": 4, "notes": ["a"]}]
    for k, window in enumerate(got):
        d = window["dispatch"]
        assert d["dispatch_index"].tolist() == [3 * k, 3 * k + 1, 3 * k + 2]
        assert d["end_ns"].dtype == "Int64" and d["end_ns"].isna().tolist() == [False, True, False]
        assert d["message"].tolist() == [f"ggml:MUL_MAT:blk.{i}" for i in range(k, k + 3)]
        pd.testing.assert_frame_equal(d, list(_windows(4, categories))[k]["dispatch"])  # as built in one process
        d.loc[0, "dispatch_index"] = -1  # the arrays are the parent's own, writable
    first = got[0]["dispatch"]["message"].cat.categories
    # an integer index is sent with its window each time (not held for the run), the same object or not
    rows = [w["marker_range"].index for w in got]
    assert all(r.equals(_ROWS) for r in rows) and len({id(r) for r in rows}) == 4
    assert all(w["dispatch"]["message"].cat.categories is first for w in got[1:])  # one index, sent once
    assert first.equals(categories) and first.dtype == categories.dtype
    assert _no_child_left(before)


def test_the_child_builds_while_the_parent_consumes() -> None:
    """The child runs ahead of the consumer (the point of the process): its pid differs from the parent's."""
    pids = list(built_in_child(lambda: iter([os.getpid(), os.getpid()]), lambda: None, lambda _: None))
    assert len(set(pids)) == 1 and pids[0] != os.getpid()


@pytest.mark.parametrize(
    "exc",
    [
        ParseError("/data/31337_kernel_trace.csv", "column 'End_Timestamp' is empty; expected an integer", 7),
        ProfilerFailed(["rocprofv3", "--kernel-trace"], 3, "boom\nlast line"),
        ValueError("a bug's message"),
    ],
)
def test_an_error_in_the_child_is_raised_in_the_parent_as_itself(exc: BaseException) -> None:
    def windows() -> Iterator[int]:
        yield 1
        raise exc

    seen: list[int] = []
    before = _children()
    with pytest.raises(type(exc)) as raised:
        for item in built_in_child(windows, lambda: None, lambda _: None):
            seen.append(item)
    assert seen == [1] and str(raised.value) == str(exc)
    if isinstance(exc, ParseError):
        assert (raised.value.path, raised.value.row, raised.value.reason) == (exc.path, exc.row, exc.reason)
    if isinstance(exc, ValueError):  # a bug keeps the child's traceback, as a note
        assert "window builder process" in "".join(getattr(raised.value, "__notes__", []))
        assert "in windows" in "".join(raised.value.__notes__)
    assert _no_child_left(before)


class _Unpicklable(Exception):
    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a}+{b}")


def test_an_error_that_does_not_cross_becomes_a_window_builder_error() -> None:
    def windows() -> Iterator[int]:
        raise _Unpicklable(1, 2)
        yield 0

    with pytest.raises(WindowBuilderError, match=r"building the windows failed: _Unpicklable: 1\+2"):
        list(built_in_child(windows, lambda: None, lambda _: None))


def test_a_child_that_dies_is_an_error_in_the_parent() -> None:
    """Killed mid-run (the OOM killer, a user): the parent raises, the store's transaction rolls back."""

    def windows() -> Iterator[int]:
        yield 1
        os.kill(os.getpid(), signal.SIGKILL)
        yield 2

    before = _children()
    with pytest.raises(WindowBuilderError, match="ended without finishing the windows") as raised:
        list(built_in_child(windows, lambda: None, lambda _: None))
    assert "killed by SIGKILL: out of memory" in str(raised.value)
    assert "ROCROOF_WINDOW_PROCESS=0" in str(raised.value)  # what to do
    assert _no_child_left(before)


def test_a_message_cut_short_is_told_apart_from_the_end_of_the_pipe() -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, forked._HEADER.pack(forked._WINDOW, 100, 0) + b"x" * 10)  # 10 of 100 bytes
    os.close(write_fd)
    with pytest.raises(forked._CutShort):
        forked._receive(read_fd, {})
    os.close(read_fd)
    # cut right after a whole header, and in the middle of a header
    for cut in (forked._HEADER.pack(forked._WINDOW, 100, 0), forked._HEADER.pack(forked._WINDOW, 100, 0)[:5]):
        read_fd, write_fd = os.pipe()
        os.write(write_fd, cut)
        os.close(write_fd)
        with pytest.raises(forked._CutShort):
            forked._receive(read_fd, {})
        os.close(read_fd)
    read_fd, write_fd = os.pipe()
    os.close(write_fd)
    assert forked._receive(read_fd, {}) is None  # nothing more: between messages
    os.close(read_fd)


def test_a_consumer_that_stops_early_kills_and_reaps_the_child() -> None:
    def windows() -> Iterator[int]:
        k = 0
        while True:  # would build forever
            yield k
            k += 1

    before = _children()
    gen = built_in_child(windows, lambda: None, lambda _: None)
    assert next(gen) == 0
    assert set(_children()) - set(before)  # running
    gen.close()
    assert _no_child_left(before)


def test_the_child_dies_with_the_parent(tmp_path: Path) -> None:
    """kill -9 of the ingest: its window builder goes too (PR_SET_PDEATHSIG), holding nothing open."""
    pid_file = tmp_path / "child.pid"
    script = textwrap.dedent(
        f"""
        import os, signal, time
        from rocroof.ingest.forked import built_in_child

        def windows():
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            while True:
                time.sleep(0.05)
                yield 0

        for _ in built_in_child(windows, lambda: None, lambda _: None):
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], check=False, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and Path(f"/proc/{child}").exists():
        status = Path(f"/proc/{child}/status").read_text() if Path(f"/proc/{child}").exists() else ""
        if "State:\tZ" in status:  # dead, waiting for init to reap it
            break
        time.sleep(0.05)
    else:
        assert not Path(f"/proc/{child}").exists()


def test_module_locks_are_free_in_a_forked_child() -> None:
    """A lock another thread holds at the fork is a fresh one in the child (else its first release would hang)."""
    with spill._maps_lock, memory._lock:  # noqa: SLF001
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's
            ok = spill._maps_lock.acquire(blocking=False) and memory._lock.acquire(blocking=False)  # noqa: SLF001
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_process_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCROOF_WINDOW_PROCESS", "0")
    assert not forked.enabled()
    monkeypatch.setenv("ROCROOF_WINDOW_PROCESS", "1")
    assert forked.enabled()


def test_a_fork_that_fails_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """No process left to fork (EAGAIN): one line naming the way round; the collector is not left frozen."""
    import errno
    import gc

    def no_fork() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    frozen = gc.get_freeze_count()
    with pytest.raises(WindowBuilderError, match=r"cannot start the window builder process \(Resource temporarily"):
        list(built_in_child(lambda: iter([1]), lambda: None, lambda _: None))
    assert gc.get_freeze_count() == frozen
