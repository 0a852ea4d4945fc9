"""The ggml marker grammar that the llama.cpp hook emits (roctx on HIP, NVTX on CUDA).

Grammar (defined by rocroof's llama.cpp patch, ``tools/llama.cpp/``):

* range ``ggml:<OP>:<node name>:<invocation>`` around each launched node or fused node
  group. ``<OP>`` is ``ggml_op_desc`` (no colons), ``<invocation>`` is a decimal process-wide
  counter and the last field, the node name is everything in between (it may contain colons
  or spaces).
* mark ``ggml-fused:<invocation>:<op1>+<op2>+...:<name1>|<name2>|...`` naming the nodes of a
  fused group (the range only carries the first node). The same line may be printed on
  stderr, because Nsight Compute ignores marks.
* mark ``ggml reset``: everything before the last reset is warm-up.

Other roctx/NVTX messages are kept as plain markers.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ParseError
from ..fileio import import_polars, open_binary
from ..records import text_values

RANGE_PREFIX = "ggml:"
FUSED_PREFIX = "ggml-fused:"
RESET_MESSAGES = frozenset({"ggml reset", "ggml:reset"})

_OP_RE = re.compile(r"[A-Za-z0-9_]+")
#: ASCII digits only: ``\d`` would also take e.g. Arabic-Indic digits, which ``int()`` accepts.
_INV_RE = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class GgmlRange:
    """A parsed ``ggml:<OP>:<node name>:<invocation>`` range message."""

    op: str
    node_name: str
    invocation: int


@dataclass(frozen=True)
class FusedGroup:
    """A parsed ``ggml-fused:`` message: the ops and node names of one fused invocation."""

    invocation: int
    ops: tuple[str, ...]
    node_names: tuple[str, ...]

    @property
    def op_list(self) -> str:
        """The ops joined with ``+``, e.g. ``RMS_NORM+MUL``."""
        return "+".join(self.ops)


def parse_range(message: str | None) -> GgmlRange | None:
    """Parse a ggml range message; None when ``message`` is not one.

    >>> parse_range("ggml:MUL_MAT:Qcur-0:17")
    GgmlRange(op='MUL_MAT', node_name='Qcur-0', invocation=17)
    >>> parse_range("ggml:CPY:a:b c (view):3").node_name
    'a:b c (view)'
    """
    if not isinstance(message, str) or not message.startswith(RANGE_PREFIX):  # None, or NaN from an empty cell
        return None
    op, sep, tail = message[len(RANGE_PREFIX) :].partition(":")
    if not sep or not _OP_RE.fullmatch(op):
        return None
    name, sep, inv = tail.rpartition(":")
    if not sep or not _INV_RE.fullmatch(inv) or not _fits(inv):
        return None
    return GgmlRange(op=op, node_name=name, invocation=int(inv))


def range_messages(op: Iterable[object], node_name: Iterable[object], invocation: Iterable[object]) -> list[str | None]:
    """The ``ggml:<OP>:<node name>:<invocation>`` message of each range: :func:`parse_range` inverted.

    A message whose invocation is written without leading zeros (as the llama.cpp hook prints it)
    is given back exactly; an entry whose op is None gives None.
    """
    return [
        None if o is None else f"{RANGE_PREFIX}{o}:{n}:{int(v)}"  # type: ignore[call-overload]
        for o, n, v in zip(op, node_name, invocation, strict=True)
    ]


#: ``ggml:<OP>:<node name>:<invocation>`` as one expression (the same grammar as :func:`parse_range`).
_RANGE_RE = re.compile(r"ggml:([A-Za-z0-9_]+):(.*):([0-9]+)", re.DOTALL)
_INT64_MAX = 2**63 - 1


def _fits(digits: str) -> bool:
    """True when the ASCII digits ``digits`` stand for a number that a signed 64-bit integer holds."""
    return len(digits) < 19 or int(digits) <= _INT64_MAX


def parse_ranges(messages: Sequence[object] | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`parse_range` of many messages at once.

    Args:
        messages: message texts (None, NaN or any non-string is not a range).

    Returns:
        ``(is_ggml, invocation, op, node_name)``: a bool array, an int64 array (0 where not a
        ggml range) and two object arrays (None where not a ggml range), one entry per message.
    """
    n = len(messages)
    if n and n >= POLARS_MIN_MESSAGES:
        # a block at a time: polars' string buffers stay the size of one block
        done = []
        for lo in range(0, n, _POLARS_BLOCK):
            block = _parse_ranges_polars(messages[lo : lo + _POLARS_BLOCK])
            if block is None:  # a text polars refuses: the Python loop reads the whole column
                break
            done.append(block)
        else:
            return (
                np.concatenate([b[0] for b in done]),
                np.concatenate([b[1] for b in done]),
                np.concatenate([b[2] for b in done]),  # a string per distinct name per block
                np.concatenate([b[3] for b in done]),
            )
    is_ggml = np.zeros(n, dtype=bool)
    invocation = np.zeros(n, dtype=np.int64)
    op = np.full(n, None, dtype=object)
    node = np.full(n, None, dtype=object)
    match = _RANGE_RE.fullmatch
    # one string object per distinct op and node name (a graph repeats its node names every
    # evaluation): 10^6 ranges then hold a few hundred names, not 2x10^6 copies
    seen: dict[str, str] = {}
    for i, text in enumerate(messages):
        if type(text) is not str or not text.startswith(RANGE_PREFIX):
            continue
        m = match(text)
        if m is None:
            continue
        inv = m.group(3)
        if not _fits(inv):
            continue
        is_ggml[i] = True
        invocation[i] = int(inv)
        name, node_name = m.group(1, 2)
        op[i] = seen.setdefault(name, name)
        node[i] = seen.setdefault(node_name, node_name)
    return is_ggml, invocation, op, node


#: From this many messages on, :func:`parse_ranges` splits them with polars (Rust, one pass over
#: the column) instead of one Python regex match each: 868,422 ranges in ~0.3 s instead of ~1.3 s
#: (benchmarks/RESULTS.md). Fewer are not worth polars' import.
POLARS_MIN_MESSAGES = 50_000


def _parse_ranges_polars(
    messages: Sequence[object] | np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`parse_ranges` through polars' string kernels; None when polars cannot hold the texts.

    The grammar is split into what the Python expression ``ggml:([A-Za-z0-9_]+):(.*):([0-9]+)``
    (DOTALL, whole message) captures: the op is the ASCII word after ``ggml:`` up to the first
    colon; the invocation the ASCII digits after the last colon, up to the end of the message (a
    trailing newline is not a digit); the node name everything between, possibly empty or holding
    colons and newlines. Lengths are counted in characters (polars slices by character).
    An invocation above 2**63 - 1 does not parse as Int64 and makes the message no range, as
    :func:`_fits` does.
    """
    pl = import_polars()
    if pl is None:
        return None
    texts = [m if type(m) is str else None for m in messages]  # NaN, numbers, bytes: not ranges
    try:
        column = pl.Series("m", texts, dtype=pl.String)
    except Exception:  # a lone surrogate (not UTF-8) or any value polars refuses: the Python loop decides
        return None
    del texts
    is_ggml, invocation, op, node, _ = _split_series(column)
    return is_ggml, invocation, op, node


def _split_series(column: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`parse_ranges` of a polars String Series, and whether :func:`range_messages` gives each back.

    Returns ``(is_ggml, invocation, op, node_name, exact)``; ``exact`` (bool, per row) is True
    where the row is a ggml range whose parts written back are its message byte for byte.
    """
    import polars as pl

    column = column.alias("m")
    parts = pl.DataFrame([column]).select(
        op=pl.col("m").str.extract(f"^{re.escape(RANGE_PREFIX)}([A-Za-z0-9_]+):", 1),
        digits=pl.col("m").str.extract(r":([0-9]+)$", 1),
        chars=pl.col("m").str.len_chars().cast(pl.Int64),
    )
    parts = parts.with_columns(
        invocation=pl.col("digits").cast(pl.Int64, strict=False),
        node_start=pl.col("op").str.len_chars().cast(pl.Int64) + len(RANGE_PREFIX) + 1,
    ).with_columns(node_chars=pl.col("chars") - pl.col("node_start") - pl.col("digits").str.len_chars() - 1)
    ok = parts.select((pl.col("invocation").is_not_null() & (pl.col("node_chars") >= 0)).fill_null(False)).to_series()
    is_ggml = ok.to_numpy().astype(bool, copy=True)
    invocation = parts["invocation"].fill_null(0).to_numpy().astype(np.int64, copy=True)
    invocation[~is_ggml] = 0
    node_start = parts["node_start"].fill_null(0).clip(0)
    node_chars = parts["node_chars"].fill_null(0).clip(0)
    nodes = column.str.slice(node_start, node_chars)
    written = pl.DataFrame([column, parts["op"], nodes.alias("node"), parts["invocation"].cast(pl.String)]).select(
        same=pl.concat_str(
            [pl.lit(RANGE_PREFIX), pl.col("op"), pl.lit(":"), pl.col("node"), pl.lit(":"), pl.col("invocation")]
        )
        == pl.col("m")
    )
    exact = written["same"].fill_null(False).to_numpy().astype(bool, copy=True) & is_ggml
    del written
    op = _shared_strings(parts["op"], is_ggml)
    node = _shared_strings(nodes, is_ggml)
    return is_ggml, invocation, op, node, exact


#: Messages per polars call of :func:`parse_ranges`.
_POLARS_BLOCK = 1 << 18


def _shared_strings(column: object, keep: np.ndarray) -> np.ndarray:
    """A polars String column as an object array with one ``str`` per distinct value, None where not ``keep``."""
    import polars as pl

    assert isinstance(column, pl.Series)
    kept = column.set(pl.Series(~keep), None) if not bool(keep.all()) else column
    distinct = kept.drop_nulls().unique(maintain_order=True)
    out = np.full(len(kept), None, dtype=object)
    if len(distinct):
        codes = kept.cast(pl.Enum(distinct)).to_physical().to_numpy()
        names = np.empty(len(distinct), dtype=object)
        names[:] = distinct.to_list()
        out[keep] = names[codes[keep].astype(np.int64)]
    return out


def parse_fused(message: str | None) -> FusedGroup | None:
    """Parse a ``ggml-fused:`` message; None when ``message`` is not one.

    >>> parse_fused("ggml-fused:0:RMS_NORM+MUL:norm-0|attn_norm-0").op_list
    'RMS_NORM+MUL'
    """
    if not message:
        return None
    start = message.find(FUSED_PREFIX)
    if start < 0:
        return None
    body = message[start + len(FUSED_PREFIX) :].rstrip("\r\n")
    parts = body.split(":", 2)
    if len(parts) != 3 or not _INV_RE.fullmatch(parts[0]) or not _fits(parts[0]):
        return None
    ops = tuple(parts[1].split("+"))
    if not all(_OP_RE.fullmatch(op) for op in ops):
        return None
    return FusedGroup(invocation=int(parts[0]), ops=ops, node_names=tuple(parts[2].split("|")))


def is_reset(message: str | None) -> bool:
    """True for the ``ggml reset`` mark (end of warm-up)."""
    return isinstance(message, str) and message.strip() in RESET_MESSAGES


def reset_rows(markers: Any) -> np.ndarray:
    """Which rows of a marker frame are ``ggml reset`` marks: a bool array (rows,).

    A categorical message column is looked at once per distinct text.
    """
    import pandas as pd

    is_mark = (markers["kind"] == "mark").to_numpy(dtype=bool)
    messages = markers["message"].array
    if isinstance(messages, pd.Categorical):
        table = np.array([*(is_reset(c) for c in messages.categories), False], dtype=bool)
        hits: np.ndarray = table[np.asarray(messages.codes)]
    else:
        hits = np.fromiter((is_reset(m) for m in messages), dtype=bool, count=len(messages))
    rows: np.ndarray = is_mark & hits
    return rows


def file_has_fused_lines(path: Path, probe_bytes: int = 4 << 20) -> bool:
    """True when the first ``probe_bytes`` of a text log contain a ``ggml-fused:`` line."""
    try:
        with open_binary(path) as fh:
            head = fh.read(probe_bytes)
    except Exception:  # unreadable logs are simply not fused logs
        return False
    # "ggml-fused:<invocation>:" — the invocation digits tell a real line from a mention in prose
    return re.search(re.escape(FUSED_PREFIX.encode()) + rb"\d+:", head) is not None


def read_fused_log(path: Path) -> dict[int, FusedGroup]:
    """Collect the ``ggml-fused:`` lines of a text log (e.g. stderr with ``GGML_CUDA_MARKERS=1``).

    Lines may carry any prefix (log timestamps, profiler output glued to the line); bytes
    that are not UTF-8 are replaced, since logs mix in program output.

    Returns:
        ``{invocation: FusedGroup}``; a later line for the same invocation wins.

    Raises:
        ParseError: the file cannot be opened, or its gzip data is damaged or truncated.
    """
    groups: dict[int, FusedGroup] = {}
    prefix = FUSED_PREFIX.encode()
    line = 0
    with open_binary(path) as fh:
        try:
            for raw in fh:
                line += 1
                if prefix not in raw:
                    continue
                group = parse_fused(raw.decode("utf-8", errors="replace"))
                if group is not None:
                    groups[group.invocation] = group
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
            raise ParseError(path, f"compressed data is damaged or truncated after line {line} ({exc})") from exc
    return groups


#: Marker frame columns that hold a ggml range's parts once its message is let go (see
#: :func:`compact_ranges`): the op, the node name and the invocation; None / ``<NA>`` elsewhere.
RANGE_PART_COLUMNS = ("range_op", "range_node", "range_invocation")
#: A dispatch's region (the innermost ggml range of its NVTX stack, Nsight Compute) as its parts:
#: op, node name and invocation, where they give the text back exactly (its ``region`` then None;
#: :func:`split_ranges` makes them). ~80 bytes of string per op invocation at read (772,557 at
#: 10^6 kernels) become two codes and an integer per kernel.
REGION_PART_COLUMNS = ("region_op", "region_node", "region_invocation")


def compact_ranges(markers: Any) -> Any:
    """Let go of the text of each ggml range that its parts give back exactly (in place; returned).

    ``markers``: a frame of :data:`rocroof.records.MARKER_COLUMNS` (``message``, ``kind``, ...),
    a reader's whole marker table or a chunk of it. Each ``range`` row whose message parses
    (:func:`parse_ranges`) and is written back byte for byte by :func:`range_messages` gets its
    op, node name and invocation in :data:`RANGE_PART_COLUMNS` and its ``message`` set to None;
    other rows keep their message and get None / ``<NA>`` there. :func:`ggml_fields` reads the
    ranges of either form, and the store writes the message back (:func:`range_messages`).

    A ggml message is ~80 bytes of Python string per range (868,422 ranges at 10^6 dispatches:
    ~70 MB); its parts are two pointers to shared strings and an integer.

    A frame that has the part columns already (split as read, :func:`split_ranges`) is not split
    again; either way its marks get their text back: a mark is never a ggml range.

    Args:
        markers: the frame (changed in place).
    """
    import pandas as pd

    if RANGE_PART_COLUMNS[0] not in markers.columns:  # not split as read: split here, marks included
        kept, parts = split_ranges(text_values(markers["message"]).copy())
        markers["message"] = pd.Series(kept, dtype=object, index=markers.index, copy=False)
        for name, values in parts.items():
            dtype = object if name != "range_invocation" else None
            markers[name] = pd.Series(values, dtype=dtype, index=markers.index, copy=False)
    # a mark is never a ggml range: one whose text reads like one gets it back
    marks = np.flatnonzero(
        (markers["kind"] != "range").to_numpy(dtype=bool) & markers["range_op"].notna().to_numpy(dtype=bool)
    )
    if len(marks):
        messages = marker_messages(markers)
        kept = text_values(markers["message"]).copy()
        kept[marks] = messages[marks]
        markers["message"] = pd.Series(kept, dtype=object, index=markers.index, copy=False)
        for name in RANGE_PART_COLUMNS[:2]:
            values = text_values(markers[name]).copy()
            values[marks] = None
            markers[name] = pd.Series(values, dtype=object, index=markers.index, copy=False)
        inv = markers["range_invocation"].astype("Int64").array.copy()
        inv[marks] = pd.NA
        markers["range_invocation"] = pd.Series(inv, index=markers.index)
    return markers


def ggml_fields(markers: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(is_ggml, invocation, op, node_name, compacted)`` per marker row, from either form of a range.

    A range let go by :func:`compact_ranges` gives its :data:`RANGE_PART_COLUMNS`; every other
    ``range`` row is parsed from its message (:func:`parse_ranges`). ``compacted`` is True where
    the message was let go (None in the frame; :func:`range_messages` gives it back).
    Shapes: (rows,) each; int64 invocation (0 where not a ggml range), object op and node name.
    """
    n = len(markers)
    kinds = markers["kind"].to_numpy(dtype=object)
    is_range = kinds == "range"
    compacted = np.zeros(n, dtype=bool)
    if RANGE_PART_COLUMNS[0] in markers.columns:
        compacted = is_range & markers["range_op"].notna().to_numpy(dtype=bool)
    if not compacted.any():
        messages = text_values(markers["message"]).copy()
        messages[~np.asarray(is_range, dtype=bool)] = None
        is_ggml, inv, op, node = parse_ranges(messages)
        return is_ggml, inv, op, node, compacted
    # the ranges with their text (not ggml ranges, or ones whose parts do not write them back) are parsed
    rest = np.flatnonzero(is_range & ~compacted)
    r_ggml, r_inv, r_op, r_node = parse_ranges(text_values(markers["message"])[rest])
    rest = rest[r_ggml]
    inv = np.where(compacted, markers["range_invocation"].to_numpy(dtype=np.int64, na_value=0), 0)
    is_ggml = compacted.copy()
    op = text_values(markers["range_op"])
    node = text_values(markers["range_node"])
    if not len(rest):  # every ggml range let go: the frame's own columns (None on every other row), not copies
        return is_ggml, inv, op, node, compacted
    op, node = op.copy(), node.copy()
    is_ggml[rest] = True
    inv[rest] = r_inv[r_ggml]
    op[rest] = r_op[r_ggml]
    node[rest] = r_node[r_ggml]
    return is_ggml, inv, op, node, compacted


def marker_messages(markers: Any) -> np.ndarray:
    """Every marker row's message text, those let go by :func:`compact_ranges` written back.

    Shape (rows,), object: str, or None where the marker has no text.
    """
    messages: np.ndarray = text_values(markers["message"]).copy()
    if RANGE_PART_COLUMNS[0] in markers.columns:
        rows = np.flatnonzero(markers["range_op"].notna().to_numpy(dtype=bool))
        if len(rows):
            messages[rows] = range_messages(
                text_values(markers["range_op"])[rows],
                text_values(markers["range_node"])[rows],
                markers["range_invocation"].to_numpy(dtype=np.int64, na_value=0)[rows],
            )
    return messages


def region_messages(dispatches: Any) -> np.ndarray:
    """Every dispatch's region text, those a reader let go for their parts (:data:`REGION_PART_COLUMNS`) written back.

    Shape (rows,), object: str, or None where the dispatch has no region.
    """
    texts: np.ndarray = text_values(dispatches["region"]).copy()
    if REGION_PART_COLUMNS[0] in dispatches.columns:
        rows = np.flatnonzero(dispatches[REGION_PART_COLUMNS[0]].notna().to_numpy(dtype=bool))
        if len(rows):
            texts[rows] = range_messages(
                text_values(dispatches[REGION_PART_COLUMNS[0]])[rows],
                text_values(dispatches[REGION_PART_COLUMNS[1]])[rows],
                dispatches[REGION_PART_COLUMNS[2]].to_numpy(dtype=np.int64, na_value=0)[rows],
            )
    return texts


def split_ranges(texts: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """A column of marker texts with the ggml ranges' messages let go: ``(texts, parts)``.

    For :func:`rocroof.fileio.read_csv_plain`'s ``split``: ``texts`` is a chunk's column, a polars
    String Series (its fast path: the messages let go never become Python strings, whose freed
    memory the allocator would keep) or an object array. Returns the texts (object, None where
    let go) and the :data:`RANGE_PART_COLUMNS` (object, object, nullable Int64), as
    :func:`compact_ranges` makes them; the caller gives the rows that are marks their text back
    (:func:`compact_ranges` on the chunk does).
    """
    import pandas as pd

    if not isinstance(texts, np.ndarray):
        _, invocation, op, node, exact = _split_series(texts)
        kept = np.full(len(texts), None, dtype=object)
        rest = np.flatnonzero(~exact)
        if len(rest):
            kept[rest] = texts.gather(rest).to_list()
        op[~exact] = None
        node[~exact] = None
    else:
        is_ggml, invocation, op, node = parse_ranges(texts)
        rows = np.flatnonzero(is_ggml)
        again = range_messages(op[rows], node[rows], invocation[rows])
        exact = np.zeros(len(texts), dtype=bool)
        exact[rows] = np.fromiter((a == b for a, b in zip(again, texts[rows].tolist(), strict=True)), bool, len(rows))
        kept = texts.copy()
        kept[exact] = None
        op[~exact] = None
        node[~exact] = None
    parts = {
        "range_op": op,
        "range_node": node,
        "range_invocation": pd.arrays.IntegerArray(np.where(exact, invocation, 0), ~exact),
    }
    return kept, parts
