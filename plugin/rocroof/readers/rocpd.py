"""Reader for rocprofv3 rocpd SQLite databases (``--output-format rocpd``, ROCm >= 7.0).

Schema: rocprofiler-sdk ``source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql`` and
``rocpd_views.sql`` (schema version 3; rocm-systems ``1b1610f``) and the writer
``source/lib/output/generateRocpd.cpp``. Physical tables carry a UUID suffix
(``rocpd_kernel_dispatch_0000ddb5_...``); the unsuffixed ``rocpd_*`` views select from them.
This reader queries the views, and falls back to the suffixed tables (``UNION ALL`` of all
suffixes, as ``rocpd merge`` does) when a database lacks the views.

What is read, and from where:

* dispatches: ``rocpd_kernel_dispatch`` (``id`` = dispatch id) joined to
  ``rocpd_info_kernel_symbol`` (name, registers), ``rocpd_event`` (``stack_id`` = the internal
  correlation id of the launching API call) and ``rocpd_string`` (``region_name_id``: the
  renamed region under ``--kernel-rename``, ``""`` otherwise).
* counters: ``rocpd_pmc_event`` rows (one per hardware instance record) joined to
  ``rocpd_info_pmc`` on ``pmc_id`` and to the dispatch on ``event_id``; summed per dispatch and
  counter (the ``counters_collection`` view does the same ``SUM``); instance values are kept in
  record order.
* roctx ranges: ``rocpd_region`` rows whose event category is ``MARKER_*``; the message is
  ``rocpd_event.extdata`` ``$.message``. Marks (start == end) are ``rocpd_sample`` rows on a
  ``rocpd_track``.
* launches: the non-marker ``rocpd_region`` (HIP API call) whose event ``stack_id`` equals a
  dispatch's.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ParseError
from ..markers import parse_range
from ..records import (
    AGENT_COLUMNS,
    COUNTER_COLUMNS,
    DISPATCH_COLUMNS,
    INSTANCE_COLUMNS,
    LAUNCH_COLUMNS,
    MARKER_COLUMNS,
    PassData,
    conform,
    empty_frame,
)

_TABLES = (
    "rocpd_metadata",
    "rocpd_string",
    "rocpd_info_node",
    "rocpd_info_process",
    "rocpd_info_agent",
    "rocpd_info_pmc",
    "rocpd_info_kernel_symbol",
    "rocpd_track",
    "rocpd_event",
    "rocpd_pmc_event",
    "rocpd_region",
    "rocpd_sample",
    "rocpd_kernel_dispatch",
)


def is_rocpd(path: Path) -> bool:
    """True when ``path`` is an SQLite file with a rocpd kernel dispatch view or table."""
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                return False
        conn = _connect(path)
    except (OSError, sqlite3.Error):
        return False
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return any(n == "rocpd_kernel_dispatch" or n.startswith("rocpd_kernel_dispatch_") for n in names)


def _connect(path: Path) -> sqlite3.Connection:
    uri = f"file:{path.resolve().as_posix()}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def _resolve(conn: sqlite3.Connection, path: Path) -> dict[str, str]:
    """Map each logical rocpd table to a FROM-clause source (view, table, or UNION ALL)."""
    rows = conn.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table','view')").fetchall()
    names = {name for name, _ in rows}
    out: dict[str, str] = {}
    for logical in _TABLES:
        if logical in names:
            out[logical] = f'"{logical}"'
            continue
        suffixed = sorted(n for n in names if n.startswith(logical + "_") and len(n) - len(logical) > 30)
        if logical == "rocpd_info_pmc":
            suffixed = [n for n in suffixed if not n.startswith("rocpd_info_pmc_event")]
        if suffixed:
            out[logical] = "(" + " UNION ALL ".join(f'SELECT * FROM "{n}"' for n in suffixed) + ")"
    if "rocpd_kernel_dispatch" not in out:
        raise ParseError(path, "not a rocpd database (no rocpd_kernel_dispatch view or table)")
    return out


def _query(conn: sqlite3.Connection, path: Path, sql: str) -> pd.DataFrame:
    try:
        return pd.read_sql_query(sql, conn)
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise ParseError(path, f"rocpd query failed ({exc}); is this a complete rocpd database?") from exc


def _message(path: Path, table: str, row_id: object, extdata: object) -> str | None:
    if extdata is None or extdata == "":
        return None
    try:
        data = json.loads(str(extdata))
    except json.JSONDecodeError as exc:
        raise ParseError(path, f"{table} row id {row_id}: extdata is not valid JSON ({exc.msg})") from exc
    msg = data.get("message") if isinstance(data, dict) else None
    return None if msg is None else str(msg)


def read_metadata(path: Path) -> dict[str, str]:
    """Run-level facts of a rocpd database: command, host, schema version, profiler."""
    conn = _connect(path)
    try:
        src = _resolve(conn, path)
        meta: dict[str, str] = {}
        if "rocpd_metadata" in src:
            for tag, value in conn.execute(f"SELECT tag, value FROM {src['rocpd_metadata']}"):
                meta[f"rocpd_{tag}"] = str(value)
        if "rocpd_info_process" in src:
            row = conn.execute(f"SELECT command FROM {src['rocpd_info_process']} LIMIT 1").fetchone()
            if row and row[0]:
                meta["command"] = str(row[0])
        if "rocpd_info_node" in src:
            row = conn.execute(f"SELECT hostname FROM {src['rocpd_info_node']} LIMIT 1").fetchone()
            if row and row[0]:
                meta["host"] = str(row[0])
        return meta
    except sqlite3.Error as exc:
        raise ParseError(path, f"rocpd query failed ({exc})") from exc
    finally:
        conn.close()


def read_agents(path: Path) -> pd.DataFrame:
    """GPU and CPU agents of a rocpd database as :data:`~rocroof.records.AGENT_COLUMNS`.

    ``agent_label`` is the ``rocpd_info_agent.id`` that dispatches reference.
    """
    conn = _connect(path)
    try:
        src = _resolve(conn, path)
        if "rocpd_info_agent" not in src:
            return empty_frame(AGENT_COLUMNS)
        df = _query(
            conn,
            path,
            f"SELECT id, type, absolute_index, logical_index, name, product_name, extdata "
            f"FROM {src['rocpd_info_agent']}",
        )
    finally:
        conn.close()
    rows = []
    for rec in df.itertuples(index=False):
        extra: dict[str, object] = {}
        if rec.extdata:
            try:
                loaded = json.loads(str(rec.extdata))
                extra = loaded if isinstance(loaded, dict) else {}
            except json.JSONDecodeError:
                extra = {}
        rows.append(
            {
                "agent_label": str(rec.id),
                "node_id": rec.absolute_index,
                "logical_node_id": rec.logical_index,
                "agent_type": rec.type,
                "gfx_arch": rec.name,
                "product_name": rec.product_name,
                "cu_count": extra.get("cu_count"),
                "simd_count": extra.get("simd_count"),
                "num_xcc": extra.get("num_xcc"),
                "wave_size": extra.get("wave_front_size"),
            }
        )
    return conform(pd.DataFrame(rows), AGENT_COLUMNS)


def read_pass(path: Path, label: str, keep_instances: bool = True) -> PassData:
    """Read one rocpd database (one process of one pass) into a :class:`PassData`.

    Args:
        path: the ``*_results.db`` file.
        label: the pass label to record.
        keep_instances: also return per-instance counter values (can be large: one row per
            TCC channel per counter per dispatch).

    Raises:
        ParseError: not a rocpd database, or a query/JSON decoding failure.
    """
    conn = _connect(path)
    try:
        src = _resolve(conn, path)
        kd, ev, st, ks = (
            src["rocpd_kernel_dispatch"],
            src.get("rocpd_event"),
            src.get("rocpd_string"),
            src.get("rocpd_info_kernel_symbol"),
        )
        select = [
            "kd.id AS dispatch_id",
            "kd.pid AS process_id",
            "kd.tid AS thread_id",
            "kd.agent_id AS agent_label",
            "kd.kernel_id AS kernel_id",
            "kd.queue_id AS queue_id",
            "kd.stream_id AS stream_id",
            "kd.start AS start_ns",
            'kd."end" AS end_ns',
            "kd.private_segment_size AS scratch_bytes",
            "kd.group_segment_size AS lds_bytes",
            "kd.workgroup_size_x AS workgroup_x",
            "kd.workgroup_size_y AS workgroup_y",
            "kd.workgroup_size_z AS workgroup_z",
            "kd.grid_size_x AS grid_x",
            "kd.grid_size_y AS grid_y",
            "kd.grid_size_z AS grid_z",
            "kd.event_id AS event_id",
        ]
        joins = []
        if ks:
            select += [
                "COALESCE(ks.display_name, ks.kernel_name) AS kernel_name",
                "ks.sgpr_count AS sgpr_count",
                "ks.arch_vgpr_count AS vgpr_count",
                "ks.accum_vgpr_count AS accum_vgpr_count",
            ]
            joins.append(f"LEFT JOIN {ks} ks ON ks.id = kd.kernel_id AND ks.guid = kd.guid")
        if ev:
            select.append("e.stack_id AS correlation_id")
            joins.append(f"LEFT JOIN {ev} e ON e.id = kd.event_id AND e.guid = kd.guid")
        if st:
            select.append("rs.string AS region")
            joins.append(f"LEFT JOIN {st} rs ON rs.id = kd.region_name_id AND rs.guid = kd.guid")
        dispatches = _query(conn, path, f"SELECT {', '.join(select)} FROM {kd} kd {' '.join(joins)} ORDER BY kd.id")
        if "region" in dispatches:
            dispatches["region"] = dispatches["region"].where(
                dispatches["region"].map(lambda r: isinstance(r, str) and parse_range(r) is not None), None
            )
        dispatches["agent_label"] = dispatches["agent_label"].map(lambda a: None if pd.isna(a) else str(int(a)))
        for axis in ("grid", "workgroup"):
            dispatches[f"{axis}_size"] = dispatches[f"{axis}_x"] * dispatches[f"{axis}_y"] * dispatches[f"{axis}_z"]
        event_to_row = pd.Series(np.arange(len(dispatches), dtype=np.int64), index=dispatches["event_id"])
        dispatches = conform(dispatches, DISPATCH_COLUMNS)

        counters = empty_frame(COUNTER_COLUMNS)
        instances = empty_frame(INSTANCE_COLUMNS)
        if "rocpd_pmc_event" in src and "rocpd_info_pmc" in src:
            pe, pmc = src["rocpd_pmc_event"], src["rocpd_info_pmc"]
            summed = _query(
                conn,
                path,
                f"SELECT pe.event_id AS event_id, pmc.name AS counter_name, SUM(pe.value) AS value, "
                f"COUNT(*) AS records FROM {pe} pe JOIN {pmc} pmc ON pmc.id = pe.pmc_id AND pmc.guid = pe.guid "
                f"GROUP BY pe.event_id, pmc.name",
            )
            summed = summed[summed["event_id"].isin(event_to_row.index)]
            summed["row"] = event_to_row.reindex(summed["event_id"]).to_numpy()
            counters = conform(summed, COUNTER_COLUMNS)
            if keep_instances and bool((summed["records"] > 1).any()):
                multi = summed.loc[summed["records"] > 1, ["event_id", "counter_name"]]
                inst = _query(
                    conn,
                    path,
                    f"SELECT pe.event_id AS event_id, pmc.name AS counter_name, pe.value AS value "
                    f"FROM {pe} pe JOIN {pmc} pmc ON pmc.id = pe.pmc_id AND pmc.guid = pe.guid "
                    f"ORDER BY pe.id",
                )
                inst = inst.merge(multi, on=["event_id", "counter_name"])
                inst["instance"] = inst.groupby(["event_id", "counter_name"]).cumcount()
                inst["row"] = event_to_row.reindex(inst["event_id"]).to_numpy()
                instances = conform(inst, INSTANCE_COLUMNS)

        markers = empty_frame(MARKER_COLUMNS)
        launches = empty_frame(LAUNCH_COLUMNS)
        if ev and st and "rocpd_region" in src:
            rg = src["rocpd_region"]
            regions = _query(
                conn,
                path,
                f"SELECT r.id AS id, r.pid AS process_id, r.tid AS thread_id, r.start AS start_ns, "
                f'r."end" AS end_ns, e.stack_id AS correlation_id, e.extdata AS extdata, '
                f"c.string AS category, n.string AS api_name FROM {rg} r "
                f"JOIN {ev} e ON e.id = r.event_id AND e.guid = r.guid "
                f"LEFT JOIN {st} c ON c.id = e.category_id AND c.guid = e.guid "
                f"LEFT JOIN {st} n ON n.id = r.name_id AND n.guid = r.guid",
            )
            is_marker = regions["category"].fillna("").str.startswith("MARKER")
            mk = regions[is_marker].copy()
            mk["message"] = [_message(path, "rocpd_region", i, x) for i, x in zip(mk["id"], mk["extdata"], strict=True)]
            mk = mk[mk["message"].notna()]
            mk["kind"] = np.where(mk["start_ns"] == mk["end_ns"], "mark", "range")
            frames = [mk]
            if "rocpd_sample" in src and "rocpd_track" in src:
                samples = _query(
                    conn,
                    path,
                    f"SELECT s.id AS id, t.pid AS process_id, t.tid AS thread_id, s.timestamp AS start_ns, "
                    f"s.timestamp AS end_ns, e.stack_id AS correlation_id, e.extdata AS extdata, "
                    f"c.string AS category FROM {src['rocpd_sample']} s "
                    f"JOIN {src['rocpd_track']} t ON t.id = s.track_id AND t.guid = s.guid "
                    f"JOIN {ev} e ON e.id = s.event_id AND e.guid = s.guid "
                    f"LEFT JOIN {st} c ON c.id = e.category_id AND c.guid = e.guid",
                )
                samples = samples[samples["category"].fillna("").str.startswith("MARKER")].copy()
                samples["message"] = [
                    _message(path, "rocpd_sample", i, x) for i, x in zip(samples["id"], samples["extdata"], strict=True)
                ]
                samples = samples[samples["message"].notna()]
                samples["kind"] = "mark"
                frames.append(samples)
            markers = conform(pd.concat(frames, ignore_index=True).sort_values("start_ns"), MARKER_COLUMNS)
            wanted = set(dispatches["correlation_id"].dropna().tolist())
            api = regions[~is_marker & regions["correlation_id"].isin(wanted)]
            launches = conform(api, LAUNCH_COLUMNS)
    except sqlite3.Error as exc:
        raise ParseError(path, f"rocpd query failed ({exc})") from exc
    finally:
        conn.close()
    return PassData(
        kind="counter" if len(counters) else "trace",
        label=label,
        source=str(path),
        dispatches=dispatches,
        counters=counters,
        instances=instances,
        markers=markers,
        launches=launches,
    )
