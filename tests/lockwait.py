"""A process that waits for another's SQLite write lock, and a signal sent to it while it waits.

The user's trial: `rocroof ingest` into a file another process was writing to waited in SQLite's
busy handler (in C) and ignored Ctrl-C until the other writer let go. The tests of the store and of
the command line both hold the lock (:func:`held_write_lock`), start a child that waits for it, and
signal the child once it has printed its first line (:func:`signal_after_first_line`).
"""

from __future__ import annotations

import contextlib
import queue
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path


@contextlib.contextmanager
def held_write_lock(db: Path, begin: str = "BEGIN IMMEDIATE") -> Iterator[sqlite3.Connection]:
    """The write lock of ``db`` held by another connection (another process's ingest, for SQLite's locks).

    ``begin``: ``BEGIN IMMEDIATE`` (a writer's reserved lock) or ``BEGIN EXCLUSIVE`` (readers wait too).
    """
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute(begin)
    try:
        yield other
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()


@dataclass
class Signalled:
    """What a child did once signalled: its exit status, its first line, the lines after it, and
    the seconds from the signal to its exit."""

    returncode: int
    first_line: str
    rest: str
    took_s: float


def signal_after_first_line(
    argv: Sequence[str], sig: int, *, stream: str = "stdout", settle_s: float = 0.0, timeout_s: float = 60
) -> Signalled:
    """Run ``argv``, wait for its first line on ``stream`` (``stdout`` or ``stderr``; the other is let
    go), sleep ``settle_s``, send ``sig`` and wait for the child to end.

    The child takes SIGINT's default action back (as a terminal's foreground job does: a child of a
    shell in the background would ignore it). Raises ``queue.Empty`` when no line comes within
    ``timeout_s`` and ``subprocess.TimeoutExpired`` when the child outlives the signal by as long;
    the child is killed either way.
    """
    out = subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL
    err = subprocess.PIPE if stream == "stderr" else subprocess.DEVNULL
    with subprocess.Popen(
        list(argv),
        stdout=out,
        stderr=err,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as proc:
        pipe = proc.stdout if stream == "stdout" else proc.stderr
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(line) for line in pipe or ()], daemon=True)
        reader.start()
        try:
            first = lines.get(timeout=timeout_s)
            time.sleep(settle_s)
            proc.send_signal(sig)
            started = time.monotonic()
            proc.wait(timeout=timeout_s)
            took = time.monotonic() - started
        finally:
            proc.kill()
        reader.join(10)
    rest = "".join(lines.get() for _ in range(lines.qsize()))
    return Signalled(proc.returncode, first, rest, took)
