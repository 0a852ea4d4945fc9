"""PostgreSQL as the results database: same schema, migrations, views, reports and read-only queries as SQLite.

The tests that need a server take it from ``ROCROOF_TEST_PG_URL`` (a database whose role may
create databases; each test gets a database of its own, dropped afterwards). ``.ci/run`` starts
a throw-away server for them (``.ci/postgres``). Without the variable they skip, except in CI
(``CI`` or ``ROCROOF_REQUIRE_PG`` set), where they fail: CI must run them.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import math
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from rocroof.capture.readers import read_capture
from rocroof.cli import cli
from rocroof.errors import DuplicateRunError, InputError, QueryError, SchemaError
from rocroof.ingest.pipeline import RunFrames, build_run
from rocroof.report.diff import diff_runs, render_diff
from rocroof.report.tables import build_report, invocation_csv_chunks, render, stored_reports
from rocroof.store import Store, schema, views
from rocroof.store.merge import merge
from rocroof.store.migrations import MIGRATIONS, SCHEMA_VERSION

from .conftest import REPO, VCOPY_BYTES, fixture_path
from .parallel import ingest_at_once
from .store_rows import row_counts, table_rows
from .test_migrations import DATA as OLD_DATABASES
from .test_migrations import back_to_schema5, logical_rows
from .test_store import BIG_NS, _frames

OLD_CAPTURE = OLD_DATABASES / "capture"

DECODE = REPO / "examples" / "h200" / "dense500m-decode"
VIEW_KEYS = {
    "dispatch": ["run_id", "dispatch_index"],
    "counter_value": ["run_id", "dispatch_index", "counter_name"],
    "counter_instance": ["run_id", "dispatch_index", "counter_name", "instance"],
    "dram_traffic": ["run_id", "dispatch_index"],
    "dispatch_dram": ["run_id", "dispatch_index"],
    "op_invocation_summary": ["run_id", "op_index"],
    "op_roofline": ["run_id", "op_index"],
    "op_verdict": ["run_id", "op_index"],
    "op_summary": ["run_id", "op"],
    "kernel_summary": ["run_id", "kernel_name"],
}


@pytest.fixture(scope="session")
def pg_server() -> str:
    url = os.environ.get("ROCROOF_TEST_PG_URL")
    if not url:
        if os.environ.get("CI") or os.environ.get("ROCROOF_REQUIRE_PG"):
            pytest.fail("ROCROOF_TEST_PG_URL is not set: CI must run the PostgreSQL tests (.ci/run starts a server)")
        pytest.skip(
            "no PostgreSQL server: set ROCROOF_TEST_PG_URL, e.g. export ROCROOF_TEST_PG_URL=$(.ci/postgres start "
            "/tmp/rocroof-pg)"
        )
    return url


def _admin(server: str) -> sa.Engine:
    url = sa.make_url(server).set(drivername="postgresql+psycopg")
    return sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)


@contextlib.contextmanager
def _new_database(server: str) -> Iterator[str]:
    """A new, empty database on the test server (dropped afterwards), as a postgresql:// URL."""
    name = f"rocroof_test_{uuid.uuid4().hex[:12]}"
    admin = _admin(server)
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        _drop_database(admin, name)
        admin.dispose()


def _drop_database(admin: sa.Engine, name: str, patience_s: float = 30.0) -> None:
    """DROP DATABASE … WITH (FORCE), retried while an autovacuum worker is inside it.

    FORCE terminates the other sessions, but a role that is not a superuser may not terminate an
    autovacuum worker (PostgreSQL refuses with "must be a member of the role whose process is being
    terminated", SQLSTATE 42501, procarray.c TerminateOtherDBBackends); the worker leaves within a
    moment, so the drop is tried again until ``patience_s`` seconds have passed.
    """
    deadline = time.monotonic() + patience_s
    while True:
        try:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except (sa.exc.ProgrammingError, sa.exc.OperationalError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """An empty database of the test's own."""
    with _new_database(pg_server) as url:
        yield url


def _execute(url: str, *statements: str) -> None:
    """Run statements on the database as another program would (committed)."""
    engine = _admin(url)
    try:
        with engine.connect() as conn:
            for sql in statements:
                conn.exec_driver_sql(sql)
    finally:
        engine.dispose()


def _ingest(target: str, frames: list[RunFrames], labels: dict[str, str]) -> list[int]:
    store = Store(target)
    try:
        return [store.write_run(f, labels=labels, reports=stored_reports) for f in frames]
    finally:
        store.close()


def _sorted(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return df.sort_values(keys, na_position="first", kind="stable").reset_index(drop=True)


def _views(target: str) -> dict[str, pd.DataFrame]:
    """Every view through the user's path (Store.query), in key order."""
    store = Store(target, read_only=True)
    try:
        return {v.name: _sorted(store.query(f"SELECT * FROM {v.name}"), VIEW_KEYS[v.name]) for v in views.VIEWS}
    finally:
        store.close()


def _assert_same_values(a: Any, b: Any, where: str) -> None:
    """Equal JSON-like values; floats to 1e-12 (sums may add in another order); None only where None."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_same_values(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same_values(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float | int) and not isinstance(b, bool):
        assert math.isclose(a, b, rel_tol=1e-12), f"{where}: {a} != {b}"
    else:
        assert a == b and type(a) is type(b), f"{where}: {a!r} != {b!r}"


def _csv_cells(text: str) -> list[list[Any]]:
    """CSV text as rows of cells: integers, floats (for :func:`_assert_same_values`) or text."""

    def cell(v: str) -> Any:
        for kind in (int, float):
            with contextlib.suppress(ValueError):
                return kind(v)
        return v

    return [[cell(v) for v in row] for row in csv.reader(io.StringIO(text))]


def _assert_same_store(sqlite_db: str, pg: str, run_ids: list[int]) -> None:
    """Tables, views and reports of the two stores hold the same rows and values, NULLs included."""
    lite, post = table_rows(sqlite_db), table_rows(pg)
    for name, df in lite.items():
        assert len(df) == len(post[name]), name
        # op_total holds op_summary's rows as each database summed them: floats may differ in the last bit
        exact = name != "op_total"
        pd.testing.assert_frame_equal(df, post[name], check_exact=exact, rtol=1e-12, obj=name)
    lite_views, post_views = _views(sqlite_db), _views(pg)
    for name, df in lite_views.items():
        assert list(df.columns) == list(post_views[name].columns), name
        pd.testing.assert_frame_equal(df, post_views[name], check_exact=False, rtol=1e-12, obj=name)
    ro_lite, ro_pg = Store(sqlite_db, read_only=True), Store(pg, read_only=True)
    try:
        for rid in run_ids:
            for by in ("op", "kernel", "dispatch", "invocation"):
                a = json.loads(render(build_report(ro_lite, rid, by=by), "json"))["rows"]
                b = json.loads(render(build_report(ro_pg, rid, by=by), "json"))["rows"]
                _assert_same_values(a, b, f"run {rid} by {by}")
            for by in ("dispatch", "invocation"):  # the N longest, cut by each database
                a = json.loads(render(build_report(ro_lite, rid, by=by, top=5), "json"))["rows"]
                b = json.loads(render(build_report(ro_pg, rid, by=by, top=5), "json"))["rows"]
                _assert_same_values(a, b, f"run {rid} by {by} top 5")
            # the whole invocation CSV, sorted by each database and written a batch at a time
            a, b = (_csv_cells("".join(invocation_csv_chunks(ro, rid))) for ro in (ro_lite, ro_pg))
            _assert_same_values(a, b, f"run {rid} invocation CSV")
            assert render(build_report(ro_lite, rid, by="op"), "markdown") == render(
                build_report(ro_pg, rid, by="op"), "markdown"
            )
    finally:
        ro_lite.close()
        ro_pg.close()


# ---- a real run, both ways --------------------------------------------------------------------


def test_a_recorded_run_round_trips_row_for_row_as_in_sqlite(pg_url: str, tmp_path: Path) -> None:
    amd = fixture_path("rocprof-compute", "vcopy", "MI300X_A1_rocpd")
    frames = [build_run(read_capture(p), source_path=str(p)) for p in (DECODE, amd)]
    lite = str(tmp_path / "same.db")
    labels = {"model": "dense500m", "who": "ci"}
    assert _ingest(lite, frames, labels) == _ingest(pg_url, frames, labels) == [1, 2]

    counts = row_counts(pg_url)
    assert counts["counter_value"] > 2 * 20_000  # several insert chunks
    assert counts["counter_instance"] > 0 and counts["op_model"] > 0 and counts["op_edge"] > 0
    _assert_same_store(lite, pg_url, [1, 2])

    ro = Store(pg_url, read_only=True)
    try:
        vcopy = ro.query("SELECT dram_read_bytes, dram_write_bytes, op FROM dispatch_dram WHERE run_id = 2")
        assert vcopy["dram_read_bytes"].tolist() == pytest.approx([VCOPY_BYTES] * 3, rel=0.01)
        assert vcopy["op"].isna().all()  # no ggml markers: unattributed, NULL (not '')
        total = ro.query("SELECT SUM(duration_ns) AS ns, AVG(duration_ns) AS mean FROM dispatch_dram WHERE run_id = 1")
        assert str(total["ns"].dtype) == "Int64" and isinstance(total["mean"][0], float)  # NUMERIC made plain
        assert render_diff(diff_runs(ro, 1, 1), "markdown").count("No change beyond run-to-run noise") == 1
    finally:
        ro.close()


def test_unknown_stays_null_and_values_keep_their_types(pg_url: str, tmp_path: Path) -> None:
    frames = _frames()
    frames.run["profiler_version"] = "v" * 100  # longer than VARCHAR(64): SQLite keeps it, so must PostgreSQL
    labels = {"k" * 300: "long key"}
    lite = str(tmp_path / "hand.db")
    _ingest(lite, [frames], labels)
    _ingest(pg_url, [frames], labels)
    _assert_same_store(lite, pg_url, [1])

    ro = Store(pg_url, read_only=True)
    try:
        d = ro.query("SELECT * FROM dispatch_dram ORDER BY dispatch_index").to_dict("records")
        assert d[0]["start_ns"] == BIG_NS and isinstance(d[0]["start_ns"], int)  # beyond 2**53, exact
        assert pd.isna(d[1]["dram_read_bytes"])
        assert (d[1]["dram_bytes_min"], d[1]["dram_bytes_max"]) == (5000, 8000)
        assert pd.isna(d[2]["duration_ns"]) and pd.isna(d[2]["achieved_gbps"])  # unknown time: NULL, not 0
        mm = ro.query("SELECT * FROM op_summary WHERE op = 'MUL_MAT'").to_dict("records")[0]
        assert pd.isna(mm["dram_read_bytes"]) and mm["duration_ns"] == 3000 and isinstance(mm["duration_ns"], int)
        run = ro.frame(sa.select(schema.run)).to_dict("records")[0]
        assert run["serialised_timings"] is False and run["dram_peak_gbps"] == 100.0 and run["host"] is None
        raw = ro.query("SELECT is_timing_pass FROM pass ORDER BY pass_index")
        assert raw["is_timing_pass"].tolist() == [True, False]  # BOOLEAN on PostgreSQL
    finally:
        ro.close()


def test_the_command_line_works_against_a_url(pg_url: str) -> None:
    runner = CliRunner()

    def ok(*args: str) -> str:
        result = runner.invoke(cli, [*args, "--db", pg_url])
        assert result.exit_code == 0, result.output
        return result.output

    assert "Stored run 1" in ok("ingest", str(DECODE), "--label", "model=dense500m")
    assert "already stored as run 1" in runner.invoke(cli, ["ingest", str(DECODE), "--db", pg_url]).output
    assert json.loads(ok("runs", "--format", "json"))[0]["labels"] == {"model": "dense500m"}
    assert "MUL_MAT" in ok("report", "--by", "op")
    assert json.loads(ok("query", "SELECT COUNT(*) AS n FROM op_invocation", "--format", "json")) == [{"n": 500}]
    assert "No change beyond run-to-run noise" in ok("diff", "1", "1")
    assert "digraph" in ok("graph", "--evaluation", "1")
    assert f"knows schema version {SCHEMA_VERSION}" in ok("db", "status")
    assert ok("db", "upgrade").strip() == "schema is up to date"
    # ROCROOF_DB names the database as well as --db
    env_result = runner.invoke(cli, ["runs", "--format", "csv"], env={"ROCROOF_DB": pg_url})
    assert env_result.exit_code == 0 and "dense500m-decode" in env_result.output


@pytest.mark.parametrize("what", ["vgpr", "nul"])
def test_a_value_postgres_cannot_hold_is_one_line_and_stores_nothing(pg_url: str, tmp_path: Path, what: str) -> None:
    """3x10^9 VGPRs (past PostgreSQL's 32-bit INTEGER) or NUL in a kernel name, both of which SQLite
    stores: one line naming the capture and the database, no traceback, no run (found by a trial user)."""
    from .rocprof_csv import Kernel, write_pass

    kernel = Kernel(1, "k", corr=1, start=1000, end=1100)
    cap = write_pass(tmp_path / "cap", 777, kernels=[kernel])
    if what == "vgpr":
        trace = cap / "777_kernel_trace.csv"
        trace.write_text(trace.read_text().replace(",8,0,16,", ",3000000000,0,16,"))
        assert "3000000000" in trace.read_text()
    else:
        # a CSV reader refuses a NUL byte (a damaged file); a SQLite capture (rocpd, nsys) can hold one in
        # its text: stored through the API here, as such a reader hands it on
        from rocroof.capture.readers import read_capture
        from rocroof.ingest.pipeline import build_run

        frames = build_run(read_capture(cap), source_path=str(cap))
        frames.tables["dispatch"]["kernel_name"] = "k\x00nul"
        with pytest.raises(InputError) as err:
            Store(pg_url).write_run(frames)
        message = str(err.value)
        assert message.startswith(f"{cap}: ") and "cannot store a value of this capture" in message
        assert "nothing was stored" in message and "\n" not in message
        assert Store(tmp_path / "r.db").write_run(frames) == 1  # SQLite stores it
        store = Store(pg_url, read_only=True)
        try:
            assert store.query("SELECT COUNT(*) AS n FROM run")["n"].iloc[0] == 0
        finally:
            store.close()
        return
    result = CliRunner().invoke(cli, ["ingest", str(cap), "--db", pg_url])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {cap}: ") and "Traceback" not in result.output
    assert "cannot store a value of this capture" in lines[0] and "nothing was stored" in lines[0]
    store = Store(pg_url, read_only=True)
    try:
        assert store.query("SELECT COUNT(*) AS n FROM run")["n"].iloc[0] == 0
    finally:
        store.close()
    assert CliRunner().invoke(cli, ["ingest", str(cap), "--db", str(tmp_path / "r.db")]).exit_code == 0


# ---- migrations ---------------------------------------------------------------------------------


def test_migrations_and_db_status_on_postgres(pg_url: str) -> None:
    runner = CliRunner()
    names = [name for name, _ in MIGRATIONS]
    status = runner.invoke(cli, ["db", "status", "--db", pg_url]).output
    assert all(f"{n}: pending" in status for n in names)
    assert runner.invoke(cli, ["db", "upgrade", "--db", pg_url]).output.strip() == f"applied {', '.join(names)}"
    status = runner.invoke(cli, ["db", "status", "--db", pg_url]).output
    assert all(f"{n}: applied 20" in status for n in names)
    assert Store(pg_url, read_only=True).check() == SCHEMA_VERSION

    # a database one migration behind: readers ask for db upgrade, which brings it (and the views) back
    _execute(
        pg_url,
        "DROP VIEW op_verdict, op_roofline",
        "DROP TABLE op_model, op_edge, run_ceiling",
        "DELETE FROM rocroof_migration WHERE name = '0002_model'",
    )
    with pytest.raises(SchemaError, match=r"out of date \(1 pending.*rocroof db upgrade --db postgresql"):
        Store(pg_url, read_only=True).check()
    result = runner.invoke(cli, ["report", "--db", pg_url])
    assert result.exit_code == 1 and "out of date" in result.output and len(result.output.splitlines()) == 1
    assert runner.invoke(cli, ["db", "upgrade", "--db", pg_url]).output.strip() == "applied 0002_model"
    assert Store(pg_url, read_only=True).query("SELECT COUNT(*) AS n FROM op_roofline")["n"][0] == 0

    # a newer rocroof's database is refused for writing and reading, and left alone
    _execute(pg_url, "INSERT INTO rocroof_migration VALUES ('0999_future', '2030-01-01T00:00:00+00:00')")
    with pytest.raises(SchemaError, match="newer rocroof"):
        Store(pg_url).write_run(_frames())
    with pytest.raises(SchemaError, match="newer rocroof"):
        Store(pg_url, read_only=True).check()
    assert "0999_future: applied" in runner.invoke(cli, ["db", "status", "--db", pg_url]).output
    assert row_counts(pg_url)["run"] == 0


def test_a_schema5_layout_on_postgres_converts_to_the_same_rows(pg_url: str, tmp_path: Path) -> None:
    """0006_lean_layout converts stored runs on PostgreSQL as on SQLite (test_migrations has the SQLite side)."""
    store = Store(pg_url)
    store.write_run(build_run(read_capture(OLD_CAPTURE)))
    store.write_run(build_run(read_capture(fixture_path("rocprof-compute", "vcopy", "MI300X_A1_rocpd"))))
    store.close()
    before = logical_rows(pg_url)
    assert min(len(before[t]) for t in ("dispatch", "counter_value", "dram_traffic", "op_summary")) > 0
    back_to_schema5(pg_url)
    assert Store(pg_url).upgrade() == ["0006_lean_layout"]
    after = logical_rows(pg_url)
    for name, df in before.items():
        pd.testing.assert_frame_equal(df, after[name], check_dtype=False, obj=name)


def test_a_schema6_database_on_postgres_numbers_its_attribution_methods(pg_url: str) -> None:
    """0007_clustered_tables turns schema 6's method names into numbers on PostgreSQL too (in place)."""
    store = Store(pg_url)
    store.write_run(build_run(read_capture(OLD_CAPTURE)))
    store.close()
    before = logical_rows(pg_url)
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:  # back to schema 6: the method by name, 0007 not applied
        views.drop_all(conn)
        conn.exec_driver_sql("ALTER TABLE dispatch_record ADD COLUMN attribution_method VARCHAR(32)")
        names = " ".join(f"WHEN {i} THEN '{n}'" for i, (n, _) in enumerate(schema.ATTRIBUTION_METHODS))
        conn.exec_driver_sql(f"UPDATE dispatch_record SET attribution_method = CASE attribution_index {names} END")
        conn.exec_driver_sql("ALTER TABLE dispatch_record DROP COLUMN attribution_index")
        conn.exec_driver_sql("DROP TABLE attribution_method")
        conn.exec_driver_sql("DELETE FROM rocroof_migration WHERE name = '0007_clustered_tables'")
    engine.dispose()
    assert Store(pg_url).upgrade() == ["0007_clustered_tables"]
    after = logical_rows(pg_url)
    for name, df in before.items():
        pd.testing.assert_frame_equal(df, after[name], check_dtype=False, obj=name)
    methods = set(after["dispatch"]["attribution_method"].dropna())
    assert methods and methods <= {n for n, _ in schema.ATTRIBUTION_METHODS}


def test_a_foreign_postgres_database_is_refused(pg_url: str) -> None:
    _execute(pg_url, "CREATE TABLE customers (id integer PRIMARY KEY)")
    for call in (lambda: Store(pg_url).write_run(_frames()), lambda: Store(pg_url, read_only=True).check()):
        with pytest.raises(SchemaError, match="not a rocroof database"):
            call()
    engine = _admin(pg_url)
    with engine.connect() as conn:
        assert sa.inspect(conn).get_table_names() == ["customers"]
    engine.dispose()


# ---- read-only queries ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_run(pg_server: str) -> Iterator[str]:
    """A database holding the hand-made run, shared by the tests that must not change it."""
    with _new_database(pg_server) as url:
        Store(url).write_run(_frames())
        yield url


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("DELETE FROM run", "beginning with 'DELETE'"),
        ("INSERT INTO run_label VALUES (1, 'k', 'v')", "beginning with 'INSERT'"),
        ("UPDATE run SET host = 'x'", "beginning with 'UPDATE'"),
        ("DROP TABLE dispatch", "beginning with 'DROP'"),
        ("CREATE TEMP TABLE t AS SELECT 1", "beginning with 'CREATE'"),
        ("TRUNCATE run CASCADE", "beginning with 'TRUNCATE'"),
        ("COPY run TO '/tmp/rocroof-copy.csv'", "beginning with 'COPY'"),  # a file on the server
        ("SET default_transaction_read_only = off", "beginning with 'SET'"),
        ("DO $$ BEGIN DELETE FROM run; END $$", "beginning with 'DO'"),
        ("BEGIN", "beginning with 'BEGIN'"),
        ("  -- a comment\n  COMMIT", "beginning with 'COMMIT'"),
        ("WITH x AS (DELETE FROM run RETURNING run_id) SELECT * FROM x", "read-only transaction"),
        ("SELECT * INTO TABLE copy_of_run FROM run", "read-only transaction"),
        ("SELECT nextval('run_run_id_seq')", "read-only transaction"),
        ("EXPLAIN ANALYZE DELETE FROM run", "read-only transaction"),
        ("SELECT 1; DELETE FROM run", "one statement at a time"),
        ("SELECT 1; SET default_transaction_read_only = off; COMMIT; DELETE FROM run", "one statement at a time"),
    ],
)
def test_query_on_postgres_refuses_what_writes(pg_run: str, sql: str, words: str) -> None:
    before = row_counts(pg_run)
    ro = Store(pg_run, read_only=True)
    with pytest.raises(QueryError) as err:
        ro.query(sql)
    message = str(err.value)
    assert words in message and "\n" not in message
    assert "refused" in message or "one statement" in message
    assert row_counts(pg_run) == before
    with pytest.raises(QueryError) as err:  # the streamed path (rocroof query) refuses the same
        list(ro.query_batches(sql, 2))
    assert words in str(err.value)
    assert row_counts(pg_run) == before
    assert ro.query("SELECT COUNT(*) AS n FROM dispatch")["n"][0] == 5  # the store still reads
    result = CliRunner().invoke(cli, ["query", sql, "--db", pg_run])
    assert result.exit_code == 1 and result.output.startswith("Error: ") and len(result.output.splitlines()) == 1
    assert row_counts(pg_run) == before
    assert not _admin_tables(pg_run) - {t.name for t in schema.metadata.sorted_tables} - {"rocroof_migration"}


def _admin_tables(url: str) -> set[str]:
    engine = _admin(url)
    try:
        with engine.connect() as conn:
            return set(sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_query_on_postgres_streams_in_batches(pg_run: str) -> None:
    ro = Store(pg_run, read_only=True)
    sql = "SELECT g AS i, g * 2 AS twice FROM generate_series(1, 11) AS g"
    frames = list(ro.query_batches(sql, 4))
    assert [len(f) for f in frames] == [4, 4, 3]
    assert sum((f["i"].tolist() for f in frames), []) == list(range(1, 12))
    assert all(str(f["i"].dtype) == "Int64" for f in frames)
    empty = list(ro.query_batches("SELECT run_id, host FROM run WHERE false", 4))
    assert len(empty) == 1 and list(empty[0].columns) == ["run_id", "host"] and len(empty[0]) == 0
    result = CliRunner().invoke(cli, ["query", sql, "--db", pg_run, "--format", "json"])
    assert json.loads(result.output) == [{"i": i, "twice": 2 * i} for i in range(1, 12)]


def test_query_on_postgres_leaves_the_session_read_only(pg_run: str) -> None:
    ro = Store(pg_run, read_only=True)
    # set_config is a SELECT: it runs, and the rollback after every query undoes it
    assert ro.query("SELECT set_config('default_transaction_read_only', 'off', false) AS v")["v"][0] == "off"
    assert ro.query("SELECT current_setting('default_transaction_read_only') AS v")["v"][0] == "on"
    assert ro.query("SELECT current_setting('transaction_read_only') AS v")["v"][0] == "on"
    with pytest.raises(QueryError, match="refused"):
        ro.query("WITH x AS (DELETE FROM run RETURNING 1) SELECT * FROM x")
    # reads of every kind still work: comments, parentheses, VALUES, TABLE, SHOW, EXPLAIN, a literal %
    assert ro.query("/* c */ (SELECT 1 AS a) UNION ALL (SELECT 2)")["a"].tolist() == [1, 2]
    assert ro.query("VALUES (1, 'x')").shape == (1, 2)
    assert len(ro.query("TABLE run_note")) == 1
    assert ro.query("SHOW transaction_read_only").iloc[0, 0] == "on"
    assert len(ro.query("EXPLAIN SELECT * FROM op_summary")) > 0
    assert ro.query("SELECT 'a%b' AS x")["x"][0] == "a%b"
    with pytest.raises(QueryError, match='query failed: relation "nope" does not exist'):
        ro.query("SELECT * FROM nope")


def test_query_needs_a_read_only_store_on_postgres_too(pg_url: str) -> None:
    with pytest.raises(QueryError, match="read-only"):
        Store(pg_url).query("SELECT 1")


# ---- several writers at once --------------------------------------------------------------------------


def test_concurrent_ingests_into_one_new_postgres_database(pg_url: str, tmp_path: Path) -> None:
    h200 = REPO / "examples" / "h200"
    amd = fixture_path("rocprof-compute", "vcopy", "MI300X_A1_rocpd")
    captures = [h200 / "dense-prefill", h200 / "moe-prefill", amd, h200 / "dense-prefill"]
    # the database is empty: the writers also race to create the schema
    outputs = ingest_at_once(pg_url, captures, tmp_path / "sync")
    stored = [o for o in outputs if o.startswith("stored")]
    duplicates = [o for o in outputs if o.startswith("duplicate")]
    assert len(stored) == 3 and len(duplicates) == 1, outputs
    assert "dense-prefill" in duplicates[0]
    assert sorted(int(o.split()[1]) for o in stored) == sorted(set(int(o.split()[1]) for o in stored))

    lite = str(tmp_path / "sequential.db")
    _ingest(lite, [build_run(read_capture(p), source_path=str(p)) for p in captures[:3]], {})
    expected = {t: n for t, n in row_counts(lite).items() if t not in ("run_label",)}
    got = {t: n for t, n in row_counts(pg_url).items() if t not in ("run_label",)}
    assert got == expected
    assert [name for name, when in Store(pg_url, read_only=True).status() if when] == [n for n, _ in MIGRATIONS]


# ---- merge -----------------------------------------------------------------------------------------


def test_merge_sqlite_files_into_postgres_and_back(pg_url: str, tmp_path: Path) -> None:
    amd = fixture_path("rocprof-compute", "vcopy", "MI300X_A1_rocpd")
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    _ingest(a, [build_run(read_capture(DECODE), source_path=str(DECODE))], {"who": "alice"})
    _ingest(b, [build_run(read_capture(p), source_path=str(p)) for p in (amd, DECODE)], {"who": "bob"})
    Store(pg_url).write_run(_frames())  # the team store already holds a run: new ids follow it

    done = merge([a, b], pg_url)
    assert [(r.source_run_id, r.run_id, r.existing_run_id) for r in done] == [(1, 2, None), (1, 3, None), (2, None, 2)]
    assert done[0].rows > 10_000 and done[2].skipped  # the decode run's rows (counters stored 16 to a row)
    assert [r.skipped for r in merge([a, b], pg_url)] == [True, True, True]

    # and back into a new SQLite file: the same rows as the sources, run by run
    back = str(tmp_path / "back.db")
    assert [r.run_id for r in merge([pg_url], back)] == [1, 2, 3]
    copied = table_rows(back, 2)  # run 1 of a.db, by way of the server
    for name, df in table_rows(a, 1).items():
        pd.testing.assert_frame_equal(df, copied[name], check_exact=True, obj=name)
    ro = Store(back, read_only=True)
    assert ro.query("SELECT value FROM run_label WHERE run_id = 3")["value"].tolist() == ["bob"]
    with pytest.raises(DuplicateRunError):
        Store(back).write_run(build_run(read_capture(DECODE), source_path=str(DECODE)))


def test_merge_into_an_out_of_date_postgres_database_asks_for_an_upgrade(pg_url: str, tmp_path: Path) -> None:
    a = str(tmp_path / "a.db")
    _ingest(a, [_frames()], {})
    Store(pg_url).upgrade()
    _execute(pg_url, "DELETE FROM rocroof_migration WHERE name = '0002_model'")
    result = CliRunner().invoke(cli, ["merge", a, "--into", pg_url])
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1
    assert "out of date" in result.output and "rocroof db upgrade --db" in result.output
    assert row_counts(pg_url)["run"] == 0


# ---- without a server ---------------------------------------------------------------------------------


def test_a_missing_driver_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "psycopg" else real(name, *a))
    with pytest.raises(InputError, match=r"PostgreSQL driver is not installed; pip install 'rocroof\[postgres\]'"):
        Store("postgresql://someone@dbhost/rocroof")
    result = CliRunner().invoke(cli, ["runs", "--db", "postgresql://someone:secret@dbhost/rocroof"])
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1
    assert "rocroof[postgres]" in result.output and "secret" not in result.output


def test_an_unreachable_server_is_one_line(tmp_path: Path) -> None:
    url = f"postgresql://someone:secret@/rocroof?host={tmp_path}"  # no server listens there
    for args in (["runs"], ["ingest", str(DECODE)], ["db", "status"], ["query", "SELECT 1"]):
        result = CliRunner().invoke(cli, [*args, "--db", url])
        assert result.exit_code == 1, args
        assert result.output.startswith("Error: postgresql://someone:***@/rocroof"), result.output
        assert "cannot connect" in result.output
        assert len(result.output.splitlines()) == 1 and "secret" not in result.output


def test_other_postgres_drivers_are_refused_with_the_url_to_use() -> None:
    with pytest.raises(InputError, match=r"through psycopg 3; write the URL as postgresql://"):
        Store("postgresql+psycopg2://someone@dbhost/rocroof")
    assert Store("postgres://someone@dbhost/rocroof").engine.dialect.driver == "psycopg"
    assert Store("postgresql://someone@dbhost/rocroof").engine.dialect.driver == "psycopg"


def test_advise_on_postgres_equals_sqlite(pg_url: str, tmp_path: Path) -> None:
    # the launch timeline, the ranked groups (counters pivoted, ceilings, verdicts) and the MoE view
    # come from SQL that both dialects run; the results must be the same numbers
    from rocroof.report.advise import build_advice

    capture = REPO / "examples" / "h200-counters" / "dense28-decode-flops"
    frames = build_run(read_capture(capture))
    lite = Store(tmp_path / "a.db")
    lite_id = lite.write_run(frames)
    pg = Store(pg_url)
    pg_id = pg.write_run(build_run(read_capture(capture)))
    a, b = build_advice(lite, lite_id), build_advice(Store(pg_url, read_only=True), pg_id)
    pd.testing.assert_frame_equal(a.evaluations, b.evaluations, check_dtype=False)
    pd.testing.assert_frame_equal(a.groups, b.groups, check_dtype=False, rtol=1e-9)
    assert a.sampled == b.sampled and a.flushed == b.flushed


def test_the_stored_report_on_postgres_equals_sqlite(pg_url: str, tmp_path: Path) -> None:
    """write_run builds the stored op report inside PostgreSQL's transaction as inside SQLite's."""
    import json

    capture = REPO / "examples" / "h200-sampled" / "moe24-decode-sample"
    lite_id = Store(tmp_path / "a.db").write_run(build_run(read_capture(capture)), reports=stored_reports)
    pg_id = Store(pg_url).write_run(build_run(read_capture(capture)), reports=stored_reports)
    docs = []
    for target, rid in ((str(tmp_path / "a.db"), lite_id), (pg_url, pg_id)):
        got = Store(target, read_only=True).query(f"SELECT document FROM stored_report WHERE run_id = {rid}")
        assert len(got) == 1
        docs.append(json.loads(got["document"][0]))
    assert docs[0]["rows"], "a report with rows"
    _assert_same_values(docs[0], docs[1], "stored_report")
