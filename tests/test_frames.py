"""Query results as DataFrames, typed a batch of rows at a time (``rocroof.store.frame_of_batches``).

The expected columns are written out by hand from the typing rule the store documents: integers
and NULLs -> exact ``Int64``; NULLs only -> ``object`` Nones; anything else -> what ``pd.Series``
makes of the values (floats -> float64 with NaN for NULL; text -> ``str``). A column must come out
the same however its rows are cut into batches.
"""

from __future__ import annotations

import decimal
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import rocroof.store as store_mod
from rocroof.store import Store, frame_of_batches

COLUMNS = ["ints", "floats", "texts", "nulls", "mixed"]
ROWS = [
    (1, None, "MUL_MAT", None, 1),
    (None, 2.5, None, None, 2.5),
    (-(2**63), None, "MUL_MAT", None, None),
    (2**63 - 1, 0.0, "ADD", None, "x"),
]


def _cut(rows: list[tuple[object, ...]], size: int) -> list[list[tuple[object, ...]]]:
    return [rows[i : i + size] for i in range(0, len(rows), size)]


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_each_column_is_typed_over_all_its_batches(size: int) -> None:
    df = frame_of_batches(_cut(ROWS, size), COLUMNS)
    assert list(df.columns) == COLUMNS
    assert str(df["ints"].dtype) == "Int64"
    assert df["ints"].tolist() == [1, pd.NA, -(2**63), 2**63 - 1]
    assert df["floats"].dtype == np.float64
    np.testing.assert_array_equal(df["floats"].to_numpy(), [np.nan, 2.5, np.nan, 0.0])
    assert df["texts"].tolist()[0] == "MUL_MAT" and df["texts"].tolist()[3] == "ADD"
    assert df["texts"].isna().tolist() == [False, True, False, False]
    assert df["nulls"].dtype == object and df["nulls"].tolist() == [None] * 4
    # an integer in one batch and a float or text in another: the objects as they were read
    assert df["mixed"].dtype == object
    assert [type(v) for v in df["mixed"]] == [int, float, type(None), str]
    assert df["mixed"].tolist() == [1, 2.5, None, "x"]


@pytest.mark.parametrize("size", [1, 2, 3])
def test_integers_and_floats_over_batches_become_float64(size: int) -> None:
    df = frame_of_batches(_cut([(1,), (None,), (2.5,)], size), ["v"])
    assert df["v"].dtype == np.float64
    np.testing.assert_array_equal(df["v"].to_numpy(), [1.0, np.nan, 2.5])


@pytest.mark.parametrize("size", [1, 2])
def test_an_integer_beyond_int64_is_left_to_pandas_as_read(size: int) -> None:
    # not an exact Int64 column: what pd.Series makes of the values as read (here float64)
    df = frame_of_batches(_cut([(2**63,), (None,), (5,)], size), ["v"])
    pd.testing.assert_series_equal(df["v"], pd.Series([2**63, None, 5], name="v"))
    assert str(df["v"].dtype) != "Int64"


def test_a_postgres_numeric_reads_as_sqlite_gives_it() -> None:
    # SUM of integers on PostgreSQL is NUMERIC: a whole one is an integer, a fraction a float
    df = frame_of_batches([[(decimal.Decimal("5"), decimal.Decimal("2.5"))], [(None, None)]], ["a", "b"])
    assert str(df["a"].dtype) == "Int64" and df["a"].tolist() == [5, pd.NA]
    assert df["b"].dtype == np.float64 and df["b"].tolist()[0] == 2.5


def test_no_rows_give_the_named_columns() -> None:
    df = frame_of_batches([], ["a", "b"])
    assert list(df.columns) == ["a", "b"] and len(df) == 0


def test_duplicate_column_names_are_kept() -> None:
    df = frame_of_batches([[(1, "x"), (2, "y")]], ["v", "v"])
    assert list(df.columns) == ["v", "v"]
    assert df.iloc[:, 0].tolist() == [1, 2] and df.iloc[:, 1].tolist() == ["x", "y"]


def test_repeated_texts_share_one_object() -> None:
    names = ["mul_mat_q4_K_kernel_" + "x" * 100, "rms_norm_f32"]
    rows = [(names[i % 2] + "",) for i in range(1000)]  # a new string object per row, as a driver makes
    df = frame_of_batches(_cut(rows, 64), ["kernel_name"])
    values = df["kernel_name"].tolist()
    assert values == [names[i % 2] for i in range(1000)]
    assert len({id(v) for v in values}) == 2


def test_store_frame_reads_in_batches_and_gives_the_whole_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "t.db"
    Store(db)  # a rocroof database; the table below is our own
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (a INTEGER, b REAL, c TEXT)")
    rows = [(i if i % 3 else None, i / 4 if i % 5 else None, f"k{i % 2}" if i % 7 else None) for i in range(50)]
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    con.commit()
    con.close()
    monkeypatch.setattr(store_mod, "FRAME_BATCH_ROWS", 4)
    df = Store(db, read_only=True).frame(sa.text("SELECT a, b, c FROM t ORDER BY rowid"))
    assert len(df) == 50
    assert str(df["a"].dtype) == "Int64"
    assert df["a"].tolist() == [i if i % 3 else pd.NA for i in range(50)]
    assert df["b"].dtype == np.float64
    np.testing.assert_array_equal(df["b"].to_numpy(), [i / 4 if i % 5 else np.nan for i in range(50)])
    assert [v if isinstance(v, str) else None for v in df["c"]] == [f"k{i % 2}" if i % 7 else None for i in range(50)]


@pytest.mark.parametrize("batch", [50, 2000])
def test_the_streamed_dispatch_csv_is_the_whole_reports_csv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    # `report --by dispatch --format csv` writes a batch of dispatches at a time; at any batch size the
    # text is the one the whole report renders (NULL-heavy RPD rows, formula-like kernel names included)
    from click.testing import CliRunner

    from rocroof.capture.readers import read_capture
    from rocroof.cli import cli
    from rocroof.ingest.pipeline import build_run
    from rocroof.report.tables import build_report, render

    from .conftest import REPO, fixture_path

    db = tmp_path / "r.db"
    for capture in (REPO / "examples" / "h200" / "dense-prefill", fixture_path("rpd")):
        Store(db).write_run(build_run(read_capture(capture)))
    import rocroof.report.tables as tables_mod

    monkeypatch.setattr(tables_mod, "CSV_BATCH_ROWS", batch)
    store = Store(db, read_only=True)
    for run_id in (1, 2):
        for raw in (False, True):
            whole = render(build_report(store, run_id, by="dispatch"), "csv", raw=raw)
            args = ["report", "--db", str(db), "--run", str(run_id), "--by", "dispatch", "--format", "csv"]
            out = CliRunner().invoke(cli, args + (["--raw"] if raw else []))
            assert out.exit_code == 0, out.output
            assert out.output == whole
            assert out.output.count("\n") == 1 + len(build_report(store, run_id, by="dispatch").rows)


def test_a_hand_changed_dispatch_cell_keeps_the_text_of_the_whole_report_or_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite keeps any value in any column: a real in the integer duration column makes the whole
    # column print as floats (3296.0), which a report written batch by batch cannot know in advance;
    # text there is no measurement at all
    from click.testing import CliRunner

    import rocroof.report.tables as tables_mod
    from rocroof.capture.readers import read_capture
    from rocroof.cli import cli
    from rocroof.ingest.pipeline import build_run
    from rocroof.report.tables import build_report, render

    from .conftest import REPO

    db = tmp_path / "r.db"
    Store(db).write_run(build_run(read_capture(REPO / "examples" / "h200" / "dense-prefill")))
    with sqlite3.connect(db) as con:
        con.execute("UPDATE dispatch_record SET duration_ns = 3296.5 WHERE run_id = 1 AND dispatch_index = 100")
    con.close()
    monkeypatch.setattr(tables_mod, "CSV_BATCH_ROWS", 16)
    args = ["report", "--db", str(db), "--by", "dispatch", "--format", "csv"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert out.output == render(build_report(Store(db, read_only=True), 1, by="dispatch"), "csv")
    assert ",3296.5," in out.output and out.output.count(".0,") > 0
    with sqlite3.connect(db) as con:
        con.execute("UPDATE dispatch_record SET duration_ns = 'junk' WHERE run_id = 1 AND dispatch_index = 100")
    con.close()
    for fmt in ("csv", "json"):
        bad = CliRunner().invoke(cli, ["report", "--db", str(db), "--by", "dispatch", "--format", fmt])
        assert bad.exit_code == 1
        assert bad.output == (
            "Error: run 1, dispatch 100: duration_ns holds text, not a number (the database was changed outside "
            "rocroof); correct or delete that row\n"
        )


@pytest.fixture(scope="module")
def invocation_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two H200 runs with op metadata (decode; MoE prefill, flagged ops), the second with unknown times.

    In run 2 every dispatch of each fifth invocation has no duration: those invocations have no
    known time (listed last, no share of time) and fill whole batches of their own at the end.
    """
    from rocroof.capture.readers import read_capture
    from rocroof.ingest.pipeline import build_run

    from .conftest import REPO

    db = tmp_path_factory.mktemp("inv") / "r.db"
    for case in ("dense500m-decode", "moe-prefill"):
        Store(db).write_run(build_run(read_capture(REPO / "examples" / "h200" / case)))
    with sqlite3.connect(db) as con:
        con.execute("UPDATE dispatch_record SET duration_ns = NULL WHERE run_id = 2 AND op_index % 5 = 0")
    con.close()
    return db


def _invocation_times(con: sqlite3.Connection, run_id: int) -> tuple[dict[int, int], set[int]]:
    """By hand from the stored dispatches: each op invocation's summed timing-dispatch ns, and the
    invocations with a dispatch of unknown time (whose sum the reports leave unknown)."""
    known: dict[int, int] = {}
    unknown: set[int] = set()
    for op_index, duration in con.execute(
        "SELECT op_index, duration_ns FROM dispatch_record WHERE run_id = ? "
        "AND timing_dispatch_index = dispatch_index AND op_index IS NOT NULL",
        (run_id,),
    ):
        if duration is None:
            unknown.add(op_index)
        known[op_index] = known.get(op_index, 0) + (duration or 0)
    return known, unknown


@pytest.mark.parametrize("batch", [16, 8192])
def test_the_streamed_invocation_csv_is_the_whole_reports_csv(
    invocation_db: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    # `report --by invocation --format csv` sorts, computes and writes a batch of invocations at a time:
    # the text is the one the whole report renders, and its rows are checked here against the tables
    import csv
    import io

    from click.testing import CliRunner

    import rocroof.report.tables as tables_mod
    from rocroof.cli import cli
    from rocroof.report.tables import build_report, invocation_csv_chunks, render

    monkeypatch.setattr(tables_mod, "CSV_BATCH_ROWS", batch)
    store = Store(invocation_db, read_only=True)
    con = sqlite3.connect(f"file:{invocation_db}?mode=ro", uri=True)
    try:
        for run_id in (1, 2):
            for raw in (False, True):
                whole = render(build_report(store, run_id, by="invocation"), "csv", raw=raw)
                args = ["report", "--db", str(invocation_db), "--run", str(run_id), "--by", "invocation"]
                out = CliRunner().invoke(cli, [*args, "--format", "csv", *(["--raw"] if raw else [])])
                assert out.exit_code == 0, out.output
                assert out.output == whole
            # one row per invocation with a timing dispatch, counted by the database
            (invocations,) = con.execute(
                "SELECT COUNT(DISTINCT op_index) FROM dispatch_record WHERE run_id = ? "
                "AND timing_dispatch_index = dispatch_index AND op_index IS NOT NULL",
                (run_id,),
            ).fetchone()
            rows = list(csv.DictReader(io.StringIO(out.output)))
            assert len(rows) == invocations > 2 * 16
            assert len(list(invocation_csv_chunks(store, run_id))) == -(-invocations // batch)  # written in batches
            # longest first, unknown times last
            times = [int(r["duration_ns"]) for r in rows if r["duration_ns"]]
            assert times == sorted(times, reverse=True)
            assert all(not r["duration_ns"] for r in rows[len(times) :])
            assert (len(times) < invocations) == (run_id == 2)
            # an invocation's time and share by hand: its timing dispatches' durations, over the known total
            known, unknown = _invocation_times(con, run_id)
            total = sum(d for i, d in known.items() if i not in unknown)
            for row in (rows[0], rows[len(times) // 2], rows[len(times) - 1]):
                (op_index,) = con.execute(
                    "SELECT op_index FROM op_invocation WHERE run_id = ? AND invocation = ?",
                    (run_id, int(row["invocation"])),
                ).fetchone()
                assert int(row["duration_ns"]) == known[op_index]
                assert float(row["share_of_time_pct"]) == pytest.approx(100.0 * known[op_index] / total, rel=1e-12)
            # the per-row roofline columns are filled in every batch, and some rows are flagged
            assert all(r["compute_peak"] and r["governing_ceiling"] for r in rows)
            assert any(r["flag"] for r in rows)
    finally:
        con.close()
        store.close()


def test_a_hand_changed_invocation_cell_keeps_the_text_of_the_whole_report(
    invocation_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a real among the integers of model_read_bytes prints that whole column as floats (4096.0): a
    # batch cannot know it before the last one, so the whole report is written
    from click.testing import CliRunner

    import rocroof.report.tables as tables_mod
    from rocroof.cli import cli
    from rocroof.report.tables import build_report, invocation_cells_typed, render

    db = tmp_path / "changed.db"
    src, con = sqlite3.connect(invocation_db), sqlite3.connect(db)
    src.backup(con)  # a copy of the file would miss what is still in its write-ahead log
    src.close()
    with con:
        con.execute("UPDATE op_model SET model_read_bytes = model_read_bytes + 0.5 WHERE run_id = 1 AND op_index = 3")
    con.close()
    monkeypatch.setattr(tables_mod, "CSV_BATCH_ROWS", 16)
    store = Store(db, read_only=True)
    try:
        assert not invocation_cells_typed(store, 1) and invocation_cells_typed(store, 2)
        args = ["report", "--db", str(db), "--run", "1", "--by", "invocation", "--format", "csv"]
        out = CliRunner().invoke(cli, args)
        assert out.exit_code == 0, out.output
        assert out.output == render(build_report(store, 1, by="invocation"), "csv")
        header = out.output.split("\n", 1)[0].split(",")
        column = header.index("model_read_bytes")
        read_bytes = [line.split(",")[column] for line in out.output.splitlines()[1:]]
        assert any(v.endswith(".5") for v in read_bytes) and any(v.endswith(".0") for v in read_bytes)
        out = CliRunner().invoke(cli, [*args[:-1], "json"])  # the JSON document, the same way
        assert out.exit_code == 0, out.output
        assert (
            out.output == render(build_report(store, 1, by="invocation"), "json")
            and re.search(r'"model_read_bytes": \d+\.5,', out.output)
            and re.search(r'"model_read_bytes": \d+\.0,', out.output)  # the whole column as floats
        )
    finally:
        store.close()


@pytest.mark.parametrize("batch", [1, 16, 8192])
def test_the_streamed_invocation_json_is_the_whole_reports_document(
    invocation_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    # `report --by invocation --format json` writes its document's head, then a batch of rows at a time
    # (7.3 GB held at 10^6 dispatches when built whole): the text is the whole report's, and its counts
    # and totals are checked here against the tables
    import json

    from click.testing import CliRunner

    import rocroof.report.tables as tables_mod
    from rocroof.cli import cli
    from rocroof.report.tables import build_report, invocation_json_chunks, render

    monkeypatch.setattr(tables_mod, "CSV_BATCH_ROWS", batch)
    store = Store(invocation_db, read_only=True)
    con = sqlite3.connect(f"file:{invocation_db}?mode=ro", uri=True)
    try:
        for run_id in (1, 2):
            args = ["report", "--db", str(invocation_db), "--run", str(run_id), "--by", "invocation"]
            out = CliRunner().invoke(cli, [*args, "--format", "json"])
            assert out.exit_code == 0, out.output
            assert out.output == render(build_report(store, run_id, by="invocation"), "json")
            if batch == 16:
                assert len(list(invocation_json_chunks(store, run_id))) > 16  # the rows came in pieces
            doc = json.loads(out.output)
            known, unknown = _invocation_times(con, run_id)
            assert doc["rows_total"] == doc["totals"]["rows"] == len(doc["rows"]) == len(known)
            assert doc["totals"]["duration_ns"] == sum(d for i, d in known.items() if i not in unknown)
            assert [r["duration_ns"] is None for r in doc["rows"]].count(True) == len(unknown)
    finally:
        con.close()
        store.close()
    # a run without op invocations: the document's rows are an empty array, as the whole report's
    from rocroof.capture.readers import read_capture
    from rocroof.ingest.pipeline import build_run

    from .conftest import fixture_path

    db = tmp_path / "plain.db"
    Store(db).write_run(build_run(read_capture(fixture_path("rocprofv3-docs"))))
    plain = Store(db, read_only=True)
    try:
        whole = render(build_report(plain, 1, by="invocation"), "json")
        assert "".join(invocation_json_chunks(plain, 1)) == whole and json.loads(whole)["rows"] == []
    finally:
        plain.close()


def test_a_closed_pipe_ends_the_streamed_csv_quietly_with_status_0(tmp_path: Path) -> None:
    # `rocroof report --by dispatch --format csv | head -1`: as the whole report did, no error, status 0
    import subprocess
    import sys

    from rocroof.capture.readers import read_capture
    from rocroof.ingest.pipeline import build_run

    from .conftest import REPO

    db = tmp_path / "r.db"
    Store(db).write_run(build_run(read_capture(REPO / "examples" / "h200-counters" / "dense28-decode-flops")))
    # the streamed report, and a query's batches (written a batch at a time too, status 1 before)
    for args, head in (
        (["report", "--by", "dispatch", "--format", "csv"], b"run_id,dispatch_id,kernel_name,"),
        # 400,000 rows: eight of the query's batches of 50,000
        (
            [
                "query",
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400000) SELECT i FROM n",
                "--format",
                "csv",
            ],
            b"i",
        ),
    ):
        argv = [sys.executable, "-m", "rocroof", *args, "--db", str(db)]
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            assert proc.stdout.readline().startswith(head)
            proc.stdout.close()  # the reader goes away with megabytes of CSV still to come
            err = proc.stderr.read()
            assert proc.wait(timeout=120) == 0, (args, err)
        assert err == b"", args
