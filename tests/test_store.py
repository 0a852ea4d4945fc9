"""The results database: schema and migrations, one transaction per run, views, read-only queries.

Most tests store a small hand-made run whose expected aggregates are worked out by hand in the
comments; the fixture-based ones use AMD's recorded vcopy workloads.
"""

from __future__ import annotations

import contextlib
import hashlib
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import rocroof.store as store_mod
from rocroof.capture.readers import read_capture
from rocroof.errors import DuplicateRunError, InputError, QueryError, SchemaError
from rocroof.ingest.pipeline import RunFrames, build_run
from rocroof.records import Note
from rocroof.report.tables import build_report, render, stored_reports
from rocroof.store import Store, schema, views
from rocroof.store.derived import Derived
from rocroof.store.docs import schema_markdown
from rocroof.store.merge import merge
from rocroof.store.migrations import MIGRATIONS, SCHEMA_VERSION, migration_table

from .conftest import REPO, VCOPY_BYTES, fixture_path
from .lockwait import held_write_lock, signal_after_first_line
from .parallel import ingest_at_once
from .store_rows import row_counts

ALL_TABLES = [t.name for t in schema.metadata.sorted_tables] + ["rocroof_migration"]
#: Tables whose rows are the schema's own, not a run's (the same in every database).
STATIC_TABLES = ("rocroof_migration", "attribution_method")


@contextlib.contextmanager
def connect(db: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection that commits and closes (to look at the file as another program would)."""
    conn = sqlite3.connect(db)
    try:
        with conn:
            yield conn
    finally:
        conn.close()


# ---- a hand-made run ------------------------------------------------------------------------
#
# Timing pass 0 holds dispatches 0..3; counter pass 1 holds dispatch 4, a re-run of dispatch 0
# (timing_dispatch_index 0), which the views must not count twice.
#
#   idx kernel  op (invocation)   duration_ns  read bytes (min..max)   write bytes
#   0   mmq     MUL_MAT (100)     1000         4000                    1000
#   1   mmq     MUL_MAT (101)     2000         NULL (3000..6000)       2000
#   2   add     ADD (102)         NULL         100                     100
#   3   mmq     unattributed      500          50                      50
#
# Ceiling 100 GB/s. Bytes / ns = GB/s.
BIG_NS = 12_345_678_901_234_567  # > 2**53: a float64 cannot hold it


def _frames(sha: str | None = "a" * 64, peak: float | None = 100.0) -> RunFrames:
    run = {
        "source_format": "hand-made",
        "source_path": "/captures/hand-made",
        "content_sha256": sha,
        "profiler": "test",
        "gpu_arch": "gfx942",
        "gpu_name": "MI300X",
        "timing_source": "trace",
        "serialised_timings": False,
        "attribution_method": "launch_api",
        "dram_peak_gbps": peak,
        "dram_peak_source": "by hand",
        "rocroof_version": "test",
    }
    passes = pd.DataFrame(
        {
            "pass_index": [0, 1],
            "kind": ["trace", "counter"],
            "label": ["trace", "pass_1"],
            "is_timing_pass": [True, False],
            "dispatch_count": [4, 1],
            "matched_count": [4, 1],
            "timestamps_exact": [True, True],
        }
    )
    ops = pd.DataFrame(
        {
            "op_index": [0, 1, 2],
            "invocation": [100, 101, 102],
            "op": ["MUL_MAT", "MUL_MAT", "ADD"],
            "op_list": ["MUL_MAT", "MUL_MAT", "ADD"],
            "is_fused": [False, False, False],
            "node_name": ["Qcur-0", "Qcur-1", "ffn_out-0"],
            "layer": [0, 1, 0],
            "from_marker": [True, True, True],
            "from_metadata": [False, False, False],
        }
    )
    na = pd.NA
    dispatch = pd.DataFrame(
        {
            "dispatch_index": [0, 1, 2, 3, 4],
            "pass_index": [0, 0, 0, 0, 1],
            "ordinal": [0, 1, 2, 3, 0],
            "dispatch_id": [1, 2, 3, 4, 1],
            "kernel_name": ["mmq", "mmq", "add", "mmq", "mmq"],
            "start_ns": pd.array([BIG_NS, BIG_NS + 2000, na, BIG_NS + 9000, na], dtype="Int64"),
            "duration_ns": pd.array([1000, 2000, na, 500, 1700], dtype="Int64"),
            "op_index": pd.array([0, 1, 2, na, 0], dtype="Int64"),
            "attribution_method": ["launch_api", "launch_api", "launch_api", "none", "launch_api"],
            "timing_dispatch_index": [0, 1, 2, 3, 0],
        }
    )
    nan = float("nan")
    dram = pd.DataFrame(
        {
            "dispatch_index": [0, 1, 2, 3],
            "dram_read_bytes": [4000.0, nan, 100.0, 50.0],
            "dram_read_bytes_min": [4000.0, 3000.0, 100.0, 50.0],
            "dram_read_bytes_max": [4000.0, 6000.0, 100.0, 50.0],
            "dram_write_bytes": [1000.0, 2000.0, 100.0, 50.0],
            "dram_write_bytes_min": [nan, nan, nan, nan],
            "dram_write_bytes_max": [nan, nan, nan, nan],
            "dram_bytes_note": [None, "request size unknown", None, None],
        }
    )
    counters = pd.DataFrame(
        {"dispatch_index": [0, 1, 4], "counter_name": ["TCC_EA0_WRREQ_sum"] * 3, "value": [15.0, 31.0, 15.0]}
    )
    return RunFrames(
        run=run,
        tables={
            "pass": passes,
            "op_invocation": ops,
            "dispatch": dispatch,
            "dram_traffic": dram,
            "counter_value": counters,
        },
        notes=[Note("warning", "dram-bytes-unknown", "1 dispatch(es): request size unknown")],
        settings={"hbm_bw": "100"},
    )


def _counts(db: Path) -> dict[str, int]:
    with connect(db) as conn:
        return {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in ALL_TABLES}


def _one(store: Store, sql: str) -> dict[str, Any]:
    rows = store.query(sql).to_dict("records")
    assert len(rows) == 1, rows
    return rows[0]


def _is_null(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


# ---- schema and migrations ------------------------------------------------------------------


def test_a_new_database_has_16_kib_pages_in_wal_mode(db_path: Path) -> None:
    """SQLite's default page is 4 KiB; a new rocroof file gets 16 KiB (set before its first page)."""
    Store(db_path).write_run(_frames(sha="1" * 64))
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 16_384
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_upgrade_records_every_migration_once(db_path: Path) -> None:
    assert SCHEMA_VERSION == len(MIGRATIONS) >= 1
    assert Store(db_path).upgrade() == [name for name, _ in MIGRATIONS]
    assert Store(db_path).upgrade() == []
    with connect(db_path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM rocroof_migration ORDER BY name")]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert names == sorted(name for name, _ in MIGRATIONS)
    assert set(ALL_TABLES) <= tables
    ro = Store(db_path, read_only=True)
    assert ro.check() == SCHEMA_VERSION
    assert all(applied for _, applied in ro.status())


def test_views_compile_on_sqlite_and_have_exactly_the_documented_columns(db_path: Path) -> None:
    Store(db_path).upgrade()
    ro = Store(db_path, read_only=True)
    for view in views.VIEWS:
        sql = views.compiled(view, sa.create_engine("sqlite://").dialect)
        assert sql.lstrip().upper().startswith("SELECT")
        columns = list(ro.query(f"SELECT * FROM {view.name} LIMIT 0").columns)
        assert columns == list(view.columns), view.name
        assert all(doc.strip() for doc in view.columns.values()), view.name
        assert view.doc.strip()


def test_every_table_column_has_a_doc() -> None:
    for table in [*schema.metadata.sorted_tables, migration_table]:
        for column in table.columns:
            assert str(column.info.get("doc", "")).strip(), f"{table.name}.{column.name} has no doc"


def test_docs_schema_md_is_the_generated_file() -> None:
    generated = subprocess.run(
        [sys.executable, "-m", "rocroof.store.docs"], capture_output=True, text=True, check=True
    ).stdout
    assert generated == schema_markdown()
    committed = (REPO / "docs" / "schema.md").read_text()
    assert committed == generated, "docs/schema.md is stale: run 'make docs'"
    for name in ALL_TABLES + [v.name for v in views.VIEWS]:
        assert f"### `{name}`" in committed


def test_a_newer_schema_is_refused_everywhere_but_status(db_path: Path) -> None:
    Store(db_path).write_run(_frames())
    with connect(db_path) as conn:
        conn.execute("INSERT INTO rocroof_migration VALUES ('0999_from_the_future', '2030-01-01T00:00:00+00:00')")
    before = _counts(db_path)
    ro = Store(db_path, read_only=True)
    with pytest.raises(SchemaError, match="newer rocroof.*0999_from_the_future"):
        ro.check()
    with pytest.raises(SchemaError, match="newer rocroof"):
        ro.resolve_run("latest")
    with pytest.raises(SchemaError, match="newer rocroof"):
        Store(db_path).upgrade()
    with pytest.raises(SchemaError, match="newer rocroof"):
        Store(db_path).preflight()
    with pytest.raises(SchemaError, match="newer rocroof"):
        Store(db_path).write_run(_frames(sha="b" * 64))
    assert ro.status()[-1] == ("0999_from_the_future", "2030-01-01T00:00:00+00:00")
    assert _counts(db_path) == before


def test_an_out_of_date_schema_asks_for_db_upgrade(db_path: Path) -> None:
    Store(db_path).upgrade()
    with connect(db_path) as conn:
        conn.execute("DELETE FROM rocroof_migration")
        conn.execute("INSERT INTO rocroof_migration VALUES ('0000_not_a_step', 'x')")
    # an applied name this rocroof does not know is "newer", even if it sorts first
    with pytest.raises(SchemaError, match="newer"):
        Store(db_path, read_only=True).check()


def test_a_foreign_sqlite_database_is_refused_and_left_byte_for_byte(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    with connect(db) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers VALUES (1, 'x')")
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    for call in (
        lambda: Store(db).upgrade(),
        lambda: Store(db).preflight(),
        lambda: Store(db).write_run(_frames()),
        lambda: Store(db, read_only=True).check(),
        lambda: Store(db, read_only=True).status(),
    ):
        with pytest.raises(SchemaError, match="not a rocroof database"):
            call()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest  # not even switched to WAL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


@pytest.mark.parametrize("content", [b"hello, this is not SQLite\n" * 40, b"SQLite format 3\x00" + b"\xff" * 200])
def test_a_file_that_is_not_a_database_is_a_schema_error(tmp_path: Path, content: bytes) -> None:
    db = tmp_path / "notes.db"
    db.write_bytes(content)
    for call in (
        lambda: Store(db).upgrade(),
        lambda: Store(db).preflight(),
        lambda: Store(db).write_run(_frames()),
        lambda: Store(db, read_only=True).check(),
        lambda: Store(db, read_only=True).status(),
    ):
        with pytest.raises(SchemaError, match=r"notes\.db"):
            call()
    assert db.read_bytes() == content


def test_missing_files_and_directories(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such database"):
        Store(tmp_path / "absent.db", read_only=True)
    with pytest.raises(InputError, match="does not exist"):
        Store(tmp_path / "no" / "dir" / "r.db")
    Store(tmp_path / "new.db").preflight()
    assert not (tmp_path / "new.db").exists()  # preflight creates nothing
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(SchemaError, match="empty database"):
        Store(empty, read_only=True).check()


# ---- one transaction per run ------------------------------------------------------------------


def _fail_in_table(monkeypatch: pytest.MonkeyPatch, failing: str) -> list[str]:
    """Make inserting rows of table ``failing`` raise; return the tables written before."""
    written: list[str] = []
    real = store_mod._chunks

    def chunks(df: pd.DataFrame, table: sa.Table, run_id: int, **kwargs: Any) -> Any:
        if table.name == failing:
            raise RuntimeError(f"disk full while writing {failing}")
        written.append(table.name)
        return real(df, table, run_id, **kwargs)

    monkeypatch.setattr(store_mod, "_chunks", chunks)
    return written


@pytest.mark.parametrize("failing", ["dispatch_record", "counter_reading", "dram_text"])
def test_a_failure_in_the_middle_of_write_run_leaves_the_database_as_it_was(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    first = Store(db_path).write_run(_frames(sha="1" * 64), labels={"model": "a"})
    before = _counts(db_path)
    assert before["run"] == 1 and before["dispatch_record"] == 5

    written = _fail_in_table(monkeypatch, failing)
    with pytest.raises(RuntimeError, match="disk full"):
        Store(db_path).write_run(_frames(sha="2" * 64), labels={"model": "b"})
    assert written, "the failure must come after some rows were inserted"
    assert _counts(db_path) == before
    monkeypatch.undo()

    second = Store(db_path).write_run(_frames(sha="2" * 64), labels={"model": "b"})
    assert second > first
    after = _counts(db_path)
    assert after["run"] == 2 and after["dispatch_record"] == 10 and after["run_label"] == 2


def test_a_database_error_in_the_middle_of_write_run_rolls_back(db_path: Path) -> None:
    Store(db_path).write_run(_frames(sha="1" * 64))
    before = _counts(db_path)
    frames = _frames(sha="2" * 64)
    disp = frames.tables["dispatch"]
    frames.tables["dispatch"] = pd.concat([disp, disp.iloc[[0]]], ignore_index=True)  # duplicate key
    with pytest.raises(sa.exc.IntegrityError):
        Store(db_path).write_run(frames)
    assert _counts(db_path) == before


# ---- values that every row of a chunk shares go into the statement ------------------------------------


def test_values_shared_by_a_chunk_are_written_into_the_statement_and_stored_as_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite, a column holding one value on every row of a chunk is written as an SQL literal.

    Chunks of 2 rows over 6 rows; each column below is the same within some chunks and not in
    others. What SQLite stores (value and type) must be what it stores for the same Python
    values bound one row at a time, worked out here by hand: integers stay integers (2**63-1
    too; -2**63 has no literal and is bound), 1.0 in a FLOAT column is real, a whole float in an
    INTEGER column an integer, a quote in text is text, NUL in text is kept (bound), long text
    stays text, NULL is null, booleans 0/1.
    """
    md = sa.MetaData()
    table = sa.Table(
        "t",
        md,
        sa.Column("run_id", sa.Integer, primary_key=True),
        sa.Column("i", sa.Integer, primary_key=True),
        sa.Column("big", sa.BigInteger),
        sa.Column("nullable", sa.BigInteger),
        sa.Column("real", sa.Float),
        sa.Column("whole", sa.Integer),
        sa.Column("text", sa.Text),
        sa.Column("flag", sa.Boolean),
        sa.Column("cat", sa.Text),
    )
    long_text = "k" * 300
    df = pd.DataFrame(
        {
            "i": [0, 1, 2, 3, 4, 5],
            "big": pd.array([2**63 - 1, 2**63 - 1, -(2**63), -(2**63), 5, 6], dtype="Int64"),
            "nullable": pd.array([None, None, 7, 7, 7, None], dtype="Int64"),
            "real": [1.0, 1.0, float("nan"), float("nan"), 2.5, 2.5],
            "whole": [3.0, 3.0, float("nan"), 4.0, 8.0, 8.0],
            "text": ["it's", "it's", "a\x00b", "a\x00b", long_text, long_text],
            "flag": [True, True, False, False, True, False],
            "cat": pd.Categorical(["x", "x", None, None, "y", "x"]),
        }
    )
    monkeypatch.setattr(store_mod, "INSERT_CHUNK", 2)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'inline.db'}")
    md.create_all(engine)
    written: list[dict[str, str]] = []
    with engine.begin() as conn:
        for names, rows, fixed in store_mod._chunks(df, table, 9, inline=True):
            assert "run_id" not in names and not set(names) & set(fixed)
            written.append(fixed)
            store_mod._insert_many(conn, table, names, rows, fixed)
    with sqlite3.connect(tmp_path / "inline.db") as check:
        got = check.execute(
            "SELECT run_id, i, big, typeof(big), nullable, typeof(nullable), real, typeof(real), whole, typeof(whole), "
            "text, typeof(text), flag, cat, typeof(cat) FROM t ORDER BY i"
        ).fetchall()
    assert got == [
        (9, 0, 2**63 - 1, "integer", None, "null", 1.0, "real", 3, "integer", "it's", "text", 1, "x", "text"),
        (9, 1, 2**63 - 1, "integer", None, "null", 1.0, "real", 3, "integer", "it's", "text", 1, "x", "text"),
        (9, 2, -(2**63), "integer", 7, "integer", None, "null", None, "null", "a\x00b", "text", 0, None, "null"),
        (9, 3, -(2**63), "integer", 7, "integer", None, "null", 4, "integer", "a\x00b", "text", 0, None, "null"),
        (9, 4, 5, "integer", 7, "integer", 2.5, "real", 8, "integer", long_text, "text", 1, "y", "text"),
        (9, 5, 6, "integer", None, "null", 2.5, "real", 8, "integer", long_text, "text", 0, "x", "text"),
    ]
    # the literals: floats other than NULL, -2**63, text with NUL and long text were bound; in the
    # last chunk big (5, 6) is i (4, 5) + 1 on both rows: written as an expression of i's parameter
    # where this Python binds numbered parameters (derived.py), bound otherwise
    last: dict[str, object] = {"run_id": "9"}
    if store_mod.numbered_parameters():
        last["big"] = Derived("i", offset=1)
    assert written == [
        {"run_id": "9", "big": "9223372036854775807", "nullable": "NULL", "text": "'it''s'", "flag": "1", "cat": "'x'"},
        {"run_id": "9", "nullable": "7", "real": "NULL", "flag": "0", "cat": "NULL"},
        last,
    ]


@pytest.mark.parametrize("bad", [3, 7])
def test_a_dispatch_naming_an_op_not_stored_is_refused_and_nothing_stays(db_path: Path, bad: int) -> None:
    """write_run checks dispatch_record's keys itself (SQLite's row-by-row lookups are off for it).

    The hand-made run has ops 0, 1, 2: op_index 3 or 7 names none of them. The write fails as
    SQLite's own check would (an IntegrityError naming the key), the run is not stored, and the
    connection's foreign-key enforcement is on again for the next writer.
    """
    Store(db_path).write_run(_frames(sha="1" * 64))
    before = _counts(db_path)
    frames = _frames(sha="2" * 64)
    frames.tables["dispatch"]["op_index"] = pd.array([0, 1, bad, pd.NA, 0], dtype="Int64")
    store = Store(db_path)
    with pytest.raises(sa.exc.IntegrityError, match=f"dispatch_record.op_index -> op_invocation.op_index = {bad}"):
        store.write_run(frames)
    assert _counts(db_path) == before
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    with pytest.raises(sa.exc.IntegrityError), store.begin_write() as conn:  # other writes: SQLite checks
        conn.execute(sa.delete(schema.op_invocation).where(schema.op_invocation.c.run_id == 1))
    assert _counts(db_path) == before


def test_a_failed_first_ingest_stores_no_run(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fail_in_table(monkeypatch, "counter_reading")
    with pytest.raises(RuntimeError):
        Store(db_path).write_run(_frames())
    assert all(n == 0 for t, n in _counts(db_path).items() if t not in STATIC_TABLES)


def test_the_same_capture_twice_is_refused_and_replace_replaces_it(db_path: Path) -> None:
    store = Store(db_path)
    first = store.write_run(_frames(), labels={"model": "a"})
    before = _counts(db_path)
    with pytest.raises(DuplicateRunError, match=f"already stored as run {first}.*--replace"):
        store.write_run(_frames(), labels={"model": "b"})
    assert _counts(db_path) == before
    assert store.replaced_run_id is None
    second = store.write_run(_frames(), labels={"model": "b"}, replace=True)
    assert second != first
    assert store.replaced_run_id == first
    assert _counts(db_path) == before  # same rows, new run id
    ro = Store(db_path, read_only=True)
    assert ro.query("SELECT run_id FROM run")["run_id"].tolist() == [second]
    assert ro.query("SELECT value FROM run_label")["value"].tolist() == ["b"]
    third = store.write_run(_frames(), replace=True)  # no labels given: the old ones stay
    assert third > second
    assert ro.query("SELECT run_id, key, value FROM run_label").to_dict("records") == [
        {"run_id": third, "key": "model", "value": "b"}
    ]
    for table in schema.metadata.sorted_tables:
        if "run_id" in table.c:
            assert ro.query(f"SELECT COUNT(*) AS n FROM {table.name} WHERE run_id = {first}")["n"][0] == 0


def test_runs_without_content_hash_are_never_duplicates(db_path: Path) -> None:
    store = Store(db_path)
    assert store.write_run(_frames(sha=None)) != store.write_run(_frames(sha=None))


def test_delete_run(db_path: Path) -> None:
    store = Store(db_path)
    rid = store.write_run(_frames())
    store.delete_run(rid)
    assert all(n == 0 for t, n in _counts(db_path).items() if t not in STATIC_TABLES)
    with pytest.raises(InputError, match=f"no run {rid}"):
        store.delete_run(rid)


# ---- views: unknown is not zero ---------------------------------------------------------------


def test_dispatch_dram_joins_bytes_and_skips_counter_pass_records(db_path: Path) -> None:
    rid = Store(db_path).write_run(_frames())
    ro = Store(db_path, read_only=True)
    rows = ro.query(f"SELECT * FROM dispatch_dram WHERE run_id = {rid} ORDER BY dispatch_index")
    assert rows["dispatch_index"].tolist() == [0, 1, 2, 3]  # record 4 is a counter-pass re-run of 0
    d0, d1, d2, d3 = rows.to_dict("records")
    assert d0["dram_bytes"] == 5000
    assert d0["achieved_gbps"] == pytest.approx(5.0)  # 5000 B / 1000 ns
    assert d0["pct_of_dram_peak"] == pytest.approx(5.0)  # 5 of 100 GB/s
    assert d0["dram_time_at_peak_ns"] == pytest.approx(50.0)  # 5000 B at 100 B/ns
    assert d0["op"] == "MUL_MAT" and d0["invocation"] == 100 and d0["gfx_arch"] is None  # no agent rows
    assert _is_null(d1["dram_read_bytes"]) and _is_null(d1["dram_bytes"]) and _is_null(d1["achieved_gbps"])
    assert (d1["dram_bytes_min"], d1["dram_bytes_max"]) == (5000, 8000)  # write bound = its exact value
    assert d1["achieved_gbps_min"] == pytest.approx(2.5) and d1["achieved_gbps_max"] == pytest.approx(4.0)
    assert d2["dram_bytes"] == 200 and _is_null(d2["duration_ns"]) and _is_null(d2["achieved_gbps"])
    assert _is_null(d3["op"]) and _is_null(d3["op_index"])


def test_op_summary_is_null_when_any_dispatch_is_unknown_and_bounds_add_up(db_path: Path) -> None:
    rid = Store(db_path).write_run(_frames())
    ro = Store(db_path, read_only=True)
    mm = _one(ro, f"SELECT * FROM op_summary WHERE run_id = {rid} AND op = 'MUL_MAT'")
    assert (mm["invocations"], mm["dispatches"], mm["duration_ns"]) == (2, 2, 3000)
    assert _is_null(mm["dram_read_bytes"])  # 4000 + unknown is unknown, not 4000
    assert (mm["dram_read_bytes_min"], mm["dram_read_bytes_max"]) == (7000, 10000)
    assert (mm["dram_write_bytes"], mm["dram_write_bytes_min"], mm["dram_write_bytes_max"]) == (3000, 3000, 3000)
    assert _is_null(mm["dram_bytes"]) and _is_null(mm["achieved_gbps"]) and _is_null(mm["pct_of_dram_peak"])
    assert mm["achieved_gbps_min"] == pytest.approx(10000 / 3000)
    assert mm["achieved_gbps_max"] == pytest.approx(13000 / 3000)
    add = _one(ro, f"SELECT * FROM op_summary WHERE run_id = {rid} AND op = 'ADD'")
    assert add["dram_bytes"] == 200
    assert _is_null(add["duration_ns"]) and _is_null(add["achieved_gbps"])  # time unknown, not 0 ns
    none = _one(ro, f"SELECT * FROM op_summary WHERE run_id = {rid} AND op IS NULL")
    assert (none["invocations"], none["dispatches"], none["duration_ns"], none["dram_bytes"]) == (0, 1, 500, 100)
    assert none["achieved_gbps"] == pytest.approx(0.2)


def test_kernel_and_invocation_summaries(db_path: Path) -> None:
    rid = Store(db_path).write_run(_frames())
    ro = Store(db_path, read_only=True)
    mmq = _one(ro, f"SELECT * FROM kernel_summary WHERE run_id = {rid} AND kernel_name = 'mmq'")
    assert (mmq["dispatches"], mmq["duration_ns"]) == (3, 3500)  # the counter-pass record is not a 4th
    assert _is_null(mmq["dram_read_bytes"])
    assert (mmq["dram_read_bytes_min"], mmq["dram_read_bytes_max"]) == (7050, 10050)
    assert mmq["dram_write_bytes"] == 3050
    inv = ro.query(f"SELECT * FROM op_invocation_summary WHERE run_id = {rid} ORDER BY invocation")
    assert inv["invocation"].tolist() == [100, 101, 102]  # the unattributed dispatch has no invocation
    assert inv["dispatches"].tolist() == [1, 1, 1]
    assert inv["dram_bytes"].tolist()[0] == 5000 and _is_null(inv["dram_bytes"].tolist()[1])


def test_report_by_invocation_names_each_launch(db_path: Path) -> None:
    frames = _frames()
    frames.tables["op_invocation"].loc[2, "node_name"] = None
    rid = Store(db_path).write_run(frames)
    text = render(build_report(Store(db_path, read_only=True), rid, by="invocation"), "table")
    names = [line.split("  ")[0] for line in text.splitlines() if line.startswith(("MUL_MAT", "ADD"))]
    assert names == ["MUL_MAT Qcur-1 #101", "MUL_MAT Qcur-0 #100", "ADD #102"]  # 2000 ns, 1000 ns, unknown


def test_the_longest_dispatches_are_cut_by_the_database_with_the_run_s_totals(db_path: Path) -> None:
    """``--by dispatch --top N``: timing dispatches 1-4 last 1000, 2000, unknown and 500 ns (by hand)."""
    rid = Store(db_path).write_run(_frames())
    ro = Store(db_path, read_only=True)
    for top, expected in ((2, [2, 1]), (3, [2, 1, 4]), (9, [2, 1, 4, 3])):  # unknown time last
        rep = build_report(ro, rid, by="dispatch", top=top)
        assert rep.rows["dispatch_id"].tolist() == expected
        assert rep.total_rows == 4 and rep.totals["rows"] == 4
        assert rep.totals["duration_ns"] == 3500
    whole = build_report(ro, rid, by="dispatch")
    assert whole.rows["dispatch_id"].tolist() == [1, 2, 3, 4] and whole.totals["duration_ns"] == 3500
    assert "showing 2 of 4 rows" in render(build_report(ro, rid, by="dispatch", top=2), "table")


def test_without_a_ceiling_the_percentages_are_unknown(db_path: Path) -> None:
    rid = Store(db_path).write_run(_frames(peak=None))
    ro = Store(db_path, read_only=True)
    d0 = _one(ro, f"SELECT * FROM dispatch_dram WHERE run_id = {rid} AND dispatch_index = 0")
    assert d0["achieved_gbps"] == pytest.approx(5.0)
    assert _is_null(d0["pct_of_dram_peak"]) and _is_null(d0["dram_time_at_peak_ns"])


# ---- reports over the hand-made run -------------------------------------------------------------


def test_report_by_op_sorts_known_times_first_and_keeps_unknowns_null(db_path: Path) -> None:
    rid = Store(db_path).write_run(_frames())
    rep = build_report(Store(db_path, read_only=True), rid, by="op")
    ops = rep.rows["op"].tolist()
    assert ops[0] == "MUL_MAT" and _is_null(ops[1]) and ops[2] == "ADD"  # 3000 ns, 500 ns, then unknown time
    # shares are of the known time, 3500 ns
    assert rep.rows["share_of_time_pct"].tolist()[:2] == pytest.approx([100 * 3000 / 3500, 100 * 500 / 3500])
    assert rep.totals["unattributed_dispatches"] == 1 and rep.totals["dispatches"] == 4
    text = render(rep, "table")
    assert "MI300X (gfx942)" in text and "100.0 GB/s" in text
    assert "(unattributed)" in text and "1 of 4 dispatches are outside any ggml range" in text
    mm_line = next(line for line in text.splitlines() if line.startswith("MUL_MAT"))
    assert "? (0.01–0.01)" in mm_line  # read MB unknown, with its bounds (7,000..10,000 B)
    assert "? (3–4)" in mm_line  # GB/s unknown, with its bounds (10,000..13,000 B in 3,000 ns)
    md = render(rep, "markdown")
    assert md.startswith("**rocroof** run ") and "| ggml op |" in md
    assert "- **warning** (dram-bytes-unknown)" in md


def test_report_json_and_csv_are_raw_and_null_for_unknown(db_path: Path) -> None:
    import csv
    import io
    import json

    rid = Store(db_path).write_run(_frames())
    rep = build_report(Store(db_path, read_only=True), rid, by="dispatch")
    rows = json.loads(render(rep, "json"))["rows"]
    assert [r["dispatch_id"] for r in rows] == [1, 2, 3, 4]
    assert rows[0]["duration_ns"] == 1000 and isinstance(rows[0]["duration_ns"], int)
    assert rows[1]["dram_read_bytes"] is None and rows[1]["dram_read_bytes_min"] == 3000
    assert rows[2]["duration_ns"] is None and rows[2]["achieved_gbps"] is None
    assert rows[3]["op"] is None and rows[3]["invocation"] is None
    parsed = list(csv.DictReader(io.StringIO(render(rep, "csv"))))
    assert parsed[1]["dram_read_bytes"] == "" and parsed[0]["duration_ns"] == "1000"


def test_report_by_invocation_on_a_run_without_ops_says_so(db_path: Path) -> None:
    frames = _frames()
    frames.tables["op_invocation"] = frames.tables["op_invocation"].iloc[0:0]
    frames.tables["dispatch"]["op_index"] = pd.array([pd.NA] * 5, dtype="Int64")
    rid = Store(db_path).write_run(frames)
    rep = build_report(Store(db_path, read_only=True), rid, by="invocation")
    assert len(rep.rows) == 0
    assert "no ggml op invocations in this run" in render(rep, "table")
    import json

    doc = json.loads(render(rep, "json"))
    assert doc["rows"] == [] and doc["report"] == "invocation" and doc["rows_total"] == 0


# ---- read-only queries --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("DELETE FROM run", "delete from run"),
        ("INSERT INTO run_label VALUES (1, 'k', 'v')", "insert into run_label"),
        ("UPDATE run SET host = 'x'", "update run"),
        ("DROP TABLE dispatch", "drop table dispatch"),
        ("DROP VIEW op_summary", "drop view op_summary"),
        ("CREATE TABLE t (x)", "create table t"),
        ("CREATE TEMP VIEW v AS SELECT 1", "create temp view v"),
        ("ALTER TABLE run ADD COLUMN extra", "alter table run"),
        ("WITH x AS (SELECT 1) DELETE FROM dispatch", "delete from dispatch"),
        ("PRAGMA journal_mode = DELETE", "PRAGMA journal_mode"),
        ("PRAGMA query_only = 0", "PRAGMA query_only"),
        ("BEGIN", "BEGIN"),
    ],
)
def test_query_refuses_statements_that_write(db_path: Path, sql: str, words: str) -> None:
    Store(db_path).write_run(_frames())
    before = _counts(db_path)
    ro = Store(db_path, read_only=True)
    with pytest.raises(QueryError, match="refused") as err:
        ro.query(sql)
    assert words in str(err.value)
    assert "\n" not in str(err.value)
    assert _counts(db_path) == before
    assert ro.query("SELECT COUNT(*) AS n FROM dispatch")["n"][0] == 5  # the connection still reads


@pytest.mark.parametrize("sql", ["ATTACH DATABASE '{p}' AS side", "VACUUM INTO '{p}'"])
def test_query_creates_no_files(db_path: Path, tmp_path: Path, sql: str) -> None:
    Store(db_path).upgrade()
    target = tmp_path / "side.db"
    with pytest.raises(QueryError, match="refused"):
        Store(db_path, read_only=True).query(sql.format(p=target))
    assert not target.exists()


def test_query_reads_tables_views_and_introspection(db_path: Path) -> None:
    rid = Store(db_path).write_run(_frames())
    ro = Store(db_path, read_only=True)
    assert "run_id" in ro.query("PRAGMA table_info(run)")["name"].tolist()
    assert ro.query("SELECT name FROM pragma_table_info('dispatch')")["name"].tolist()[:2] == [
        "run_id",
        "dispatch_index",
    ]
    assert ro.query("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r")[
        "n"
    ].tolist() == [1, 2, 3]
    assert ro.query(f"SELECT COUNT(*) AS n FROM op_summary WHERE run_id = {rid}")["n"][0] == 3


def test_query_keeps_integers_exact(db_path: Path) -> None:
    Store(db_path).write_run(_frames())
    df = Store(db_path, read_only=True).query("SELECT start_ns FROM dispatch ORDER BY dispatch_index")
    values = df["start_ns"].tolist()
    assert values[0] == BIG_NS and values[1] == BIG_NS + 2000  # a float64 would round these
    assert values[2] is pd.NA


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELEC 1", "syntax error"),
        ("SELECT * FROM no_such_table", "no such table"),
        ("SELECT 1; SELECT 2", "one statement"),
        ("", "empty query"),
        ("   ", "empty query"),
    ],
)
def test_query_errors_are_one_line(db_path: Path, sql: str, message: str) -> None:
    Store(db_path).upgrade()
    with pytest.raises(QueryError, match=message) as err:
        Store(db_path, read_only=True).query(sql)
    assert "\n" not in str(err.value)


def test_query_needs_a_read_only_store(db_path: Path) -> None:
    with pytest.raises(QueryError, match="read-only"):
        Store(db_path).query("SELECT 1")


def test_resolve_run(db_path: Path) -> None:
    Store(db_path).upgrade()
    ro = Store(db_path, read_only=True)
    with pytest.raises(InputError, match="no runs stored yet"):
        ro.resolve_run("latest")
    first = Store(db_path).write_run(_frames(sha="1" * 64))
    second = Store(db_path).write_run(_frames(sha="2" * 64))
    assert ro.resolve_run("latest") == ro.resolve_run(None) == ro.resolve_run("LATEST") == second
    assert ro.resolve_run(str(first)) == ro.resolve_run(first) == first
    with pytest.raises(InputError, match="no run 99"):
        ro.resolve_run("99")
    with pytest.raises(InputError, match="a number, 'latest' or labels"):
        ro.resolve_run("first")


# ---- recorded workloads ---------------------------------------------------------------------------


def test_replacing_a_recorded_workload_keeps_its_bytes(db_path: Path) -> None:
    path = fixture_path("rocprof-compute", "vcopy", "MI300X_A1_rocpd")
    frames = build_run(read_capture(path))
    store = Store(db_path)
    first = store.write_run(frames)
    with pytest.raises(DuplicateRunError):
        store.write_run(build_run(read_capture(path)))
    second = store.write_run(build_run(read_capture(path)), replace=True)
    assert second != first
    ro = Store(db_path, read_only=True)
    assert ro.query("SELECT COUNT(*) AS n FROM run")["n"][0] == 1
    rows = ro.query(f"SELECT dram_read_bytes, dram_write_bytes FROM dispatch_dram WHERE run_id = {second}")
    assert len(rows) == 3
    assert rows["dram_read_bytes"].tolist() == pytest.approx([VCOPY_BYTES] * 3, rel=0.01)
    assert rows["dram_write_bytes"].tolist() == pytest.approx([VCOPY_BYTES] * 3, rel=0.01)


# ---- several writers at once (parallel sweep points, one file) ------------------------------------


def test_several_processes_ingest_into_one_new_sqlite_file_at_once(tmp_path: Path) -> None:
    h200 = REPO / "examples" / "h200"
    vcopy = fixture_path("rocprof-compute", "vcopy", "MI300X_A1_rocpd")
    captures = [h200 / "dense-prefill", h200 / "moe-prefill", vcopy, h200 / "dense-prefill"]
    db = tmp_path / "sweep.db"
    # the file does not exist yet: the writers also race to create the schema (one transaction per step)
    outputs = ingest_at_once(str(db), captures, tmp_path / "sync")
    assert sorted(int(o.split()[1]) for o in outputs if o.startswith("stored")) == [1, 2, 3], outputs
    assert [o.startswith("duplicate") and "dense-prefill" in o for o in outputs].count(True) == 1, outputs
    sequential = tmp_path / "one-by-one.db"
    store = Store(sequential)
    for path in captures[:3]:
        store.write_run(build_run(read_capture(path), source_path=str(path)), reports=stored_reports)
    assert row_counts(str(db)) == {**row_counts(str(sequential)), "run_label": 3}  # a worker label each
    with connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        names = [r[0] for r in conn.execute("SELECT name FROM rocroof_migration")]
    assert sorted(names) == [name for name, _ in MIGRATIONS]  # each step once


def test_a_schema_committed_by_another_process_between_two_reads_is_not_called_foreign(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check reads the migrations, then another writer commits the first migration (its tables and
    its row): the tables it then sees belong to rocroof, not to another program (a race seen in CI)."""
    from rocroof.store import migrations

    real_applied = migrations.applied
    other = Store(db_path)
    calls = []

    def applied_then_other_writer_commits(conn: sa.Connection) -> dict[str, str]:
        seen = real_applied(conn)
        if not calls:
            calls.append(1)
            migrations.upgrade(other.engine, str(db_path))  # the other process, after our read
        return seen

    monkeypatch.setattr(migrations, "applied", applied_then_other_writer_commits)
    rid = Store(db_path).write_run(_frames(sha="3" * 64))
    monkeypatch.undo()
    assert calls and rid == 1
    with connect(db_path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM rocroof_migration")]
    assert sorted(names) == [name for name, _ in MIGRATIONS]


def test_a_writer_waits_for_another_process_and_says_so_when_it_waits_too_long(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Store(db_path).write_run(_frames(sha="1" * 64))
    monkeypatch.setattr(store_mod, "WRITE_TIMEOUT_S", 20)
    other = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process in the middle of its ingest
    release = threading.Timer(0.5, lambda: other.execute("COMMIT"))
    release.start()
    started = time.monotonic()
    rid = Store(db_path).write_run(_frames(sha="2" * 64))  # queues behind it
    assert time.monotonic() - started >= 0.4 and rid == 2
    release.join()

    monkeypatch.setattr(store_mod, "WRITE_TIMEOUT_S", 1)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(InputError, match=r"another process kept the database locked for 1 s") as err:
            Store(db_path).write_run(_frames(sha="3" * 64))
        assert "\n" not in str(err.value)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert _counts(db_path)["run"] == 2


class _Stop(Exception):
    """What a test's ``on_wait`` hook raises to stop a wait."""


def _stop_at_once(calls: list[tuple[str, float, float]]) -> Any:
    """An ``on_wait`` hook that records its call and stops the wait."""

    def on_wait(location: str, waited_s: float, timeout_s: float) -> None:
        calls.append((location, waited_s, timeout_s))
        raise _Stop

    return on_wait


#: Every way a store takes the SQLite write lock (``write(store, source)``, ``source`` a store to copy
#: run 1 from): each must wait in short tries that its hook hears of.
WRITE_PATHS = {
    "write_run": lambda store, _src: store.write_run(_frames(sha="2" * 64), reports=stored_reports),
    "store_reports": lambda store, _src: store.store_reports(1, stored_reports),
    "delete_run": lambda store, _src: store.delete_run(1),
    "copy_run": lambda store, src: store.copy_run(src, 1),
    "upgrade": lambda store, _src: store.upgrade(recreate_views=True),  # migrations.write_lock
    "merge": lambda store, src: merge([src.location], store.location, on_wait=store.on_wait),
}


@pytest.mark.parametrize("path", list(WRITE_PATHS))
def test_every_write_waits_for_another_writer_in_short_tries_that_its_hook_can_stop(
    db_path: Path, tmp_path: Path, path: str
) -> None:
    """SQLite's busy wait runs in C (no Ctrl-C until it returns): a write waits in tries of 0.1 s, and
    between them its ``on_wait`` hook hears of the wait and may stop it (as a signal handler does)."""
    Store(db_path).write_run(_frames(sha="1" * 64), reports=stored_reports)
    Store(tmp_path / "source.db").write_run(_frames(sha="5" * 64))
    source = Store(tmp_path / "source.db", read_only=True)
    before = _counts(db_path)
    calls: list[tuple[str, float, float]] = []
    store = Store(db_path, on_wait=_stop_at_once(calls))
    with held_write_lock(db_path):
        started = time.monotonic()
        with pytest.raises(_Stop):
            WRITE_PATHS[path](store, source)
        took = time.monotonic() - started
    store.close()
    assert took < 10, took  # the first try's 0.1 s, not the 600 s timeout
    assert calls == [(str(db_path), pytest.approx(calls[0][1]), store_mod.WRITE_TIMEOUT_S)]
    assert 0 <= calls[0][1] < 10
    assert _counts(db_path) == before  # nothing written
    with connect(db_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_writer_tells_its_hook_how_long_it_has_waited_and_goes_on_when_the_lock_is_free(db_path: Path) -> None:
    Store(db_path).write_run(_frames(sha="1" * 64))
    waits: list[float] = []
    store = Store(db_path, on_wait=lambda _db, waited, _timeout: waits.append(waited))
    with held_write_lock(db_path) as other:
        release = threading.Timer(0.8, lambda: other.execute("COMMIT"))
        release.start()
        assert store.write_run(_frames(sha="2" * 64)) == 2  # queued behind the other writer
        release.join()
    assert len(waits) >= 3 and waits == sorted(waits) and waits[-1] >= 0.4, waits  # one call a try (~0.1 s)
    with connect(db_path) as conn:  # the transaction's statements got the long busy timeout back
        assert conn.execute("SELECT COUNT(*) FROM run").fetchone()[0] == 2
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == store_mod.WRITE_TIMEOUT_S * 1000


def test_a_reader_of_a_file_another_process_holds_waits_in_short_tries(db_path: Path) -> None:
    """A file out of WAL mode (an exclusive lock shuts readers out): the read waits, interruptibly."""
    writer = Store(db_path)
    writer.write_run(_frames(sha="1" * 64))
    writer.close()
    with connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    calls: list[tuple[str, float, float]] = []
    reader = Store(db_path, read_only=True, on_wait=_stop_at_once(calls))
    with held_write_lock(db_path, "BEGIN EXCLUSIVE"):
        started = time.monotonic()
        with pytest.raises(_Stop):
            reader.query("SELECT COUNT(*) AS n FROM run")
        assert time.monotonic() - started < 10
    assert [c[::2] for c in calls] == [(str(db_path), store_mod.READ_TIMEOUT_S)]
    reader.on_wait = None
    assert reader.query("SELECT COUNT(*) AS n FROM run")["n"][0] == 1  # the lock gone: it reads


_WAITING_WRITER = r"""
import sys, time
from rocroof.store import Store

told = []

def on_wait(location, waited_s, timeout_s):
    if not told:
        told.append(1)
        print("waiting", flush=True)

store = Store(sys.argv[1], on_wait=on_wait)
try:
    store.delete_run(1)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
print("not interrupted", flush=True)
"""


def test_a_signal_stops_a_writer_that_waits_for_another_process_at_once(db_path: Path) -> None:
    """The user's trial: Ctrl-C did nothing until the other process let go of the file (up to 600 s)."""
    Store(db_path).write_run(_frames(sha="1" * 64))
    with held_write_lock(db_path):
        done = signal_after_first_line(
            [sys.executable, "-c", _WAITING_WRITER, str(db_path)], signal.SIGINT, settle_s=0.5
        )
    assert done.first_line == "waiting\n"  # it was in the wait (imports done) when signalled
    assert done.returncode == 130 and done.rest == "interrupted\n", done
    assert done.took_s < 20, done.took_s  # a try lasts 0.1 s
    assert _counts(db_path)["run"] == 1


def test_op_total_holds_the_op_summary_of_each_run_and_the_report_reads_it(db_path: Path) -> None:
    store = Store(db_path)
    rid = store.write_run(_frames())
    ro = Store(db_path, read_only=True)
    cols = ", ".join(schema.OP_TOTAL_COLUMNS)
    stored = ro.query(f"SELECT {cols} FROM op_total WHERE run_id = {rid} ORDER BY row_index")
    view = ro.query(f"SELECT {cols} FROM op_summary WHERE run_id = {rid} ORDER BY op")
    pd.testing.assert_frame_equal(stored, view)
    # worked out by hand (the _frames comment): MUL_MAT has 2 invocations and 2 dispatches, ADD 1, one unattributed
    assert stored["op"].tolist()[1:] == ["ADD", "MUL_MAT"] and pd.isna(stored["op"][0])
    assert stored["dispatches"].tolist() == [1, 1, 2] and stored["invocations"].tolist() == [0, 1, 2]
    report = build_report(ro, rid, by="op")
    by_op = report.rows.set_index("op")
    assert by_op.loc["MUL_MAT", "dispatches"] == 2 and by_op.loc["MUL_MAT", "invocations"] == 2
    # without its op_total rows (a database written before they existed), the report sums the view
    with connect(db_path) as conn:
        conn.execute("DELETE FROM op_total")
        conn.commit()
    again = build_report(Store(db_path, read_only=True), rid, by="op")
    pd.testing.assert_frame_equal(report.rows, again.rows)


def test_a_read_only_store_cannot_write_even_past_the_authorizer(db_path: Path) -> None:
    """rocroof query's store is read-only at the connection itself (mode=ro, query_only), not only by the authorizer."""
    Store(db_path).write_run(_frames())
    before = db_path.read_bytes()
    ro = Store(db_path, read_only=True)
    with ro.engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert isinstance(raw, sqlite3.Connection)
        for sql in ("DELETE FROM run", "CREATE TABLE x (a INTEGER)", "PRAGMA user_version = 7"):
            with pytest.raises(sqlite3.OperationalError, match="readonly|read-only|query_only"):
                raw.execute(sql)
    ro.close()
    assert db_path.read_bytes() == before


_OP_TOTAL_CAPTURES = {
    "nsight-prefill": ("examples", "h200", "dense-prefill"),
    "nsight-sampled": ("examples", "h200-sampled", "dense28-decode-sample"),
    "mi350-bounded-bytes": ("fixtures", "rocprof-compute", "vcopy", "MI350"),
    "rocprof-v1-unattributed": ("fixtures", "rocprof-v1", "mi250x-laplacian-kernel2"),
}


@pytest.mark.parametrize("name", list(_OP_TOTAL_CAPTURES))
def test_op_total_summed_in_python_equals_the_views_sql_sums(name: str, tmp_path: Path) -> None:
    """op_total is summed from the frames before they are written; SQLite's view sums the stored rows.

    The captures cover bytes unknown for some dispatches (sampled), byte bounds (MI350's FETCH_SIZE
    pairs), dispatches outside any op and runs with and without op metadata.
    """
    where, *parts = _OP_TOTAL_CAPTURES[name]
    capture = REPO.joinpath(where, *parts) if where == "examples" else fixture_path(*parts)
    rid = Store(tmp_path / "t.db").write_run(build_run(read_capture(capture)))
    ro = Store(tmp_path / "t.db", read_only=True)
    cols = ", ".join(schema.OP_TOTAL_COLUMNS)
    stored = ro.query(f"SELECT {cols} FROM op_total WHERE run_id = {rid} ORDER BY row_index")
    view = ro.query(f"SELECT {cols} FROM op_summary WHERE run_id = {rid} ORDER BY op")
    assert len(stored) > 0
    pd.testing.assert_frame_equal(stored, view, check_dtype=False, rtol=1e-12)


def test_a_released_write_lets_go_of_each_frame_and_stores_the_same_rows(tmp_path: Path) -> None:
    """``write_run(release=True)``, as ``ingest`` calls it, empties ``frames.tables`` and stores the same rows."""
    kept, released = Store(tmp_path / "a.db"), Store(tmp_path / "b.db")
    frames = _frames()
    assert kept.write_run(_frames()) == 1
    assert released.write_run(frames, release=True) == 1
    assert frames.tables == {}  # every frame let go once stored
    kept, released = Store(tmp_path / "a.db", read_only=True), Store(tmp_path / "b.db", read_only=True)
    for table in ("dispatch_record", "counter_reading", "op_invocation", "op_total", "kernel_symbol"):
        a = kept.query(f"SELECT * FROM {table} ORDER BY 1, 2")
        b = released.query(f"SELECT * FROM {table} ORDER BY 1, 2")
        pd.testing.assert_frame_equal(a, b)
        assert len(a), table


def test_a_database_in_a_read_only_folder_is_read_as_it_stands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a WAL database on a read-only mount: SQLite cannot create its -shm index there, so the store opens
    # the file immutable (nobody can write it either); a pending -wal file keeps the normal way (it holds
    # rows the main file does not)
    import os
    import sqlite3 as sqlite

    import rocroof.dbfile
    import rocroof.store as store_module

    db = tmp_path / "r.db"
    writer = Store(db)
    writer.upgrade()
    writer.close()  # the last connection checkpoints the WAL into the file
    assert not Path(f"{db}-wal").exists()
    real_access, real_connect = os.access, sqlite.connect
    uris: list[str] = []

    def connect(database: str, *args: object, **kwargs: object) -> sqlite.Connection:
        uris.append(database)
        return real_connect(database, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module.sqlite3, "connect", connect)
    monkeypatch.setattr(
        rocroof.dbfile.os, "access", lambda p, m: False if Path(p) == tmp_path and m == os.W_OK else real_access(p, m)
    )
    assert Store(db, read_only=True).runs_with_labels({}) == []  # it reads
    assert uris[-1].endswith("?mode=ro&immutable=1")
    Path(f"{db}-wal").write_bytes(b"x")
    Store(db, read_only=True).engine.connect().close()
    assert uris[-1].endswith("?mode=ro")


def test_dispatch_indexes_numbered_in_order_are_told_block_by_block() -> None:
    """``_numbered_in_order``: 0..n-1 and nothing else, across block boundaries (blocks of 2 values)."""
    cases = {
        (0,): True,
        (0, 1, 2, 3, 4): True,
        (): False,
        (1,): False,
        (0, 2, 1, 3): False,  # ends right, out of order inside
        (0, 1, 1, 3): False,  # a repeat and a gap
        (0, 2, 2, 3): False,
        (0, 1, 2, 4): False,
        (-1, 0, 1): False,
    }
    for ids, expected in cases.items():
        assert store_mod._numbered_in_order(np.array(ids, dtype=np.int64), block=2) is expected, ids


@pytest.mark.parametrize("chunk", [2, 1 << 18])
def test_op_totals_of_a_run_whose_first_chunk_holds_no_timing_dispatch(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """A chunk of counter-pass rows only (a counter pass stored before the timing pass, longer than a
    chunk) summed nothing, as integers, and the next chunk's floats could not go in (a traceback)."""
    monkeypatch.setattr(store_mod, "_OP_TOTAL_CHUNK", chunk)
    record = pd.DataFrame(
        {
            # rows 0-1: the counter pass, each matched to its timing dispatch (rows 2-3)
            "dispatch_index": [0, 1, 2, 3],
            "timing_dispatch_index": [2, 3, 2, 3],
            "op_index": [0, 1, 0, 1],
            "duration_ns": [999, 999, 100, 50],
            "dram_read_bytes": [np.nan, np.nan, 1000.0, 400.0],
            "dram_write_bytes": [np.nan, np.nan, 10.0, 0.0],
        }
    )
    ops = pd.DataFrame({"op_index": [0, 1], "op": ["MUL_MAT", "ADD"]})
    out = store_mod._op_totals(record, ops, 1.0).set_index("op")
    # by hand: the timing rows alone; GB/s = bytes / ns; at 1 GB/s the time at the ceiling is the bytes in ns
    assert out.loc["ADD", "dispatches"] == 1 and out.loc["MUL_MAT", "dispatches"] == 1
    assert (out.loc["ADD", "duration_ns"], out.loc["MUL_MAT", "duration_ns"]) == (50, 100)
    assert (out.loc["ADD", "dram_bytes"], out.loc["MUL_MAT", "dram_bytes"]) == (400.0, 1010.0)
    assert out.loc["MUL_MAT", "achieved_gbps"] == pytest.approx(1010 / 100)
    assert out.loc["MUL_MAT", "dram_time_at_peak_ns"] == pytest.approx(1010.0)


@pytest.mark.parametrize(
    ("values", "missing"),
    [
        (pd.Series([None, "x"], dtype=object), False),  # the first row empty: the column is scanned
        (pd.Series(["x", None], dtype=object), False),
        (pd.Series([float("nan")] * 3), True),
        (pd.Series(pd.array([None, None], dtype="Int64")), True),
        (pd.Series(pd.array([None, 4], dtype="Int64")), False),
        (pd.Series(pd.Categorical([None, None])), True),
        (pd.Series(pd.Categorical(["a", None])), False),
        (pd.Series([[1], [2]], dtype=object), False),  # a cell whose isna is not one bool
        (pd.Series([pd.NA, None], dtype=object), True),
        (pd.Series([], dtype=object), True),
    ],
)
def test_a_column_with_no_value_is_left_out_of_the_insert(values: pd.Series, missing: bool) -> None:
    assert store_mod._all_missing(values) is missing
