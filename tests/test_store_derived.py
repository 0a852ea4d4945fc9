"""Integer columns written as expressions of their row's other values (rocroof.store.derived).

Every expected relation and stored value below is worked out by hand from the rows given.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import rocroof.store as store_mod
from rocroof.store.derived import Derived, derive, exact_ints, numbered_parameters

needs_numbered = pytest.mark.skipif(
    not numbered_parameters(), reason="this Python's sqlite3 does not bind a sequence to ?NNN parameters"
)


def _ints(**cols: list[int]) -> list[tuple[str, np.ndarray]]:
    return [(name, np.array(values, dtype=np.int64)) for name, values in cols.items()]


def test_a_column_equal_to_an_earlier_one_plus_a_constant_is_derived_from_it() -> None:
    got = derive(_ints(index=[0, 1, 2, 3], ordinal=[0, 1, 2, 3], dispatch_id=[1, 2, 3, 4], before=[-5, -4, -3, -2]))
    assert got == {
        "ordinal": Derived("index"),
        "dispatch_id": Derived("index", offset=1),
        "before": Derived("index", offset=-5),
    }


def test_a_difference_of_two_earlier_columns_is_derived() -> None:
    got = derive(_ints(start=[100, 250, 400], end=[130, 262, 500], duration=[30, 12, 100]))
    assert got == {"duration": Derived("end", minus="start")}


def test_a_relation_broken_on_one_row_is_not_taken() -> None:
    # 40 rows: the sample (16 rows spread over them) misses row 5, where the relation breaks
    index = list(range(40))
    plus_one = [i + 1 for i in index]
    plus_one[5] = 99
    assert derive(_ints(index=index, plus_one=plus_one)) == {}
    duration = [2 * i + 1 - i for i in index]  # end - start with end = 2i + 1, start = i
    duration[5] = 0
    assert derive(_ints(start=index, end=[2 * i + 1 for i in index], duration=duration)) == {}


def test_sources_are_bound_columns_only() -> None:
    # b is a + 1 (derived); c is b + 1 = a + 2: derived from a, never from the derived b
    got = derive(_ints(a=[3, 7], b=[4, 8], c=[5, 9]))
    assert got == {"b": Derived("a", offset=1), "c": Derived("a", offset=2)}


def test_one_column_or_no_rows_derives_nothing() -> None:
    assert derive(_ints(a=[1, 2])) == {}
    assert derive(_ints(a=[], b=[])) == {}


def test_only_integers_below_2_62_with_no_missing_value_take_part() -> None:
    assert exact_ints(pd.Series([1, 2], dtype="int32")).tolist() == [1, 2]
    assert exact_ints(pd.Series(pd.array([1, 2], dtype="Int64"))).tolist() == [1, 2]
    assert exact_ints(pd.Series(pd.array([1, None], dtype="Int64"))) is None
    assert exact_ints(pd.Series([1.0, 2.0])) is None
    assert exact_ints(pd.Series([True, False])) is None
    assert exact_ints(pd.Series(pd.Categorical([1, 2]))) is None
    assert exact_ints(pd.Series([2**62, 0], dtype="int64")) is None
    assert exact_ints(pd.Series([-(2**62), 0], dtype="int64")) is None
    assert exact_ints(pd.Series([2**62 - 1, 0], dtype="int64")) is not None
    assert exact_ints(pd.Series([2**63, 0], dtype="uint64")) is None


_VALUES = ("d_id", "start", "end", "dur", "same", "odd", "huge", "opt")


@needs_numbered
def test_derived_columns_store_what_binding_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table written with derived columns holds the rows, and types, of one written bound.

    1,000 rows in chunks of 300 (full 256-row statements and a rest); ``d_id`` = ``i`` + 1,
    ``dur`` = ``end`` - ``start``, ``same`` = ``i`` in every chunk; ``odd`` = ``i`` + 7 except on
    row 500 (its chunk binds it); ``huge`` is beyond 2**62 (bound); ``opt`` has NULLs (bound).
    """
    md = sa.MetaData()
    keys = [sa.Column(name, sa.Integer, primary_key=True) for name in ("run_id", "i")]
    big = ("d_id", "start", "end", "dur", "huge", "opt")
    table = sa.Table("t", md, *keys, *(sa.Column(c, sa.BigInteger if c in big else sa.Integer) for c in _VALUES))
    n = 1000
    i = np.arange(n, dtype=np.int64)
    start = 10**15 + 1000 * i
    end = start + (i % 97) + 3
    odd = i + 7
    odd[500] = -1
    df = pd.DataFrame(
        {
            "i": i,
            "d_id": i + 1,
            "start": start,
            "end": end,
            "dur": end - start,
            "same": i,
            "odd": odd,
            "huge": 2**62 + i,
            "opt": pd.array([None if k % 3 == 0 else k + 1 for k in range(n)], dtype="Int64"),
        }
    )
    monkeypatch.setattr(store_mod, "INSERT_CHUNK", 300)
    written = []
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'derived.db'}")
    md.create_all(engine)
    with engine.begin() as conn:
        for names, rows, fixed in store_mod._chunks(df, table, 4, inline=True):
            written.append({k: v for k, v in fixed.items() if isinstance(v, Derived)})
            store_mod._insert_many(conn, table, names, rows, fixed)
    assert written[0] == {
        "d_id": Derived("i", offset=1),
        "dur": Derived("end", minus="start"),
        "same": Derived("i"),
        "odd": Derived("i", offset=7),
    }
    assert "odd" not in written[1]  # rows 300-599 hold row 500
    with sqlite3.connect(tmp_path / "derived.db") as check:
        got = check.execute(
            "SELECT run_id, i, d_id, start, end, dur, same, odd, huge, opt, typeof(dur), typeof(huge), typeof(opt) "
            "FROM t ORDER BY i"
        ).fetchall()
    assert len(got) == n
    for k, row in enumerate(got):
        s = 10**15 + 1000 * k
        e = s + k % 97 + 3
        opt = None if k % 3 == 0 else k + 1
        assert row == (
            4,
            k,
            k + 1,
            s,
            e,
            k % 97 + 3,
            k,
            -1 if k == 500 else k + 7,
            2**62 + k,
            opt,
            "integer",
            "integer",
            "null" if opt is None else "integer",
        )


def test_without_numbered_parameters_every_value_is_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "numbered_parameters", lambda: False)
    md = sa.MetaData()
    table = sa.Table("t", md, sa.Column("a", sa.Integer, primary_key=True), sa.Column("b", sa.Integer))
    df = pd.DataFrame({"a": [1, 2, 3], "b": [2, 3, 4]})
    ((names, rows, fixed),) = store_mod._chunks(df, table, 1, inline=True)
    assert names == ["a", "b"] and rows.tolist() == [[1, 2], [2, 3], [3, 4]] and fixed == {"run_id": "1"}
