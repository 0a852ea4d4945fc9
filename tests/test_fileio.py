"""Profiler text files: gzip, strict UTF-8, CSV chunks, exact integers, errors with file and row."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rocroof.errors import ParseError
from rocroof.fileio import (
    column_map,
    decode_utf8,
    is_gzip,
    logical_name,
    parse_float,
    parse_int,
    pick,
    read_csv,
    read_csv_chunks,
    read_header,
    read_text,
    require,
)

P = Path("x_kernel_trace.csv")


def _ints(*cells: object, first_row: int = 2, **kw: bool) -> tuple[list[object], list[bool]]:
    values, exact = parse_int(P, pd.Series(list(cells), dtype=object), first_row, "Start_Timestamp", **kw)
    assert values.dtype == "Int64"
    return [None if v is pd.NA else int(v) for v in values], [bool(e) for e in exact]


# ---- parse_int -----------------------------------------------------------------------------


def test_parse_int_keeps_17_digit_timestamps_exact() -> None:
    # above 2**53 (9007199254740992), so float64 could not hold them
    values, exact = _ints("12345678901234567", "12345678901234569", "-98765432109876543")
    assert values == [12345678901234567, 12345678901234569, -98765432109876543]
    assert exact == [True, True, True]
    assert float(12345678901234567) != 12345678901234567  # the reason for the exact path


def test_parse_int_float_text_with_zero_fraction_is_exact() -> None:
    values, exact = _ints("16384.000000", "16384.", "+7.0", "-3.000")
    assert values == [16384, 16384, 7, -3]
    assert exact == [True, True, True, True]


def test_parse_int_scientific_text_is_flagged_inexact() -> None:
    values, exact = _ints("8.1097E+14", "1.6384E+04", "1e3")
    assert values == [810_970_000_000_000, 16384, 1000]
    # 8.1097E+14 stands for anything in [8.10965e14, 8.10975e14); 1e3 for anything in [500, 1500)
    assert exact == [False, True, False]


def test_parse_int_scientific_text_above_2_53_keeps_its_digits() -> None:
    values, exact = _ints("9.007199254740993e15", "1.2345678901234567E+16")
    assert values == [9_007_199_254_740_993, 12_345_678_901_234_567]
    assert exact == [True, True]


def test_parse_int_fraction_is_rounded_and_inexact() -> None:
    values, exact = _ints("1.5", "2.5", "0.25")
    assert values == [2, 2, 0]  # half to even
    assert exact == [False, False, False]


def test_parse_int_empty_cells() -> None:
    values, _ = _ints("", "  ", None, np.nan, pd.NA, "5")
    assert values == [None, None, None, None, None, 5]


def test_parse_int_required_empty_cell_names_the_row() -> None:
    with pytest.raises(ParseError) as err:
        _ints("1", "", first_row=10, required=True)
    assert err.value.row == 11
    assert "empty cell" in str(err.value) and "Start_Timestamp" in str(err.value)


def test_parse_int_required_na_in_a_string_column() -> None:
    series = pd.Series(["1", pd.NA], dtype="string")
    with pytest.raises(ParseError) as err:
        parse_int(P, series, 2, "c", required=True)
    assert err.value.row == 3
    assert "empty cell" in str(err.value)


@pytest.mark.parametrize("bad", ["abc", "12x", "0x10", "inf", "nan", "1_000", "1e", "--1", "\u0661"])
def test_parse_int_non_numeric_is_a_parse_error(bad: str) -> None:
    with pytest.raises(ParseError) as err:
        _ints("1", "2", bad, first_row=2)
    assert err.value.row == 4
    assert err.value.path == str(P)


def test_parse_int_disallowed_float_text() -> None:
    assert _ints("7", allow_float_text=False)[0] == [7]
    for text in ("16384.000000", "1e3"):
        with pytest.raises(ParseError):
            _ints(text, allow_float_text=False)


def test_parse_int_64_bit_range() -> None:
    assert _ints("9223372036854775807", "-9223372036854775808")[0] == [2**63 - 1, -(2**63)]
    for too_big in ("9223372036854775808", "-9223372036854775809", "1e19", "99999999999999999999"):
        with pytest.raises(ParseError) as err:
            _ints("0", too_big, first_row=5)
        assert err.value.row == 6
        assert "64 bits" in str(err.value)


def test_parse_int_row_numbers_follow_csv_chunks(tmp_path: Path) -> None:
    """The header is row 1; rows are counted across chunks (not within one)."""
    path = tmp_path / "k.csv"
    path.write_text("Dispatch_Id,Start_Timestamp\n1,10\n2,20\n3,30\n4,oops\n5,50\n")
    firsts = []
    with pytest.raises(ParseError) as err:
        for chunk, first in read_csv_chunks(path, chunk_rows=2):
            firsts.append(first)
            parse_int(path, chunk["Start_Timestamp"], first, "Start_Timestamp")
    assert firsts == [2, 4]
    assert err.value.row == 5  # "4,oops" is the fifth line of the file
    assert str(err.value).startswith(f"{path}:5: column 'Start_Timestamp' has 'oops'")


# ---- parse_float ---------------------------------------------------------------------------


def test_parse_float() -> None:
    got = parse_float(P, pd.Series(["1.5e3", "", "-2", None]), 2, "v")
    assert got.iloc[0] == 1500.0 and got.iloc[2] == -2.0
    assert got.isna().tolist() == [False, True, False, True]
    for bad in ("inf", "x"):
        with pytest.raises(ParseError) as err:
            parse_float(P, pd.Series(["1", bad]), 7, "v")
        assert err.value.row == 8


# ---- read_csv_chunks -----------------------------------------------------------------------


def test_read_csv_chunks_strings_and_offsets(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(b'\xef\xbb\xbfKernel_Name,Start_Timestamp\n"a, b",0012\nc,\n')
    chunks = list(read_csv_chunks(path, chunk_rows=1))
    assert [first for _, first in chunks] == [2, 3]
    df = pd.concat([c for c, _ in chunks], ignore_index=True)
    assert list(df.columns) == ["Kernel_Name", "Start_Timestamp"]  # BOM dropped
    assert df["Kernel_Name"].tolist() == ["a, b", "c"]
    assert df["Start_Timestamp"].tolist() == ["0012", ""]  # text kept, empty cell is ""


def test_read_csv_chunks_gzip(tmp_path: Path) -> None:
    path = tmp_path / "a.csv.gz"
    path.write_bytes(gzip.compress(b"x,y\n1,2\n"))
    assert is_gzip(path)
    assert logical_name(path) == "a.csv"
    assert read_csv(path).to_dict("records") == [{"x": "1", "y": "2"}]


def test_read_csv_chunks_empty_file(tmp_path: Path) -> None:
    for data in (b"", gzip.compress(b"")):
        path = tmp_path / "empty.csv"
        path.write_bytes(data)
        with pytest.raises(ParseError) as err:
            list(read_csv_chunks(path))
        assert err.value.path == str(path)
        assert "empty" in str(err.value)


def test_read_csv_header_only(tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("a,b\n")
    df = read_csv(path)
    assert list(df.columns) == ["a", "b"] and len(df) == 0


def test_read_csv_chunks_non_utf8_byte_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(b"a,b\n" + b"1,2\n" * 4999 + b"1,caf\xe9\n" + b"1,2\n" * 10)
    with pytest.raises(ParseError) as err:
        for _ in read_csv_chunks(path, chunk_rows=1000):
            pass
    assert err.value.row == 5001
    assert "0xe9" in str(err.value) and "UTF-8" in str(err.value)


def test_read_csv_chunks_truncated_gzip(tmp_path: Path) -> None:
    data = gzip.compress(b"a,b\n" + b"".join(b"%d,%d\n" % (i, i * 7) for i in range(50_000)))
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError) as err:
        for _ in read_csv_chunks(path):
            pass
    assert err.value.path == str(path)
    assert "truncated" in str(err.value)


@pytest.mark.parametrize("chunk_rows", [2, 100])
def test_read_csv_chunks_quote_never_closed(tmp_path: Path, chunk_rows: int) -> None:
    # line 5 opens a quoted field that runs to the end of the file: a file cut inside a kernel name
    path = tmp_path / "cut.csv"
    path.write_text('a,b\n1,2\n3,4\n5,6\n7,"name<int>\n8,9\n')
    with pytest.raises(ParseError) as err:
        for _ in read_csv_chunks(path, chunk_rows=chunk_rows):
            pass
    assert err.value.row == 5
    assert str(err.value).endswith(
        "cut.csv:5: malformed CSV row: a quoted field opens here and the file ends before it closes (file truncated?)"
    )


@pytest.mark.parametrize("chunk_rows", [2, 100])
def test_read_csv_chunks_row_with_too_many_fields(tmp_path: Path, chunk_rows: int) -> None:
    path = tmp_path / "wide.csv"
    path.write_text("a,b\n" + "1,2\n" * 6 + "1,2,3\n" + "1,2\n")
    with pytest.raises(ParseError) as err:
        for _ in read_csv_chunks(path, chunk_rows=chunk_rows):
            pass
    assert err.value.row == 8
    assert "malformed CSV row" in str(err.value)


@pytest.mark.parametrize("extra", [",", ",x"])
def test_a_field_more_than_the_header_on_every_row_is_refused_not_shifted(tmp_path: Path, extra: str) -> None:
    """A first row of one field more than the header is refused, not read shifted.

    pandas reads such a row as an index column plus data: every column would silently hold its
    right neighbour's value (found by a trial user).
    """
    from rocroof.fileio import NotPlain, read_csv_plain

    path = tmp_path / "shifted.csv"
    path.write_text("a,b,c\n" + "".join(f"{i},{i + 10},{i + 20}{extra}\n" for i in range(5)))
    with pytest.raises(ParseError) as err:
        for _ in read_csv_chunks(path, chunk_rows=2):
            pass
    assert err.value.row == 2 and err.value.path == str(path)
    assert "this row has 4 fields, the header 3" in str(err.value)
    with pytest.raises(NotPlain):
        for _ in read_csv_plain(path, ints=["a", "b", "c"]):
            pass


def test_read_csv_chunks_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ParseError) as err:
        list(read_csv_chunks(tmp_path / "absent.csv"))
    assert "cannot open" in str(err.value)


def test_read_header(tmp_path: Path) -> None:
    path = tmp_path / "h.csv.gz"
    path.write_bytes(gzip.compress(b'\xef\xbb\xbf"Agent_Id","Kernel Name"\r\n1,k\n'))
    assert read_header(path) == ["Agent_Id", "Kernel Name"]
    blank = tmp_path / "blank.csv"
    blank.write_text("\n")
    with pytest.raises(ParseError) as err:
        read_header(blank)
    assert err.value.row == 1


def test_column_helpers() -> None:
    cols = column_map(["Dispatch_Id", " Kernel_Name "])
    assert pick(cols, "dispatch_ID") == "Dispatch_Id"
    assert pick(cols, "correlation_id", "kernel_name") == " Kernel_Name "
    assert pick(cols, "nope") is None
    with pytest.raises(ParseError) as err:
        require(P, cols, "dispatch start", "Start_Timestamp")
    assert err.value.row == 1 and "Start_Timestamp" in str(err.value)


# ---- read_text / decode_utf8 --------------------------------------------------------------


def test_read_text_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b"x" * 100)
    assert read_text(path, limit_bytes=100) == "x" * 100
    with pytest.raises(ParseError) as err:
        read_text(path, limit_bytes=99)
    assert "larger than 99 bytes" in str(err.value)


def test_read_text_limit_counts_decompressed_bytes(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(b"y" * 10_000))
    assert path.stat().st_size < 1000
    with pytest.raises(ParseError):
        read_text(path, limit_bytes=1000)
    assert len(read_text(path)) == 10_000


def test_read_text_truncated_gzip(tmp_path: Path) -> None:
    data = gzip.compress(bytes(range(256)) * 400)
    path = tmp_path / "t.json.gz"
    path.write_bytes(data[:-10])
    with pytest.raises(ParseError) as err:
        read_text(path)
    assert "truncated" in str(err.value)


def test_decode_utf8_bom_and_bad_byte_line() -> None:
    assert decode_utf8(P, b"\xef\xbb\xbfabc") == "abc"
    assert decode_utf8(P, "h\u00e9llo".encode()) == "h\u00e9llo"
    with pytest.raises(ParseError) as err:
        decode_utf8(P, b"a\nb\n\xff", first_line=10)
    assert err.value.row == 12
    assert "0xff" in str(err.value)
