"""Copy every run of several results databases into one (``rocroof merge``).

Each run is copied with all its rows in one transaction of the target and gets a new run id
there; a run whose content hash the target already holds is skipped (runs stored without a
hash are always copied). Sources and target are SQLite files or PostgreSQL URLs, in any mix.
All of them must be at this rocroof's schema version: everything is checked before the first
run is copied, so a mismatch stops the merge with nothing written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from ..dbfile import damaged
from ..errors import InputError, SchemaError
from . import CopiedRun, Store, _reason, is_url, migrations, schema
from .locking import LockWait


@dataclass(frozen=True)
class MergedRun:
    """One source run and what the merge did with it.

    Attributes:
        source: the source database (password hidden).
        source_run_id: its id there.
        source_path: the capture it was ingested from.
        run_id: its new id in the target; None when skipped.
        existing_run_id: when skipped, the target's run with the same content.
        rows: rows copied (all tables but ``run``).
    """

    source: str
    source_run_id: int
    source_path: str | None
    run_id: int | None
    existing_run_id: int | None
    rows: int

    @property
    def skipped(self) -> bool:
        """True when the target already held this content."""
        return self.run_id is None


def merge(
    sources: Sequence[str | Path],
    into: str | Path,
    *,
    on_run: Callable[[MergedRun], None] | None = None,
    on_wait: LockWait | None = None,
) -> list[MergedRun]:
    """Copy every run of ``sources`` into ``into``, oldest first, source by source.

    Args:
        sources: SQLite files or database URLs, read-only.
        into: the target; a SQLite file that does not exist yet, or an empty database, gets the schema.
        on_run: called after each run is copied or skipped.
        on_wait: told while a SQLite source or target stays locked by another process
            (:data:`~rocroof.store.locking.LockWait`).

    Returns:
        One entry per source run, in the order handled.

    Raises:
        InputError: no sources, a source that is also the target, a missing source file.
        SchemaError: a source or the target with another schema version (older: ``rocroof db
            upgrade --db X`` first; newer: upgrade rocroof), or not a rocroof database.
    """
    if not sources:
        raise InputError("merge: give at least one source database")
    target = Store(into, on_wait=on_wait)
    opened: list[Store] = []
    try:
        for src in sources:
            store = Store(src, read_only=True, on_wait=on_wait)
            opened.append(store)
            if _same_database(store, target):
                raise InputError(f"{store.location}: is also the target (--into); it cannot be merged into itself")
            store.check()  # out of date, newer, empty or foreign: stop before anything is written
        _ready_target(target)
        done: list[MergedRun] = []
        for store in opened:
            with store.engine.connect() as conn:
                runs = conn.execute(
                    sa.select(schema.run.c.run_id, schema.run.c.source_path).order_by(schema.run.c.run_id)
                ).all()
            for rid, source_path in runs:
                copied = _copy_run(target, store, int(rid))
                entry = MergedRun(
                    store.location, int(rid), source_path, copied.run_id, copied.existing_run_id, copied.rows
                )
                done.append(entry)
                if on_run:
                    on_run(entry)
        return done
    finally:
        for store in opened:
            store.close()
        target.close()


def _copy_run(target: Store, source: Store, run_id: int) -> CopiedRun:
    """``target.copy_run(source, run_id)``, a damaged source named in the error.

    Raises:
        InputError: the copy failed on a damaged file (SQLite's "database disk image is
            malformed") or on rows that break the target's constraints (a foreign key to no row:
            what a damaged source gives); the copy of this run was rolled back, the runs copied
            before it are kept.
    """
    try:
        return target.copy_run(source, run_id)
    except sa.exc.DBAPIError as exc:
        reason = _reason(exc)
        if isinstance(exc, sa.exc.OperationalError) and not damaged(reason):
            raise  # the target or the source refused (locked, read-only, full disk): the CLI says so
        why = (
            "a file is damaged: restore it from a copy, or save what can be read with the sqlite3 shell's .recover"
            if damaged(reason)
            else "its rows break the target's constraints, as a damaged file's do: PRAGMA integrity_check in the "
            "sqlite3 shell tells"
        )
        raise InputError(
            f"{source.location}: run {run_id} could not be copied into {target.location} ({reason}): {why}; "
            "nothing of this run is stored, the runs copied before it are kept"
        ) from exc


def _ready_target(target: Store) -> None:
    """Give a new or empty target the schema; refuse one with another schema version."""
    target.preflight()  # a foreign or newer database: refused without writing
    if is_url(target.location) or Path(target.location).exists():
        try:
            with target.engine.connect() as conn:
                done = migrations.applied(conn)
        except sa.exc.DatabaseError as exc:
            raise SchemaError(f"{target.location}: cannot open the database ({exc.orig})") from exc
        if done:
            target.check()  # pending migrations: the user upgrades first, knowingly
            return
    target.upgrade()


def _same_database(a: Store, b: Store) -> bool:
    """True when both stores open the same SQLite file, or the same URL (spelling of the driver aside)."""
    if is_url(a.target) or is_url(b.target):
        return is_url(a.target) and is_url(b.target) and a.engine.url == b.engine.url
    pa, pb = Path(a.location), Path(b.location)
    if pa.exists() and pb.exists():
        return os.path.samefile(pa, pb)
    return pa.resolve() == pb.resolve()
