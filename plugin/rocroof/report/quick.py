"""A run's stored report read back without pandas or SQLAlchemy: ``rocroof report`` in well under a second.

``rocroof ingest`` stores the op report of each run it writes (``stored_report``: the rows that
:func:`rocroof.report.tables.build_report` returns, built in the run's write transaction).
:func:`stored_report` reads it back with the standard library's ``sqlite3`` and the run's
header facts (run row, labels, notes, ceilings), as a :class:`~rocroof.report.render.Report` that
:func:`rocroof.report.render.render_text` renders exactly as the full path does.

It is a fast path, never the only one: it answers None (and the caller builds the report from
the tables) whenever it cannot be sure to give the same report — a PostgreSQL URL or a file it
cannot open read-only, labels that pick no run or several, a schema other than this rocroof's,
no stored report or one built by another rocroof version. Errors (no such file, no such run,
ambiguous labels) are left to the full path, which words them.

Why: on the 2-core development machine pandas alone imports in ~0.47 s and SQLAlchemy in ~0.24 s,
and the op report of 10^6 dispatches reads the roofline of every invocation (issue 15: the op
report within 0.5 s; benchmarks/scale.py measures it).
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from .. import SCHEMA_VERSION, __version__
from ..dbfile import read_only_uri
from ..errors import InputError
from ..labels import parse_run_labels, runs_matching
from ..note import Note
from .render import By, Report, Rows, render_text

_RUN_NUMBER = re.compile(r"[0-9]+")
#: Columns every stored op report has (rocroof.report.tables.build_report's, whatever the run measured;
#: ``run_id`` is not stored: it is the run's own).
_NEEDED = {"op", "invocations", "dispatches", "duration_ns", "share_of_time_pct"}


def _connect(db: str) -> sqlite3.Connection | None:
    """The SQLite file ``db`` opened read-only, or None (a URL, no such file, not openable)."""
    if "://" in db or db.startswith("sqlite:"):
        return None
    path = Path(db).expanduser()
    try:
        if not path.is_file():
            return None
        conn = sqlite3.connect(read_only_uri(path), uri=True, timeout=5.0)
    except (OSError, ValueError, sqlite3.Error):
        return None
    return conn


def _dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def stored_report(db: str, run_spec: str | None, by: By | str, top: int | None = None) -> Report | None:
    """The report of one run from ``stored_report``, or None where the full path must build it.

    Args:
        db: the ``--db`` value (a file path; URLs answer None).
        run_spec: ``latest`` (or None), a run id, or labels (``key=value[,...]``, ``latest:`` before
            them for the newest of several), as :meth:`rocroof.store.Store.resolve_run` takes them.
        by: the grouping; only those of :data:`rocroof.report.tables.STORED_GROUPINGS` are stored.
        top: keep the first N rows (the stored rows are in report order: longest first).

    Returns:
        The report (rows as :class:`~rocroof.report.render.Rows`), or None.
    """
    if by != "op":
        return None
    spec = "latest" if run_spec is None else str(run_spec).strip()
    if spec.lower() != "latest" and not _RUN_NUMBER.fullmatch(spec) and "=" not in spec:
        return None
    conn = _connect(db)
    if conn is None:
        return None
    try:
        return _read(conn, spec, top)
    except (sqlite3.Error, ValueError, KeyError, TypeError, IndexError, OverflowError, RecursionError):
        return None  # anything unexpected: the full path reads (and words what is wrong)
    finally:
        conn.close()


def stored_text(
    db: str, run_spec: str | None, by: str, top: int | None, fmt: str, *, all_columns: bool = False
) -> str | None:
    """:func:`stored_report` rendered (``table`` or ``markdown``), or None where the full path must answer.

    A stored document that reads but cannot be rendered (a hand-edited cell of the wrong type) is
    treated like no document: the full path builds the report from the tables.
    """
    if fmt not in ("table", "markdown"):
        return None
    report = stored_report(db, run_spec, by, top)
    if report is None:
        return None
    try:
        return render_text(report, "markdown" if fmt == "markdown" else "table", all_columns=all_columns)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError):
        return None


def _valid(doc: Any) -> bool:
    """Whether ``doc`` has the shape :func:`rocroof.report.tables.stored_document` writes."""
    if not isinstance(doc, dict):
        return False
    columns, rows, total, fused = doc.get("columns"), doc.get("rows"), doc.get("total_rows"), doc.get("fused")
    if not (isinstance(columns, list) and all(isinstance(c, str) for c in columns) and set(columns) >= _NEEDED):
        return False
    if not (isinstance(rows, list) and all(isinstance(r, list) and len(r) == len(columns) for r in rows)):
        return False
    if not (isinstance(total, int) and not isinstance(total, bool) and total >= len(rows)):
        return False
    if not isinstance(doc.get("totals"), dict) or not isinstance(fused, list):
        return False
    return all(
        isinstance(f, list)
        and len(f) == 3
        and isinstance(f[0], str)
        and isinstance(f[1], str)
        and isinstance(f[2], int)
        and not isinstance(f[2], bool)
        for f in fused
    )


def _run_by_labels(conn: sqlite3.Connection, spec: str) -> int | None:
    """The one run the labels pick (the newest with ``latest:``), or None (none, several, a bad selector)."""
    try:
        newest, selector = parse_run_labels(spec)
    except InputError:
        return None
    labels: dict[int, dict[str, str]] = {int(r): {} for (r,) in conn.execute("SELECT run_id FROM run")}
    for rid, key, value in conn.execute("SELECT run_id, key, value FROM run_label"):
        labels.setdefault(int(rid), {})[str(key)] = str(value)
    found = runs_matching(labels, selector)
    if not found or (len(found) > 1 and not newest):
        return None
    return found[-1]


def _read(conn: sqlite3.Connection, spec: str, top: int | None) -> Report | None:
    """The op report of the run ``spec`` names (see :func:`stored_report`)."""
    (migrations,) = conn.execute("SELECT COUNT(*) FROM rocroof_migration").fetchone()
    if migrations != SCHEMA_VERSION:
        return None
    if spec.lower() == "latest":
        (run_id,) = conn.execute("SELECT MAX(run_id) FROM run").fetchone()
    elif "=" in spec:
        run_id = _run_by_labels(conn, spec)
    else:
        run_id = int(spec)
    if run_id is None or not 0 < run_id < 2**31:
        return None
    found = conn.execute(
        "SELECT rocroof_version, document FROM stored_report WHERE run_id = ? AND grouping = 'op'", (run_id,)
    ).fetchone()
    if found is None or found[0] != __version__:
        return None
    runs = _dicts(conn.execute("SELECT * FROM run WHERE run_id = ?", (run_id,)))
    if not runs:
        return None
    doc = json.loads(found[1])
    if not _valid(doc):
        return None  # not a document this rocroof wrote
    columns = ["run_id", *(c for c in doc["columns"] if c != "run_id")]  # stored without it: copies keep it right
    rows = Rows(
        columns, [{"run_id": run_id, **dict(zip(doc["columns"], values, strict=True))} for values in doc["rows"]]
    )
    notes = [
        Note(severity, code, message)
        for severity, code, message in conn.execute(
            "SELECT severity, code, message FROM run_note WHERE run_id = ? ORDER BY note_index", (run_id,)
        )
    ]
    labels = {
        str(k): str(v)
        for k, v in conn.execute("SELECT key, value FROM run_label WHERE run_id = ? ORDER BY key", (run_id,))
    }
    ceilings = {r["name"]: r for r in _dicts(conn.execute("SELECT * FROM run_ceiling WHERE run_id = ?", (run_id,)))}
    return Report(
        by="op",
        rows=rows if top is None else rows.head(top),
        run=runs[0],
        notes=notes,
        total_rows=int(doc["total_rows"]),
        totals=dict(doc["totals"]),
        ceilings=ceilings,
        labels=labels,
        fused=[(str(op), str(op_list), int(n)) for op, op_list, n in doc["fused"]],
    )
