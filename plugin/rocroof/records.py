"""Normalized, profiler-independent records shared by readers, attribution and the store.

Readers turn profiler files into these records; nothing downstream knows which profiler
wrote them. Tables are pandas DataFrames whose columns are listed below (name: dtype, unit).
Nullable integer columns use pandas' ``Int64``; a missing value is ``<NA>`` (unknown),
never 0.

``DISPATCH_COLUMNS`` — one row per kernel dispatch of one pass, in enqueue order:
    dispatch_id: Int64, the profiler's dispatch id (rocprofv3 ``Dispatch_Id``).
    kernel_name: str, the kernel symbol (demangled where the profiler demangles).
    kernel_id: Int64, the profiler's kernel/code-object symbol id.
    region: str or None, the kernel's renamed region when recorded with ``--kernel-rename``.
    agent_label: str, the agent as the trace names it (``"Agent 4"``, ``"2"``, ``"GPU 0"``).
    queue_id, stream_id, process_id, thread_id, correlation_id: Int64.
    start_ns, end_ns: Int64, GPU timestamps in ns (profiler clock).
    duration_ns: Int64, GPU execution time in ns; filled by readers whose source gives only a
        duration (Nsight Compute, the fork's JSON), otherwise derived from end - start.
    invocation: Int64, the ggml op invocation when the source itself attributed the dispatch
        (the fork's JSON); otherwise attribution fills it from markers.
    launch_ns: Int64, host time (ns, the markers' clock) at which the launching thread
        ``thread_id`` handed the dispatch to the GPU, when the source records it with the
        dispatch (rocprof v1 ``DispatchNs``); sources with an API trace give launches instead.
    grid_size, workgroup_size: Int64, total work-items per grid / per workgroup.
    grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z: Int64, work-items.
    lds_bytes: Int64, LDS (group segment) bytes per workgroup.
    scratch_bytes: Int64, scratch (private segment) bytes per work-item.
    vgpr_count, accum_vgpr_count, sgpr_count: Int64, registers per work-item / wave.
    timestamps_exact: boolean, False where the source rounded this dispatch's timestamps (its
        duration is then unknown); <NA> or True otherwise.

``COUNTER_COLUMNS`` — one row per (dispatch, counter), summed over hardware instances:
    row: int, 0-based position of the dispatch in the pass's dispatch table.
    counter_name: str, e.g. ``TCC_EA0_RDREQ_sum`` or ``TCC_EA0_RDREQ``.
    value: float64, the counter value (counts, or KB for ``FETCH_SIZE``/``WRITE_SIZE``).

``INSTANCE_COLUMNS`` — per-instance values, when the source keeps them:
    row: int; counter_name: str; instance: int (0-based, e.g. the TCC channel); value: float64.

``MARKER_COLUMNS`` — roctx/NVTX ranges and marks on host threads:
    process_id, thread_id: Int64; start_ns, end_ns: Int64 (host ns, profiler clock; a mark
    has ``start_ns == end_ns``); message: str; kind: ``"range"`` or ``"mark"``;
    correlation_id: Int64 (the roctx call's internal correlation id, when recorded).
    A reader that lets go of the ggml ranges' messages as it reads them adds
    ``MARKER_PART_COLUMNS``: range_op, range_node: str; range_invocation: Int64 — the range's op,
    node name and invocation where its message is None (see
    :func:`rocroof.capture.markers.compact_ranges`), None / ``<NA>`` on every other row.

``LAUNCH_COLUMNS`` — host API calls that enqueued kernels (HIP/CUDA runtime trace):
    correlation_id, process_id, thread_id: Int64; start_ns, end_ns: Int64 (host ns);
    api_name: str.

``AGENT_COLUMNS`` — the agents (CPUs and GPUs) of a capture:
    agent_label: str (as traces name it); node_id, logical_node_id: Int64;
    agent_type: ``"GPU"``/``"CPU"``; gfx_arch: str (e.g. ``gfx942``, ``sm_90``);
    product_name: str; cu_count, simd_count, num_xcc, wave_size: Int64; max_clock_mhz: float64;
    pci_device_id: Int64, the GPU's PCI device id (``0x74a1``; libdrm ``amdgpu.ids`` numbering).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from . import spill
from .note import Note as Note
from .note import Severity as Severity
from .spill import TAKE_ROWS, ColumnWriter, is_spilled, release_pages, spilled_copy, take, zeros

DISPATCH_COLUMNS: dict[str, str] = {
    "dispatch_id": "Int64",
    "kernel_name": "object",
    "kernel_id": "Int64",
    "region": "object",
    "agent_label": "object",
    "queue_id": "Int64",
    "stream_id": "Int64",
    "process_id": "Int64",
    "thread_id": "Int64",
    "correlation_id": "Int64",
    "start_ns": "Int64",
    "end_ns": "Int64",
    "duration_ns": "Int64",
    "invocation": "Int64",
    "launch_ns": "Int64",
    "grid_size": "Int64",
    "workgroup_size": "Int64",
    "grid_x": "Int64",
    "grid_y": "Int64",
    "grid_z": "Int64",
    "workgroup_x": "Int64",
    "workgroup_y": "Int64",
    "workgroup_z": "Int64",
    "lds_bytes": "Int64",
    "scratch_bytes": "Int64",
    "vgpr_count": "Int64",
    "accum_vgpr_count": "Int64",
    "sgpr_count": "Int64",
    "timestamps_exact": "boolean",
}

COUNTER_COLUMNS: dict[str, str] = {"row": "int64", "counter_name": "object", "value": "float64"}

INSTANCE_COLUMNS: dict[str, str] = {
    "row": "int64",
    "counter_name": "object",
    "instance": "int64",
    "value": "float64",
}

MARKER_COLUMNS: dict[str, str] = {
    "process_id": "Int64",
    "thread_id": "Int64",
    "start_ns": "Int64",
    "end_ns": "Int64",
    "message": "object",
    "kind": "object",
    "correlation_id": "Int64",
}

#: Marker columns a reader adds when it lets go of the ggml ranges' messages as it reads them
#: (:func:`rocroof.capture.markers.split_ranges`); a reader that keeps every message leaves them
#: out (no column of None per row).
MARKER_PART_COLUMNS: dict[str, str] = {
    "range_op": "object",
    "range_node": "object",
    "range_invocation": "Int64",
}

LAUNCH_COLUMNS: dict[str, str] = {
    "correlation_id": "Int64",
    "process_id": "Int64",
    "thread_id": "Int64",
    "start_ns": "Int64",
    "end_ns": "Int64",
    "api_name": "object",
}

AGENT_COLUMNS: dict[str, str] = {
    "agent_label": "object",
    "node_id": "Int64",
    "logical_node_id": "Int64",
    "agent_type": "object",
    "gfx_arch": "object",
    "product_name": "object",
    "cu_count": "Int64",
    "simd_count": "Int64",
    "num_xcc": "Int64",
    "wave_size": "Int64",
    "max_clock_mhz": "float64",
    "pci_device_id": "Int64",
}


def empty_frame(columns: dict[str, str]) -> pd.DataFrame:
    """An empty DataFrame with the given ``{name: dtype}`` columns."""
    return conform(pd.DataFrame(), columns)


def marker_kinds(is_mark: Any) -> pd.Categorical:
    """The ``kind`` column of marker rows: ``mark`` where ``is_mark`` is true, else ``range``.

    A categorical (a byte per row, two strings in all), not a string object per row: a million
    roctx rows would otherwise hold a million small strings (~55 MB).
    """
    if isinstance(is_mark, pd.Series | pd.api.extensions.ExtensionArray):
        is_mark = pd.Series(is_mark).fillna(False).to_numpy(dtype=bool)
    codes = np.asarray(is_mark, dtype=bool).astype(np.int8)
    return pd.Categorical.from_codes(codes, categories=pd.Index(["range", "mark"], dtype=object))


def conform(df: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """Return ``df`` with exactly ``columns``, in order, cast to their dtypes.

    Missing columns are added as all-missing. Extra columns are dropped. A categorical column
    (the big readers' counter and kernel names: a code per row) stays categorical where an
    ``object`` column is asked for: same values, one string per distinct value.

    Args:
        df: a frame from a reader.
        columns: ``{name: dtype}``, e.g. :data:`DISPATCH_COLUMNS`.

    Returns:
        A new DataFrame with a fresh ``RangeIndex``.

    Raises:
        ValueError: a value cannot be cast (readers validate before calling this).
    """
    out = {}
    n = len(df)
    for name, dtype in columns.items():
        if name in df.columns:
            col = df[name]
            if dtype == "object" and isinstance(col.dtype, pd.CategoricalDtype):
                out[name] = col.reset_index(drop=True)
            elif dtype == "object":
                out[name] = col.astype(object).where(col.notna(), None).reset_index(drop=True)
            else:
                out[name] = col.astype(dtype).reset_index(drop=True)
        else:
            if dtype == "object":
                out[name] = pd.Series([None] * n, dtype=object)
            elif dtype == "float64":
                out[name] = pd.Series(np.full(n, np.nan), dtype="float64")
            elif dtype == "Int64" and n:
                # all NULL: the values are a mapping of zeros that no page of memory backs, the mask
                # a spill file from SPILL_MIN_BYTES on (rocroof.spill)
                mask = spill.full(n, True, np.bool_)
                out[name] = pd.Series(pd.arrays.IntegerArray(zeros(n, np.int64), mask), copy=False)
            else:
                out[name] = pd.Series(pd.NA, index=pd.RangeIndex(n), dtype=dtype)  # not a list of n NAs
    return pd.DataFrame(out, copy=False)  # the columns built above (copy-on-write: no second copy)


#: Dispatch columns that no step computes with between reading and storing (see
#: :func:`rocroof.ingest.pipeline.build_run`): readers may spill them (:class:`ChunkStacker`).
PAYLOAD_COLUMNS = (
    "kernel_id",
    "queue_id",
    "stream_id",
    "grid_size",
    "workgroup_size",
    "grid_x",
    "grid_y",
    "grid_z",
    "workgroup_x",
    "workgroup_y",
    "workgroup_z",
    "lds_bytes",
    "scratch_bytes",
    "vgpr_count",
    "accum_vgpr_count",
    "sgpr_count",
)


#: The integer columns of a pass's dispatches, ranges and launch calls that wait in spill files
#: once read (``capture.readers.read_capture`` moves those a reader left in memory): the
#: attribution reads them once and the store writes them (~90 MB at 10^6 dispatches).
SPILLED_AFTER_READ = (
    "process_id",
    "thread_id",
    "correlation_id",
    "start_ns",
    "end_ns",
    "duration_ns",
    "invocation",
    "launch_ns",
    "range_invocation",
)

#: Dispatch columns a reader may spill as it reads (:class:`ChunkStacker`): :data:`PAYLOAD_COLUMNS`,
#: the dispatch id and :data:`SPILLED_AFTER_READ` (the pipeline reads them a column at a time;
#: their pages go between stages).
SPILLED_ON_READ = (*PAYLOAD_COLUMNS, "dispatch_id", *SPILLED_AFTER_READ)


class ChunkStacker:
    """Frames of the same columns, added a chunk at a time, stacked at :meth:`finish`.

    The ``spill`` columns of each chunk (nullable ``Int64``, as the readers type dispatch ids,
    times and sizes) go to spill files as the chunk is added (:mod:`rocroof.spill`): the chunks
    held until the end lack them, and the stacked frame maps them from the files. Other columns,
    and a ``spill`` column the first chunk lacks or holds in another type, are stacked in memory
    as :func:`stack_frames` does.

    A context manager: leaving the block closes the files of columns not finished.

    Raises:
        OSError: the spill directory cannot take the files.
        ValueError: a later chunk lacks a spilled column or holds it in another type (a bug).
    """

    def __init__(self, spill: tuple[str, ...] = ()) -> None:
        self.spill = spill
        self.chunks: list[pd.DataFrame] = []
        self._writers: dict[str, tuple[ColumnWriter, ColumnWriter]] = {}  # column -> (values, mask) writers
        self._spilling: list[str] | None = None  # the spilled columns, fixed by the first chunk
        self._order: list[str] = []  # the first chunk's columns

    def add(self, chunk: pd.DataFrame) -> None:
        """Take ``chunk`` (its spill columns are written out and dropped from it)."""
        if self._spilling is None:
            self._order = list(chunk.columns)
            self._spilling = [c for c in self.spill if c in chunk.columns and isinstance(chunk[c].dtype, pd.Int64Dtype)]
            for c in self._spilling:
                self._writers[c] = (ColumnWriter(np.int64), ColumnWriter(np.bool_))
        for c in self._spilling:
            col = chunk[c] if c in chunk.columns else None
            if col is None or not isinstance(col.dtype, pd.Int64Dtype):  # a reader's bug: its chunks differ
                raise ValueError(f"column {c!r} of a chunk is not Int64 as in the first chunk")
            values, mask = self._writers[c]
            mask.append(col.isna().to_numpy(dtype=bool))
            values.append(col.to_numpy(dtype=np.int64, na_value=0))
            del chunk[c]
        self.chunks.append(chunk)

    def finish(self) -> pd.DataFrame:
        """The chunks one after the other, with a fresh index (the chunk list is emptied)."""
        spilled: dict[str, Any] = {}
        try:
            for c, (values, mask) in self._writers.items():
                spilled[c] = pd.arrays.IntegerArray(values.finish(), mask.finish())
        finally:
            self.close()
        stacked = stack_frames(self.chunks)
        parts = {**{c: stacked[c] for c in stacked.columns}, **spilled}
        columns = [c for c in self._order if c in parts] + [c for c in parts if c not in self._order]
        return pd.DataFrame({c: parts[c] for c in columns}, copy=False)  # the spilled arrays themselves

    def close(self) -> None:
        """Drop the spill files not made into columns (an error while reading)."""
        for values, mask in self._writers.values():
            values.close()
            mask.close()

    def __enter__(self) -> ChunkStacker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # the files of columns not finished (an error while reading); finished ones are kept


class SpilledTexts:
    """Texts by code kept in spill files: their UTF-8 bytes back to back, and where each starts.

    For a window's few rows of a run's many texts (the fused marks' messages: 276,318 at 3x10^6
    dispatches, 26 MB as Python strings and 8 MB of their index's hash table): indexing with an
    array of codes (int, shape (n,)) gives the texts as an object array, None for code -1, as
    :func:`text_table`'s table does; each distinct code is decoded once per call.

    Raises:
        OutputError: the spill directory cannot take the files (:class:`~rocroof.spill.ColumnWriter`).
        TypeError: a text that is not a ``str``.
    """

    _BLOCK = 1 << 16

    def __init__(self, texts: Any) -> None:
        ends = [np.zeros(1, dtype=np.int64)]
        with ColumnWriter(np.uint8) as data:
            for lo in range(0, len(texts), self._BLOCK):
                block = texts[lo : lo + self._BLOCK]
                if not all(isinstance(t, str) for t in block):
                    raise TypeError("SpilledTexts holds str only")
                encoded = [t.encode("utf-8", "surrogatepass") for t in block]
                data.append(np.frombuffer(b"".join(encoded), dtype=np.uint8))
                lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=len(encoded))
                ends.append(ends[-1][-1] + np.cumsum(lengths))
            self._data = data.finish()
        self._starts = spilled_copy(np.concatenate(ends))

    def __len__(self) -> int:
        return len(self._starts) - 1

    def __getitem__(self, codes: np.ndarray) -> np.ndarray:
        codes = np.asarray(codes, dtype=np.int64)
        out = np.full(len(codes), None, dtype=object)
        known = np.flatnonzero(codes >= 0)
        if not len(known):
            return out
        distinct, where = np.unique(codes[known], return_inverse=True)
        starts, data = self._starts, self._data
        texts = np.empty(len(distinct), dtype=object)
        texts[:] = [bytes(data[starts[c] : starts[c + 1]]).decode("utf-8", "surrogatepass") for c in distinct.tolist()]
        out[known] = texts[where]
        return out


def text_table(categories: Any) -> np.ndarray:
    """Texts by code, then None for code -1 (missing): shape (categories + 1,), object; index it with the codes."""
    table = np.empty(len(categories) + 1, dtype=object)
    table[:-1] = list(categories)
    table[-1] = None
    return table


def text_values(column: Any) -> np.ndarray:
    """A text column's values as an object array (rows,), None where missing.

    A categorical (a reader's spilled text: kernel names, messages...) is looked up through its
    categories (``to_numpy(dtype=object)`` would give NaN for a missing value, where the other
    readers' object columns hold None); any other column is ``to_numpy(dtype=object)`` (it may share
    the column's memory: copy before writing into it).
    """
    array = column.array if isinstance(column, pd.Series) else column
    if isinstance(array, pd.Categorical):
        codes = np.asarray(array.codes)
        categories = array.categories
        if len(codes) < len(categories):
            # few rows of many texts (a window's ranges of a run's marker messages): the rows' texts
            # only, not an object table of every category (92,000 at 10^6 dispatches) per call
            missing = codes < 0
            picked: np.ndarray = (
                np.array(categories.take(np.where(missing, 0, codes)), dtype=object)
                if len(categories)
                else np.full(len(codes), None, dtype=object)
            )
            picked[missing] = None
            release_pages()
            return picked
        values: np.ndarray = text_table(categories)[codes]
        release_pages()
        return values
    out: np.ndarray = np.asarray(
        column.to_numpy(dtype=object) if isinstance(column, pd.Series) else column, dtype=object
    )
    return out


def small_frame(rows: int) -> bool:
    """True when a frame of ``rows`` rows stays in memory: 8 bytes a row under ``SPILL_MIN_BYTES``.

    A column of 8 bytes a row is an int64 or float64 one, or text as object pointers
    (:data:`rocroof.spill.SPILL_MIN_BYTES`). A larger frame is in spill files whole, its masks and
    text codes included (:class:`SpilledFrameWriter`, :func:`take_rows`).
    """
    return rows * 8 < max(spill.SPILL_MIN_BYTES, 1)


def code_dtype(categories: int) -> np.dtype[Any]:
    """The integer type pandas gives the codes of a categorical of ``categories`` categories.

    ``pd.Categorical.from_codes`` converts codes of another type (a copy of the column); codes
    written in this type are used as they are, a spill mapping included.
    """
    for dtype in (np.int8, np.int16, np.int32):
        if categories < np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


class TextWriter:
    """A text column appended a chunk at a time: a code per row in a spill file, each distinct text once.

    Codes number the texts in order of first appearance (after ``categories``), -1 for a missing
    value (None or NaN); they are written in the type pandas keeps for that many categories
    (:func:`code_dtype`), rewritten wider when a chunk brings more texts than it holds. The
    categories are those of the rows as read: what is stored does not depend on their order (the
    store and the pipeline number texts in order of first appearance themselves).

    Args:
        categories: texts numbered first, in this order (e.g. a marker's kind: range, mark).
        categorical: :meth:`finish` gives a categorical however small the column (else a column
            under :data:`rocroof.spill.SPILL_MIN_BYTES` as an object array comes back as one,
            with None for missing values: what the readers gave before they spilled text).
        fixed: the column holds none but ``categories`` (a reader's check of its own values).

    Raises:
        OutputError: the spill directory cannot take the file (:class:`rocroof.spill.ColumnWriter`).
        ValueError: (:meth:`append`) with ``fixed``, a text not in ``categories`` (a reader's bug).
    """

    def __init__(self, categories: tuple[str, ...] = (), *, categorical: bool = False, fixed: bool = False) -> None:
        self.categorical = categorical
        self.fixed = fixed
        self._number: dict[Any, int] = {text: i for i, text in enumerate(categories)}
        self._codes = ColumnWriter(code_dtype(len(self._number)))
        self.rows = 0

    def append(self, values: Any) -> None:
        """Add ``values``: a categorical (its categories are the texts) or object values, None/NaN missing."""
        if isinstance(values, pd.Series):
            values = values.array
        if isinstance(values, pd.Categorical):
            texts = list(values.categories)
            local = np.asarray(values.codes)
        else:
            local, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=True)
            texts = list(uniques)
        table = np.empty(len(texts) + 1, dtype=np.int64)
        for i, text in enumerate(texts):
            if self.fixed and text not in self._number:
                raise ValueError(f"{text!r} is not one of the column's categories {list(self._number)}")
            table[i] = self._number.setdefault(text, len(self._number))
        table[-1] = -1  # local code -1: missing
        wanted = code_dtype(len(self._number))
        if wanted.itemsize > self._codes.dtype.itemsize:
            self._widen(wanted)
        self._codes.append(table[local].astype(self._codes.dtype))
        self.rows += len(local)

    def _widen(self, dtype: np.dtype[Any]) -> None:
        """Rewrite the codes written so far in the wider ``dtype``."""
        old = self._codes.finish(mapped=True)
        wider = ColumnWriter(dtype)
        try:
            for lo in range(0, len(old), TAKE_ROWS):
                wider.append(old[lo : lo + TAKE_ROWS])
                release_pages()
        except BaseException:
            wider.close()
            raise
        self._codes = wider

    @property
    def categories(self) -> list[Any]:
        """The distinct texts so far, in code order."""
        return list(self._number)

    def finish(self) -> Any:
        """The column: a categorical whose codes are a spill mapping, or a small object array (see the class)."""
        big = not small_frame(self.rows)  # (the size of the column as object pointers)
        codes = self._codes.finish(mapped=big)
        categories = pd.Index(list(self._number), dtype=object)
        if big or self.categorical:
            return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(categories), validate=False)
        texts: np.ndarray = text_table(categories)[codes]
        return texts

    def close(self) -> None:
        """Drop the file (an error while reading); nothing once finished."""
        self._codes.close()

    def __enter__(self) -> TextWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _column_kind(dtype: Any) -> str:
    """How :class:`SpilledFrameWriter` writes a column of ``dtype``: ``Int64``, ``boolean``, ``text`` or numpy."""
    if isinstance(dtype, pd.Int64Dtype) or str(dtype) == "Int64":
        return "Int64"
    if isinstance(dtype, pd.BooleanDtype) or str(dtype) == "boolean":
        return "boolean"
    if isinstance(dtype, pd.CategoricalDtype | pd.StringDtype) or str(dtype) in ("object", "category", "str"):
        return "text"
    return str(np.dtype(dtype))


class SpilledFrameWriter:
    """A frame of ``columns`` added a chunk at a time, every column written to spill files as it comes.

    Integers and floats go to :class:`rocroof.spill.ColumnWriter` files (nullable ones as values
    and mask), text columns to :class:`TextWriter` (a code per row): the chunks are not kept, and
    the finished frame maps its columns from the files. A chunk's column of the frame's type is
    written as it is; one of another type is cast as :func:`conform` casts it, and a column the
    chunk lacks is missing values there. A frame of few rows (:func:`small_frame`) comes back in
    memory, as :func:`conform` would give it; a larger one maps every column, byte-wide ones
    (masks, booleans) and text codes too.

    A context manager: leaving the block drops the files of a frame not finished.

    Args:
        columns: ``{name: dtype}`` as :func:`conform` takes them (e.g. :data:`DISPATCH_COLUMNS`).
        categorical: text columns given as categoricals however small (e.g. a marker's ``kind``).
        categories: text columns' first categories, in order (``{"kind": ("range", "mark")}``).
        fixed: the ``categories`` columns hold none but those (:class:`TextWriter`).

    Raises:
        OutputError: the spill directory cannot take the files.
    """

    def __init__(
        self,
        columns: dict[str, str],
        *,
        categorical: tuple[str, ...] = (),
        categories: dict[str, tuple[str, ...]] | None = None,
        fixed: bool = False,
    ) -> None:
        self.columns = dict(columns)
        self.rows = 0
        self._writers: dict[str, Any] = {}
        try:
            for name, dtype in self.columns.items():
                kind = _column_kind(dtype)
                if kind == "text":
                    seeds = (categories or {}).get(name)
                    self._writers[name] = TextWriter(
                        seeds or (), categorical=name in categorical, fixed=fixed and seeds is not None
                    )
                elif kind in ("Int64", "boolean"):
                    self._writers[name] = (
                        ColumnWriter(np.int64 if kind == "Int64" else np.bool_),
                        ColumnWriter(np.bool_),
                    )
                else:
                    self._writers[name] = ColumnWriter(kind)
        except BaseException:
            self.close()
            raise

    def add(self, chunk: pd.DataFrame) -> None:
        """Write ``chunk``'s rows at the frame's end (its other columns are left out).

        Raises:
            ValueError: a value cannot be cast to its column's type, or a numpy integer column is
                missing from the chunk (a reader's bug).
        """
        n = len(chunk)
        for name, writer in self._writers.items():
            column = chunk[name] if name in chunk.columns else None
            if isinstance(writer, TextWriter):
                writer.append(column if column is not None else np.full(n, None, dtype=object))
                continue
            if isinstance(writer, tuple):
                values, mask = writer
                if column is None:
                    values.append(np.zeros(n, dtype=values.dtype))
                    mask.append(np.ones(n, dtype=np.bool_))
                    continue
                dtype = "Int64" if values.dtype == np.int64 else "boolean"
                array = (column if str(column.dtype) == dtype else column.astype(dtype)).array
                values.append(array._data)  # noqa: SLF001 (the arrays themselves, not copies)
                mask.append(array._mask)  # noqa: SLF001
                continue
            if column is None:  # (missing floats are NaN; an integer column cannot miss a value)
                column = pd.Series(np.full(n, np.nan))
            writer.append((column if column.dtype == writer.dtype else column.astype(writer.dtype)).to_numpy())
        self.rows += n

    def add_frame(self, frame: pd.DataFrame, rows: int = TAKE_ROWS) -> None:
        """Write a whole frame (spilled or not) ``rows`` at a time, its pages let go after each part."""
        for lo in range(0, len(frame), rows):
            self.add(frame.iloc[lo : lo + rows])
            release_pages()

    def finish(self) -> pd.DataFrame:
        """The frame, with a fresh index (the files are then mapped; the writer is spent)."""
        out: dict[str, Any] = {}
        # one decision for the frame, by its rows (as TextWriter decides its codes): a frame that is
        # mapped maps its byte-wide columns too (masks, booleans: 1 MB each at 10^6 rows, 36 MB for
        # the three frames of a rocprofv3 CSV pass, where a per-column size test kept them in memory)
        big = not small_frame(self.rows)
        try:
            for name, writer in self._writers.items():
                if isinstance(writer, TextWriter):
                    text = writer.finish()
                    out[name] = pd.Series(text, dtype=None if isinstance(text, pd.Categorical) else object, copy=False)
                elif isinstance(writer, tuple):
                    values, mask = writer
                    data, missing = values.finish(mapped=big), mask.finish(mapped=big)
                    array = (
                        pd.arrays.IntegerArray(data, missing)
                        if data.dtype.kind == "i"
                        else pd.arrays.BooleanArray(data, missing)
                    )
                    out[name] = pd.Series(array, copy=False)
                else:
                    out[name] = pd.Series(writer.finish(mapped=big), copy=False)
        finally:
            self.close()
        return pd.DataFrame(out, index=pd.RangeIndex(self.rows), copy=False)

    def close(self) -> None:
        """Drop the files of columns not finished (an error while reading)."""
        for writer in self._writers.values():
            for part in writer if isinstance(writer, tuple) else (writer,):
                part.close()

    def __enter__(self) -> SpilledFrameWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def frame_schema(frame: pd.DataFrame) -> dict[str, str]:
    """``{name: dtype}`` of ``frame`` as :class:`SpilledFrameWriter` takes it (text columns: ``object``)."""
    return {name: "object" if _column_kind(frame[name].dtype) == "text" else str(frame[name].dtype) for name in frame}


def stack_spilled(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Frames of the same columns one after the other, written to spill files part by part.

    The frames' columns may be spilled or not; categorical columns stay categorical (``frames``
    is emptied). One frame is returned as it is.
    """
    if len(frames) == 1:
        return frames.pop()
    first = frames[0]
    categorical = tuple(c for c in first.columns if isinstance(first[c].dtype, pd.CategoricalDtype))
    seeds = {c: tuple(first[c].cat.categories) for c in categorical}
    with SpilledFrameWriter(frame_schema(first), categorical=categorical, categories=seeds) as writer:
        while frames:
            writer.add_frame(frames.pop(0))
        return writer.finish()


def spilled_array(values: Any) -> Any:
    """A copy of ``values`` (a nullable ``Int64`` array, or a 1-D numpy array) in spill files (:mod:`rocroof.spill`)."""
    if isinstance(values, pd.arrays.IntegerArray):
        return pd.arrays.IntegerArray(spilled_copy(values._data), spilled_copy(values._mask))  # noqa: SLF001
    return spilled_copy(np.asarray(values))


def spill_columns(df: pd.DataFrame, names: tuple[str, ...]) -> pd.DataFrame:
    """``df`` with its ``names`` columns (nullable ``Int64``, plain integers or floats) moved to spill files.

    The values are unchanged (:mod:`rocroof.spill`); other columns, and columns already spilled,
    stay as they are. A new frame sharing the other columns (``df`` is not changed).
    """
    out: dict[str, Any] = {}
    for name in df.columns:
        column = df[name]
        array = column.array
        if name not in names or is_spilled(array) or not len(column):
            out[name] = column
        elif isinstance(column.dtype, pd.Int64Dtype) or (
            getattr(column.dtype, "kind", "O") in "if"
            and not isinstance(column.dtype, pd.api.extensions.ExtensionDtype)
        ):
            out[name] = spilled_array(array if isinstance(column.dtype, pd.Int64Dtype) else column.to_numpy())
        else:
            out[name] = column
    return pd.DataFrame(out, copy=False)


def stack_column(parts: list[pd.Series]) -> Any:
    """``parts`` (one column of several frames) one after the other, with a fresh index.

    When any part is spilled (:mod:`rocroof.spill`) and all are nullable ``Int64`` or all of one
    numpy dtype, the result is written to a spill file part by part; otherwise ``pd.concat``.
    """
    dtypes = {str(p.dtype) for p in parts}
    if any(is_spilled(p.array) for p in parts) and len(dtypes) == 1:
        first = parts[0]
        if isinstance(first.dtype, pd.Int64Dtype):
            with ColumnWriter(np.int64) as data, ColumnWriter(np.bool_) as mask:
                for part in parts:
                    data.append(part.array._data)  # noqa: SLF001 (the arrays themselves)
                    mask.append(part.array._mask)  # noqa: SLF001
                    release_pages()
                return pd.arrays.IntegerArray(data.finish(), mask.finish())
        if getattr(first.dtype, "kind", "O") in "iufb" and not isinstance(
            first.dtype, pd.api.extensions.ExtensionDtype
        ):
            with ColumnWriter(first.dtype) as writer:
                for part in parts:
                    writer.append(part.to_numpy())
                    release_pages()
                return writer.finish()
    return pd.concat(parts, ignore_index=True)


def take_rows(
    df: pd.DataFrame, rows: np.ndarray, remap: dict[str, np.ndarray] | None = None, *, consume: bool = False
) -> pd.DataFrame:
    """``df.iloc[rows]`` with a fresh index; a spilled column stays spilled (:func:`rocroof.spill.take`).

    A spilled column's rows are taken a chunk at a time into a spill file: a small result in
    memory (:data:`rocroof.spill.SPILL_MIN_BYTES`), a result of many rows (:func:`small_frame`)
    in files whole, its mask too; a categorical's codes in a file however small. A column in
    memory is taken in memory. ``remap`` maps a column name to a lookup array: that column's
    taken values ``v`` become ``remap[name][v]`` (e.g. dispatch rows renumbered), computed a chunk
    at a time. With ``consume``, ``df`` loses each column once it is taken (its pages let go):
    the frame and its reordering are never both held whole.
    """
    out: dict[str, Any] = {}
    big = not small_frame(len(rows))
    for name in list(df.columns):
        column = df[name]
        lookup = (remap or {}).get(name)
        array = column.array
        if lookup is not None:
            values = column.to_numpy(dtype=np.int64)
            out[name] = take(values, rows, lookup) if is_spilled(array) else lookup[values[rows]]
        elif is_spilled(array) and isinstance(column.dtype, pd.Int64Dtype | pd.BooleanDtype):
            data, mask = take(array._data, rows, mapped=big), take(array._mask, rows, mapped=big)
            out[name] = type(array)(data, mask)
        elif isinstance(column.dtype, pd.CategoricalDtype) and is_spilled(array.codes):
            codes = take(array.codes, rows, mapped=True)  # a code per row: spilled however small
            out[name] = pd.Categorical.from_codes(codes, dtype=column.dtype, validate=False)
        elif is_spilled(array):
            out[name] = take(column.to_numpy(), rows, mapped=big)
        else:
            out[name] = column.iloc[rows].reset_index(drop=True)
        if consume:
            del df[name], column, array
            release_pages()
    return pd.DataFrame(out, index=pd.RangeIndex(len(rows)), copy=False)


def non_decreasing(values: np.ndarray, block: int = 1 << 18, *, strict: bool = False) -> bool:
    """True when ``values`` (1-D integers) never decrease (with ``strict``: always increase).

    Checked ``block`` values at a time by comparison (no whole-length temporary, no overflow at
    the int64 ends); a spilled column's pages are let go after each block (:mod:`rocroof.spill`).
    """
    last = None
    for lo in range(0, len(values), block):
        part = values[lo : lo + block]
        if strict:
            ordered = (last is None or part[0] > last) and bool((part[1:] > part[:-1]).all())
        else:
            ordered = (last is None or part[0] >= last) and bool((part[1:] >= part[:-1]).all())
        if not ordered:
            return False
        last = part[-1]
        release_pages()
    return True


def dispatch_blocks(rows: np.ndarray, block: int) -> Iterator[tuple[int, int]]:
    """``(lo, hi)`` bounds cutting records of ``rows`` into blocks of about ``block`` records.

    ``rows`` (1-D, each record's dispatch row) must not decrease (:func:`non_decreasing`): each
    block then ends where a dispatch's records end, so that a dispatch's records are in one block
    and a per-block sort or duplicate check is one of the whole.
    """
    n, lo = len(rows), 0
    while lo < n:
        hi = n if lo + block >= n else int(np.searchsorted(rows, rows[lo + block - 1], side="right"))
        yield lo, hi
        lo = hi


def stack_frames(chunks: list[pd.DataFrame]) -> pd.DataFrame:
    """Frames with the same columns one after the other, with a fresh index.

    Built a column at a time, each column's parts released once it is built (``chunks`` is
    emptied): the memory of the chunks plus one column, not of two whole copies.
    """
    if not chunks:
        return pd.DataFrame()
    if len(chunks) == 1:
        only = chunks.pop()
        return only.reset_index(drop=True)
    columns = list(chunks[0].columns)
    parts = {c: [chunk[c] for chunk in chunks] for c in columns}
    chunks.clear()
    out = {c: pd.concat(parts.pop(c), ignore_index=True) for c in columns}
    return pd.DataFrame(out, copy=False)


def per_distinct(values: Any, fn: Callable[[Any], Any], dtype: Any = object) -> np.ndarray:
    """``fn`` of each of ``values`` (1-D), called once per distinct value: an array of ``dtype``, one entry per value.

    Missing values (None, NaN) are one distinct value, given to ``fn`` as the first of them met.
    For text that repeats (kernel names, op lists, node names over 10^6 rows): a few hundred calls.
    """
    codes, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    results = [fn(u) for u in uniques]
    if np.dtype(dtype) == object:  # an entry per value even where fn gives sequences
        table: np.ndarray = np.array([*results, None], dtype=object)[:-1]
    else:
        table = np.array(results, dtype=dtype)
    out: np.ndarray = table[codes]
    return out


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a numeric array, sorted (``np.unique`` without its slow hash path)."""
    if not len(values):
        return np.asarray(values)
    ordered = np.sort(values)
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


def match_rows(table: list[np.ndarray], query: list[np.ndarray]) -> np.ndarray:
    """For each query key, the first row of ``table`` with the same key; -1 where none has it.

    Keys are tuples of int64 columns (``table`` and ``query`` hold the same number of columns,
    each of their own length). A sort-based join, O((T + Q) log(T + Q)), without Python objects
    per row: the columns are ranked together so that a key becomes one int64.

    Args:
        table: the key columns of the rows to find.
        query: the key columns of the rows to look up.

    Returns:
        An int64 array of ``table`` positions, one per query row.
    """
    n_table = len(table[0]) if table else 0
    n_query = len(query[0]) if query else 0
    if not n_table or not n_query:
        return np.full(n_query, -1, dtype=np.int64)
    if len(table) > 1:
        firsts_t, firsts_q = table[0], query[0]
        values = distinct(firsts_t)
        if len(values) == 1:  # one process (the usual case): its rows are all rows, no copies
            return np.where(firsts_q == values[0], match_rows(table[1:], query[1:]), -1)
        if len(values) <= 64:  # a few processes: look up the other columns per value of the first
            out = np.full(n_query, -1, dtype=np.int64)
            for v in values.tolist():
                t_sel = np.flatnonzero(firsts_t == v)
                q_sel = np.flatnonzero(firsts_q == v)
                if len(q_sel):
                    hit = match_rows([c[t_sel] for c in table[1:]], [c[q_sel] for c in query[1:]])
                    out[q_sel] = np.where(hit >= 0, t_sel[np.clip(hit, 0, None)], -1)
            return out
        key_t = np.zeros(n_table, dtype=np.int64)
        key_q = np.zeros(n_query, dtype=np.int64)
        for col_t, col_q in zip(table, query, strict=True):
            # densify the key so far, then append this column's rank: both stay below (T + Q) ** 2
            _, dense = np.unique(np.concatenate([key_t, key_q]), return_inverse=True)
            values, rank = np.unique(np.concatenate([col_t, col_q]), return_inverse=True)
            combined = dense.reshape(-1).astype(np.int64) * len(values) + rank.reshape(-1)
            key_t, key_q = combined[:n_table], combined[n_table:]
    else:
        key_t, key_q = table[0], query[0]
    order = np.argsort(key_t, kind="stable")
    sorted_keys = key_t[order]
    firsts = np.ones(len(order), dtype=bool)
    firsts[1:] = sorted_keys[1:] != sorted_keys[:-1]
    if not firsts.all():  # repeated keys: the first row of each (the whole arrays otherwise, not copies)
        order, sorted_keys = order[firsts], sorted_keys[firsts]
    del firsts
    at = np.searchsorted(sorted_keys, key_q)
    found = at < len(sorted_keys)
    found[found] = sorted_keys[at[found]] == key_q[found]
    del sorted_keys
    np.clip(at, 0, len(order) - 1, out=at)
    out = order[at]
    del order, at
    out[~found] = -1
    return out.astype(np.int64, copy=False)


class KeyIndex:
    """:func:`match_rows` with the table sorted once, for lookups a chunk at a time.

    Counter files repeat a dispatch's key on consecutive rows (one row per counter): a query's
    runs of equal keys are looked up once and the answer repeated. Keys of two columns whose
    first column has at most 64 distinct values (process ids) get one sorted index per value;
    other multi-column keys fall back to :func:`match_rows` per query.
    """

    def __init__(self, table: list[np.ndarray]) -> None:
        self._table = table
        self._n = len(table[0]) if table else 0
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None
        self._parts: dict[int, tuple[np.ndarray, KeyIndex]] | None = None
        if not self._n:
            return
        if len(table) == 1:
            order = np.argsort(table[0], kind="stable")
            keys = table[0][order]
            firsts = np.ones(len(order), dtype=bool)
            firsts[1:] = keys[1:] != keys[:-1]
            self._sorted = (keys[firsts], order[firsts])
        elif len(table) == 2:
            values = distinct(table[0])
            if len(values) <= 64:
                self._parts = {}
                for v in values.tolist():
                    rows = np.flatnonzero(table[0] == v)
                    self._parts[int(v)] = (rows, KeyIndex([table[1][rows]]))

    def find(self, query: list[np.ndarray]) -> np.ndarray:
        """For each query key, the first table row with that key; -1 where none has it."""
        n_query = len(query[0]) if query else 0
        if not self._n or not n_query:
            return np.full(n_query, -1, dtype=np.int64)
        heads = np.ones(n_query, dtype=bool)
        same = np.ones(n_query - 1, dtype=bool)
        for col in query:
            same &= col[1:] == col[:-1]
        heads[1:] = ~same
        if not same.any():
            return self._find(query)
        starts = np.flatnonzero(heads)
        found = self._find([col[starts] for col in query])
        return np.repeat(found, np.diff(np.append(starts, n_query)))

    def _find(self, query: list[np.ndarray]) -> np.ndarray:
        if self._sorted is not None:
            keys, order = self._sorted
            at = np.searchsorted(keys, query[0])
            hit = at < len(keys)
            hit[hit] = keys[at[hit]] == query[0][hit]
            return np.where(hit, order[np.clip(at, 0, len(order) - 1)], -1).astype(np.int64)
        if self._parts is not None:
            out = np.full(len(query[0]), -1, dtype=np.int64)
            for v, (rows, index) in self._parts.items():
                sel = np.flatnonzero(query[0] == v)
                if len(sel):
                    hit = index.find([query[1][sel]])
                    out[sel] = np.where(hit >= 0, rows[np.clip(hit, 0, None)], -1)
            return out
        return match_rows(self._table, query)


#: The per-row frames of a run built a window at a time (``RunFrames.windows`` of
#: :mod:`rocroof.ingest.pipeline`): each window holds these; the run's other frames are run-level.
WINDOW_FRAMES = (
    "dispatch",
    "counter_value",
    "counter_instance",
    "dram_traffic",
    "marker_range",
    "op_invocation",
    "op_node",
    "op_operand",
)


@dataclass
class PassData:
    """One profiled execution (application run) of the command.

    Attributes:
        kind: ``trace`` (timings only), ``counter`` (counters, serialised kernels) or
            ``merged`` (counters of several passes already merged by the tool that wrote them).
        label: a short name, e.g. ``pass_1`` or ``pmc_perf_3.csv``.
        source: the file or directory the pass was read from.
        dispatches: :data:`DISPATCH_COLUMNS`.
        counters: :data:`COUNTER_COLUMNS`.
        instances: :data:`INSTANCE_COLUMNS`.
        markers: :data:`MARKER_COLUMNS`.
        launches: :data:`LAUNCH_COLUMNS`.
        requested_counters: counters the pass asked for, when the capture says so.
        timestamps_exact: False when the source rounded timestamps (durations unknown).
        timestamps_note: why timestamps are not exact.
        notes: findings of the reader about this pass (stored with the run).
        region_method: how the profiler recorded ``dispatches.region``: ``kernel_rename``
            (rocprofv3 ``--kernel-rename``) or ``nvtx_stack`` (Nsight Compute's NVTX stack per kernel).
    """

    kind: Literal["trace", "counter", "merged"]
    label: str
    source: str
    dispatches: pd.DataFrame
    counters: pd.DataFrame = field(default_factory=lambda: empty_frame(COUNTER_COLUMNS))
    instances: pd.DataFrame = field(default_factory=lambda: empty_frame(INSTANCE_COLUMNS))
    markers: pd.DataFrame = field(default_factory=lambda: empty_frame(MARKER_COLUMNS))
    launches: pd.DataFrame = field(default_factory=lambda: empty_frame(LAUNCH_COLUMNS))
    requested_counters: tuple[str, ...] | None = None
    timestamps_exact: bool = True
    timestamps_note: str | None = None
    notes: list[Note] = field(default_factory=list)
    region_method: str = "kernel_rename"


@dataclass
class OpMetadata:
    """ggml op metadata of one process (the fork's ``GGML_ROOFLINE_OUT`` schema or our sidecar).

    Attributes:
        ops: one row per op invocation (columns: see :mod:`rocroof.capture.readers.ggml_meta`).
        nodes: one row per graph node of a fused group (node_index 0 is the head).
        operands: one row per source/destination tensor of each node, and per graph input.
        kernels: kernels with their GPU time, when the file came from the fork's profiler.
        device: the ``device`` field (e.g. ``gfx1151``), or None.
        source: the producer named by the file's ``source`` key, or ``ggml-roofline``.
    """

    ops: pd.DataFrame
    nodes: pd.DataFrame
    operands: pd.DataFrame
    kernels: pd.DataFrame
    device: str | None
    source: str


@dataclass
class Capture:
    """Everything read from one capture: run metadata, agents, passes, op metadata, notes.

    Attributes:
        source_format: the detected format (``rocprofv3-csv``, ``rocpd``, ``rocprof-compute``,
            ``ggml-roofline-json``...).
        source_paths: the files that were read.
        profiler: the profiler that produced the data (``rocprofv3``, ``rocprof-compute``...).
        profiler_version: its version, when recorded.
        command: the profiled application command line, when recorded.
        host: the host name, when recorded (scrub before publishing captures).
        agents: :data:`AGENT_COLUMNS`.
        passes: the passes, in the order they ran.
        op_metadata: ggml op metadata, when present.
        op_metadata_file: the file ``op_metadata`` was read from, or None.
        op_metadata_attached: True when the user named that file (``--attach``, or the file is the
            capture itself); False when it was found beside the capture's files. Op metadata of
            another run is refused when named and left out with a warning when found
            (:func:`rocroof.ingest.pipeline.build_run`).
        fused_groups: ``{invocation: (op_list, node_names)}`` from ``ggml-fused:`` lines.
        notes: findings to store with the run.
        sysinfo: free-form key/values about the system (e.g. rocprof-compute ``sysinfo.csv``).
        dram_peak_gbps: a measured or recorded DRAM bandwidth ceiling in GB/s (1e9 B/s).
        dram_peak_source: where that ceiling came from.
        dram_peak_rule: what kind of ceiling it is: ``probe`` (measured by rocroof's probe),
            ``roofline_csv`` (rocprofiler-compute's benchmark) or ``capture`` (a bandwidth the
            profiler recorded); see :data:`rocroof.analysis.peaks.DRAM_RULES`.
        content_sha256: hash of the raw input files, to refuse double ingests (a property:
            :func:`rocroof.capture.readers.read_capture` computes it on a second thread while the
            capture is processed; reading it waits for that).
        files_read: the files that were read (what the hash covers).
        measured_ceilings: empirical ceilings the capture carries (a
            :class:`rocroof.analysis.peaks.Ceilings` read from rocprofiler-compute's ``roofline.csv``:
            compute peaks, L2/L1/LDS bandwidth), preferred to the peaks table's; None without.
        counter_sample: the counter pass's sample as ``rocroof collect`` planned it (the manifest's
            ``sample``: ``spec``, ``description``, ``evaluations``, ``selected``, ``windows``,
            ``launches``, ``kernels``); None when every kernel was counted.
    """

    source_format: str
    source_paths: list[str]
    profiler: str
    passes: list[PassData]
    agents: pd.DataFrame = field(default_factory=lambda: empty_frame(AGENT_COLUMNS))
    profiler_version: str | None = None
    command: str | None = None
    host: str | None = None
    op_metadata: OpMetadata | None = None
    op_metadata_file: str | None = None
    op_metadata_attached: bool = False
    fused_groups: dict[int, tuple[str, list[str]]] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    sysinfo: dict[str, str] = field(default_factory=dict)
    dram_peak_gbps: float | None = None
    dram_peak_source: str | None = None
    dram_peak_rule: str | None = None
    measured_ceilings: Any = None
    files_read: list[str] = field(default_factory=list)
    counter_sample: dict[str, object] | None = None
    _content_sha256: str = field(default="", repr=False)
    _hash_job: Future[str] | None = field(default=None, repr=False, compare=False)

    @property
    def content_sha256(self) -> str:
        """SHA-256 (hex) of the raw input files; waits for the hash when it is still being computed."""
        if self._hash_job is not None:
            job, self._hash_job = self._hash_job, None
            self._content_sha256 = job.result()
        return self._content_sha256

    @content_sha256.setter
    def content_sha256(self, value: str) -> None:
        self._hash_job = None
        self._content_sha256 = value

    def take_pending_hash(self) -> Future[str] | None:
        """The hash of the input files while it is still being computed, taken from the capture; else None.

        Afterwards :attr:`content_sha256` reads ``""`` (unknown): the taker waits for the job when it
        needs the hash (a windowed build hands it to the store, which claims it between windows).
        """
        job = self._hash_job
        if job is None or job.done():
            return None
        self._hash_job, self._content_sha256 = None, ""
        return job


def merge_passes(parts: list[PassData], label: str, source: str) -> PassData:
    """Several processes' dispatches of one pass (one application run) as one pass.

    Dispatch rows follow each other in ``parts`` order; counter and instance rows are shifted to
    them. The pass is a counter pass when any part is; its timestamps are exact when every
    part's are.
    """
    if len(parts) == 1:
        return parts[0]
    offset = 0
    counters, instances = [], []
    for part in parts:
        c = part.counters.copy()
        c["row"] += offset
        counters.append(c)
        inst = part.instances.copy()
        inst["row"] += offset
        instances.append(inst)
        offset += len(part.dispatches)
    return PassData(
        kind="counter" if any(p.kind == "counter" for p in parts) else "trace",
        label=label,
        source=source,
        dispatches=pd.concat([p.dispatches for p in parts], ignore_index=True),
        counters=pd.concat(counters, ignore_index=True),
        instances=pd.concat(instances, ignore_index=True),
        markers=pd.concat([p.markers for p in parts], ignore_index=True),
        launches=pd.concat([p.launches for p in parts], ignore_index=True),
        timestamps_exact=all(p.timestamps_exact for p in parts),
        notes=[n for p in parts for n in p.notes],
    )
