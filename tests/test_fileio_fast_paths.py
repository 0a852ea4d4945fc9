"""The fast paths of parse_int / parse_float give what the cell-by-cell path gives, errors included.

``fileio._runs`` (parse each run of equal cells once) and ``fileio._ascii_ints`` (numpy's bytes
-> int64 cast for plain ASCII integer text) only make parsing faster: with both switched off,
``parse_int`` and ``parse_float`` are the reference implementation. Hypothesis compares the two
on columns with repeated cells, padding, signs, float text, huge numbers, underscores, NUL
bytes, non-ASCII digits and missing cells.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocroof import fileio
from rocroof.errors import ParseError

P = Path("x_counter_collection.csv")

CELL = st.one_of(
    st.integers(-(2**64), 2**64).map(str),
    st.integers(0, 300).map(str),
    st.sampled_from(
        [
            "",
            " ",
            " 42",
            "42 ",
            "\t7",
            "+5",
            "-0",
            "05",
            "1_000",
            "5\x00",
            "\x1c5",
            "\u0663",
            "1.5",
            "2.5",
            "16384.000000",
            "8.1097E+14",
            "1e3",
            "1e400",
            "nan",
            "inf",
            "abc",
            "0x10",
            str(2**63 - 1),
            str(2**63),
            str(-(2**63)),
            str(-(2**63) - 1),
            "12345678901234567",
        ]
    ),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: f"{f:f}"),
    st.text(max_size=6),
)
#: Columns of runs: each cell repeated 1-9 times (counter files repeat a dispatch's cells per counter).
COLUMN = st.lists(st.tuples(CELL, st.integers(1, 9)), max_size=60).map(
    lambda runs: [cell for cell, times in runs for _ in range(times)]
)
MISSING = st.sampled_from([None, np.nan, pd.NA])


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        result = fn()
    except ParseError as exc:
        return ("error", str(exc), exc.row)
    if isinstance(result, tuple):
        values, exact = result
        return ("ok", str(values.dtype), values.astype(object).tolist(), exact.tolist())
    return ("ok", str(result.dtype), [None if pd.isna(v) else v for v in result.tolist()])


def _reference(fn: Callable[[], Any]) -> Any:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(fileio, "_runs", lambda s: None)
        m.setattr(fileio, "_ascii_ints", lambda s: None)
        return _outcome(fn)


@settings(max_examples=int(os.environ.get("ROCROOF_FUZZ_EXAMPLES", "200")), deadline=None)
@given(
    cells=COLUMN,
    holes=st.lists(st.tuples(st.integers(0, 10_000), MISSING), max_size=2),
    as_str=st.booleans(),
    required=st.booleans(),
    float_text=st.booleans(),
    first=st.integers(1, 1_000_000),
)
def test_parse_int_fast_paths_match_the_reference(
    cells: list[str],
    holes: list[tuple[int, Any]],
    as_str: bool,
    required: bool,
    float_text: bool,
    first: int,
) -> None:
    values: list[Any] = list(cells)
    for at, hole in holes:
        if values:
            values[at % len(values)] = hole
    series = pd.Series(values, dtype=str if as_str and not holes else object)

    def run() -> Any:
        return fileio.parse_int(P, series, first, "Dispatch_Id", required=required, allow_float_text=float_text)

    assert _outcome(run) == _reference(run)


@settings(max_examples=int(os.environ.get("ROCROOF_FUZZ_EXAMPLES", "200")), deadline=None)
@given(cells=COLUMN, as_str=st.booleans(), required=st.booleans(), first=st.integers(1, 1_000_000))
def test_parse_float_fast_path_matches_the_reference(
    cells: list[str], as_str: bool, required: bool, first: int
) -> None:
    series = pd.Series(cells, dtype=str if as_str else object)

    def run() -> Any:
        return fileio.parse_float(P, series, first, "Counter_Value", required=required)

    assert _outcome(run) == _reference(run)


def test_a_repeated_bad_cell_is_named_at_its_first_row() -> None:
    cells = ["7"] * 100 + ["x"] * 50 + ["8"] * 100
    with pytest.raises(ParseError) as err:
        fileio.parse_int(P, pd.Series(cells, dtype=str), 2, "Dispatch_Id")
    assert err.value.row == 102


def test_runs_of_a_counter_file_are_parsed_once_each() -> None:
    cells = pd.Series([str(12_345_678_901_234_567 + i // 8) for i in range(800)], dtype=str)
    heads, run_of_row = fileio._runs(cells)  # type: ignore[misc]
    assert len(heads) == 100 and run_of_row[-1] == 99
    values, exact = fileio.parse_int(P, cells, 2, "Start_Timestamp")
    assert values.iloc[7] == 12_345_678_901_234_567 and values.iloc[8] == 12_345_678_901_234_568
    assert bool(exact.all())


def test_ascii_ints_leaves_what_python_int_accepts_but_csv_does_not_to_the_other_paths() -> None:
    for text in ("1_000", "5\x00", "\u0663", "", "1.0", str(2**63)):
        assert fileio._ascii_ints(pd.Series([text, "1"], dtype=object)) is None, text
    assert fileio._ascii_ints(pd.Series([" 5", "-7", "+3"], dtype=object)).tolist() == [5, -7, 3]  # type: ignore[union-attr]


def test_a_long_cell_does_not_make_the_integer_cast_allocate_rows_times_its_length() -> None:
    # numpy's bytes dtype is as wide as the longest cell: 200,000 rows x 1 MB would be 200 GB
    cells = pd.Series(["7"] * 200_000 + ["9" * 1_000_000], dtype=object)
    assert fileio._ascii_ints(cells) is None
    with pytest.raises(ParseError, match="fits in 64 bits"):
        fileio.parse_int(P, cells, 2, "Dispatch_Id")
