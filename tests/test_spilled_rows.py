"""A reader's tables in spill files (``capture.readers.spilled_rows``): written a chunk at a time, sorted in blocks.

Every result is compared with what pandas or numpy give for the same rows held whole in memory:
``np.lexsort`` for the sorts, ``pd.concat`` for the frames, ``iloc`` for the reordering.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rocroof.spill as spill
from rocroof.capture.readers import spilled_rows as sr


@pytest.fixture
def spill_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every column goes to a file, however small."""
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)


def _nullable(values: np.ndarray, missing: np.ndarray, spilled: bool) -> pd.arrays.IntegerArray:
    data = np.where(missing, 12345, values).astype(np.int64)  # what lies under a missing value must not matter
    if spilled:
        return pd.arrays.IntegerArray(spill.spilled_copy(data), spill.spilled_copy(missing))
    return pd.arrays.IntegerArray(data, missing)


@pytest.mark.parametrize("block", [1, 3, 7, 64, 10_000])
@pytest.mark.parametrize("spilled", [True, False])
def test_sorted_order_is_numpy_s_stable_lexsort(spill_all: None, block: int, spilled: bool) -> None:
    rng = np.random.default_rng(block)
    n = 500
    start = rng.integers(-3, 20, size=n)  # many ties: equal keys must keep their order
    end = rng.integers(0, 4, size=n)
    missing = rng.random(n) < 0.1
    column = _nullable(start, missing, spilled)
    # the keys by hand: a missing start counts as 0, the end descending
    expected = np.lexsort((-end, np.where(missing, 0, start)))
    got = sr.sorted_order([column, sr.Key(end, descending=True)], block=block)
    assert got is not None
    np.testing.assert_array_equal(got, expected)
    # a missing start as the smallest value, before a real one equal to it
    low = -(2**63)
    with_min = np.where(rng.random(n) < 0.05, low, start)
    column = _nullable(with_min, missing, spilled)
    expected = np.lexsort((np.arange(n), (~missing).astype(int), np.where(missing, low, with_min)))
    keys = [sr.Key(column, fill=low), sr.Key(missing, descending=True), np.arange(n)]
    np.testing.assert_array_equal(sr.sorted_order(keys, block=block), expected)


def test_rows_in_order_are_not_sorted_again(spill_all: None) -> None:
    ordered = spill.spilled_copy(np.repeat(np.arange(50), 3))
    assert sr.sorted_order([ordered], block=4) is None
    assert sr.in_order([ordered], block=4) and not sr.in_order([ordered], strict=True, block=4)
    assert sr.in_order([np.arange(10)], strict=True, block=3)
    # the first key decides, the second only between equal first keys; across block ends too
    assert sr.in_order([np.array([1, 1, 2, 2]), np.array([5, 6, 0, 1])], strict=True, block=1)
    assert not sr.in_order([np.array([1, 1, 2, 2]), np.array([5, 6, 1, 0])], block=3)


def test_sorted_keys_gives_the_values_present_and_their_rows(spill_all: None) -> None:
    rng = np.random.default_rng(3)
    values = rng.integers(0, 40, size=300)
    missing = rng.random(300) < 0.2
    got, rows = sr.sorted_keys(_nullable(values, missing, True), block=16)
    present = np.flatnonzero(~missing)
    order = present[np.argsort(values[present], kind="stable")]
    assert rows is not None
    np.testing.assert_array_equal(rows, order)
    np.testing.assert_array_equal(got, values[order])
    in_order = spill.spilled_copy(np.arange(0, 90, 3))
    same, none = sr.sorted_keys(in_order)
    assert none is None and np.shares_memory(same, in_order)  # the column itself: no copy


@pytest.mark.parametrize("distinct", [3, 200, 40_000])
def test_text_codes_hold_each_text_once_and_give_the_values_back(spill_all: None, distinct: int) -> None:
    rng = np.random.default_rng(distinct)
    pool = np.array([f"t{i:05d}" for i in rng.permutation(distinct)], dtype=object)
    chunks = [pool[rng.integers(0, distinct, size=n)] for n in (10, 0, 5000, 30_000, 20_000)]
    for chunk in chunks[2:]:
        chunk[rng.random(len(chunk)) < 0.01] = None
    writer = sr.TextCodes()
    for chunk in chunks:
        writer.append(chunk)
    column = writer.finish()
    assert isinstance(column, pd.Categorical) and spill.is_spilled(np.asarray(column.codes))
    expected = np.concatenate(chunks)
    assert list(column.categories) == sorted(set(expected[pd.notna(expected)]))  # sorted: not the order read
    assert column.codes.dtype == sr.code_dtype(len(column.categories))  # the type pandas keeps: no copy
    got = np.asarray(column.astype(object))
    assert [None if pd.isna(v) else v for v in got] == expected.tolist()


def test_small_text_stays_object_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 1 << 20)
    writer = sr.TextCodes()
    writer.append(np.array(["b", None, "a"], dtype=object))
    writer.append(pd.Categorical(["a", "c"]))
    got = writer.finish()
    assert isinstance(got, np.ndarray) and got.dtype == object and got.tolist() == ["b", None, "a", "a", "c"]
    kinds = sr.TextCodes(("range", "mark"), fixed=True, categorical=True)
    kinds.append(np.array(["mark", "range"], dtype=object))
    fixed = kinds.finish()
    assert isinstance(fixed, pd.Categorical) and list(fixed.categories) == ["range", "mark"]
    assert fixed.codes.tolist() == [1, 0]
    with pytest.raises(ValueError, match="not one of"), sr.TextCodes(("range", "mark"), fixed=True) as other:
        other.append(np.array(["other"], dtype=object))


@pytest.mark.parametrize("spill_everything", [True, False])
def test_a_frame_written_a_chunk_at_a_time_is_the_chunks_stacked(
    spill_everything: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0 if spill_everything else 1 << 20)
    rng = np.random.default_rng(11)
    columns = {"id": "Int64", "flag": "boolean", "value": "float64", "row": "int64", "name": "object"}
    chunks = []
    for n in (4, 0, 9, 1, 6):
        ints = rng.integers(0, 5, size=n)
        chunk = pd.DataFrame(
            {
                "id": pd.array(np.where(ints == 0, None, ints), dtype="Int64"),
                "value": rng.random(n),
                "row": ints,
                "name": pd.Series(rng.choice(np.array(["x", "y", None], dtype=object), size=n), dtype=object),
            }
        )
        if n != 9:  # a chunk without a nullable column: missing values there
            chunk["flag"] = pd.array(np.where(ints == 1, None, ints > 2), dtype="boolean")
        chunks.append(chunk)
    with sr.FrameWriter(columns) as writer:
        for chunk in chunks:
            writer.add(chunk)
        got = writer.finish()
    expected = pd.concat([c.reindex(columns=list(columns)) for c in chunks], ignore_index=True)
    expected = expected.astype({"id": "Int64", "flag": "boolean", "value": "float64", "row": "int64"})
    expected["name"] = expected["name"].astype(object)
    assert spill.is_spilled(got["id"].array) == spill_everything
    got["name"] = got["name"].astype(object).where(got["name"].notna(), None)
    expected["name"] = expected["name"].where(expected["name"].notna(), None)
    pd.testing.assert_frame_equal(got, expected)


@pytest.mark.parametrize("spill_everything", [True, False])
def test_take_frame_is_iloc(spill_everything: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)  # the frame's columns in files
    frame = pd.DataFrame(
        {
            "id": pd.arrays.IntegerArray(spill.spilled_copy(np.arange(6)), spill.spilled_copy(np.arange(6) == 2)),
            "flag": pd.array([True, None, False, True, False, None], dtype="boolean"),
            "name": pd.Categorical.from_codes(
                spill.spilled_copy(np.array([0, 1, -1, 1, 0, 0], dtype=np.int8)), ["a", "b"]
            ),
            "text": pd.Series(["p", "q", None, "r", "s", "t"], dtype=object),
            "value": spill.spilled_copy(np.linspace(0, 1, 6)),
        }
    )
    order = np.array([5, 0, 2, 2, 4])
    expected = frame.iloc[order].reset_index(drop=True)
    if not spill_everything:  # a small result: taken in memory
        monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 1 << 20)
        frame = pd.DataFrame({name: frame[name].copy(deep=True) for name in frame.columns})
    got = sr.take_frame(frame, order)
    pd.testing.assert_frame_equal(got, expected)
    assert spill.is_spilled(np.asarray(got["name"].array.codes)) == spill_everything and list(frame.columns) == []
