"""Row keys over spilled columns (rocroof.keys) against brute force.

The reader sorts dispatches, finds repeated dispatch ids and matches counter rows through these
functions, a block of rows at a time, instead of sorts and hash tables over whole columns. Each is
checked here against the obvious whole-column computation (Python sorts and dicts), with blocks
smaller than the columns, on keys in order, nearly in order and shuffled, with repeats and gaps.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rocroof.spill as spill
from rocroof import keys

PROPERTY = settings(max_examples=int(os.environ.get("ROCROOF_FUZZ_EXAMPLES", "60")), deadline=None)


@pytest.fixture(autouse=True)
def spill_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every column a spill mapping: the functions must read them as they lie."""
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)


def _spilled(values: list[int | None]) -> pd.arrays.IntegerArray:
    mask = np.array([v is None for v in values], dtype=bool)
    data = np.array([0 if v is None else v for v in values], dtype=np.int64)
    return pd.arrays.IntegerArray(spill.spilled_copy(data, mapped=True), spill.spilled_copy(mask, mapped=True))


#: Key rows: (process, dispatch id, start); missing values allowed in the first two.
KEY_ROWS = st.lists(
    st.tuples(st.sampled_from([None, 5, 7, 40]), st.one_of(st.none(), st.integers(-3, 30)), st.integers(0, 5)),
    max_size=40,
)


@PROPERTY
@given(rows=KEY_ROWS, block=st.integers(1, 9))
def test_lex_sorted_is_a_comparison_of_neighbours(rows: list[tuple[int | None, int | None, int]], block: int) -> None:
    columns = [_spilled([r[i] for r in rows]) for i in range(3)]
    filled = [tuple(-1 if v is None else v for v in r) for r in rows]
    in_order = all(filled[i] <= filled[i + 1] for i in range(len(filled) - 1))
    repeat = next((i for i in range(1, len(filled)) if filled[i] == filled[i - 1]), None)
    assert keys.lex_sorted(columns, block) == (in_order, repeat if in_order else None)


@PROPERTY
@given(rows=KEY_ROWS)
def test_sorted_rows_stay_sorted_and_repeats_are_found(rows: list[tuple[int | None, int | None, int]]) -> None:
    ordered = sorted(tuple(-1 if v is None else v for v in r) for r in rows)
    columns = [_spilled([r[i] for r in ordered]) for i in range(3)]
    repeat = next((i for i in range(1, len(ordered)) if ordered[i] == ordered[i - 1]), None)
    assert keys.lex_sorted(columns, 4) == (True, repeat)


#: Dispatch keys as rocprofv3 writes them: a few processes, ids dense within each, completion order.
DENSE_KEYS = st.lists(st.tuples(st.sampled_from([3, 11, 12]), st.integers(1, 25)), max_size=60)


@PROPERTY
@given(rows=DENSE_KEYS, block=st.integers(1, 7))
def test_dense_keys_find_the_first_repeat_and_order_rows(rows: list[tuple[int, int]], block: int) -> None:
    pids, ids = _spilled([p for p, _ in rows]), _spilled([i for _, i in rows])
    dense = keys.DenseKeys.build(pids, ids, block)
    if not rows:
        assert dense is None or dense.slots == 0
        return
    assert dense is not None
    seen: set[tuple[int, int]] = set()
    first_repeat = None
    for i, key in enumerate(rows):
        if key in seen:
            first_repeat = i
            break
        seen.add(key)
    assert dense.first_repeat(pids, ids, block) == first_repeat
    order = dense.order(pids, ids, block)
    if first_repeat is not None:
        assert order is None  # a key twice: the caller sorts another way
    else:
        assert order is not None
        assert np.asarray(order).tolist() == sorted(range(len(rows)), key=lambda r: rows[r])


def test_sparse_keys_and_many_processes_are_not_dense() -> None:
    ids = _spilled([1, 10**9, 5])
    assert keys.DenseKeys.build(_spilled([1, 1, 1]), ids) is None  # 10^9 slots for three rows
    many = list(range(keys.DenseKeys.MAX_GROUPS + 1))
    assert keys.DenseKeys.build(_spilled(many), _spilled([1] * len(many))) is None
    # ids at both ends of int64: 2^64 slots, more than an int64 counts (was an OverflowError)
    assert keys.DenseKeys.build(_spilled([1, 1]), _spilled([0, -(2**63)])) is None
    assert keys.DenseKeys.build(_spilled([1, 1]), _spilled([2**63 - 1, -(2**63)])) is None


@PROPERTY
@given(
    table=st.lists(st.tuples(st.sampled_from([2, 9]), st.integers(0, 20)), max_size=30),
    query=st.lists(st.tuples(st.sampled_from([2, 9, 4]), st.integers(-1, 22)), max_size=30),
    by_process=st.booleans(),
)
def test_sorted_index_finds_the_first_row_of_each_key(
    table: list[tuple[int, int]], query: list[tuple[int, int]], by_process: bool
) -> None:
    table = sorted(table)
    index = keys.SortedIndex(_spilled([p for p, _ in table]), _spilled([i for _, i in table]), block=3)
    q_pids = np.array([p for p, _ in query], dtype=np.int64)
    q_ids = np.array([i for _, i in query], dtype=np.int64)
    got = index.find(q_pids if by_process else None, q_ids)

    def first(p: int, i: int) -> int:
        hits = [r for r, (tp, ti) in enumerate(table) if ti == i and (tp == p or not by_process)]
        return hits[0] if hits else -1

    assert got.tolist() == [first(p, i) for p, i in query]


@PROPERTY
@given(values=st.lists(st.one_of(st.none(), st.integers(-5, 50)), max_size=40), block=st.integers(1, 6))
def test_sorted_distinct_of_a_column_in_order(values: list[int | None], block: int) -> None:
    present = [v for v in values if v is not None]
    got = keys.sorted_distinct(_spilled(values), block)
    if present != sorted(present):
        assert got is None
    else:
        assert got is not None and np.asarray(got).tolist() == sorted(set(present))


@PROPERTY
@given(values=st.lists(st.integers(-5, 30), max_size=30), table=st.sets(st.integers(0, 25), max_size=15))
def test_isin_sorted_is_isin(values: list[int], table: set[int]) -> None:
    column = spill.spilled_copy(np.array(sorted(table), dtype=np.int64), mapped=True)
    got = keys.isin_sorted(np.array(values, dtype=np.int64), column)
    assert got.tolist() == [v in table for v in values]


def test_block_of_fills_missing_values() -> None:
    column = _spilled([4, None, 6])
    assert keys.block_of(column, 0, 3).tolist() == [4, -1, 6]
    assert keys.block_of(column, 1, 3, fill=99).tolist() == [99, 6]
    assert keys.has_missing(column) and not keys.has_missing(_spilled([1, 2]))


# ---- sorts a bucket of rows at a time (rocpd's ranges and launch calls into time order) -------------


def _nullable(values: np.ndarray, missing: np.ndarray, spilled: bool) -> pd.arrays.IntegerArray:
    data = np.where(missing, 12345, values).astype(np.int64)  # what lies under a missing value must not matter
    if spilled:
        return pd.arrays.IntegerArray(spill.spilled_copy(data), spill.spilled_copy(missing))
    return pd.arrays.IntegerArray(data, missing)


@pytest.mark.parametrize("block", [1, 3, 7, 64, 10_000])
@pytest.mark.parametrize("spilled", [True, False])
def test_sorted_order_is_numpy_s_stable_lexsort(block: int, spilled: bool) -> None:
    rng = np.random.default_rng(block)
    n = 500
    start = rng.integers(-3, 20, size=n)  # many ties: equal keys must keep their order
    end = rng.integers(0, 4, size=n)
    missing = rng.random(n) < 0.1
    column = _nullable(start, missing, spilled)
    # the keys by hand: a missing start counts as 0 (its fill), the end descending
    expected = np.lexsort((-end, np.where(missing, 0, start)))
    got = keys.sorted_order([keys.Key(column, fill=0), keys.Key(end, descending=True)], block=block)
    assert got is not None
    np.testing.assert_array_equal(got, expected)
    # a bare column: a missing value counts as -1
    expected = np.lexsort((end, np.where(missing, -1, start)))
    np.testing.assert_array_equal(keys.sorted_order([column, end], block=block), expected)
    # a missing start as the smallest value, before a real one equal to it
    low = -(2**63)
    with_min = np.where(rng.random(n) < 0.05, low, start)
    column = _nullable(with_min, missing, spilled)
    expected = np.lexsort((np.arange(n), (~missing).astype(int), np.where(missing, low, with_min)))
    spec = [keys.Key(column, fill=low), keys.Key(missing, descending=True), np.arange(n)]
    np.testing.assert_array_equal(keys.sorted_order(spec, block=block), expected)


def test_rows_in_order_are_not_sorted_again() -> None:
    ordered = spill.spilled_copy(np.repeat(np.arange(50), 3))
    assert keys.sorted_order([ordered], block=4) is None
    assert keys.in_order([ordered], block=4) and not keys.in_order([ordered], strict=True, block=4)
    assert keys.in_order([np.arange(10)], strict=True, block=3)
    # the first key decides, the second only between equal first keys; across block ends too
    assert keys.in_order([np.array([1, 1, 2, 2]), np.array([5, 6, 0, 1])], strict=True, block=1)
    assert not keys.in_order([np.array([1, 1, 2, 2]), np.array([5, 6, 1, 0])], block=3)


def test_sorted_keys_gives_the_values_present_and_their_rows() -> None:
    rng = np.random.default_rng(3)
    values = rng.integers(0, 40, size=300)
    missing = rng.random(300) < 0.2
    got, rows = keys.sorted_keys(_nullable(values, missing, True), block=16)
    present = np.flatnonzero(~missing)
    order = present[np.argsort(values[present], kind="stable")]
    assert rows is not None
    np.testing.assert_array_equal(rows, order)
    np.testing.assert_array_equal(got, values[order])
    in_order = spill.spilled_copy(np.arange(0, 90, 3))
    same, none = keys.sorted_keys(in_order)
    assert none is None and np.shares_memory(same, in_order)  # the column itself: no copy


def test_missing_values_and_a_single_value_found_a_block_at_a_time() -> None:
    flags = pd.array([True, False, None, True], dtype="boolean")
    assert keys.has_missing(pd.Series(flags)) and keys.has_missing(flags)
    assert keys.block_of(flags, 1, 4, fill=7).tolist() == [0, 7, 1]
    assert not keys.has_missing(np.arange(5)) and not keys.has_missing(pd.array([1, 2], dtype="Int64"))
    assert keys.only_value(np.full(10, 4), block=3) == 4
    assert keys.only_value(np.array([4] * 9 + [5]), block=3) is None and keys.only_value(np.array([])) is None
    assert keys.first_row(10, lambda lo, hi: np.arange(lo, hi) >= 7, block=4) == 7
