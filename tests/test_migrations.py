"""Databases written by earlier rocroof versions upgrade in place and keep every value.

tests/data/old-databases holds one small database per schema a user's file may have, each written
by that commit's rocroof from the same capture (tests/data/old-databases/make.py says how). Each is
upgraded by this rocroof; what the old tables held (read with sqlite3 before the upgrade) must come
back through the views that replace them, row for row, and the upgraded file must take new runs.
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import rocroof.store as store_mod
from rocroof.capture.readers import read_capture
from rocroof.errors import SchemaError
from rocroof.ingest.pipeline import RunFrames, build_run
from rocroof.report.tables import build_report
from rocroof.store import Store, schema, views
from rocroof.store.migrations import _CLUSTERED, MIGRATIONS

from .test_store import _frames

DATA = Path(__file__).resolve().parent / "data" / "old-databases"
OLD = sorted(DATA.glob("schema*.db.gz"))
#: The tables of schemas 1-5 that 0006_lean_layout replaced by views of the same name and columns.
REPLACED = ("dispatch", "counter_value", "counter_instance", "dram_traffic")


def _rows(conn: sqlite3.Connection, table: str) -> list[tuple[object, ...]]:
    cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    return conn.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY 1, 2, 3").fetchall()


@pytest.fixture(params=OLD, ids=[p.name.split(".")[0] for p in OLD])
def old_db(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    db = tmp_path / "old.db"
    db.write_bytes(gzip.decompress(request.param.read_bytes()))
    return db


def test_there_is_one_database_per_earlier_schema() -> None:
    assert {p.name.split("-")[0] for p in OLD} == {"schema1", "schema2", "schema4", "schema5", "schema6", "schema7"}


def test_an_old_database_upgrades_in_place_and_keeps_every_value(old_db: Path) -> None:
    with sqlite3.connect(old_db) as conn:
        applied = {r[0] for r in conn.execute("SELECT name FROM rocroof_migration")}
        # the tables of schemas 1-5, or the views that replaced them (schema 6)
        before = {
            t: _rows(conn, t)
            for t in REPLACED
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?", (t,)).fetchone()
        }
        clustered_before = {
            t: _rows(conn, t)
            for t in _CLUSTERED
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (t,)).fetchone()
        }
        run_before = _rows(conn, "run")
        page_bytes = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    assert set(before) == set(REPLACED)
    pending = [name for name, _ in MIGRATIONS if name not in applied]
    assert pending and pending[-1] == MIGRATIONS[-1][0]
    with pytest.raises(SchemaError, match=f"{len(pending)} pending migration"):
        Store(old_db, read_only=True).check()
    assert Store(old_db).upgrade() == pending
    with sqlite3.connect(old_db) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == page_bytes  # only a new file gets 16 KiB pages
        for table, rows in before.items():
            kind = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()
            assert kind == ("view",), table
            assert _rows(conn, table) == rows, table  # the view gives back exactly what the table held
        assert _rows(conn, "run")[0][:1] == run_before[0][:1]
        number = {name: i for i, (name, _) in enumerate(schema.ATTRIBUTION_METHODS)}
        for table, rows in clustered_before.items():  # 0007 copies them into WITHOUT ROWID tables
            if table == "dispatch_record":  # ... with the attribution method by number
                rows = [tuple(number.get(v, v) if isinstance(v, str) else v for v in row) for row in rows]
            assert _rows(conn, table) == rows, table
        methods = conn.execute("SELECT method_index, method FROM attribution_method ORDER BY 1").fetchall()
        assert methods == list(enumerate(name for name, _ in schema.ATTRIBUTION_METHODS))
        ddl = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index')").fetchall())
        for table in _CLUSTERED:
            assert "WITHOUT ROWID" in ddl[table].upper(), table
        assert "WHERE" in ddl["ix_dispatch_op"].upper()  # timing records only
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        names = [r[0] for r in conn.execute("SELECT kernel_name FROM kernel_symbol ORDER BY kernel_index")]
        # one row per distinct kernel (numbered in name order by 0006, in order of first dispatch by an ingest)
        assert sorted(names) == sorted(set(r[5] for r in before["dispatch"])) and len(names) == len(set(names))
        # exact byte counts keep no bounds of their own; the unknown read keeps its NULL
        exact = conn.execute(
            "SELECT COUNT(*) FROM dispatch_record WHERE dram_read_bytes IS NOT NULL AND dram_read_bytes_min IS NULL"
        ).fetchone()[0]
        assert exact == sum(1 for r in before["dram_traffic"] if r[2] is not None)
        cols = ", ".join(schema.OP_TOTAL_COLUMNS)
        stored = conn.execute(f"SELECT {cols} FROM op_total ORDER BY run_id, row_index").fetchall()
        view = conn.execute(f"SELECT {cols} FROM op_summary ORDER BY run_id, op").fetchall()
    conn.close()
    assert stored == view and len(stored) > 0
    ro = Store(old_db, read_only=True)
    assert ro.check() == len(MIGRATIONS)
    rep = build_report(ro, 1, by="op")
    assert set(rep.rows["op"].dropna()) == {"MUL_MAT", "ROPE", "ADD", "RMS_NORM"}
    # the upgraded file takes new runs, stored like the old one
    new = Store(old_db).write_run(build_run(read_capture(DATA / "capture")), replace=True)
    ro = Store(old_db, read_only=True)
    mine = ro.query(f"SELECT kernel_name, dram_read_bytes, dram_write_bytes FROM dispatch_dram WHERE run_id = {new}")
    assert len(mine) == len(before["dispatch"])


def test_a_fresh_database_has_the_lean_layout_and_no_old_table(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    Store(db).upgrade()
    with sqlite3.connect(db) as conn:
        kinds = dict(conn.execute("SELECT name, type FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall())
    conn.close()
    for name in REPLACED:
        assert kinds[name] == "view"
    for name in ("kernel_symbol", "dispatch_record", "counter", "counter_reading", "dram_text"):
        assert kinds[name] == "table"
    assert "ix_dispatch_timing" not in kinds and kinds["ix_op_fused"] == "index"


def test_make_py_names_the_files_it_wrote() -> None:
    text = (DATA / "make.py").read_text()
    for path in OLD:
        assert path.name.split(".")[0] in text
    assert shutil.which("git") is None or True  # make.py needs git; the tests only read its output


# ---- counters stored 16 to a row ------------------------------------------------------------------


def _frames_with_counters(long: pd.DataFrame) -> RunFrames:
    """The hand-made run of test_store with ``long`` as its counter readings."""
    frames = _frames()
    return RunFrames(run=frames.run, tables={**frames.tables, "counter_value": long}, notes=[], settings={})


def _long_counters(n_dispatch: int, n_counters: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [(d, f"C{c:02d}", float(rng.integers(0, 10**9))) for d in range(n_dispatch) for c in range(n_counters)]
    return pd.DataFrame(rows, columns=["dispatch_index", "counter_name", "value"])


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("n_counters", [1, 8, 16, 17, 40])
def test_counter_values_read_back_as_stored_whatever_their_number_and_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n_counters: int, shuffle: bool
) -> None:
    """counter_value (a view over 16-wide rows) gives back exactly the long readings written, slices included."""
    monkeypatch.setattr(store_mod, "_SIDE_BY_SIDE_SLICE", 7)  # many slices, boundaries inside a dispatch
    long = _long_counters(23, n_counters)
    if shuffle:
        long = long.sample(frac=1.0, random_state=3).reset_index(drop=True)
    frames = _frames_with_counters(long)
    db = tmp_path / "c.db"
    Store(db).write_run(frames)
    con = sqlite3.connect(db)
    got = con.execute("SELECT dispatch_index, counter_name, value FROM counter_value ORDER BY 1, 2").fetchall()
    per_row = con.execute("SELECT COUNT(*), MAX(block) FROM counter_reading").fetchone()
    con.close()
    assert got == sorted(long.itertuples(index=False, name=None))
    assert per_row == (23 * ((n_counters + 15) // 16), (n_counters - 1) // 16)


def test_two_values_of_one_counter_for_one_dispatch_are_refused(tmp_path: Path) -> None:
    long = _long_counters(3, 4)
    long = pd.concat([long, long.iloc[[5]]], ignore_index=True)  # dispatch 1, counter C01 twice
    db = tmp_path / "d.db"
    with pytest.raises(SchemaError, match="two values of one counter for one dispatch"):
        Store(db).write_run(_frames_with_counters(long))
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM run").fetchone() == (0,)
    con.close()


# ---- schema 5 -> 6 on any database (SQLite here, PostgreSQL in test_postgres) ------------------------

#: The tables schema 6 stores instead of the REPLACED ones.
LEAN = ("counter_instance_reading", "counter_reading", "counter", "dispatch_record", "dram_text", "kernel_symbol")


def back_to_schema5(target: str) -> None:
    """Turn a schema-6 database back into the schema 1-5 layout, rows included, through its own views.

    Each replaced view's rows become a table of that name (what schema 5 stored), the schema-6
    tables go, and ``0006_lean_layout`` is marked as not applied: an upgrade must then convert it.
    """
    engine = sa.create_engine(target if "://" in target else f"sqlite:///{target}")
    try:
        with engine.begin() as conn:
            for name in REPLACED:
                conn.exec_driver_sql(f"CREATE TABLE old_{name} AS SELECT * FROM {name}")
            views.drop_all(conn)
            for name in LEAN:
                conn.exec_driver_sql(f"DROP TABLE {name}")
            for name in REPLACED:
                conn.exec_driver_sql(f"ALTER TABLE old_{name} RENAME TO {name}")
            conn.exec_driver_sql("DELETE FROM rocroof_migration WHERE name = '0006_lean_layout'")
    finally:
        engine.dispose()


def logical_rows(target: str) -> dict[str, pd.DataFrame]:
    """The rows of the replaced tables/views and of op_summary, sorted, as frames."""
    store = Store(target, read_only=True)
    try:
        out = {}
        for name in (*REPLACED, "op_summary"):
            df = store.query(f"SELECT * FROM {name}")
            out[name] = df.sort_values(list(df.columns)).reset_index(drop=True)
        return out
    finally:
        store.close()


def test_a_schema5_layout_converts_to_the_same_rows(tmp_path: Path) -> None:
    db = str(tmp_path / "five.db")
    store = Store(db)
    store.write_run(build_run(read_capture(DATA / "capture")))
    store.write_run(_frames())
    store.close()
    before = logical_rows(db)
    assert min(len(before[t]) for t in ("dispatch", "counter_value", "dram_traffic", "op_summary")) > 0
    back_to_schema5(db)
    with sqlite3.connect(db) as conn:
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} >= set(REPLACED)
    assert Store(db).upgrade() == ["0006_lean_layout"]
    after = logical_rows(db)
    for name, df in before.items():
        pd.testing.assert_frame_equal(df, after[name], check_dtype=False, obj=name)


def test_0008_decides_the_compute_ceiling_of_stored_ops_as_an_ingest_does(tmp_path: Path) -> None:
    """A database of schema 7 with op models (no compute_ceiling yet) gets the ingest's decisions.

    The schema-7 file is made from a fresh ingest of the H200 examples by dropping the column and
    the migration's record; the upgrade must put back what the ingest wrote.
    """
    examples = Path(__file__).resolve().parent.parent / "examples" / "h200"
    db = tmp_path / "m.db"
    store = Store(db)
    for case in ("dense500m-decode", "moe-prefill"):
        store.write_run(build_run(read_capture(examples / case)))
    store.close()
    with sqlite3.connect(db) as conn:
        written = conn.execute("SELECT run_id, op_index, compute_ceiling FROM op_model ORDER BY 1, 2").fetchall()
        for (view,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall():
            conn.execute(f"DROP VIEW {view}")
        conn.execute("ALTER TABLE op_model DROP COLUMN compute_ceiling")
        conn.execute("DELETE FROM rocroof_migration WHERE name = '0008_compute_ceiling'")
    conn.close()
    assert Store(db).upgrade() == ["0008_compute_ceiling"]
    with sqlite3.connect(db) as conn:
        again = conn.execute("SELECT run_id, op_index, compute_ceiling FROM op_model ORDER BY 1, 2").fetchall()
        kinds = dict(conn.execute("SELECT compute_ceiling, COUNT(*) FROM op_model GROUP BY 1").fetchall())
    conn.close()
    assert again == written
    # the decode's Q8_0/Q4_K matmuls run ggml's int8 kernels on sm_90, attention on FP16, the rest FP32
    assert set(kinds) == {"int8_matrix_tops", "fp16_matrix_tflops", "fp32_vector_tflops"}


def test_ingest_into_an_older_database_says_it_upgraded_it(tmp_path: Path) -> None:
    # a shared file upgraded by a write is then refused by teammates' older rocroof: the write says so
    from click.testing import CliRunner

    from rocroof.cli import cli

    db = tmp_path / "old.db"
    db.write_bytes(gzip.decompress(next(p for p in OLD if p.name.startswith("schema7")).read_bytes()))
    capture = Path(__file__).resolve().parent.parent / "examples" / "h200" / "moe-prefill"
    out = CliRunner().invoke(cli, ["ingest", str(capture), "--db", str(db)])
    assert out.exit_code == 0, out.output
    line = next(x for x in out.output.splitlines() if x.startswith("Upgraded"))
    assert f"schema version {len(MIGRATIONS)}" in line
    assert "0008_compute_ceiling, 0009_stored_report" in line  # schema 7 lacked exactly these two
    # a new database is created, not upgraded: nothing to say
    fresh = CliRunner().invoke(cli, ["ingest", str(capture), "--db", str(tmp_path / "new.db")])
    assert fresh.exit_code == 0 and "Upgraded" not in fresh.output


def test_the_upgrade_line_masks_a_database_urls_password() -> None:
    from rocroof.cli.capture import _upgrade_line

    line = _upgrade_line(["0008_compute_ceiling"], "postgresql://team:s3cret-pw@db.lan/rocroof")
    assert "s3cret-pw" not in line and "postgresql://team:***@db.lan/rocroof" in line
    assert _upgrade_line([], "x.db") == ""
