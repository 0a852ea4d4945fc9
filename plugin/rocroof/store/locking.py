"""Waiting for another process's SQLite lock in short tries, so that the wait can be stopped.

SQLite waits for a lock in its busy handler, in C: a signal (Ctrl-C, SIGTERM) is handled by
Python only once the call returns, which a busy timeout of :data:`WRITE_TIMEOUT_S` puts off for
up to ten minutes. The waits that can last (taking the write lock, a reader's first look at a
file another process holds) therefore try for :data:`BUSY_SLICE_MS` at a time, in a Python loop
that runs signal handlers and the caller's ``on_wait`` hook between the tries, until their
timeout. Writers still queue: each try is SQLite's own busy wait, only shorter.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import sqlalchemy as sa

#: How long a SQLite writer waits for another process's write transaction (parallel sweep points
#: ingesting into one file queue up; each holds the lock only while it inserts one run).
WRITE_TIMEOUT_S = 600
#: How long a SQLite reader waits (WAL readers wait only for a checkpoint or a journal switch).
READ_TIMEOUT_S = 30
#: SQLite's busy timeout for one try at a lock (ms): how long a Ctrl-C may go unhandled.
BUSY_SLICE_MS = 100
#: How long a wait lasts before rocroof's commands tell the user about it (s).
WAIT_NOTICE_S = 2.0

#: ``on_wait(database, waited_s, timeout_s)``: called after each try that found the database
#: locked (about every :data:`BUSY_SLICE_MS`), with the seconds waited so far and the most it
#: will wait. It may raise to stop waiting: the exception goes to the caller, nothing is written.
LockWait = Callable[[str, float, float], None]

T = TypeVar("T")


def is_locked(exc: BaseException) -> bool:
    """True for SQLite's "database is locked" (a busy timeout that ran out), bare or wrapped by SQLAlchemy."""
    orig = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    return isinstance(orig, sqlite3.OperationalError) and "locked" in str(orig)


def retry_while_locked(
    attempt: Callable[[], T],
    *,
    location: str,
    timeout_s: float,
    on_wait: LockWait | None = None,
    pause_s: float = 0.0,
) -> T:
    """``attempt()``, tried again while it fails with "database is locked", for up to ``timeout_s``.

    Args:
        attempt: one try; it should wait at most about :data:`BUSY_SLICE_MS` (a short busy timeout).
        location: the database, as ``on_wait`` is told it.
        timeout_s: how long to keep trying.
        on_wait: see :data:`LockWait`.
        pause_s: sleep between tries (for an attempt that SQLite fails at once, without a busy wait).

    Raises:
        sqlalchemy.exc.OperationalError, sqlite3.OperationalError: the last try's "database is locked"
            once ``timeout_s`` has passed; any other error of a try at once.
    """
    start = time.monotonic()
    while True:
        try:
            return attempt()
        except (sa.exc.OperationalError, sqlite3.OperationalError) as exc:
            waited = time.monotonic() - start
            if not is_locked(exc) or waited >= timeout_s:
                raise
        if on_wait is not None:
            on_wait(location, waited, timeout_s)
        if pause_s:
            time.sleep(pause_s)


@contextlib.contextmanager
def short_tries(conn: sa.Connection) -> Iterator[None]:
    """Within the block, ``conn`` waits at most :data:`BUSY_SLICE_MS` for a lock; its busy timeout is set back after."""
    before = int(conn.exec_driver_sql("PRAGMA busy_timeout").scalar() or 0)
    conn.exec_driver_sql(f"PRAGMA busy_timeout = {BUSY_SLICE_MS}")
    try:
        yield
    except BaseException:
        # Ctrl-C or an error: it is the one to report; a connection left with the short timeout goes
        try:
            if not conn.invalidated:
                conn.exec_driver_sql(f"PRAGMA busy_timeout = {before}")
        except Exception:
            conn.invalidate()
        raise
    conn.exec_driver_sql(f"PRAGMA busy_timeout = {before}")


def begin_immediate(conn: sa.Connection, *, location: str, timeout_s: float, on_wait: LockWait | None = None) -> None:
    """``BEGIN IMMEDIATE`` on a SQLite ``conn`` (the write lock), waiting for it in short tries.

    The connection's own busy timeout is set back once the lock is held: the statements of the
    transaction are not cut short by the tries' timeout.

    Raises:
        sqlalchemy.exc.OperationalError: "database is locked" for ``timeout_s``.
    """
    with short_tries(conn):
        retry_while_locked(
            lambda: conn.exec_driver_sql("BEGIN IMMEDIATE"), location=location, timeout_s=timeout_s, on_wait=on_wait
        )


def wait_readable(
    conn: sqlite3.Connection, *, location: str, timeout_s: float, on_wait: LockWait | None = None
) -> None:
    """Wait, in short tries, until a new SQLite connection can read (another process may hold the file).

    Only a lock is waited for: any other error is left to the first real query. The connection's
    busy timeout is ``timeout_s`` afterwards.
    """
    conn.execute(f"PRAGMA busy_timeout = {BUSY_SLICE_MS}")
    try:
        retry_while_locked(
            lambda: conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall(),
            location=location,
            timeout_s=timeout_s,
            on_wait=on_wait,
        )
    except sqlite3.DatabaseError as exc:
        if is_locked(exc):
            raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
