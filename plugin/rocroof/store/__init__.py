"""The results database: a SQLite file by default, any SQLAlchemy URL (PostgreSQL) for teams.

:class:`Store` writes each run in one transaction (a failed ingest leaves the database as it
was), refuses to ingest the same raw output twice (content hash) unless asked to replace it,
and opens read-only for queries.
"""

from __future__ import annotations

import datetime as dt
import math
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa

from ..errors import DuplicateRunError, InputError, QueryError, SchemaError
from ..pipeline import RunFrames
from . import migrations, schema

#: progress(stage, done, total)
Progress = Callable[[str, int, int], None]

INSERT_CHUNK = 20_000
_TABLE_ORDER = [
    "agent",
    "pass",
    "marker_range",
    "op_invocation",
    "op_node",
    "op_operand",
    "dispatch",
    "counter_value",
    "counter_instance",
    "dram_traffic",
]


def is_url(target: str) -> bool:
    """True for an SQLAlchemy URL (``postgresql://...``), False for a file path."""
    return "://" in target


class Store:
    """A rocroof results database.

    Args:
        target: a file path (SQLite) or an SQLAlchemy URL.
        read_only: open without write access (SQLite ``mode=ro`` + ``query_only``;
            PostgreSQL ``default_transaction_read_only``).

    Raises:
        InputError: ``read_only`` and the SQLite file does not exist.
    """

    def __init__(self, target: str | Path, *, read_only: bool = False) -> None:
        self.target = str(target)
        self.read_only = read_only
        if is_url(self.target):
            url = sa.make_url(self.target)
            kwargs: dict[str, Any] = {}
            if read_only and url.get_backend_name() == "postgresql":
                kwargs["connect_args"] = {"options": "-c default_transaction_read_only=on"}
            self.engine = sa.create_engine(url, **kwargs)
            self.location = url.render_as_string(hide_password=True)
        else:
            path = Path(self.target).expanduser()
            self.location = str(path)
            if read_only:
                if not path.is_file():
                    raise InputError(
                        f"{path}: no such database (ingest a capture first: rocroof ingest PATH --db {path})"
                    )
                uri = f"file:{path.resolve().as_posix()}?mode=ro"

                def connect() -> sqlite3.Connection:
                    conn = sqlite3.connect(uri, uri=True, timeout=30)
                    conn.execute("PRAGMA query_only = ON")
                    return conn

                self.engine = sa.create_engine("sqlite://", creator=connect)
            else:
                if path.parent and not path.parent.exists():
                    raise InputError(f"{path}: directory {path.parent} does not exist")
                self.engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 30})

                @sa.event.listens_for(self.engine, "connect")
                def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                    cur = dbapi_conn.cursor()
                    cur.execute("PRAGMA foreign_keys = ON")
                    cur.execute("PRAGMA busy_timeout = 30000")
                    cur.execute("PRAGMA journal_mode = WAL")
                    cur.close()

    def close(self) -> None:
        """Release connections."""
        self.engine.dispose()

    # ---- schema -----------------------------------------------------------------------
    def upgrade(self) -> list[str]:
        """Create or upgrade the schema; returns the migrations applied now.

        Raises:
            SchemaError: a newer or foreign schema.
        """
        try:
            return migrations.upgrade(self.engine, self.location)
        except sa.exc.OperationalError as exc:
            raise SchemaError(f"{self.location}: cannot open the database ({exc.orig})") from exc

    def check(self) -> int:
        """Verify the schema is current; return its version.

        Raises:
            SchemaError: empty, foreign, newer or out-of-date database.
        """
        try:
            with self.engine.connect() as conn:
                return migrations.check(conn, self.location)
        except sa.exc.DatabaseError as exc:
            raise SchemaError(f"{self.location}: not a readable database ({exc.orig})") from exc

    def status(self) -> list[tuple[str, str | None]]:
        """``[(migration, applied_at or None)]`` in order."""
        with self.engine.connect() as conn:
            done = migrations.applied(conn)
        return [(name, done.get(name)) for name, _ in migrations.MIGRATIONS]

    # ---- writing ------------------------------------------------------------------------
    def write_run(
        self,
        frames: RunFrames,
        *,
        labels: dict[str, str] | None = None,
        replace: bool = False,
        progress: Progress | None = None,
    ) -> int:
        """Store one run in a single transaction; return its ``run_id``.

        Args:
            frames: from :func:`rocroof.pipeline.build_run`.
            labels: user labels (``key=value``).
            replace: replace a run with the same content hash instead of refusing.
            progress: called with (stage, rows done, rows total) while inserting.

        Raises:
            DuplicateRunError: the same raw output is already stored and ``replace`` is False.
            SchemaError: the database has a foreign or newer schema.
        """
        self.upgrade()
        total = sum(len(frames.tables.get(name, ())) for name in _TABLE_ORDER)
        done = 0
        with self.engine.begin() as conn:
            digest = frames.run.get("content_sha256")
            if digest:
                old = conn.execute(sa.select(schema.run.c.run_id).where(schema.run.c.content_sha256 == digest)).scalar()
                if old is not None:
                    if not replace:
                        raise DuplicateRunError(
                            f"{frames.run.get('source_path')}: this capture is already stored as run {old} "
                            f"(same content); use --replace to re-ingest it"
                        )
                    _delete_run(conn, int(old))
            row = dict(frames.run)
            row["created_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            result = conn.execute(schema.run.insert().values(**_clean(row)))
            run_id = int(result.inserted_primary_key[0])  # type: ignore[index]
            small: dict[str, list[dict[str, Any]]] = {
                "run_label": [{"key": k, "value": v} for k, v in (labels or {}).items()],
                "run_note": [
                    {"note_index": i, "severity": n.severity, "code": n.code, "message": n.message}
                    for i, n in enumerate(frames.notes)
                ],
                "run_setting": [{"key": k, "value": v} for k, v in frames.settings.items()],
            }
            for name, rows in small.items():
                if rows:
                    conn.execute(schema.metadata.tables[name].insert(), [{"run_id": run_id, **r} for r in rows])
            for name in _TABLE_ORDER:
                df = frames.tables.get(name)
                if df is None or not len(df):
                    continue
                table = schema.metadata.tables[name]
                for chunk in _chunks(df, table, run_id):
                    conn.execute(table.insert(), chunk)
                    done += len(chunk)
                    if progress:
                        progress(name, done, total)
        return run_id

    def delete_run(self, run_id: int) -> None:
        """Delete a run and all its rows (one transaction).

        Raises:
            InputError: no such run.
        """
        with self.engine.begin() as conn:
            if conn.execute(sa.select(schema.run.c.run_id).where(schema.run.c.run_id == run_id)).scalar() is None:
                raise InputError(f"{self.location}: no run {run_id}")
            _delete_run(conn, run_id)

    # ---- reading ------------------------------------------------------------------------
    def frame(self, stmt: sa.Select[Any] | sa.TextClause, params: dict[str, Any] | None = None) -> pd.DataFrame:
        """Run a select and return a DataFrame."""
        with self.engine.connect() as conn:
            result = conn.execute(stmt, params or {})
            return pd.DataFrame(result.fetchall(), columns=list(result.keys()))

    def resolve_run(self, spec: str | int | None) -> int:
        """A run id from ``latest``/None or a number.

        Raises:
            InputError: no runs, or no such run.
        """
        self.check()
        with self.engine.connect() as conn:
            if spec is None or str(spec).lower() == "latest":
                rid = conn.execute(sa.select(sa.func.max(schema.run.c.run_id))).scalar()
                if rid is None:
                    raise InputError(f"{self.location}: no runs stored yet")
                return int(rid)
            try:
                wanted = int(spec)
            except ValueError as exc:
                raise InputError(f"run must be a number or 'latest', not {spec!r}") from exc
            rid = conn.execute(sa.select(schema.run.c.run_id).where(schema.run.c.run_id == wanted)).scalar()
            if rid is None:
                raise InputError(f"{self.location}: no run {wanted} (see 'rocroof runs')")
            return int(rid)

    def query(self, sql: str) -> pd.DataFrame:
        """Run one user SQL statement on a read-only connection.

        Raises:
            QueryError: the statement fails or tries to write.
        """
        if not self.read_only:
            raise QueryError("Store.query needs a read-only store (Store(path, read_only=True))")
        try:
            with self.engine.connect() as conn:
                result = conn.exec_driver_sql(sql)
                if not result.returns_rows:
                    raise QueryError("the statement returned no rows; only SELECT-like queries are allowed")
                return pd.DataFrame(result.fetchall(), columns=list(result.keys()))
        except sa.exc.DBAPIError as exc:
            msg = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
            if "readonly" in msg.replace("-", "").lower() or "read-only" in msg.lower() or "query_only" in msg:
                raise QueryError(
                    f"the database is opened read-only; statements that write are refused ({msg})"
                ) from exc
            raise QueryError(f"query failed: {msg}") from exc


def _delete_run(conn: sa.Connection, run_id: int) -> None:
    for table in reversed(schema.metadata.sorted_tables):
        if "run_id" in table.c:
            conn.execute(table.delete().where(table.c.run_id == run_id))


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            out[k] = None
        elif hasattr(v, "item"):
            out[k] = v.item()
        else:
            out[k] = v
    return out


def _chunks(df: pd.DataFrame, table: sa.Table, run_id: int) -> Iterator[list[dict[str, Any]]]:
    cols = [c.name for c in table.columns if c.name in df.columns and c.name != "run_id"]
    n = len(df)
    for start in range(0, n, INSERT_CHUNK):
        part = df.iloc[start : start + INSERT_CHUNK]
        values = {c: _py_list(part[c]) for c in cols}
        yield [{"run_id": run_id, **{c: values[c][i] for c in cols}} for i in range(len(part))]


def _py_list(col: pd.Series) -> list[Any]:
    """Column values as Python scalars with None for missing (sqlite3 rejects numpy types)."""
    if col.dtype == object:
        return [
            None
            if (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)))
            else (v.item() if hasattr(v, "item") else v)
            for v in col.tolist()
        ]
    mask = col.isna().to_numpy()
    values = col.astype(object).tolist() if str(col.dtype) in ("Int64", "boolean") else col.tolist()
    return [None if m else (v.item() if hasattr(v, "item") else v) for v, m in zip(values, mask, strict=True)]
