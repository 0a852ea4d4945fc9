"""Bounded-memory ingest: chunked reads, the typed fast paths, and the helpers that replaced whole-frame pandas work.

The big readers read their inputs a chunk of rows at a time and keep only compact columns; the
typed fast paths (plain CSV typed by the C parser, rocpd counter records as numbers) must give
exactly what the cell-by-cell paths give, and every chunk size must give the same run. The
sort-based joins and the vectorised parsers are checked against brute force with hypothesis.
"""

from __future__ import annotations

import concurrent.futures
import functools
import gc
import hashlib
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rocroof.ingest.attribution as attribution_mod
import rocroof.ingest.pipeline as pipeline_mod
import rocroof.store as store_mod
from rocroof import fileio
from rocroof.analysis import dram
from rocroof.capture.markers import parse_range, parse_ranges
from rocroof.capture.readers import nvidia, read_capture, rocpd, rocprofv3_csv
from rocroof.errors import ParseError
from rocroof.ingest.pipeline import build_run
from rocroof.records import DISPATCH_COLUMNS, KeyIndex, conform, distinct, match_rows, stack_frames, text_values
from rocroof.store import Store
from rocroof.text import storable

from . import synthetic

REPO = Path(__file__).resolve().parents[1]
PROPERTY = settings(max_examples=int(os.environ.get("ROCROOF_FUZZ_EXAMPLES", "40")), deadline=None)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("captures")


def db_rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's and view's rows (ingest time left out), sorted: what two ingests of one capture must share."""
    con = sqlite3.connect(db)
    try:
        out = {}
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name"):
            cols = [
                r[1] for r in con.execute(f'PRAGMA table_info("{table}")') if r[1] not in ("created_at", "applied_at")
            ]
            select = ", ".join(f'"{c}"' for c in cols)
            out[table] = con.execute(f'SELECT {select} FROM "{table}" ORDER BY {select}').fetchall()
        return out
    finally:
        con.close()


def ingest(capture: Path, db: Path) -> dict[str, list[tuple[Any, ...]]]:
    store = Store(db)
    store.write_run(build_run(read_capture(capture), source_path=str(capture)))
    store.close()
    return db_rows(db)


# ---- every chunk size gives the same run ------------------------------------------------------------


@pytest.mark.parametrize("fmt", synthetic.FORMATS)
def test_tiny_chunks_everywhere_store_the_same_run(
    tmp_path: Path, cache: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = synthetic.capture(fmt, 600, cache)
    expected = ingest(capture, tmp_path / "whole.db")
    assert len(expected["dispatch"]) >= 600 and len(expected["counter_value"]) == 8 * 600
    # chunks of a few rows: reading, stacking, DRAM bytes, the attribution sweep and the inserts
    monkeypatch.setattr(rocprofv3_csv, "read_csv_plain", functools.partial(fileio.read_csv_plain, chunk_rows=7))
    monkeypatch.setattr(rocprofv3_csv, "read_csv_chunks", functools.partial(fileio.read_csv_chunks, chunk_rows=7))
    monkeypatch.setattr(nvidia, "NCU_CHUNK_ROWS", 7)  # the Nsight Compute read asks for its own chunk size
    monkeypatch.setattr(rocpd, "FETCH_ROWS", 7)
    monkeypatch.setattr(nvidia, "FETCH_ROWS", 7)
    monkeypatch.setattr(pipeline_mod, "_DRAM_CHUNK", 5)
    monkeypatch.setattr(attribution_mod, "_SWEEP_BLOCK", 3)
    monkeypatch.setattr(store_mod, "INSERT_CHUNK", 11)
    assert ingest(capture, tmp_path / "chunked.db") == expected


def test_inputs_are_read_a_chunk_at_a_time(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Profiler tables of any size go through pandas in chunks; only a few small tables are read whole."""
    whole: list[str] = []
    real_csv, real_sql = pd.read_csv, pd.read_sql_query

    def read_csv(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("chunksize"):
            whole.append(f"read_csv {args[0]}")
        return real_csv(*args, **kwargs)

    def read_sql_query(sql: str, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("chunksize"):
            whole.append(sql)
        return real_sql(sql, *args, **kwargs)

    monkeypatch.setattr(pd, "read_csv", read_csv)
    monkeypatch.setattr(pd, "read_sql_query", read_sql_query)
    for fmt in synthetic.FORMATS:
        ingest(synthetic.capture(fmt, 300, cache), tmp_path / f"{fmt}.db")
    # what may be read whole: agent, process and GPU descriptions (a row per device or process)
    small = ("rocpd_info_agent", "PROCESSES", "TARGET_INFO_GPU")
    assert [w for w in whole if not any(name in w for name in small)] == []


# ---- the typed fast paths give what the cell-by-cell paths give ------------------------------------------


def _frames_of(p: Any) -> dict[str, pd.DataFrame]:
    """A pass's tables with categoricals as plain values (the two paths may differ only in dtype)."""
    out = {}
    for name in ("dispatches", "counters", "markers", "launches", "instances"):
        df = getattr(p, name).reset_index(drop=True)
        for col in df.columns:
            if isinstance(df[col].dtype, pd.CategoricalDtype):
                df[col] = df[col].astype(object)
        out[name] = df
    return out


def _assert_same_pass(a: Any, b: Any) -> None:
    fa, fb = _frames_of(a), _frames_of(b)
    for name in fa:
        pd.testing.assert_frame_equal(fa[name], fb[name], check_dtype=False, obj=name)
    assert (a.kind, a.timestamps_exact, a.notes) == (b.kind, b.timestamps_exact, b.notes)


def test_plain_csv_is_read_as_the_cell_by_cell_path_reads_it(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    capture = synthetic.capture("csv", 500, cache)
    (files,) = rocprofv3_csv.group_pass_files(p for p in capture.iterdir() if p.is_file()).values()
    fast = rocprofv3_csv.read_pass(files, "p")
    assert isinstance(fast.counters["counter_name"].dtype, pd.CategoricalDtype)  # the typed path was taken

    def not_plain(*args: Any, **kwargs: Any) -> Any:
        raise fileio.NotPlain("forced")

    monkeypatch.setattr(rocprofv3_csv, "read_csv_plain", not_plain)
    _assert_same_pass(fast, rocprofv3_csv.read_pass(files, "p"))


def test_polars_and_pandas_read_plain_files_alike(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain CSV files are parsed by polars when it is installed, else by pandas' C parser: same pass."""
    capture = synthetic.capture("csv", 500, cache)
    (files,) = rocprofv3_csv.group_pass_files(p for p in capture.iterdir() if p.is_file()).values()
    monkeypatch.setattr(fileio, "POLARS_MIN_BYTES", 0)
    with_polars = rocprofv3_csv.read_pass(files, "p")
    monkeypatch.setattr(fileio, "USE_POLARS", False)
    _assert_same_pass(with_polars, rocprofv3_csv.read_pass(files, "p"))


def _plain(path: Path, **kwargs: Any) -> Any:
    """What read_csv_plain gives for ``path``: its chunks as plain lists, or NotPlain."""
    try:
        return [
            (first, {name: [None if v is None else str(v) for v in chunk[name].tolist()] for name in chunk.columns})
            for chunk, first in fileio.read_csv_plain(path, **kwargs)
        ]
    except fileio.NotPlain:
        return "not plain"


@pytest.mark.parametrize(
    "text",
    [
        b"a,b,c\n1,x,5\n2,y,6\n",  # plain
        b"a,b,c\n1,x,5\n2,y\n",  # a short last row
        b"a,b,c\n1,x,5\n2,,\n3,z,7\n",  # empty cells in the middle
        b"a,c,b\n1,5,x\n2,6\n3,7,z\n",  # a row short of a text column only (the last column)
        b"a,b,c\n1,x,5\n\n3,z,7\n",  # a blank line
        b"a,b,c\n1,\xff,5\n",  # not UTF-8
        b'a,b,c\n1,"open,5\n',  # a quote that never closes
        b"a,b,c\n1,x,5,9\n",  # an extra field
        b"a,b,c\n 1,x,+5\n",  # blanks and signs that parse_int reads
        b"a,b,c\n1.5,x,5\n",  # not an integer
        b'a,b,c\n1,"q,""r""",5\r\n2,"",6\r\n',  # quoting, CRLF
    ],
)
def test_polars_refuses_what_pandas_refuses(text: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Malformed rows are never read as empty cells: polars gives pandas' chunks or hands the file back (NotPlain)."""
    path = tmp_path / "t.csv"
    path.write_bytes(text)
    monkeypatch.setattr(fileio, "POLARS_MIN_BYTES", 0)
    got = _plain(path, ints=["a", "c"])
    monkeypatch.setattr(fileio, "USE_POLARS", False)
    assert got == _plain(path, ints=["a", "c"])


def _joined(path: Path, **kwargs: Any) -> Any:
    """:func:`_plain`'s chunks joined column by column (blocks and chunks split rows differently)."""
    got = _plain(path, **kwargs)
    if got == "not plain":
        return got
    joined: dict[str, list[Any]] = {}
    for _, chunk in got:
        for name, values in chunk.items():
            joined.setdefault(name, []).extend(values)
    return joined


BLOCK_TEXTS = [
    b'a,b,c\n1,"two\nlines",5\n2,"x",6\n3,"three\nli\nnes",7\n',  # newlines inside quotes
    b'a,b,c\n1,"q ""a\nb"" r",5\n2,"""",6\n',  # doubled quotes around a quoted newline
    b'a,b,c\r\n1,"x\r\ny",5\r\n2,z,6',  # CRLF, no newline at the end
    b"a,b,c\n1,x,5\n2,y\n3,z,7\n",  # a short row in the middle
    b'a,b,c\n1,"open,5\n2,y,6\n',  # a quote that never closes
    b'a,"b\nc",d\n1,x,5\n',  # a header with a quoted newline
    b"a,b,c\n" + b"".join(b"%d,k%d,%d\n" % (i, i % 3, i * 7) for i in range(200)),  # many rows
]


@pytest.mark.parametrize("text", BLOCK_TEXTS)
def test_polars_blocks_end_where_records_end(text: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the block size, polars reads what pandas reads: a block never ends inside a quoted field."""
    path = tmp_path / "t.csv"
    path.write_bytes(text)
    monkeypatch.setattr(fileio, "USE_POLARS", False)
    expected = _joined(path, ints=["a", "c"])
    monkeypatch.setattr(fileio, "USE_POLARS", True)
    monkeypatch.setattr(fileio, "POLARS_MIN_BYTES", 0)
    for block in (1, 2, 3, 5, 8, 13, 21, 64, len(text), 1 << 20):
        monkeypatch.setattr(fileio, "POLARS_BLOCK_BYTES", block)
        got = _joined(path, ints=["a", "c"])
        # polars refuses a few files pandas reads (the pandas path then decides): never other values
        assert got == expected or got == "not plain", block
    if text.startswith(b"a,b,c\n") and b"open" not in text and b"y\n3" not in text:
        # these plain files stay on the polars path, in blocks of a few records
        monkeypatch.setattr(fileio, "POLARS_BLOCK_BYTES", 13)
        plan = fileio._Plan(["a", "b", "c"], ["a", "b", "c"], {"a", "c"}, set(), set())
        chunks = list(fileio._polars_chunks(path, plan))
        assert sum(len(c) for c in chunks) == len(expected["a"]) and len(chunks) > 1


def test_a_record_longer_than_the_line_limit_goes_to_pandas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b'a,b,c\n1,"' + b"x" * 100 + b'",5\n')
    monkeypatch.setattr(fileio, "POLARS_MIN_BYTES", 0)
    monkeypatch.setattr(fileio, "POLARS_BLOCK_BYTES", 8)
    monkeypatch.setattr(fileio, "MAX_LINE_BYTES", 40)
    plan = fileio._Plan(["a", "b", "c"], ["a", "b", "c"], {"a", "c"}, set(), set())
    with pytest.raises(fileio.NotPlain, match="longer than 40 bytes"):
        list(fileio._polars_chunks(path, plan))


INT_CELLS = st.one_of(
    st.integers(-(2**64), 2**64).map(str),
    st.sampled_from(
        [
            "",
            " ",
            " 42 ",
            "\t7",
            "+5",
            "-0",
            "05",
            "1_000",
            "5\x00",
            "\x1c5",
            "\u0663",
            "1.5",
            "16384.000000",
            "8.1097E+14",
            "1e3",
            "nan",
            "inf",
            "abc",
            "0x10",
            str(2**63 - 1),
            str(2**63),
            str(-(2**63)),
            "12345678901234567",
            "12345678901234567.000000",
        ]
    ),
)


@PROPERTY
@given(
    cells=st.lists(INT_CELLS, min_size=1, max_size=6),
    column=st.sampled_from(["Dispatch_Id", "End_Timestamp", "Queue_Id"]),
)
def test_any_cell_in_an_integer_column_reads_as_the_text_path_reads_it(
    tmp_path_factory: pytest.TempPathFactory, cells: list[str], column: str
) -> None:
    """The typed path takes a file only when it reads every cell exactly as parse_int does."""
    path = tmp_path_factory.mktemp("kt") / "1_kernel_trace.csv"
    rows = ['"Dispatch_Id","Kernel_Name","Start_Timestamp","End_Timestamp","Queue_Id"']
    for i, cell in enumerate(cells):
        values = {"Dispatch_Id": str(i + 1), "End_Timestamp": str(2000 + i), "Queue_Id": "3"}
        values[column] = cell
        quoted = '"' + cell.replace('"', '""') + '"'
        values[column] = quoted
        rows.append(f'{values["Dispatch_Id"]},"k{i}",{1000 + i},{values["End_Timestamp"]},{values["Queue_Id"]}')
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")

    def outcome(fn: Any) -> Any:
        try:
            got = fn(path, None)
        except ParseError as exc:
            return ("error", str(exc))
        # the typed path gives the whole frame, timestamp exactness included; the text path its parts
        df, exact = got if isinstance(got, tuple) else (got, got["timestamps_exact"])
        df = conform(df, DISPATCH_COLUMNS).drop(columns=["region", "timestamps_exact"])
        for c in df.columns:
            if isinstance(df[c].dtype, pd.CategoricalDtype):  # text as codes: its values, None where missing
                df[c] = pd.Series(text_values(df[c]), dtype=object)
        return ("ok", df, [bool(v) for v in exact.tolist()])

    fast = outcome(rocprofv3_csv._dispatches_from_kernel_trace)
    slow = outcome(rocprofv3_csv._kernel_trace_text)
    assert fast[0] == slow[0], (fast, slow)
    if fast[0] == "ok":
        pd.testing.assert_frame_equal(fast[1], slow[1], check_dtype=False)
        assert fast[2] == slow[2]
    else:
        assert fast[1] == slow[1]


def test_rocpd_counters_read_as_numbers_equal_the_sql_sums(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    capture = synthetic.capture("rocpd", 500, cache)
    (db,) = capture.glob("*_results.db")
    fast = rocpd.read_pass(db, "p")
    assert isinstance(fast.counters["counter_name"].dtype, pd.CategoricalDtype)  # read as numbers
    monkeypatch.setattr(rocpd, "_counters_one_record_each", lambda *args: None)
    _assert_same_pass(fast, rocpd.read_pass(db, "p"))


def test_rocpd_counter_recorded_twice_for_a_dispatch_is_summed_by_sql(cache: Path, tmp_path: Path) -> None:
    capture = synthetic.capture("rocpd", 50, cache, dest=tmp_path / "cap")
    (db,) = capture.glob("*_results.db")
    con = sqlite3.connect(db)
    table = next(
        r[0]
        for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_pmc_event%'")
    )
    first = con.execute(f'SELECT event_id, pmc_id, value FROM "{table}" ORDER BY id LIMIT 1').fetchone()
    con.execute(
        f'INSERT INTO "{table}" (guid, event_id, pmc_id, value, extdata) SELECT guid, event_id, pmc_id, 0.5, '
        f'extdata FROM "{table}" WHERE id = (SELECT MIN(id) FROM "{table}")'
    )
    con.commit()
    con.close()
    p = rocpd.read_pass(db, "p")
    counters = p.counters.astype({"counter_name": object})
    values = counters.loc[counters["row"] == 0, "value"].tolist()
    assert first[2] + 0.5 in values  # the two records of that counter summed
    assert len(p.instances) == 2  # and kept per record


def test_a_repeated_rocpd_dispatch_is_refused_with_its_id(cache: Path, tmp_path: Path) -> None:
    capture = synthetic.capture("rocpd", 50, cache, dest=tmp_path / "cap")
    (db,) = capture.glob("*_results.db")
    con = sqlite3.connect(db)
    table = next(
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_kernel_dispatch%'"
        )
    )
    con.execute("DROP VIEW rocpd_kernel_dispatch")
    con.execute(f'CREATE VIEW rocpd_kernel_dispatch AS SELECT * FROM "{table}" UNION ALL SELECT * FROM "{table}"')
    con.commit()
    con.close()
    with pytest.raises(ParseError, match=r"dispatch id 1 of process .* appears twice"):
        read_capture(capture)


def test_a_repeated_ncu_kernel_row_is_refused_with_its_row(cache: Path, tmp_path: Path) -> None:
    capture = synthetic.capture("nvidia", 20, cache, dest=tmp_path / "cap")
    path = capture / "ncu" / "ncu_raw.csv"
    lines = path.read_text().splitlines()
    lines.insert(5, lines[4])  # file row 5 (the third kernel, ID 2) again as row 6
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError) as err:
        read_capture(capture)
    assert err.value.row == 6 and "kernel ID 2 appears twice" in err.value.reason


# ---- the vectorised helpers against brute force ---------------------------------------------------------


@PROPERTY
@given(
    data=st.data(),
    width=st.integers(1, 3),
    n_table=st.integers(0, 120),
    n_query=st.integers(0, 40),
    spread=st.sampled_from([3, 200]),
)
def test_match_rows_finds_the_first_row_with_the_key(
    data: st.DataObject, width: int, n_table: int, n_query: int, spread: int
) -> None:
    ints = st.integers(-3, spread)
    table = [
        np.array(data.draw(st.lists(ints, min_size=n_table, max_size=n_table)), dtype=np.int64) for _ in range(width)
    ]
    query = [
        np.array(data.draw(st.lists(ints, min_size=n_query, max_size=n_query)), dtype=np.int64) for _ in range(width)
    ]
    # runs of one key on consecutive query rows, as counter files have them (one row per counter)
    repeats = np.array(data.draw(st.lists(st.integers(1, 3), min_size=n_query, max_size=n_query)), dtype=np.int64)
    query = [np.repeat(c, repeats) for c in query]
    got = match_rows(table, query).tolist()
    index = KeyIndex(table)
    by_index = index.find(query).tolist()
    keys = list(zip(*(c.tolist() for c in table), strict=True)) if n_table else []
    for i in range(len(got)):
        key = tuple(int(c[i]) for c in query)
        assert got[i] == (keys.index(key) if key in keys else -1)
    assert by_index == got
    half = len(got) // 2  # the index answers chunk after chunk
    assert index.find([c[:half] for c in query]).tolist() + index.find([c[half:] for c in query]).tolist() == got


def test_match_rows_of_one_process_answers_as_row_by_row() -> None:
    """One value in the table's first column (one process): queries of other processes find nothing."""
    table = [np.array([7, 7, 7, 7, 7]), np.array([4, 1, 4, 9, 2])]
    query = [np.array([7, 8, 7, 7, 7, 6]), np.array([4, 4, 9, 5, 2, 1])]
    # by hand: (7, 4) -> row 0 (its first row), (8, 4) -> none, (7, 9) -> 3, (7, 5) -> none, (7, 2) -> 4, (6, 1) -> none
    assert match_rows(table, query).tolist() == [0, -1, 3, -1, 4, -1]
    assert KeyIndex(table).find(query).tolist() == [0, -1, 3, -1, 4, -1]


@PROPERTY
@given(values=st.lists(st.integers(-(2**62), 2**62), max_size=60))
def test_distinct_is_the_sorted_set(values: list[int]) -> None:
    assert distinct(np.array(values, dtype=np.int64)).tolist() == sorted(set(values))


@PROPERTY
@given(blocks=st.lists(st.lists(st.integers(0, 4), max_size=6), max_size=8), block=st.integers(1, 9))
def test_repeats_finds_a_pair_twice(blocks: list[list[int]], block: int) -> None:
    rows = np.array([r for r, codes in enumerate(blocks) for _ in codes], dtype=np.int64)
    codes = np.array([c for codes in blocks for c in codes], dtype=np.int64)
    pairs = list(zip(rows.tolist(), codes.tolist(), strict=True))
    assert rocprofv3_csv._repeats(rows, codes, 5, block=block) == (len(set(pairs)) != len(pairs))


MESSAGE = st.one_of(
    st.builds(
        lambda op, name, inv: f"ggml:{op}:{name}:{inv}",
        st.text("ABZ_09:-x", max_size=6),
        st.text("ab:-() \n0", max_size=8),
        st.one_of(st.integers(0, 2**64).map(str), st.text("0123a ", max_size=4)),
    ),
    st.text(max_size=12),
    st.sampled_from([None, float("nan"), "ggml reset", "ggml:A:b:\u0663", "ggml:A:b:1\n"]),
)


@PROPERTY
@given(messages=st.lists(MESSAGE, max_size=20))
def test_parse_ranges_reads_what_parse_range_reads(messages: list[Any]) -> None:
    is_ggml, invocation, op, node = parse_ranges(messages)
    for i, message in enumerate(messages):
        one = parse_range(message) if isinstance(message, str) else None
        if one is None:
            assert not is_ggml[i]
        else:
            assert is_ggml[i] and (invocation[i], op[i], node[i]) == (one.invocation, one.op, one.node_name)


def test_a_ggml_invocation_beyond_int64_is_a_plain_marker(cache: Path, tmp_path: Path) -> None:
    capture = synthetic.capture("csv", 50, cache, dest=tmp_path / "cap")
    path = next(capture.glob("*_marker_api_trace.csv"))
    text = path.read_text()
    assert 'ggml:GET_ROWS:inp_embd:1"' in text
    path.write_text(text.replace('ggml:GET_ROWS:inp_embd:1"', 'ggml:GET_ROWS:inp_embd:99999999999999999999"'))
    rows = ingest(capture, tmp_path / "r.db")
    con = sqlite3.connect(tmp_path / "r.db")
    message, invocation = con.execute(
        "SELECT message, invocation FROM marker_range WHERE message LIKE 'ggml:GET_ROWS:inp_embd:%'"
    ).fetchone()
    con.close()
    assert message.endswith(":99999999999999999999") and invocation is None
    assert len(rows["dispatch"]) == 50


def _old_value(value: Any, whole: bool) -> Any:
    """The value-by-value conversion the writer used before (the reference)."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    if hasattr(value, "item"):
        value = value.item()
    elif isinstance(value, str):
        value = storable(value)
    if whole and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


COLUMNS = st.one_of(
    st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=8).map(
        lambda v: pd.Series(pd.array(v, dtype="Int64"))
    ),
    st.lists(st.one_of(st.none(), st.booleans()), max_size=8).map(lambda v: pd.Series(pd.array(v, dtype="boolean"))),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=8).map(lambda v: pd.Series(v, dtype="float64")),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=8).map(lambda v: pd.Series(v, dtype="int64")),
    st.lists(st.one_of(st.none(), st.text(max_size=4), st.just("a\udcff")), max_size=8).map(
        lambda v: pd.Series(v, dtype=object)
    ),
    st.lists(st.sampled_from(["a", "bb", None]), max_size=8).map(lambda v: pd.Series(v, dtype="category")),
    st.lists(st.one_of(st.none(), st.integers(0, 9), st.floats(0, 9), st.text(max_size=2)), max_size=8).map(
        lambda v: pd.Series(v, dtype=object)
    ),
)


@PROPERTY
@given(column=COLUMNS, whole=st.booleans())
def test_the_writer_converts_columns_as_value_by_value(column: pd.Series, whole: bool) -> None:
    got = store_mod._py_values(column, whole=whole).tolist()
    expected = [_old_value(v, whole) for v in column.astype(object).tolist()]
    assert [(type(g), g) for g in got] == [(type(e), e) for e in expected]


def test_every_counter_a_formula_reads_is_an_input_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline gives dram_bytes only the input counters: every name a formula asks for must be one."""
    asked: set[str] = set()
    real = dram._Counters.get

    def get(self: Any, name: str) -> pd.Series:
        asked.add(name)
        return real(self, name)

    monkeypatch.setattr(dram._Counters, "get", get)
    wide = pd.DataFrame({"SQ_WAVES": [1.0]})
    for arch in ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201", "sm_90", "gfx803"):
        dram.dram_bytes(wide, pd.Series([arch]))
    assert asked and all(dram.is_input_counter(name) for name in asked)
    assert not dram.is_input_counter("SQ_WAVES") and dram.is_input_counter("TCC_EA0_RDREQ")


def test_stack_frames_keeps_rows_in_order_and_empties_the_list() -> None:
    chunks = [
        pd.DataFrame({"a": pd.array([i, None], dtype="Int64"), "b": pd.Series([f"x{i}", None], dtype=object)})
        for i in range(3)
    ]
    out = stack_frames(chunks)
    assert chunks == []
    assert out["a"].tolist()[::2] == [0, 1, 2] and out["b"].tolist() == ["x0", None, "x1", None, "x2", None]


# ---- the content hash, computed on a second thread ---------------------------------------------------------


def test_the_content_hash_is_the_hash_of_the_files_read(cache: Path) -> None:
    capture = synthetic.capture("csv", 80, cache)
    got = read_capture(capture)
    digest = hashlib.sha256()
    for path in sorted((Path(f) for f in got.files_read), key=str):
        digest.update(os.fsencode(path.relative_to(capture)) + b"\0" + path.read_bytes() + b"\0")
    assert got.content_sha256 == digest.hexdigest()


# ---- memory: a large ingest stays bounded ------------------------------------------------------------------

MEASURE = r"""
import resource, sys
from pathlib import Path
from rocroof.ingest.pipeline import build_run
from rocroof.capture.readers import read_capture
from rocroof.store import Store
capture = read_capture(Path(sys.argv[1]))
frames = build_run(capture, source_path=sys.argv[1])
del capture
Store(sys.argv[2]).write_run(frames)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


@pytest.mark.large
@pytest.mark.parametrize("fmt", ["csv", "rocpd"])
def test_peak_memory_of_a_large_ingest_is_a_fraction_of_its_input(tmp_path: Path, cache: Path, fmt: str) -> None:
    """10^5 dispatches (0.8x10^6 counters): peak RSS under 1 kB per stored row, reading never holding the files."""
    capture = synthetic.capture(fmt, 100_000, cache)
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(capture), str(tmp_path / "r.db")],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    peak_mb = int(out.stdout.split()[-1])
    rows = sum(len(v) for v in db_rows(tmp_path / "r.db").values())
    assert rows > 1_100_000
    assert peak_mb * 1e6 / rows < 1_000, f"{peak_mb} MB for {rows:,} rows"


def test_text_columns_become_the_categoricals_pandas_makes() -> None:
    """``_categorical`` (distinct objects told apart by identity) gives ``astype("category")``'s result.

    Random columns of short texts, equal texts as distinct objects, missing values (None, NaN) and,
    now and then, a value that is not text (pandas then decides); coded in blocks of 1, 3 and 7
    rows, and whole, so that values first seen in a later block keep their place.
    """
    import random

    from rocroof.ingest.pipeline import _categorical

    gen = random.Random(5)
    for trial in range(400):
        values = [gen.choice(["b", "a", "é", "", None, float("nan"), "kernel<1>"]) for _ in range(gen.randint(1, 40))]
        values = ["".join([v]) if isinstance(v, str) and gen.random() < 0.5 else v for v in values]  # copies
        if trial % 10 == 0:
            values.append(gen.choice([1, 2.5, b"x"]))
        column = np.empty(len(values), dtype=object)
        column[:] = values
        got = _categorical(column, block=(1, 3, 7, 1 << 18)[trial % 4])
        expected = pd.Series(column).astype("category").array
        assert list(got.categories) == list(expected.categories), values
        assert got.codes.tolist() == expected.codes.tolist(), values


def _counted(n: int, log: list[str], fail_at: int | None = None) -> Iterator[int]:
    """0..n-1, each made in whichever thread asks; ``log`` records each item's thread and the close."""
    try:
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"bad item {i}")
            log.append(threading.current_thread().name)
            yield i
    finally:
        log.append("closed")


def _read_ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rocroof-read-ahead"]


def test_read_ahead_gives_every_item_in_order_made_in_its_thread() -> None:
    log: list[str] = []
    assert list(fileio.read_ahead(_counted(50, log))) == list(range(50))
    assert log[:-1] == ["rocroof-read-ahead"] * 50 and log[-1] == "closed"
    assert not _read_ahead_threads()  # ended with the read: a fork after it copies no thread


def test_read_ahead_raises_an_error_after_the_items_before_it() -> None:
    log: list[str] = []
    got = []
    with pytest.raises(ValueError, match="bad item 3"):
        for item in fileio.read_ahead(_counted(10, log, fail_at=3)):
            got.append(item)
    assert got == [0, 1, 2] and log[-1] == "closed"
    assert not _read_ahead_threads()


def test_a_caller_that_stops_early_ends_the_thread_and_closes_the_items() -> None:
    log: list[str] = []
    ahead = fileio.read_ahead(_counted(1000, log))
    assert [next(ahead), next(ahead)] == [0, 1]
    ahead.close()
    assert log[-1] == "closed" and len(log) <= 2 + 2 + 1  # at most the item in the queue and one being made
    assert not _read_ahead_threads()


def test_read_ahead_on_and_off_read_the_same_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(BLOCK_TEXTS[-1])
    monkeypatch.setattr(fileio, "POLARS_MIN_BYTES", 0)
    monkeypatch.setattr(fileio, "POLARS_BLOCK_BYTES", 64)
    ahead = _plain(path, ints=["a", "c"])
    monkeypatch.setattr(fileio, "READ_AHEAD", False)
    assert ahead == _plain(path, ints=["a", "c"]) and len(ahead) > 10


@pytest.mark.skipif(sys.platform != "linux", reason="a nice level per thread is Linux's")
def test_the_hash_thread_runs_at_a_lower_priority_than_the_reader(tmp_path: Path) -> None:
    """The hash thread's nice level is the process's + HASH_NICE_STEP (capped at 19); the caller's is unchanged."""
    from rocroof.capture import readers

    path = tmp_path / "a.bin"
    path.write_bytes(b"abc")
    seen: list[int] = []
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        digest = pool.submit(readers._hash_beside, [path], tmp_path).result()
        # the pool's one thread, after the hash: its level as the hash left it
        pool.submit(lambda: seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))).result()
    # sha256 of the name, a NUL, the content and a NUL, by hand
    assert digest == hashlib.sha256(b"a.bin\0abc\0").hexdigest()
    assert seen == [min(19, before + readers.HASH_NICE_STEP)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before


def test_a_bad_marker_row_stops_the_read_ahead_threads_while_its_error_lives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A marker that ends before it starts is a ParseError; the read's threads end with it, not at a GC.

    The error is kept (as a future keeps it in ``read_pass``) and the cyclic GC is off: the reader
    is closed by the marker read itself.
    """
    path = tmp_path / "7_marker_api_trace.csv"
    lines = ["Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp"]
    for i in range(3000):
        start = 1000 * i
        end = start - 1 if i == 1000 else start + 500
        lines.append(f"MARKER_CORE_API,roctxRangePush_{i % 13},7,7,{i},{start},{end}")
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(fileio, "SPLIT_POLARS_MIN_BYTES", 0)
    monkeypatch.setattr(fileio, "SPLIT_POLARS_BLOCK_BYTES", 4096)
    kept: list[BaseException] = []
    gc.disable()
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            job = pool.submit(rocprofv3_csv._read_markers, path)
            try:
                job.result()
            except ParseError as exc:
                kept.append(exc)
        assert kept and "ends before it starts" in str(kept[0])
        assert not _read_ahead_threads()
    finally:
        gc.enable()
