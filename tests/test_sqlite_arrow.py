"""SQLite results as typed columns: the Arrow path (ADBC) and the sqlite3 path give exact values.

Expected values are the ones written into the database by the test.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rocroof.capture.readers import sqlite_arrow

BIG = 1_734_000_000_123_456_789  # epoch ns: past 2**53, where a float64 rounds


def _db(path: Path, rows: list[tuple[object, object]]) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (a, b)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", rows)
    conn.commit()
    return conn


@pytest.mark.parametrize("adbc", [True, False])
def test_integers_past_two_to_the_53_with_nulls_stay_exact(
    tmp_path: Path, adbc: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = _db(tmp_path / "t.db", [(BIG, "x"), (None, None), (BIG + 1, "y")])
    monkeypatch.setattr(sqlite_arrow, "USE_ADBC", adbc)
    try:
        frame = sqlite_arrow.arrow_frame(conn, "SELECT a, b FROM t", texts=frozenset({"b"}))
        if not adbc:
            assert frame is None
            frame = sqlite_arrow.sqlite_frame(conn, "SELECT a, b FROM t")
        assert frame is not None
        assert frame["a"].tolist() == [BIG, pd.NA, BIG + 1]
        assert [None if pd.isna(v) else v for v in frame["b"]] == ["x", None, "y"]
    finally:
        conn.close()


def test_a_column_of_mixed_types_is_left_to_the_sqlite3_path_as_objects(tmp_path: Path) -> None:
    conn = _db(tmp_path / "t.db", [(1, 1.5), ("text", 2), (3, None)])
    try:
        # text among integers: the driver would make it all text; not a column arrow_frame takes
        assert sqlite_arrow.arrow_frame(conn, "SELECT a FROM t") is None
        frame = sqlite_arrow.sqlite_frame(conn, "SELECT a, b FROM t")
        assert frame["a"].tolist() == [1, "text", 3]  # as they are: the reader names the bad value
        b = frame["b"].to_numpy()
        assert b.dtype == np.float64 and b[0] == 1.5 and b[1] == 2.0 and np.isnan(b[2])
    finally:
        conn.close()


def test_typed_column_rules() -> None:
    assert sqlite_arrow.typed_column([None, None]).dtype == object
    ints = sqlite_arrow.typed_column([BIG, None])
    assert isinstance(ints, pd.arrays.IntegerArray) and ints[0] == BIG and ints[1] is pd.NA
    assert sqlite_arrow.typed_column([True, 1]).dtype == object  # a bool is not a count
