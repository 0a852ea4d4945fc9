"""The ggml marker grammar: ranges ``ggml:<OP>:<name>:<inv>``, ``ggml-fused:`` lines, reset marks."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pandas as pd
import pytest

from rocroof.capture.markers import (
    FusedGroup,
    GgmlRange,
    file_has_fused_lines,
    is_reset,
    parse_fused,
    parse_range,
    read_fused_log,
)
from rocroof.errors import ParseError

from .conftest import fixture_path

# ---- ranges -------------------------------------------------------------------------------


def test_parse_range_simple() -> None:
    assert parse_range("ggml:MUL_MAT:Qcur-0:17") == GgmlRange(op="MUL_MAT", node_name="Qcur-0", invocation=17)


def test_parse_range_name_with_colons_and_spaces() -> None:
    got = parse_range("ggml:CPY:cache_k_l0 (view): a:b :42")
    assert got == GgmlRange(op="CPY", node_name="cache_k_l0 (view): a:b ", invocation=42)


def test_parse_range_empty_name_and_big_invocation() -> None:
    assert parse_range("ggml:ADD::3") == GgmlRange(op="ADD", node_name="", invocation=3)
    assert parse_range("ggml:ADD:x:9223372036854775807") == GgmlRange("ADD", "x", 2**63 - 1)
    # beyond what the store's 64-bit invocation column holds: a plain marker, not a ggml range
    assert parse_range("ggml:ADD:x:9223372036854775808") is None
    assert parse_range("ggml:ADD:x:18446744073709551615") is None


@pytest.mark.parametrize(
    "message",
    [
        None,
        "",
        "hipMemcpyAsync",
        "ggml",
        "ggml reset",
        "ggml:reset",
        "ggml-fused:0:RMS_NORM+MUL:norm-0|attn_norm-0",
        "xggml:ADD:x:1",
        "GGML:ADD:x:1",
    ],
)
def test_parse_range_not_a_ggml_range(message: str | None) -> None:
    assert parse_range(message) is None


@pytest.mark.parametrize(
    "message",
    [
        "ggml:MUL_MAT:x:17a",  # not a number
        "ggml:MUL_MAT:x:",  # empty invocation
        "ggml:MUL_MAT:x:-1",  # negative
        "ggml:MUL_MAT:x: 17",  # space
        "ggml:MUL_MAT:x:1.0",  # float
        "ggml:MUL_MAT:17",  # no name field
        "ggml:ADD:x:\u0661\u0662",  # Arabic-Indic digits: int() would take them
        "ggml:MUL MAT:x:1",  # op with a space
        "ggml::x:1",  # empty op
    ],
)
def test_parse_range_bad_invocation_or_op(message: str) -> None:
    assert parse_range(message) is None


# ---- fused lines ---------------------------------------------------------------------------


def test_parse_fused_plain() -> None:
    got = parse_fused("ggml-fused:0:RMS_NORM+MUL:norm-0|attn_norm-0")
    assert got == FusedGroup(invocation=0, ops=("RMS_NORM", "MUL"), node_names=("norm-0", "attn_norm-0"))
    assert got.op_list == "RMS_NORM+MUL"


def test_parse_fused_with_prefix_and_names_with_spaces() -> None:
    line = "[2025-01-01 12:00:01] W ggml-fused:5:ROPE+VIEW+SET_ROWS:Kcur-0|Kcur-0 (view)|cache_k_l0 (view)\r\n"
    got = parse_fused(line)
    assert got is not None
    assert got.invocation == 5
    assert got.ops == ("ROPE", "VIEW", "SET_ROWS")
    assert got.node_names == ("Kcur-0", "Kcur-0 (view)", "cache_k_l0 (view)")


def test_parse_fused_names_may_contain_colons() -> None:
    got = parse_fused("ggml-fused:3:ADD+MUL:a:b|c")
    assert got is not None and got.node_names == ("a:b", "c")


def test_parse_fused_single_op() -> None:
    got = parse_fused("ggml-fused:9:ADD:x")
    assert got is not None and got.op_list == "ADD" and got.node_names == ("x",)


@pytest.mark.parametrize(
    "message",
    [
        None,
        "",
        "ggml:ADD:x:1",
        "ggml-fused:x:ADD:a",  # invocation not a number
        "ggml-fused:-1:ADD:a",
        "ggml-fused:1:ADD+:a",  # empty op
        "ggml-fused:1:ADD MUL:a",  # op with a space
        "ggml-fused:1:ADD",  # no names
        "ggml-fused:",
    ],
)
def test_parse_fused_rejects(message: str | None) -> None:
    assert parse_fused(message) is None


def test_is_reset() -> None:
    assert is_reset("ggml reset")
    assert is_reset("  ggml reset\n")
    assert is_reset("ggml:reset")
    for other in (None, "", "ggml resets", "ggml", "reset", "ggml:ADD:x:1"):
        assert not is_reset(other)


# ---- logs ----------------------------------------------------------------------------------


def _write_gz(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data))
    return path


def test_read_fused_log_gzip_with_non_utf8_bytes(tmp_path: Path) -> None:
    log = _write_gz(
        tmp_path / "stderr.log.gz",
        b"llama_model_loader: \xff\xfe binary junk\n"
        b"ggml-fused:0:RMS_NORM+MUL:norm-0|attn_norm-0\n"
        b"\x80prefix ggml-fused:2:MUL_MAT+ADD:ffn_out-0|ffn_out-0 (bias)\n"
        b"ggml-fused:4:ADD+MUL:na\xffme|x\n"
        b"ggml-fused:bad line\n"
        b"ggml-fused:0:RMS_NORM+MUL:norm-0|attn_norm-0 again\n",
    )
    groups = read_fused_log(log)
    assert sorted(groups) == [0, 2, 4]
    assert groups[0].node_names == ("norm-0", "attn_norm-0 again")  # a later line wins
    assert groups[2].op_list == "MUL_MAT+ADD"
    assert groups[2].node_names == ("ffn_out-0", "ffn_out-0 (bias)")
    assert groups[4].node_names == ("na\ufffdme", "x")


def test_read_fused_log_plain_text(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    log.write_bytes(b"hello\nggml-fused:7:SOFT_MAX+ARGSORT:a|b")  # no final newline
    assert read_fused_log(log) == {7: FusedGroup(7, ("SOFT_MAX", "ARGSORT"), ("a", "b"))}


def test_read_fused_log_truncated_gzip_is_a_parse_error(tmp_path: Path) -> None:
    data = gzip.compress(b"".join(b"ggml-fused:%d:ADD+MUL:a|b\n" % i for i in range(20000)))
    log = tmp_path / "cut.log.gz"
    log.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError) as err:
        read_fused_log(log)
    assert err.value.path == str(log)
    assert "truncated" in str(err.value)


def test_read_fused_log_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ParseError):
        read_fused_log(tmp_path / "absent.log")


def test_file_has_fused_lines(tmp_path: Path) -> None:
    yes = _write_gz(tmp_path / "a.log.gz", b"x\xff\nggml-fused:0:ADD+MUL:a|b\n")
    no = _write_gz(tmp_path / "b.log.gz", b"ggml:ADD:x:1\nggml reset\n")
    late = tmp_path / "c.log"
    late.write_bytes(b"x" * 100 + b"\nggml-fused:0:ADD+MUL:a|b\n")
    assert file_has_fused_lines(yes)
    assert not file_has_fused_lines(no)
    assert file_has_fused_lines(late)
    assert not file_has_fused_lines(late, probe_bytes=50)
    assert not file_has_fused_lines(tmp_path / "absent.log")


_FUSED_LINE = re.compile(rb"ggml-fused:([0-9]+):([A-Za-z0-9_+]+):([^\r\n]*)")


@pytest.mark.parametrize("name", ["dense_stderr_fused.log.gz", "moe_stderr_fused.log.gz"])
def test_read_fused_log_on_real_h200_logs(name: str) -> None:
    path = fixture_path("h200-trial", name)
    with gzip.open(path, "rb") as fh:
        lines = [m for raw in fh if (m := _FUSED_LINE.search(raw))]
    assert lines, "the recorded log has fused lines"
    expected = {
        int(m.group(1)): (m.group(2).decode(), tuple(m.group(3).decode("utf-8", "replace").split("|"))) for m in lines
    }
    assert len(expected) == len(lines)  # each invocation is printed once in these runs
    groups = read_fused_log(path)
    assert len(groups) == len(lines)
    assert {inv: (g.op_list, g.node_names) for inv, g in groups.items()} == expected
    assert all(len(g.ops) == len(g.node_names) for g in groups.values())
    assert file_has_fused_lines(path)


def test_parse_ranges_in_polars_equals_the_python_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large marker columns are split by polars: same answers as :func:`parse_range` on each message.

    The messages mix the grammar's pieces at random (colons, newlines, non-ASCII digits, empty
    node names, invocations at and past 2**63 - 1, leading zeros) with cells that are not text.
    """
    import random

    import numpy as np

    from rocroof.capture import markers

    pieces = ["ggml:", "MUL_MAT", ":", "a", "b:c", "\n", "7", "12", "\u0662", "é", " ", "(view)",
              "9223372036854775807", "9223372036854775808", "0000000000000000000001"]  # fmt: skip
    gen = random.Random(3)
    messages: list[object] = []
    for _ in range(20_000):
        if gen.random() < 0.05:
            messages.append(gen.choice([None, float("nan"), 5, b"ggml:A:b:1"]))
        elif gen.random() < 0.5:  # the grammar's shape, with pieces that may break it
            op = gen.choice(["MUL_MAT", "ADD", "", "A:B", "٢"])
            name = "".join(gen.choice(pieces) for _ in range(gen.randint(0, 3)))
            digits = gen.choice(["17", "0", "9223372036854775807", "9223372036854775808", "0000000000000000000001",
                                 "", "٢", "3\n"])  # fmt: skip
            messages.append(f"ggml:{op}:{name}:{digits}")
        else:
            messages.append("".join(gen.choice(pieces) for _ in range(gen.randint(0, 6))))
    column = np.array(messages, dtype=object)
    monkeypatch.setattr(markers, "POLARS_MIN_MESSAGES", 1)
    assert markers._parse_ranges_polars(column) is not None  # the fast path answers for these
    is_ggml, invocation, op, node = markers.parse_ranges(column)
    expected = [markers.parse_range(m) if isinstance(m, str) else None for m in messages]
    assert is_ggml.tolist() == [e is not None for e in expected]
    assert sum(e is not None for e in expected) > 1000
    assert invocation.tolist() == [e.invocation if e else 0 for e in expected]
    assert op.tolist() == [e.op if e else None for e in expected]
    assert node.tolist() == [e.node_name if e else None for e in expected]
    # a lone surrogate cannot go to polars: the Python loop reads the column
    assert markers._parse_ranges_polars(np.array(["ggml:A:\udc80:1"], dtype=object)) is None
    assert markers.parse_ranges(np.array(["ggml:A:\udc80:1"], dtype=object))[3].tolist() == ["\udc80"]


# ---- ggml ranges' messages split into their parts as read (compact_ranges, split_ranges) ------------

# (message, what split_ranges keeps of its text, op, node name, invocation): worked out by hand from
# the grammar: a message is let go only when ggml:<op>:<node>:<invocation> writes it back exactly
SPLIT_CASES = [
    ("ggml:MUL_MAT:Qcur-0:5", None, "MUL_MAT", "Qcur-0", 5),
    ("ggml:ADD:l_out-0:007", "ggml:ADD:l_out-0:007", None, None, None),  # leading zeros: kept as recorded
    ("llama_decode", "llama_decode", None, None, None),
    ("", "", None, None, None),
    ("ggml:CPY::8", None, "CPY", "", 8),  # an empty node name
    ("ggml:ROPE:a:b c (view):6", None, "ROPE", "a:b c (view)", 6),  # colons and spaces in the node name
    ("ggml:ADD:x:9223372036854775808", "ggml:ADD:x:9223372036854775808", None, None, None),  # past int64
    ("ggml:MUL:x:12\n", "ggml:MUL:x:12\n", None, None, None),  # a trailing newline is not a digit
]


@pytest.mark.parametrize("as_polars", [False, True], ids=["object-array", "polars-series"])
def test_split_ranges_lets_go_of_exactly_the_messages_its_parts_write_back(as_polars: bool) -> None:
    import numpy as np

    from rocroof.capture.markers import split_ranges

    texts = np.array([c[0] for c in SPLIT_CASES], dtype=object)
    if as_polars:
        import polars as pl

        column = pl.Series("Function", texts.tolist(), dtype=pl.String)
        kept, parts = split_ranges(column)
    else:
        kept, parts = split_ranges(texts)
    assert kept.tolist() == [c[1] for c in SPLIT_CASES]
    assert parts["range_op"].tolist() == [c[2] for c in SPLIT_CASES]
    assert parts["range_node"].tolist() == [c[3] for c in SPLIT_CASES]
    assert [None if v is pd.NA else int(v) for v in parts["range_invocation"]] == [c[4] for c in SPLIT_CASES]


def test_a_mark_keeps_its_text_and_both_forms_read_the_same() -> None:
    """A mark (start == end) is never a ggml range: its ggml-like text stays; ggml_fields reads either form alike."""
    import numpy as np

    from rocroof.capture.markers import compact_ranges, ggml_fields, marker_messages, split_ranges

    texts = ["ggml:MUL_MAT:Qcur-0:5", "ggml:ADD:x-0:6", "ggml reset", "ggml:CPY:v:007"]
    kinds = ["range", "mark", "mark", "range"]
    plain = pd.DataFrame({"message": pd.Series(texts, dtype=object), "kind": kinds})
    kept, parts = split_ranges(np.array(texts, dtype=object))
    columns = {k: pd.Series(v, dtype=object) if k != "range_invocation" else pd.Series(v) for k, v in parts.items()}
    split = pd.DataFrame({"message": pd.Series(kept, dtype=object), "kind": kinds, **columns})
    compact_ranges(split)  # the mark gets its text back
    assert split["message"].tolist() == [None, "ggml:ADD:x-0:6", "ggml reset", "ggml:CPY:v:007"]
    assert split["range_op"].tolist() == ["MUL_MAT", None, None, None]
    whole = compact_ranges(plain.copy())  # the same frame, compacted in one step
    pd.testing.assert_frame_equal(whole, split)
    assert marker_messages(split).tolist() == texts
    for got, want in zip(ggml_fields(split)[:4], ggml_fields(plain)[:4], strict=True):
        assert got.tolist() == want.tolist()
    is_ggml, invocation, op, node, compacted = ggml_fields(split)
    assert is_ggml.tolist() == [True, False, False, True]  # the leading-zero range is parsed from its text
    assert invocation.tolist() == [5, 0, 0, 7] and op.tolist() == ["MUL_MAT", None, None, "CPY"]
    assert compacted.tolist() == [True, False, False, False]


@pytest.mark.parametrize("parser", ["polars", "pandas"])
def test_a_marker_trace_split_as_read_stores_every_message_as_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parser: str
) -> None:
    """Both CSV parsers split the ranges' messages as read; the store writes back each recorded text."""
    import rocroof.fileio as fileio
    from rocroof.capture.readers import read_capture
    from rocroof.ingest.pipeline import build_run
    from rocroof.store import Store

    from .rocprof_csv import T0, Kernel, mark, rng, write_pass
    from .store_rows import table_rows

    if parser == "polars":
        monkeypatch.setattr(fileio, "SPLIT_POLARS_MIN_BYTES", 0)
    else:
        monkeypatch.setattr(fileio, "USE_POLARS", False)
    texts = [c[0] for c in SPLIT_CASES if c[0]]  # an empty Function cell is not a marker rocprofv3 writes
    markers = [rng(text, 9 + 3 * i, T0 + 100 * i, T0 + 100 * i + 50) for i, text in enumerate(texts)]
    markers.append(mark("ggml:ADD:x-0:6", 40, T0 + 5000))
    capture = write_pass(tmp_path / "cap", 1234, kernels=[Kernel(1, "k", 10, T0 + 1000, T0 + 1200)], markers=markers)
    read = read_capture(capture)
    m = read.passes[0].markers
    # the three ranges that write back exactly are let go as read; the rest keep their text
    assert int(m["message"].isna().sum()) == 3
    store = Store(tmp_path / "r.db")
    store.write_run(build_run(read, release=True))
    store.close()
    stored = table_rows(str(tmp_path / "r.db"))["marker_range"]
    assert sorted(stored["message"].tolist()) == sorted([*texts, "ggml:ADD:x-0:6"])


def test_parse_ranges_of_no_messages_on_either_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    import rocroof.capture.markers as markers

    for threshold in (0, markers.POLARS_MIN_MESSAGES):
        monkeypatch.setattr(markers, "POLARS_MIN_MESSAGES", threshold)
        is_ggml, invocation, op, node = markers.parse_ranges(np.array([], dtype=object))
        assert (len(is_ggml), len(invocation), len(op), len(node)) == (0, 0, 0, 0)
