"""The kernel-property columns of every rocprof generation, told apart from counter columns.

rocprof v1 (``rocprof``), rocprofv2 and rocprofiler-compute write one wide row per dispatch: a
few columns describe the dispatch (its id, kernel, queue, grid, registers, timestamps...) and
every other column is a counter or a derived metric. Readers of those files call
:func:`split_columns` to learn which is which; a column named here is never taken for a counter.

Sources, by generation:

* rocprof v1: ``ROCm/rocprofiler`` ``test/tool/tool.cpp`` (``dump_context_entry``: ``dispatch[N],
  gpu-id(..), queue-id(..), queue-index(..), pid(..), tid(..), grd(..), wgr(..), lds(..), scr(..),
  arch_vgpr(..), accum_vgpr(..), sgpr(..), wave_size(..), sig(0x..), obj(0x..), kernel-name(..),
  time(..)``; ``vgpr, sgpr, fbar`` before ROCm 5.3) and ``bin/tblextr.py`` (``Index``,
  ``KernelName``, ``DispatchNs, BeginNs, EndNs, CompleteNs``, ``DurationNs`` with ``--stats``).
* rocprofv2: the same repository's ``plugin/file/file.cpp`` (``Dispatch_ID, GPU_ID, Queue_ID,
  Queue_Index, PID, TID, GRD, WGR, LDS, SCR, Arch_VGPR, ACCUM_VGPR, SGPR, Wave_Size, SIG, OBJ,
  Kernel_Name, Start_Timestamp, End_Timestamp, Correlation_ID``).
* rocprofiler-compute (Omniperf): ``src/utils/utils.py`` renames the v1/v2 headers (``grd`` ->
  ``Grid_Size``, ``lds`` -> ``LDS_Per_Workgroup``, ``BeginNs`` -> ``Start_Timestamp``...) but
  keeps ``queue-id``, ``pid``, ``tid``, ``wave_size``, ``sig``, ``obj``, ``DispatchNs`` and
  ``CompleteNs``; joining the passes (``join_prof``) suffixes repeated columns ``_1``, ``_2``...
  (``obj_1``, ``wave_size_16``, ``Correlation_ID_3``, ``XCC_Index_2``).

Timestamps: ``BeginNs``/``EndNs`` (renamed ``Start_Timestamp``/``End_Timestamp``) are the
kernel's GPU start and end; ``DispatchNs`` and ``CompleteNs`` are host times taken when the
dispatch was intercepted and when its completion was seen (``src/core/tracker.h``), so they
include queueing and completion latency.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...fileio import check_counter_values, check_times, parse_float, parse_int, parse_str
from ...records import COUNTER_COLUMNS, INSTANCE_COLUMNS, Note, conform, empty_frame

#: Host time when the dispatch was intercepted (rocprof v1 ``DispatchNs``), in ns.
HOST_DISPATCH = "host_dispatch_ns"
#: Host time when the dispatch's completion was seen (rocprof v1 ``CompleteNs``), in ns.
HOST_COMPLETE = "host_complete_ns"

#: Lower-cased column name -> the dispatch field it fills (``records.DISPATCH_COLUMNS`` names, or
#: :data:`HOST_DISPATCH` / :data:`HOST_COMPLETE`), or None for a property rocroof does not keep
#: (hex signal and code-object handles, queue slots, wave size, derived durations).
PROPERTY_COLUMNS: dict[str, str | None] = {
    # rocprof v1
    "index": "dispatch_id",
    "kernelname": "kernel_name",
    "gpu-id": "agent_label",
    "queue-id": "queue_id",
    "queue-index": None,
    "pid": "process_id",
    "tid": "thread_id",
    "grd": "grid_size",
    "wgr": "workgroup_size",
    "lds": "lds_bytes",
    "scr": "scratch_bytes",
    "vgpr": "vgpr_count",
    "arch_vgpr": "vgpr_count",
    "accum_vgpr": "accum_vgpr_count",
    "sgpr": "sgpr_count",
    "fbar": None,
    "wave_size": None,
    "sig": None,
    "obj": None,
    "dispatchns": HOST_DISPATCH,
    "beginns": "start_ns",
    "endns": "end_ns",
    "completens": HOST_COMPLETE,
    "durationns": None,  # EndNs - BeginNs, recomputed from the timestamps
    # rocprofv2 and rocprofiler-compute
    "dispatch_id": "dispatch_id",
    "kernel_name": "kernel_name",
    "gpu_id": "agent_label",
    "queue_id": "queue_id",
    "queue_index": None,
    "process_id": "process_id",
    "thread_id": "thread_id",
    "grid_size": "grid_size",
    "workgroup_size": "workgroup_size",
    "lds_per_workgroup": "lds_bytes",
    "scratch_per_workitem": "scratch_bytes",
    "start_timestamp": "start_ns",
    "begin_timestamp": "start_ns",
    "end_timestamp": "end_ns",
    "correlation_id": "correlation_id",
    "kernel_id": "kernel_id",
    "xcc_index": None,
    "node_id": None,
}

#: Columns of the rocprofiler-compute long form (one row per dispatch and counter).
LONG_FORM_COLUMNS = frozenset({"counter_name", "counter_value"})

_SUFFIXED = re.compile(r"^(?P<base>.+)_(?P<n>\d+)$")
#: A per-instance counter column: ``TCC_EA_WRREQ[12]``.
INSTANCE = re.compile(r"^(?P<name>.+)\[(?P<index>\d+)\]$")


@dataclass
class ColumnSplit:
    """The columns of one header, told apart.

    Attributes:
        properties: ``{dispatch field: the file's column}``, first column per field (a rocprof
            v1 file with both ``vgpr`` and ``arch_vgpr`` has only one of them).
        counters: the counter and derived-metric columns, in file order.
        skipped: recognised property columns rocroof does not keep, and repeated property
            columns of joined passes (``obj_3``, ``wave_size_12``), in file order.
    """

    properties: dict[str, str] = field(default_factory=dict)
    counters: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def property_of(column: str) -> tuple[bool, str | None]:
    """``(is a property column, the field it fills)`` for one column name.

    A name is a property when it is listed in :data:`PROPERTY_COLUMNS` (case-insensitive), or is
    a listed name with a ``_<n>`` suffix (a repeat from a joined pass, which fills nothing).
    Counter names ending in digits (``SQC_DCACHE_REQ_READ_16``) stay counters: their base is
    not a property.

    >>> property_of("BeginNs"), property_of("obj_12"), property_of("SQC_DCACHE_REQ_READ_16")
    ((True, 'start_ns'), (True, None), (False, None))
    """
    key = str(column).strip().lower()
    if key in PROPERTY_COLUMNS:
        return True, PROPERTY_COLUMNS[key]
    m = _SUFFIXED.match(key)
    if m and m.group("base") in PROPERTY_COLUMNS:
        return True, None
    return False, None


def split_columns(columns: Iterable[str], *, long_form: bool = False) -> ColumnSplit:
    """Tell the property columns of a rocprof header from its counter columns.

    Args:
        columns: the header, in file order.
        long_form: the file is rocprofiler-compute's long form, whose ``Counter_Name`` /
            ``Counter_Value`` columns are neither properties nor counters.

    Returns:
        The :class:`ColumnSplit`.
    """
    out = ColumnSplit()
    for col in columns:
        name = str(col)
        is_property, target = property_of(name)
        if long_form and name.strip().lower() in LONG_FORM_COLUMNS:
            continue
        if not is_property:
            out.counters.append(name)
        elif target is None or target in out.properties:
            out.skipped.append(name)
        else:
            out.properties[target] = name
    return out


#: Kernel-descriptor suffixes of kernel names: ``name [clone .kd]`` (rocprof v1, demangled C++),
#: ``name.kd`` (rocprof v1, C and OpenMP symbols), ``name (.kd)`` (rocprofv2).
_KD_SUFFIX = re.compile(r"(?:\s*\[clone \.kd\]|\s*\(\.kd\)|\.kd)\s*$")


def kernel_symbol_name(name: object) -> object:
    """A kernel name without its kernel-descriptor suffix and the quotes rocprof v1 keeps.

    rocprof v1 and v2 name the kernel descriptor symbol; the kernel is the name before it.
    ``results.db`` stores names with their CSV quotes (``'"laplacian_kernel"'``).

    >>> kernel_symbol_name('vecCopy(double*, int) [clone .kd]'), kernel_symbol_name('"f.kd"')
    ('vecCopy(double*, int)', 'f')
    """
    if not isinstance(name, str):
        return name
    text = name.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    return _KD_SUFFIX.sub("", text)


#: Dispatch fields parsed as text (the others are integers).
_TEXT_FIELDS = frozenset({"kernel_name", "agent_label"})
#: Id fields, which some generations may write in hex (``0x...``); counts and times never are.
_ID_FIELDS = frozenset({"dispatch_id", "queue_id", "correlation_id", "kernel_id"})
_HEX = re.compile(r"^\s*0[xX][0-9a-fA-F]{1,16}\s*$")


def _decimal_ids(series: pd.Series) -> pd.Series:
    """Hexadecimal id cells (``0x1f``) as decimal text; other cells unchanged."""
    text = series.astype(object)
    is_hex = text.map(lambda v: isinstance(v, str) and _HEX.match(v) is not None).astype(bool)
    if not bool(is_hex.any()):
        return series
    out = text.copy()
    # ids are unsigned 64-bit; one above the signed range is refused by parse_int, naming the row
    out[is_hex] = [str(int(v, 16)) for v in text[is_hex]]
    return out


def property_frame(path: Path, df: pd.DataFrame, first_row: int, split: ColumnSplit) -> tuple[pd.DataFrame, pd.Series]:
    """The dispatch fields of a rocprof table of text cells.

    Args:
        path: the file, for error messages.
        df: the table (every cell text, as :func:`rocroof.fileio.read_csv` gives it).
        first_row: the file row of ``df.iloc[0]``.
        split: :func:`split_columns` of ``df.columns``.

    Returns:
        ``(frame, exact)``: one row per table row with a column per field of ``split.properties``
        (kernel names without their ``.kd`` suffix; ids written in hex read as ids; host times of
        0, which rocprofv2 writes for "not recorded", as missing), and False where a GPU
        timestamp was rounded in the text.

    Raises:
        ParseError: a cell that is not a number where one is expected, or a time that is negative or
            beyond 2**62 ns (file and row named).
    """
    out: dict[str, pd.Series] = {}
    exact = pd.Series(np.ones(len(df), dtype=bool))
    for target, col in split.properties.items():
        if target in _TEXT_FIELDS:
            values = parse_str(df[col])
            out[target] = values.map(kernel_symbol_name) if target == "kernel_name" else values
            continue
        cells = _decimal_ids(df[col]) if target in _ID_FIELDS else df[col]
        ints, ex = parse_int(path, cells, first_row, col, required=target == "dispatch_id")
        if target in (HOST_DISPATCH, HOST_COMPLETE):
            ints = ints.mask(ints == 0)
        if target in ("start_ns", "end_ns", HOST_DISPATCH, HOST_COMPLETE):
            check_times(path, ints, first_row, col)
        if target in ("start_ns", "end_ns"):
            exact &= ex.to_numpy(dtype=bool)
        out[target] = ints
    return pd.DataFrame(out, index=pd.RangeIndex(len(df))), exact


def wide_counters(
    path: Path, df: pd.DataFrame, columns: list[str], first_row: int = 2
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The counter columns of a wide table (one row per dispatch) as long counter rows.

    ``NAME[i]`` columns are per-instance values (one per TCC channel...); a counter reported
    only per instance also gets its summed value. Empty cells are not collected, not 0.

    Args:
        path: the file, for error messages.
        df: the table of text cells.
        columns: the counter columns (:attr:`ColumnSplit.counters`).
        first_row: the file row of ``df.iloc[0]``.

    Returns:
        ``(counters, instances)`` in :data:`~rocroof.records.COUNTER_COLUMNS` and
        :data:`~rocroof.records.INSTANCE_COLUMNS`; ``row`` is the table row.

    Raises:
        ParseError: a cell that is not a finite number, or a counter value no counter gives
            (negative, beyond 2**64; file and row named).
    """
    summed: list[pd.DataFrame] = []
    inst: list[pd.DataFrame] = []
    rows = np.arange(len(df), dtype=np.int64)
    for col in columns:
        values = parse_float(path, df[col], first_row, str(col))
        check_counter_values(path, values.to_numpy(dtype=np.float64), first_row, str(col))
        m = INSTANCE.match(str(col))
        if m:
            inst.append(
                pd.DataFrame(
                    {"row": rows, "counter_name": m.group("name"), "instance": int(m.group("index")), "value": values}
                )
            )
        else:
            summed.append(pd.DataFrame({"row": rows, "counter_name": str(col).strip(), "value": values}))
    counters = pd.concat(summed, ignore_index=True) if summed else empty_frame(COUNTER_COLUMNS)
    instances = pd.concat(inst, ignore_index=True) if inst else empty_frame(INSTANCE_COLUMNS)
    counters = counters[counters["value"].notna()]
    instances = instances[instances["value"].notna()]
    if len(instances):
        # a counter reported only per instance still gets its summed value
        have = set(counters["counter_name"])
        extra = instances[~instances["counter_name"].isin(have)]
        if len(extra):
            sums = extra.groupby(["row", "counter_name"], as_index=False)["value"].sum()
            counters = pd.concat([counters, sums], ignore_index=True)
    return conform(counters, COUNTER_COLUMNS), conform(instances, INSTANCE_COLUMNS)


def settle_times(path: Path, meta: pd.DataFrame) -> tuple[pd.DataFrame, Note | None]:
    """The GPU start and end of each dispatch, and its host launch time, from :func:`property_frame` columns.

    ``BeginNs``/``EndNs`` (``Start_Timestamp``/``End_Timestamp``) are the GPU times. A file with
    only ``DispatchNs``/``CompleteNs`` (host times taken when the dispatch was intercepted and when
    its completion was seen, ``src/core/tracker.h``) gives start and end from those: durations that
    are upper bounds, with a warning. ``DispatchNs`` is also the host time of the launch on the
    dispatch's ``tid`` (``launch_ns``). The host columns are dropped.

    Returns:
        ``(meta, note)``: the frame, and the warning when durations are upper bounds.
    """
    note = None
    has_gpu_times = "start_ns" in meta and bool(meta["start_ns"].notna().any())
    has_host_times = HOST_DISPATCH in meta and HOST_COMPLETE in meta and bool(meta[HOST_DISPATCH].notna().any())
    if not has_gpu_times and has_host_times:
        meta["start_ns"], meta["end_ns"] = meta[HOST_DISPATCH], meta[HOST_COMPLETE]
        note = Note(
            "warning",
            "duration-upper-bound",
            f"{path.name} has only DispatchNs/CompleteNs (host times around each dispatch): durations are upper "
            "bounds, they include queueing and completion latency",
        )
    if HOST_DISPATCH in meta:
        meta["launch_ns"] = meta[HOST_DISPATCH]
    return meta.drop(columns=[c for c in (HOST_DISPATCH, HOST_COMPLETE) if c in meta]), note
