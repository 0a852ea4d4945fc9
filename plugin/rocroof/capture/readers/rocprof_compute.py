"""Reader for rocprofiler-compute (Omniperf) workload directories.

Layout (rocprofiler-compute ``docs/how-to/profile/mode.rst`` and the workloads under
``tests/workloads/vcopy/`` in rocm-systems ``1b1610f``):

* ``pmc_perf_<N>.csv`` and ``SQ_*.csv``: one file per counter pass (each pass is a separate
  application run), wide: one row per dispatch, one column per counter; ``NAME[i]`` columns are
  per-instance values, ``NAME_sum`` the reduced sum.
* ``pmc_perf.csv``: the passes merged by rocprofiler-compute. Either wide (as above, with
  repeated ``Wave_Size_<k>``/``Correlation_ID_<k>``/``XCC_Index_<k>`` columns per pass) or, for
  workloads profiled with ``--format-rocprof-output rocpd``, long: one row per
  (dispatch, counter) with ``Counter_Name``/``Counter_Value``, each row carrying the timestamps
  of the pass that measured it.
* ``timestamps.csv``: a kernel-trace-only run (timings without counter serialisation).
* ``perfmon/<pass>.txt``: the counters each pass asked for (``pmc: A B C``).
* ``sysinfo.csv``: one row about the system (``gpu_arch``, ``gpu_model``, ``hbm_bw`` in GB/s...).
* ``roofline.csv``: empirical peaks measured by the roofline micro-benchmark, one row per device
  (column meanings and units: :data:`ROOFLINE_COLUMNS`).

When per-pass files exist they are read and joined across passes by rocroof (the merged
``pmc_perf.csv`` is then ignored); otherwise the merged file is one ``merged`` pass.
"""

from __future__ import annotations

import math
import re
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd

from ...analysis.peaks import MEASURED, Ceiling, Ceilings
from ...errors import ParseError
from ...fileio import (
    check_counter_values,
    column_map,
    logical_name,
    parse_float,
    parse_str,
    pick,
    read_csv,
    read_text,
    require,
)
from ...records import (
    AGENT_COLUMNS,
    COUNTER_COLUMNS,
    DISPATCH_COLUMNS,
    INSTANCE_COLUMNS,
    Note,
    PassData,
    conform,
    empty_frame,
)
from .rocprof_columns import (
    INSTANCE,
    property_frame,
    settle_times,
    split_columns,
    wide_counters,
)


def is_workload(directory: Path) -> bool:
    """True when ``directory`` looks like a rocprofiler-compute workload."""
    names = {logical_name(p) for p in directory.iterdir() if p.is_file()}
    return "sysinfo.csv" in names and any(n == "pmc_perf.csv" or re.fullmatch(r"pmc_perf_\d+\.csv", n) for n in names)


def _find(directory: Path, name: str) -> Path | None:
    for candidate in (directory / name, directory / (name + ".gz")):
        if candidate.is_file():
            return candidate
    return None


#: Omniperf 1.x ``sysinfo.csv`` names -> today's (the workloads of ROCm/rocprofiler-compute
#: ``d5ecf1d`` ``tests/workloads/*/mi100/sysinfo.csv``: ``gpu_soc,numCU,...,name,hbmBW``).
_SYSINFO_V1_NAMES = {
    "gpu_soc": "gpu_arch",
    "name": "gpu_model",
    "numCU": "cu_per_gpu",
    "hbmBW": "hbm_bw",
    "sclk": "max_sclk",
    "mclk": "max_mclk",
    "waveSize": "wave_size",
    "host_name": "hostname",
    "host_rocmver": "rocm_version",
}


def read_sysinfo(directory: Path) -> dict[str, str]:
    """The single row of ``sysinfo.csv`` as ``{column: value}`` (empty values dropped).

    Omniperf 1.x names (``gpu_soc``, ``name``, ``numCU``, ``hbmBW``...) are given today's names
    (``gpu_arch``, ``gpu_model``, ``cu_per_gpu``, ``hbm_bw``...) where the file lacks those.
    """
    path = _find(directory, "sysinfo.csv")
    if path is None:
        return {}
    df = read_csv(path)
    if len(df) == 0:
        raise ParseError(path, "no data row (expected one row describing the system)", 2)
    row = df.iloc[0]
    info = {str(k).strip(): str(v).strip() for k, v in row.items() if str(v).strip() != ""}
    for old, new in _SYSINFO_V1_NAMES.items():
        if old in info and new not in info:
            info[new] = info[old]
    return info


def read_roofline_peak(directory: Path) -> float | None:
    """Empirical HBM bandwidth (GB/s) from ``roofline.csv``, or None when absent.

    Raises:
        ParseError: the file exists but lacks the ``HBMBw`` column or a number in it.
    """
    path = _find(directory, "roofline.csv")
    if path is None:
        return None
    df = read_csv(path)
    cols = column_map(df.columns)
    col = require(path, cols, "measured HBM bandwidth in GB/s", "HBMBw")
    values = parse_float(path, df[col], 2, col, required=True)
    if bool((values <= 0).any()):
        pos = int((values <= 0).to_numpy().nonzero()[0][0])
        raise ParseError(
            path, f"column {col!r} has {values.iloc[pos]:g}; expected a positive bandwidth in GB/s", 2 + pos
        )
    return float(values.max()) if len(values) else None


#: Source string of every ceiling read from ``roofline.csv``.
ROOFLINE_SOURCE = "roofline.csv (measured by rocprofiler-compute)"

#: ``roofline.csv`` columns: ``column -> (Ceilings field or extra key, factor to its unit, unit)``.
#:
#: What the columns are (rocprofiler-compute ``src/utils/benchmark.py``, ``dump_csv`` and the
#: benchmarks above it, rocm-systems commit 01d6c28; before 3.5.0 the same kernels and header in
#: ROCm/rocm-amdgpu-bench ``roofline.cpp``, which wrote ``hbmBwHigh`` and ``MFMAFI8OpsLow``):
#: one row per measured device (``device`` = HIP device id); per test three columns, ``X`` the
#: mean of 100 timed runs, ``XLow``/``XHigh`` that mean -/+ 1.96 stdev / sqrt(runs) (a 95%
#: confidence interval of the mean). Each sample is work / elapsed_ms / 1e6, so bandwidths are
#: GB/s (1e9 B/s), ``*Flops`` GFLOP/s and ``*Ops`` GOP/s (1e9 operations/s). A test the
#: architecture does not support is written as 0 (e.g. ``MALLBw`` on gfx90a); rocroof reads 0 as
#: "not measured". The tests:
#:
#: * ``HBMBw``: a ``dst[i] = src[i]`` copy of doubles, 20 Ki workgroups of 256 per CU (read + write).
#: * ``MALLBw``, ``L2Bw``, ``L1Bw``: repeated reads of a buffer the size of the Infinity Cache
#:   (64 MiB on gfx94x/gfx950), the per-XCD L2 (4 MiB; 8 MiB on gfx90a) or the L1 (16/32 KiB).
#: * ``LDSBw``: a pointer chase in LDS.
#: * ``FP16Flops``, ``FP32Flops``, ``FP64Flops``, ``I8Ops``, ``I32Ops``, ``I64Ops``: a vec4 FMA loop
#:   on the vector ALUs (FMA = 2 ops) (``FP16Flops`` and the integer tests only in newer versions).
#: * ``MFMA<T>Flops`` / ``MFMAI8Ops``: a loop of one 32x32 (F64: 16x16) MFMA instruction per wave,
#:   128 workgroups of 256 threads per CU: F4, F6, F6F4 (gfx950), F8, F16, BF16, F32, F64, I8.
ROOFLINE_COLUMNS: dict[str, tuple[str, float, str]] = {
    "HBMBw": ("dram_gbps", 1.0, "GB/s"),
    "MALLBw": ("llc_gbps", 1.0, "GB/s"),
    "L2Bw": ("l2_gbps", 1.0, "GB/s"),
    "L1Bw": ("l1_gbps", 1.0, "GB/s"),
    "LDSBw": ("lds_gbps", 1.0, "GB/s"),
    "FP32Flops": ("fp32_vector_tflops", 1e-3, "TFLOP/s"),
    "MFMAF16Flops": ("fp16_matrix_tflops", 1e-3, "TFLOP/s"),
    "MFMABF16Flops": ("bf16_matrix_tflops", 1e-3, "TFLOP/s"),
    "FP16Flops": ("fp16_vector_tflops", 1e-3, "TFLOP/s"),
    "FP64Flops": ("fp64_vector_tflops", 1e-3, "TFLOP/s"),
    "MFMAF32Flops": ("fp32_matrix_tflops", 1e-3, "TFLOP/s"),
    "MFMAF64Flops": ("fp64_matrix_tflops", 1e-3, "TFLOP/s"),
    "MFMAF8Flops": ("fp8_matrix_tflops", 1e-3, "TFLOP/s"),
    "MFMAF6Flops": ("fp6_matrix_tflops", 1e-3, "TFLOP/s"),
    "MFMAF4Flops": ("fp4_matrix_tflops", 1e-3, "TFLOP/s"),
    "MFMAF6F4Flops": ("fp6f4_matrix_tflops", 1e-3, "TFLOP/s"),
    "MFMAI8Ops": ("int8_matrix_tops", 1e-3, "TOP/s"),
    "I8Ops": ("int8_vector_tops", 1e-3, "TOP/s"),
    "I32Ops": ("int32_vector_tops", 1e-3, "TOP/s"),
    "I64Ops": ("int64_vector_tops", 1e-3, "TOP/s"),
}
#: Misspelt bound columns of the pre-3.5 benchmark binary (case is ignored anyway).
_ROOFLINE_BOUND_ALIASES = {"MFMAI8OpsLow": ("MFMAFI8OpsLow",)}
#: The keys above that are :class:`Ceilings` fields; the others go to ``Ceilings.extra``.
_CEILING_FIELDS = frozenset(f.name for f in fields(Ceilings)) - {"gpu", "matched_by", "extra"}


def read_roofline_ceilings(path: Path, device: int | str | None = None) -> Ceilings | None:
    """Empirical ceilings from rocprofiler-compute's ``roofline.csv``, in rocroof's units.

    Bandwidths stay GB/s; GFLOP/s and GOP/s become TFLOP/s and TOP/s (/1000). Every value has the
    source :data:`ROOFLINE_SOURCE`, mark ``measured``, and a note naming the column, the device
    and the 95% confidence interval. Fields the file does not measure (cache sizes, CU count, or a
    test written as 0) stay None, so :func:`rocroof.analysis.peaks.combine_ceilings` keeps the datasheet's.

    Args:
        path: a workload directory holding ``roofline.csv`` (or ``roofline.csv.gz``), or the file.
        device: the ``device`` id of the row to read; None reads the first row (the file holds one
            row per measured device; rocprofiler-compute measures the device it profiles).

    Returns:
        The ceilings, or None when ``path`` is a directory without ``roofline.csv``.

    Raises:
        ParseError: no data row, no such device, or a cell that is not a finite number >= 0.
    """
    csv_path = path if path.is_file() else _find(path, "roofline.csv")
    if csv_path is None:
        return None
    df = read_csv(csv_path)
    if not len(df):
        raise ParseError(csv_path, "no data row (expected one row per measured device)", 2)
    cols = column_map(df.columns)
    dev_col = pick(cols, "device")
    row_index = 0
    if device is not None:
        if dev_col is None:
            raise ParseError(csv_path, f"no 'device' column, so device {device} cannot be chosen", 1)
        ids = [str(v).strip() for v in df[dev_col]]
        if str(device).strip() not in ids:
            raise ParseError(csv_path, f"no row for device {device} (devices measured: {', '.join(ids)})")
        row_index = ids.index(str(device).strip())
    row_no = row_index + 2  # the header is row 1
    dev_label = str(df[dev_col].iloc[row_index]).strip() if dev_col is not None else str(row_index)
    named: dict[str, Ceiling] = {}
    extra: dict[str, Ceiling] = {}
    for column, (key, factor, unit) in ROOFLINE_COLUMNS.items():
        col = pick(cols, column)
        if col is None:
            continue
        mean = _roofline_cell(csv_path, df, col, row_index)
        if mean is None or mean == 0:  # 0: the benchmark skipped this test on this architecture
            continue
        bounds = []
        for suffix in ("Low", "High"):
            bcol = pick(cols, column + suffix, *_ROOFLINE_BOUND_ALIASES.get(column + suffix, ()))
            bounds.append(_roofline_cell(csv_path, df, bcol, row_index) if bcol is not None else None)
        ci = (
            f"95% confidence interval {bounds[0] * factor:,.6g}-{bounds[1] * factor:,.6g} {unit}"
            if bounds[0] is not None and bounds[1] is not None
            else "confidence interval not recorded"
        )
        ceiling = Ceiling(
            value=mean * factor,
            unit=unit,
            source=ROOFLINE_SOURCE,
            mark=MEASURED,
            note=f"{csv_path.name} row {row_no} (device {dev_label}) column {col}: mean of the benchmark's runs, {ci}",
        )
        if key in _CEILING_FIELDS:
            named[key] = ceiling
        else:
            extra[key] = ceiling
    return Ceilings(gpu=f"roofline.csv device {dev_label}", matched_by=MEASURED, extra=extra, **named)


def _roofline_cell(path: Path, df: pd.DataFrame, col: str, row_index: int) -> float | None:
    values = parse_float(path, df[col], 2, col)
    value = float(values.iloc[row_index])
    if math.isnan(value):
        return None
    if value < 0:
        raise ParseError(path, f"column {col!r} holds {value:g}; expected a rate >= 0", row_index + 2)
    return value


def _requested(directory: Path, stem: str) -> tuple[str, ...] | None:
    path = _find(directory / "perfmon", stem + ".txt")
    if path is None:
        return None
    names: list[str] = []
    for line in read_text(path, limit_bytes=4 << 20).splitlines():
        if line.strip().lower().startswith("pmc:"):
            names += line.split(":", 1)[1].split()
    return tuple(names)


def _meta_frame(path: Path, df: pd.DataFrame, first: int) -> tuple[pd.DataFrame, pd.Series, Note | None]:
    """The dispatch columns of a workload CSV (every rocprof generation's names, see rocprof_columns)."""
    split = split_columns(df.columns, long_form=pick(column_map(df.columns), "Counter_Name") is not None)
    for target, what, name in (
        ("dispatch_id", "dispatch id", "Dispatch_ID"),
        ("kernel_name", "kernel name", "Kernel_Name"),
    ):
        if target not in split.properties:
            raise ParseError(path, f"missing column {name!r} ({what}); the header is row 1", 1)
    meta, exact = property_frame(path, df, first, split)
    meta, upper_bound = settle_times(path, meta)
    return meta, exact, upper_bound


def _wide_pass(path: Path, kind: str, label: str, requested: tuple[str, ...] | None) -> PassData:
    df = read_csv(path)
    if not len(df):
        raise ParseError(
            path,
            "no data rows: no dispatch was profiled (a dispatch or kernel filter that matched nothing?) or the file "
            "was cut short; expected one row per kernel dispatch",
            2,
        )
    meta, exact, upper_bound = _meta_frame(path, df, 2)
    counters, instances = wide_counters(path, df, split_columns(df.columns).counters)
    order = np.argsort(meta["dispatch_id"].to_numpy(dtype=np.int64), kind="stable")
    remap = np.empty(len(order), dtype=np.int64)
    remap[order] = np.arange(len(order))
    meta = meta.iloc[order].reset_index(drop=True)
    exact = exact.iloc[order].reset_index(drop=True)
    meta["timestamps_exact"] = pd.array(exact.to_numpy(dtype=bool), dtype="boolean")
    counters["row"] = remap[counters["row"].to_numpy()] if len(counters) else counters["row"]
    instances["row"] = remap[instances["row"].to_numpy()] if len(instances) else instances["row"]
    all_exact = bool(exact.all()) if len(exact) else True
    note = upper_bound.message if upper_bound else None
    notes = [upper_bound] if upper_bound else []
    if not all_exact:
        start_col = pick(column_map(df.columns), "Start_Timestamp")
        example = df[start_col].iloc[0] if start_col else "?"
        note = f"{path.name} rounds kernel timestamps (e.g. {example}), so kernel durations cannot be computed"
    return PassData(
        kind=kind,  # type: ignore[arg-type]
        label=label,
        source=str(path),
        dispatches=conform(meta, DISPATCH_COLUMNS),
        counters=counters,
        instances=instances,
        requested_counters=requested,
        timestamps_exact=all_exact,
        timestamps_note=note,
        notes=notes,
    )


def _long_passes(path: Path, df: pd.DataFrame, requested: tuple[str, ...] | None) -> list[PassData]:
    """Split a long-form ``pmc_perf.csv`` into its passes by each dispatch's distinct start times.

    Each counter pass is a separate application run, so a dispatch appears once per pass with
    that run's timestamps; runs happen one after the other, so ranking a dispatch's distinct
    start times gives the pass.
    """
    cols = column_map(df.columns)
    cname = require(path, cols, "counter name", "Counter_Name")
    cval = require(path, cols, "counter value", "Counter_Value")
    require(path, cols, "kernel start time", "Start_Timestamp")
    meta, exact, _ = _meta_frame(path, df, 2)
    if not bool(exact.all()):
        raise ParseError(path, "timestamps are rounded; cannot separate the counter passes of a long-form file")
    meta["counter_name"] = parse_str(df[cname])
    meta["value"] = parse_float(path, df[cval], 2, cval, required=True)
    check_counter_values(path, meta["value"].to_numpy(dtype=np.float64), 2, cval)  # as the wide form's columns
    if bool(meta["counter_name"].isna().any()):
        pos = int(np.flatnonzero(meta["counter_name"].isna().to_numpy())[0])
        raise ParseError(path, f"column {cname!r} is empty; expected a counter name", pos + 2)
    gpu = meta["agent_label"].fillna("") if "agent_label" in meta else pd.Series([""] * len(meta))
    meta["_key"] = gpu.astype(str) + "/" + meta["dispatch_id"].astype(str)
    starts = meta[["_key", "start_ns"]].drop_duplicates()
    starts["pass_no"] = starts.groupby("_key")["start_ns"].rank(method="dense").astype(int) - 1
    meta = meta.merge(starts, on=["_key", "start_ns"], how="left")
    passes = []
    for pass_no, part in meta.groupby("pass_no", sort=True):
        part = part.sort_values("dispatch_id", kind="stable").reset_index(drop=True)
        disp = part.drop_duplicates("_key").reset_index(drop=True)
        row_of = pd.Series(np.arange(len(disp), dtype=np.int64), index=disp["_key"])
        part["row"] = row_of.reindex(part["_key"]).to_numpy()
        names = part["counter_name"].astype(str)
        m = names.str.extract(INSTANCE)
        is_inst = m["name"].notna()
        instances = pd.DataFrame(
            {
                "row": part.loc[is_inst, "row"],
                "counter_name": m.loc[is_inst, "name"],
                "instance": m.loc[is_inst, "index"].astype(np.int64),
                "value": part.loc[is_inst, "value"],
            }
        )
        counters = part.loc[~is_inst, ["row", "counter_name", "value"]]
        have = set(counters["counter_name"])
        extra = instances[~instances["counter_name"].isin(have)]
        if len(extra):
            counters = pd.concat(
                [counters, extra.groupby(["row", "counter_name"], as_index=False)["value"].sum()], ignore_index=True
            )
        passes.append(
            PassData(
                kind="counter",
                label=f"pass_{int(pass_no) + 1} of {logical_name(path)}",
                source=str(path),
                dispatches=conform(disp, DISPATCH_COLUMNS),
                counters=conform(counters, COUNTER_COLUMNS),
                instances=conform(instances, INSTANCE_COLUMNS),
                requested_counters=None,
            )
        )
    if passes and requested is not None:
        passes[0].requested_counters = requested  # checked against the union, see read_workload
    return passes


def _natural_key(path: Path) -> tuple[int, str]:
    m = re.search(r"_(\d+)\.csv", logical_name(path))
    return (int(m.group(1)) if m else -1, logical_name(path))


def read_workload(directory: Path) -> tuple[list[PassData], dict[str, str], pd.DataFrame, list[Note], float | None]:
    """Read a rocprofiler-compute workload directory.

    Returns:
        ``(passes, sysinfo, agents, notes, roofline_hbm_gbps)``: the passes in run order (the
        trace pass ``timestamps.csv`` first when present), the ``sysinfo.csv`` row, the GPU
        agent(s), notes (e.g. requested counters missing from the output), and the empirical
        HBM bandwidth from ``roofline.csv`` (GB/s) or None.

    Raises:
        ParseError: a file lacks a required column or holds malformed values.
    """
    sysinfo = read_sysinfo(directory)
    notes: list[Note] = []
    files = sorted((p for p in directory.iterdir() if p.is_file()), key=_natural_key)
    per_pass = [p for p in files if re.fullmatch(r"pmc_perf_\d+\.csv", logical_name(p))]
    sq = [p for p in files if re.fullmatch(r"SQ_.*\.csv", logical_name(p))]
    passes: list[PassData] = []
    ts = _find(directory, "timestamps.csv")
    if ts is not None:
        passes.append(_wide_pass(ts, "trace", "timestamps.csv", None))
    if per_pass:
        for path in per_pass + sq:
            stem = logical_name(path)[: -len(".csv")]
            passes.append(_wide_pass(path, "counter", logical_name(path), _requested(directory, stem)))
    else:
        merged = _find(directory, "pmc_perf.csv")
        if merged is None:
            raise ParseError(directory, "no pmc_perf.csv or pmc_perf_<N>.csv (expected a rocprofiler-compute workload)")
        requested = _union_requested(directory)
        df = read_csv(merged)
        if pick(column_map(df.columns), "Counter_Name") is not None:
            passes += _long_passes(merged, df, requested)
        else:
            passes.append(_wide_pass(merged, "merged", "pmc_perf.csv (merged passes)", requested))
            for path in sq:
                stem = logical_name(path)[: -len(".csv")]
                passes.append(_wide_pass(path, "counter", logical_name(path), _requested(directory, stem)))
    notes += _missing_counter_notes(passes)
    agents = _agents(passes, sysinfo)
    return passes, sysinfo, agents, notes, read_roofline_peak(directory)


def _union_requested(directory: Path) -> tuple[str, ...] | None:
    perfmon = directory / "perfmon"
    if not perfmon.is_dir():
        return None
    names: list[str] = []
    for txt in sorted(perfmon.glob("pmc_perf_*.txt")):
        names += list(_requested(directory, txt.stem) or ())
    return tuple(dict.fromkeys(names)) or None


def _present(p: PassData) -> set[str]:
    names = set(p.counters["counter_name"].unique())
    if len(p.instances):
        names |= {f"{n}[{i}]" for n, i in zip(p.instances["counter_name"], p.instances["instance"], strict=True)}
    return names


def _missing_counter_notes(passes: list[PassData]) -> list[Note]:
    notes = []
    union_present: set[str] = set()
    for p in passes:
        union_present |= _present(p)
    for p in passes:
        if not p.requested_counters:
            continue
        have = union_present if "of pmc_perf.csv" in p.label else _present(p)
        missing = [c for c in p.requested_counters if c not in have]
        if missing:
            whole = [c for c in missing if not INSTANCE.match(c)]
            per_instance = [c for c in missing if INSTANCE.match(c)]
            parts = []
            if whole:
                parts.append(", ".join(whole[:8]) + (f" and {len(whole) - 8} more" if len(whole) > 8 else ""))
            if per_instance:
                names = sorted({m.group("name") for c in per_instance if (m := INSTANCE.match(c))})
                parts.append(
                    f"{len(per_instance)} per-instance values of {', '.join(names[:6])}"
                    + ("..." if len(names) > 6 else "")
                )
            # rocprofiler-compute asks for hundreds of counters; rocroof needs few of them, and a missing
            # DRAM counter is reported where the DRAM bytes are computed
            notes.append(
                Note(
                    "info",
                    "missing-counter",
                    f"{p.label}: {len(missing)} requested counter(s) are absent from the output "
                    f"(the profiler could not collect them): {'; '.join(parts)}",
                )
            )
    return notes


def _agents(passes: list[PassData], sysinfo: dict[str, str]) -> pd.DataFrame:
    labels: list[str] = []
    for p in passes:
        labels += [str(v) for v in p.dispatches["agent_label"].dropna().unique()]
    labels = list(dict.fromkeys(labels)) or ["0"]

    def num(key: str) -> int | None:
        try:
            value = int(float(sysinfo[key]))
        except (KeyError, ValueError, OverflowError):  # missing, not a number, inf
            return None
        return value if -(2**63) <= value < 2**63 else None  # agent counts are 64-bit integers

    clock = None
    try:
        clock = float(sysinfo["max_sclk"]) or None
    except (KeyError, ValueError):
        clock = None
    if clock is not None and not math.isfinite(clock):
        clock = None
    rows = [
        {
            "agent_label": label,
            "agent_type": "GPU",
            "gfx_arch": sysinfo.get("gpu_arch"),
            "product_name": sysinfo.get("gpu_model") or sysinfo.get("gpu_series"),
            "cu_count": num("cu_per_gpu"),
            "num_xcc": num("num_xcd"),
            "wave_size": num("wave_size"),
            "max_clock_mhz": clock,
            "pci_device_id": num("gpu_chip_id"),  # the PCI device id (29857 = 0x74a1, an MI300X)
        }
        for label in labels
    ]
    return conform(pd.DataFrame(rows), AGENT_COLUMNS) if rows else empty_frame(AGENT_COLUMNS)
