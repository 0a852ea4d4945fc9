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

Every join also matches ``guid``: ids restart in each process's tables, so in a merged
database only (guid, id) is unique. Files are opened read-only and ``immutable`` (no lock or
``-shm`` files needed) unless a non-empty ``-wal`` file holds rows not yet checkpointed. Every
failure (not SQLite, not rocpd, damaged, a value of the wrong type, marker ``extdata`` that is
not JSON) is a :class:`~rocroof.errors.ParseError` naming the file.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
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

#: ``_<uuid>`` with ``-`` replaced by ``_`` (``generateRocpd.cpp`` ``replace_uuid``).
_UUID_SUFFIX = re.compile(r"_[0-9A-Fa-f]{8}_[0-9A-Fa-f]{4}_[0-9A-Fa-f]{4}_[0-9A-Fa-f]{4}_[0-9A-Fa-f]{12}$")

#: How far :func:`is_rocpd` looks for rocpd table names in a file whose schema SQLite cannot read.
_PROBE_BYTES = 8 << 20

_DAMAGED = "the file may be truncated, damaged or still being written"


def is_rocpd(path: Path) -> bool:
    """True when ``path`` is an SQLite file with a rocpd kernel dispatch view or table.

    A file with the SQLite header whose schema cannot be read (truncated, damaged) still counts
    when its first pages name a rocpd kernel dispatch table, so that reading it reports the
    damage instead of an unknown format.
    """
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                return False
        conn = _connect(path)
    except (OSError, sqlite3.Error):
        return False
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except (sqlite3.Error, UnicodeDecodeError, MemoryError):  # damaged (MemoryError: SQLITE_NOMEM)
        return _names_rocpd_table(path)
    finally:
        conn.close()
    return any(_logical_name(n) == "rocpd_kernel_dispatch" for n in names)


def _names_rocpd_table(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(_PROBE_BYTES)
    except OSError:
        return False
    return b"rocpd_kernel_dispatch" in head


def _reason(exc: BaseException) -> str:
    """What went wrong, in words (sqlite3 reports SQLITE_NOMEM as a MemoryError without a message)."""
    if isinstance(exc, MemoryError):
        return "SQLite ran out of memory: a damaged page can claim a record of any size"
    return str(exc)


def _logical_name(name: str) -> str:
    """``rocpd_x_<uuid>`` -> ``rocpd_x``; other names unchanged."""
    m = _UUID_SUFFIX.search(name)
    return name[: m.start()] if m else name


def _connect(path: Path) -> sqlite3.Connection:
    # immutable=1 reads a file in a read-only place without lock or -shm files, but ignores a
    # write-ahead log: when a non-empty "-wal" file is present its pages are needed.
    wal = path.with_name(path.name + "-wal")
    try:
        immutable = not (wal.is_file() and wal.stat().st_size > 0)
    except OSError:
        immutable = True
    uri = f"file:{path.resolve().as_posix()}?mode=ro" + ("&immutable=1" if immutable else "")
    return sqlite3.connect(uri, uri=True)


@contextmanager
def _open(path: Path) -> Iterator[tuple[sqlite3.Connection, dict[str, str]]]:
    """A read-only connection and the resolved table sources; ParseError when unreadable."""
    try:
        conn = _connect(path)
    except sqlite3.Error as exc:
        raise ParseError(path, f"cannot open as an SQLite database ({exc})") from exc
    try:
        try:
            src = _resolve(conn, path)
        except (sqlite3.Error, UnicodeDecodeError, MemoryError) as exc:
            raise ParseError(path, f"cannot read the rocpd database ({_reason(exc)}); {_DAMAGED}") from exc
        yield conn, src
    finally:
        conn.close()


def _resolve(conn: sqlite3.Connection, path: Path) -> dict[str, str]:
    """Map each logical rocpd table to a FROM-clause source (view, table, or UNION ALL)."""
    rows = conn.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table','view')").fetchall()
    names = {str(name) for name, _ in rows}
    out: dict[str, str] = {}
    for logical in _TABLES:
        if logical in names:
            out[logical] = f'"{logical}"'
            continue
        suffixed = sorted(n for n in names if n != logical and _logical_name(n) == logical)
        if suffixed:
            out[logical] = "(" + " UNION ALL ".join(f'SELECT * FROM "{n}"' for n in suffixed) + ")"
    if "rocpd_kernel_dispatch" not in out:
        raise ParseError(path, "not a rocpd database (no rocpd_kernel_dispatch view or table)")
    return out


#: Rows converted per step: a large result (8 counter rows per dispatch...) is turned into columns
#: chunk by chunk, so that its Python row tuples never all exist at once.
FETCH_ROWS = 200_000


def _query(conn: sqlite3.Connection, path: Path, sql: str) -> pd.DataFrame:
    try:
        parts = [_shared_strings(part) for part in pd.read_sql_query(sql, conn, chunksize=FETCH_ROWS)]
        if len(parts) == 1:
            return parts[0]
        if all(p.dtypes.equals(parts[0].dtypes) for p in parts):
            return pd.concat(parts, ignore_index=True)
        # the chunks typed a column differently (NULLs or mixed values in part of it): read the result
        # whole, so that every column gets the type of one read
        del parts
        return _shared_strings(pd.read_sql_query(sql, conn))
    except (sqlite3.Error, pd.errors.DatabaseError, UnicodeDecodeError, MemoryError) as exc:
        # pandas wraps the sqlite3 error in a message that repeats the whole statement
        cause = exc.__cause__ if isinstance(exc.__cause__, sqlite3.Error) else exc
        raise ParseError(
            path, f"rocpd query failed ({_reason(cause)}); {_DAMAGED}, or not a rocpd schema 3 database"
        ) from exc


def _shared_strings(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each repeated value of a text column held once (same values and dtypes).

    sqlite3 returns a new string object per row: a guid or counter name repeated on millions of
    rows would take that many copies.
    """
    for name in df.columns:
        col = df[name]
        if len(col) < 2 or col.dtype == object or not pd.api.types.is_string_dtype(col.dtype):
            continue
        codes = col.astype("category")
        if 2 * len(codes.cat.categories) < len(col):
            df[name] = codes.astype(col.dtype)
    return df


def _conform(df: pd.DataFrame, columns: dict[str, str], path: Path, what: str) -> pd.DataFrame:
    """:func:`conform`, with a ParseError naming the column when a value has the wrong type."""
    try:
        with np.errstate(invalid="ignore", over="ignore"):  # 1e308 in an integer column: no stray warning
            return conform(df, columns)
    except (ValueError, TypeError, OverflowError):
        for name, dtype in columns.items():
            if name not in df.columns or dtype == "object":
                continue
            try:
                with np.errstate(invalid="ignore", over="ignore"):
                    df[name].astype(dtype)
            except (ValueError, TypeError, OverflowError) as exc:
                bad = next((v for v in df[name] if not _castable(v, dtype)), None)
                kind = "a number" if dtype.startswith("float") else "an integer"
                raise ParseError(path, f"{what}: {name} holds {bad!r}, not {kind}") from exc
        raise


def _castable(value: object, dtype: str) -> bool:
    try:
        with np.errstate(invalid="ignore", over="ignore"):
            pd.Series([value]).astype(dtype)
    except (ValueError, TypeError, OverflowError):
        return False
    return True


def _message(path: Path, table: str, row_id: object, event_id: object, extdata: object) -> str | None:
    """The ``$.message`` of a marker event's ``extdata`` (None when absent)."""
    if extdata is None or (isinstance(extdata, float) and np.isnan(extdata)):
        return None
    if isinstance(extdata, bytes):
        try:
            extdata = extdata.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(path, f"rocpd_event id {event_id} ({table} id {row_id}): extdata is not UTF-8") from exc
    text = str(extdata)
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            path, f"rocpd_event id {event_id} ({table} id {row_id}): extdata is not valid JSON ({exc.msg})"
        ) from exc
    except RecursionError as exc:  # json.loads recurses once per nesting level
        raise ParseError(
            path, f"rocpd_event id {event_id} ({table} id {row_id}): extdata is not valid JSON (nested too deeply)"
        ) from exc
    msg = data.get("message") if isinstance(data, dict) else None
    return None if msg is None else str(msg)


def read_metadata(path: Path) -> dict[str, str]:
    """Run-level facts of a rocpd database: command, host, schema version, profiler.

    Returns:
        ``rocpd_<tag>`` for each ``rocpd_metadata`` row, plus ``command`` (the first process's
        command line) and ``host`` (the node's host name) when recorded.

    Raises:
        ParseError: not a readable rocpd database.
    """
    with _open(path) as (conn, src):
        try:
            meta: dict[str, str] = {}
            if "rocpd_metadata" in src:
                for tag, value in conn.execute(f"SELECT tag, value FROM {src['rocpd_metadata']} ORDER BY id"):
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
        except (sqlite3.Error, UnicodeDecodeError, MemoryError) as exc:
            raise ParseError(path, f"rocpd query failed ({_reason(exc)}); {_DAMAGED}") from exc


def _int_or_none(value: object) -> int | None:
    """An integer extdata field, or None (bools, strings, floats with a fraction are not counts)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def read_agents(path: Path) -> pd.DataFrame:
    """GPU and CPU agents of a rocpd database as :data:`~rocroof.records.AGENT_COLUMNS`.

    ``agent_label`` is the ``rocpd_info_agent.id`` that dispatches reference. ``cu_count``,
    ``simd_count``, ``num_xcc`` and ``wave_size`` come from the agent's ``extdata`` JSON when it
    holds them as integers (``wave_front_size`` for the wave size).

    Raises:
        ParseError: not a readable rocpd database.
    """
    with _open(path) as (conn, src):
        if "rocpd_info_agent" not in src:
            return empty_frame(AGENT_COLUMNS)
        df = _query(
            conn,
            path,
            f"SELECT id, type, absolute_index, logical_index, name, product_name, extdata "
            f"FROM {src['rocpd_info_agent']} ORDER BY id",
        )
    rows = []
    for rec in df.itertuples(index=False):
        extra: dict[str, object] = {}
        if isinstance(rec.extdata, str | bytes) and rec.extdata:
            try:
                loaded = json.loads(rec.extdata)
                extra = loaded if isinstance(loaded, dict) else {}
            except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
                extra = {}  # agent details are optional: a bad extdata loses them, nothing else
        rows.append(
            {
                "agent_label": None if pd.isna(rec.id) else str(int(rec.id)),
                "node_id": rec.absolute_index,
                "logical_node_id": rec.logical_index,
                "agent_type": rec.type,
                "gfx_arch": rec.name,
                "product_name": rec.product_name,
                "cu_count": _int_or_none(extra.get("cu_count")),
                "simd_count": _int_or_none(extra.get("simd_count")),
                "num_xcc": _int_or_none(extra.get("num_xcc")),
                "wave_size": _int_or_none(extra.get("wave_front_size")),
            }
        )
    return _conform(pd.DataFrame(rows), AGENT_COLUMNS, path, "rocpd_info_agent")


def read_pass(path: Path, label: str, keep_instances: bool = True) -> PassData:
    """Read one rocpd database (one process of one pass) into a :class:`PassData`.

    A database merged from several processes (``rocpd merge``: several table suffixes) is read
    as a whole; rows are told apart by their ``guid``. Dispatches are ordered by process id,
    guid and dispatch id.

    Args:
        path: the ``*_results.db`` file.
        label: the pass label to record.
        keep_instances: also return per-instance counter values (can be large: one row per
            TCC channel per counter per dispatch).

    Returns:
        The pass: ``counter`` kind when it holds counter values, else ``trace``.

    Raises:
        ParseError: not a rocpd database, or a query/JSON decoding failure.
    """
    with _open(path) as (conn, src):
        try:
            return _read_pass(conn, src, path, label, keep_instances)
        except (sqlite3.Error, UnicodeDecodeError, MemoryError) as exc:
            raise ParseError(path, f"rocpd query failed ({_reason(exc)}); {_DAMAGED}") from exc


def _read_pass(conn: sqlite3.Connection, src: dict[str, str], path: Path, label: str, keep_instances: bool) -> PassData:
    kd, ev, st, ks = (
        src["rocpd_kernel_dispatch"],
        src.get("rocpd_event"),
        src.get("rocpd_string"),
        src.get("rocpd_info_kernel_symbol"),
    )
    select = [
        "kd.guid AS guid",
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
            # display_name is the demangled name; an empty one falls back to the symbol
            "COALESCE(NULLIF(ks.display_name, ''), ks.kernel_name) AS kernel_name",
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
    dispatches = _query(
        conn,
        path,
        f"SELECT {', '.join(select)} FROM {kd} kd {' '.join(joins)} ORDER BY kd.pid, kd.guid, kd.id",
    )
    if "region" in dispatches:
        dispatches["region"] = dispatches["region"].where(
            dispatches["region"].map(lambda r: isinstance(r, str) and parse_range(r) is not None), None
        )
    for axis in ("grid", "workgroup"):
        dims = [f"{axis}_{c}" for c in "xyz"]
        dispatches[dims] = _conform(dispatches[dims], dict.fromkeys(dims, "Int64"), path, "rocpd_kernel_dispatch")
        dispatches[f"{axis}_size"] = dispatches[dims[0]] * dispatches[dims[1]] * dispatches[dims[2]]
    dispatches["agent_label"] = dispatches["agent_label"].map(_label)
    # (guid, event id) -> dispatch row: ids restart in every process of a merged database
    keymap = pd.DataFrame(
        {
            "guid": dispatches["guid"].astype(object),
            "event_id": dispatches["event_id"],
            "row": np.arange(len(dispatches), dtype=np.int64),
        }
    )
    keymap["event_id"] = _int_ids(keymap["event_id"], path, "rocpd_kernel_dispatch", "event_id")
    keymap = keymap[keymap["event_id"].notna()].drop_duplicates(["guid", "event_id"])
    dispatch_keys = dispatches[["guid", "correlation_id"]] if "correlation_id" in dispatches else None
    dispatches = _conform(dispatches, DISPATCH_COLUMNS, path, "rocpd_kernel_dispatch")

    counters = empty_frame(COUNTER_COLUMNS)
    instances = empty_frame(INSTANCE_COLUMNS)
    if "rocpd_pmc_event" in src and "rocpd_info_pmc" in src:
        pe, pmc = src["rocpd_pmc_event"], src["rocpd_info_pmc"]
        summed = _query(
            conn,
            path,
            f"SELECT pe.guid AS guid, pe.event_id AS event_id, pmc.name AS counter_name, SUM(pe.value) AS value, "
            f"COUNT(*) AS records FROM {pe} pe JOIN {pmc} pmc ON pmc.id = pe.pmc_id AND pmc.guid = pe.guid "
            f"WHERE pe.event_id IS NOT NULL GROUP BY pe.guid, pe.event_id, pmc.name",
        )
        summed = _with_rows(summed, keymap, path)
        counters = _conform(
            summed.sort_values(["row", "counter_name"], kind="stable"), COUNTER_COLUMNS, path, "rocpd_pmc_event"
        )
        multi = summed.loc[summed["records"] > 1, ["guid", "event_id", "counter_name"]]
        if keep_instances and len(multi):
            inst = _query(
                conn,
                path,
                f"SELECT pe.guid AS guid, pe.event_id AS event_id, pmc.name AS counter_name, pe.value AS value "
                f"FROM {pe} pe JOIN {pmc} pmc ON pmc.id = pe.pmc_id AND pmc.guid = pe.guid "
                f"WHERE pe.event_id IS NOT NULL ORDER BY pe.guid, pe.id",
            )
            inst = _with_rows(inst, keymap, path).merge(multi, on=["guid", "event_id", "counter_name"])
            inst["instance"] = inst.groupby(["row", "counter_name"], sort=False).cumcount()
            inst = inst.sort_values(["row", "counter_name", "instance"], kind="stable")
            instances = _conform(inst, INSTANCE_COLUMNS, path, "rocpd_pmc_event")

    markers = empty_frame(MARKER_COLUMNS)
    launches = empty_frame(LAUNCH_COLUMNS)
    if ev and st and "rocpd_region" in src:
        rg = src["rocpd_region"]
        regions = _query(
            conn,
            path,
            f"SELECT r.guid AS guid, r.id AS id, r.pid AS process_id, r.tid AS thread_id, r.start AS start_ns, "
            f'r."end" AS end_ns, e.id AS event_id, e.stack_id AS correlation_id, e.extdata AS extdata, '
            f"c.string AS category, n.string AS api_name FROM {rg} r "
            f"JOIN {ev} e ON e.id = r.event_id AND e.guid = r.guid "
            f"LEFT JOIN {st} c ON c.id = e.category_id AND c.guid = e.guid "
            f"LEFT JOIN {st} n ON n.id = r.name_id AND n.guid = r.guid "
            f"ORDER BY r.start, r.guid, r.id",
        )
        is_marker = regions["category"].map(lambda c: isinstance(c, str) and c.startswith("MARKER")).astype(bool)
        mk = regions[is_marker].copy()
        mk["message"] = pd.Series(
            [
                _message(path, "rocpd_region", i, e, x)
                for i, e, x in zip(mk["id"], mk["event_id"], mk["extdata"], strict=True)
            ],
            index=mk.index,
            dtype=object,
        )
        mk = mk[mk["message"].notna()].copy()
        mk["kind"] = np.where(mk["start_ns"] == mk["end_ns"], "mark", "range")
        frames = [mk]
        if "rocpd_sample" in src and "rocpd_track" in src:
            samples = _query(
                conn,
                path,
                f"SELECT s.id AS id, t.pid AS process_id, t.tid AS thread_id, s.timestamp AS start_ns, "
                f"s.timestamp AS end_ns, e.id AS event_id, e.stack_id AS correlation_id, e.extdata AS extdata, "
                f"c.string AS category FROM {src['rocpd_sample']} s "
                f"JOIN {ev} e ON e.id = s.event_id AND e.guid = s.guid "
                f"LEFT JOIN {src['rocpd_track']} t ON t.id = s.track_id AND t.guid = s.guid "
                f"LEFT JOIN {st} c ON c.id = e.category_id AND c.guid = e.guid "
                f"ORDER BY s.timestamp, s.guid, s.id",
            )
            keep = samples["category"].map(lambda c: isinstance(c, str) and c.startswith("MARKER")).astype(bool)
            samples = samples[keep].copy()
            samples["message"] = pd.Series(
                [
                    _message(path, "rocpd_sample", i, e, x)
                    for i, e, x in zip(samples["id"], samples["event_id"], samples["extdata"], strict=True)
                ],
                index=samples.index,
                dtype=object,
            )
            samples = samples[samples["message"].notna()].copy()
            samples["kind"] = "mark"
            frames.append(samples)
        frames = [_conform(f, MARKER_COLUMNS, path, "rocpd_region/rocpd_sample") for f in frames if len(f)]
        if frames:
            # by host time; at equal starts the outer (longer) range first
            both = pd.concat(frames, ignore_index=True)
            order = np.lexsort(
                (-both["end_ns"].fillna(0).to_numpy(np.int64), both["start_ns"].fillna(0).to_numpy(np.int64))
            )
            markers = both.iloc[order].reset_index(drop=True)
        if dispatch_keys is not None and len(dispatch_keys):
            wanted = dispatch_keys.assign(
                guid=dispatch_keys["guid"].astype(object),
                correlation_id=_int_ids(dispatch_keys["correlation_id"], path, "rocpd_event", "stack_id"),
            )
            wanted = wanted.dropna().drop_duplicates()
            api = regions[~is_marker].copy()
            api["guid"] = api["guid"].astype(object)
            api["correlation_id"] = _int_ids(api["correlation_id"], path, "rocpd_event", "stack_id")
            api = api[api["correlation_id"].notna()]
            launches = _conform(api.merge(wanted, on=["guid", "correlation_id"]), LAUNCH_COLUMNS, path, "rocpd_region")
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


def _label(agent: object) -> str | None:
    if agent is None or pd.isna(agent):
        return None
    try:
        return str(int(agent))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return str(agent)


def _int_ids(values: pd.Series, path: Path, table: str, column: str) -> pd.Series:
    """``values`` as nullable integers (same index); ParseError naming ``table.column`` otherwise."""
    out = _conform(pd.DataFrame({column: values.to_numpy(dtype=object)}), {column: "Int64"}, path, table)[column]
    return out.set_axis(values.index)


def _with_rows(df: pd.DataFrame, keymap: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Add the dispatch ``row`` of each (guid, event_id); rows of no dispatch are dropped."""
    df = df.assign(
        guid=df["guid"].astype(object), event_id=_int_ids(df["event_id"], path, "rocpd_pmc_event", "event_id")
    )
    return df.merge(keymap, on=["guid", "event_id"], how="inner")
