"""Build small rocpd SQLite databases for tests, in the documented schemas 3 and 4.0.

Schema 4.0 (:class:`RocpdV4Builder`) is described where it is defined, below. For schema 3, the
layout follows rocprofiler-sdk ``rocpd_tables.sql`` / ``rocpd_views.sql`` (schema
version 3) as summarised in ``shared/reference/rocprofv3-formats.md`` §3-4: every physical
table is ``<table>_<uuid>`` (a UUIDv7 with ``-`` replaced by ``_``), every row carries the
dashed ``guid``, JSON columns hold text, and unsuffixed ``rocpd_<table>`` views select from
the physical tables. This is our own minimal writer (no rocprofiler code); it writes only the
columns the format defines, so tests can state every value they expect by hand.

Conventions copied from the format description (not from any reader):

* ``rocpd_kernel_dispatch.id`` is the dispatch id; its event's ``stack_id`` (and
  ``parent_stack_id``) is the internal correlation id of the launching HIP API call.
* a HIP API call is a ``rocpd_region`` row (``id`` = its internal correlation id) whose event
  has the same ``stack_id`` and category ``HIP_RUNTIME_API_EXT``.
* a roctx range is a ``rocpd_region`` named ``roctxThreadRangeA`` whose event has category
  ``MARKER_CORE_RANGE_API`` and ``extdata`` ``{"message": ...}``.
* a roctx mark is a ``rocpd_sample`` on a ``rocpd_track``; its event has category
  ``MARKER_CORE_API``.
* counters: one ``rocpd_pmc_event`` row per hardware instance record, ``event_id`` = the
  dispatch's event.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

UUID_A = "0000ddb5-8903-7903-b269-cd8d3745bb8a"
UUID_B = "0000ddb6-1a2b-7c3d-8e4f-5a6b7c8d9e0f"

#: logical table -> columns besides ``id`` (``guid`` first where the table has one).
TABLES: dict[str, tuple[str, ...]] = {
    "rocpd_metadata": ("tag", "value"),
    "rocpd_string": ("guid", "string"),
    "rocpd_info_node": (
        "guid",
        "hash",
        "machine_id",
        "system_name",
        "hostname",
        "release",
        "version",
        "hardware_name",
        "domain_name",
    ),
    "rocpd_info_process": (
        "guid",
        "nid",
        "ppid",
        "pid",
        "init",
        "fini",
        "start",
        "end",
        "command",
        "environment",
        "extdata",
    ),
    "rocpd_info_thread": ("guid", "nid", "ppid", "pid", "tid", "name", "start", "end", "extdata"),
    "rocpd_info_agent": (
        "guid",
        "nid",
        "pid",
        "type",
        "absolute_index",
        "logical_index",
        "type_index",
        "uuid",
        "name",
        "model_name",
        "vendor_name",
        "product_name",
        "user_name",
        "extdata",
    ),
    "rocpd_info_pmc": (
        "guid",
        "nid",
        "pid",
        "agent_id",
        "target_arch",
        "event_code",
        "instance_id",
        "name",
        "symbol",
        "description",
        "long_description",
        "component",
        "units",
        "value_type",
        "block",
        "expression",
        "is_constant",
        "is_derived",
        "extdata",
    ),
    "rocpd_info_kernel_symbol": (
        "guid",
        "nid",
        "pid",
        "code_object_id",
        "kernel_name",
        "display_name",
        "kernel_object",
        "kernarg_segment_size",
        "kernarg_segment_alignment",
        "group_segment_size",
        "private_segment_size",
        "sgpr_count",
        "arch_vgpr_count",
        "accum_vgpr_count",
        "extdata",
    ),
    "rocpd_track": ("guid", "nid", "pid", "tid", "name_id", "extdata"),
    "rocpd_event": (
        "guid",
        "category_id",
        "stack_id",
        "parent_stack_id",
        "correlation_id",
        "call_stack",
        "line_info",
        "extdata",
    ),
    "rocpd_pmc_event": ("guid", "event_id", "pmc_id", "value", "extdata"),
    "rocpd_region": ("guid", "nid", "pid", "tid", "start", "end", "name_id", "event_id", "extdata"),
    "rocpd_sample": ("guid", "track_id", "timestamp", "event_id", "extdata"),
    "rocpd_kernel_dispatch": (
        "guid",
        "nid",
        "pid",
        "tid",
        "agent_id",
        "kernel_id",
        "dispatch_id",
        "queue_id",
        "stream_id",
        "start",
        "end",
        "private_segment_size",
        "group_segment_size",
        "workgroup_size_x",
        "workgroup_size_y",
        "workgroup_size_z",
        "grid_size_x",
        "grid_size_y",
        "grid_size_z",
        "region_name_id",
        "event_id",
        "extdata",
    ),
}

_TYPES = {
    "value": "REAL",
    "extdata": "JSONB",
    "environment": "JSONB",
    "call_stack": "JSONB",
    "line_info": "JSONB",
    "string": "TEXT",
    "guid": "TEXT",
    "tag": "TEXT",
    "type": "TEXT",
    "name": "TEXT",
    "command": "TEXT",
    "hostname": "TEXT",
}


def suffix(uuid: str) -> str:
    """The physical-table suffix of a uuid: ``_`` + the uuid with ``-`` replaced by ``_``."""
    return "_" + uuid.replace("-", "_")


def _ddl(table: str, columns: tuple[str, ...]) -> str:
    cols = ['"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT']
    for c in columns:
        sql_type = _TYPES.get(c, "BIGINT" if c in ("start", "end", "timestamp", "hash") else "INTEGER")
        if c == "value" and table.startswith("rocpd_metadata"):
            cols.append('"value" TEXT NOT NULL')
        elif c == "string":
            cols.append('"string" TEXT NOT NULL UNIQUE ON CONFLICT ABORT')
        elif c in ("extdata", "environment", "call_stack", "line_info"):
            cols.append(f"\"{c}\" JSONB DEFAULT '{{}}'")
        else:
            cols.append(f'"{c}" {sql_type}')
    return f'CREATE TABLE "{table}" ({", ".join(cols)})'


def create_views(conn: sqlite3.Connection, uuids: Sequence[str], *, schema: int = 3) -> None:
    """Create the unsuffixed ``rocpd_<table>`` views (``UNION ALL`` over several uuids, as ``rocpd merge``).

    ``schema`` 4 creates the views of the schema 4.0 tables (:data:`V4_TABLES`): ``SELECT *``
    too, so ``rocpd_kernel_dispatch`` shows ``start_id``/``end_id``, not times.
    """
    for table in TABLES if schema == 3 else V4_TABLES:
        body = " UNION ALL ".join(f'SELECT * FROM "{table}{suffix(u)}"' for u in uuids)
        conn.execute(f'CREATE VIEW "{table}" AS {body}')


@dataclass
class Dispatch:
    """What :meth:`RocpdBuilder.add_dispatch` wrote: the dispatch row id and its event id."""

    id: int
    event_id: int


class RocpdBuilder:
    """Writes one process's rocpd tables (one uuid suffix) into an open connection.

    Args:
        conn: the connection (the caller closes it, or use :func:`rocpd_db`).
        uuid: the dashed UUID of the process database; tables get its ``_``-form as suffix.
        pid, tid: defaults for rows that carry a process / thread id.
    """

    def __init__(self, conn: sqlite3.Connection, uuid: str = UUID_A, *, pid: int = 4242, tid: int = 4242) -> None:
        self.conn = conn
        self.uuid = uuid
        self.guid = uuid
        self.sfx = suffix(uuid)
        self.pid = pid
        self.tid = tid
        self._strings: dict[str, int] = {}
        for table, columns in TABLES.items():
            conn.execute(_ddl(table + self.sfx, columns))
        self.insert("rocpd_metadata", tag="schema_version", value="3")
        self.insert("rocpd_metadata", tag="uuid", value=self.sfx[1:])
        self.insert("rocpd_metadata", tag="guid", value=self.guid)
        self.string("")  # the string table always holds ""

    # ---- low level ---------------------------------------------------------------------
    def insert(self, table: str, **values: object) -> int:
        """Insert one row into the physical ``table`` of this uuid; return its id."""
        if "guid" in TABLES[table] and "guid" not in values:
            values["guid"] = self.guid
        cols = ", ".join(f'"{c}"' for c in values)
        marks = ", ".join("?" for _ in values)
        cur = self.conn.execute(f'INSERT INTO "{table}{self.sfx}" ({cols}) VALUES ({marks})', list(values.values()))
        assert cur.lastrowid is not None
        return int(cur.lastrowid)

    def string(self, text: str) -> int:
        """The id of ``text`` in ``rocpd_string`` (inserted on first use)."""
        if text not in self._strings:
            self._strings[text] = self.insert("rocpd_string", string=text)
        return self._strings[text]

    def event(
        self,
        category: str,
        stack_id: int | None,
        *,
        extdata: object = "{}",
        correlation_id: int = 0,
        event_id: int | None = None,
    ) -> int:
        """A ``rocpd_event`` row; ``extdata`` may be a dict (JSON-encoded) or raw text."""
        text = json.dumps(extdata) if isinstance(extdata, dict) else extdata
        kw: dict[str, object] = {} if event_id is None else {"id": event_id}
        return self.insert(
            "rocpd_event",
            **kw,
            category_id=self.string(category),
            stack_id=stack_id,
            parent_stack_id=stack_id,
            correlation_id=correlation_id,
            call_stack="{}",
            line_info="{}",
            extdata=text,
        )

    # ---- info tables ---------------------------------------------------------------------
    def add_node_and_process(self, *, hostname: str = "testhost", command: str = "llama-bench -m m.gguf") -> None:
        """One node, one process (``id`` = OS pid) and its main thread (``id`` = OS tid)."""
        nid = self.insert(
            "rocpd_info_node",
            hash=1234,
            machine_id="abc",
            system_name="Linux",
            hostname=hostname,
            release="6.8",
            version="#1",
            hardware_name="x86_64",
            domain_name="",
        )
        self.insert(
            "rocpd_info_process",
            id=self.pid,
            nid=nid,
            ppid=1,
            pid=self.pid,
            init=0,
            fini=0,
            start=0,
            end=0,
            command=command,
            environment="{}",
            extdata="{}",
        )
        self.insert(
            "rocpd_info_thread", id=self.tid, nid=nid, ppid=1, pid=self.pid, tid=self.tid, name="main", extdata="{}"
        )

    def add_agent(
        self,
        *,
        agent_type: str = "GPU",
        absolute_index: int = 1,
        logical_index: int = 1,
        type_index: int = 0,
        name: str = "gfx942",
        product_name: str = "AMD Instinct MI300X",
        extdata: object = None,
        agent_id: int | None = None,
    ) -> int:
        """A ``rocpd_info_agent`` row (``name`` is the gfx target); returns its id."""
        if extdata is None:
            extdata = {"cu_count": 304, "simd_count": 1216, "num_xcc": 8, "wave_front_size": 64}
        text = json.dumps(extdata) if isinstance(extdata, dict) else extdata
        kw: dict[str, object] = {} if agent_id is None else {"id": agent_id}
        return self.insert(
            "rocpd_info_agent",
            **kw,
            nid=1,
            pid=self.pid,
            type=agent_type,
            absolute_index=absolute_index,
            logical_index=logical_index,
            type_index=type_index,
            uuid="GPU-0",
            name=name,
            model_name="aqua_vanjaram",
            vendor_name="AMD",
            product_name=product_name,
            user_name="",
            extdata=text,
        )

    def add_kernel_symbol(
        self,
        kernel_name: str,
        display_name: str | None = None,
        *,
        sgpr: int = 16,
        vgpr: int = 32,
        accum_vgpr: int = 0,
        lds: int = 0,
        scratch: int = 0,
    ) -> int:
        """A ``rocpd_info_kernel_symbol`` row; returns its id (the dispatch's ``kernel_id``)."""
        return self.insert(
            "rocpd_info_kernel_symbol",
            nid=1,
            pid=self.pid,
            code_object_id=1,
            kernel_name=kernel_name,
            display_name=display_name,
            kernel_object=0,
            kernarg_segment_size=64,
            kernarg_segment_alignment=8,
            group_segment_size=lds,
            private_segment_size=scratch,
            sgpr_count=sgpr,
            arch_vgpr_count=vgpr,
            accum_vgpr_count=accum_vgpr,
            extdata="{}",
        )

    def add_pmc(self, name: str, agent_id: int, *, is_derived: int = 0, pmc_id: int | None = None) -> int:
        """A ``rocpd_info_pmc`` row for ``name`` on ``agent_id``; returns its id."""
        kw: dict[str, object] = {} if pmc_id is None else {"id": pmc_id}
        return self.insert(
            "rocpd_info_pmc",
            **kw,
            nid=1,
            pid=self.pid,
            agent_id=agent_id,
            target_arch="gfx942",
            event_code=0,
            instance_id=0,
            name=name,
            symbol=name,
            description="",
            long_description="",
            component="rocm",
            units="",
            value_type="ABS",
            block=name.split("_", 1)[0],
            expression="",
            is_constant=0,
            is_derived=is_derived,
            extdata="{}",
        )

    # ---- records -------------------------------------------------------------------------
    def add_dispatch(
        self,
        *,
        dispatch_id: int,
        kernel_id: int,
        agent_id: int,
        start: int,
        end: int,
        stack_id: int | None,
        tid: int | None = None,
        grid: tuple[int, int, int] = (1024, 1, 1),
        workgroup: tuple[int, int, int] = (256, 1, 1),
        lds: int = 0,
        scratch: int = 0,
        region: str = "",
        queue_id: int = 1,
        stream_id: int = 0,
        correlation_id: int = 0,
    ) -> Dispatch:
        """A kernel dispatch (``id`` = ``dispatch_id``) and its ``KERNEL_DISPATCH`` event.

        ``stack_id`` is the internal correlation id of the launching API call; ``region`` is the
        ``--kernel-rename`` region (``""`` without it).
        """
        ev = self.event("KERNEL_DISPATCH", stack_id, correlation_id=correlation_id)
        self.insert(
            "rocpd_kernel_dispatch",
            id=dispatch_id,
            nid=1,
            pid=self.pid,
            tid=self.tid if tid is None else tid,
            agent_id=agent_id,
            kernel_id=kernel_id,
            dispatch_id=dispatch_id,
            queue_id=queue_id,
            stream_id=stream_id,
            start=start,
            end=end,
            private_segment_size=scratch,
            group_segment_size=lds,
            workgroup_size_x=workgroup[0],
            workgroup_size_y=workgroup[1],
            workgroup_size_z=workgroup[2],
            grid_size_x=grid[0],
            grid_size_y=grid[1],
            grid_size_z=grid[2],
            region_name_id=self.string(region),
            event_id=ev,
            extdata="{}",
        )
        return Dispatch(dispatch_id, ev)

    def add_counter(self, event_id: int, pmc_id: int, values: Sequence[float]) -> None:
        """One ``rocpd_pmc_event`` row per hardware instance value, in the given order."""
        for value in values:
            self.insert("rocpd_pmc_event", event_id=event_id, pmc_id=pmc_id, value=value, extdata="{}")

    def add_region(
        self,
        *,
        name: str,
        category: str,
        start: int,
        end: int,
        stack_id: int,
        tid: int | None = None,
        extdata: object = "{}",
    ) -> int:
        """A ``rocpd_region`` row (``id`` = the call's internal correlation id) and its event."""
        ev = self.event(category, stack_id, extdata=extdata)
        return self.insert(
            "rocpd_region",
            id=stack_id,
            nid=1,
            pid=self.pid,
            tid=self.tid if tid is None else tid,
            start=start,
            end=end,
            name_id=self.string(name),
            event_id=ev,
            extdata="{}",
        )

    def add_hip_launch(
        self, *, stack_id: int, start: int, end: int, tid: int | None = None, name: str = "hipLaunchKernel"
    ) -> int:
        """The HIP runtime API call (category ``HIP_RUNTIME_API_EXT``) that enqueued a dispatch."""
        return self.add_region(
            name=name, category="HIP_RUNTIME_API_EXT", start=start, end=end, stack_id=stack_id, tid=tid
        )

    def add_range(
        self, message: str, *, start: int, end: int, stack_id: int, tid: int | None = None, extdata: object = None
    ) -> int:
        """A roctx thread range (``MARKER_CORE_RANGE_API``, ``roctxThreadRangeA``)."""
        return self.add_region(
            name="roctxThreadRangeA",
            category="MARKER_CORE_RANGE_API",
            start=start,
            end=end,
            stack_id=stack_id,
            tid=tid,
            extdata={"message": message} if extdata is None else extdata,
        )

    def add_mark(self, message: str, *, timestamp: int, stack_id: int, tid: int | None = None) -> int:
        """A roctxMark: a ``rocpd_sample`` on a ``MARKER_CORE_API`` track of the thread."""
        thread = self.tid if tid is None else tid
        track = self.insert(
            "rocpd_track", nid=1, pid=self.pid, tid=thread, name_id=self.string("MARKER_CORE_API"), extdata="{}"
        )
        ev = self.event("MARKER_CORE_API", stack_id, extdata={"message": message})
        return self.insert("rocpd_sample", id=stack_id, track_id=track, timestamp=timestamp, event_id=ev, extdata="{}")


@contextmanager
def rocpd_db(
    path: Path, *, uuid: str = UUID_A, views: bool = True, pid: int = 4242, tid: int = 4242, schema: int = 3
) -> Iterator[Any]:
    """A new one-process rocpd database at ``path``, with its views unless ``views`` is False.

    Yields the builder (:class:`RocpdBuilder`, or :class:`RocpdV4Builder` for ``schema=4``); on
    exit commits and closes the connection (also on error, so no ResourceWarning leaks).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        builder = (
            RocpdBuilder(conn, uuid, pid=pid, tid=tid) if schema == 3 else RocpdV4Builder(conn, uuid, pid=pid, tid=tid)
        )
        if views:  # the writer creates the views right after the tables, before any data
            create_views(conn, [uuid], schema=schema)
        yield builder
        conn.commit()
    finally:
        conn.close()


# ---- schema 4.0: timestamps in rocpd_timestamp, owners in rocpd_track ------------------------------
#
# Modelled on the in-development rocpd schema 4.0 (not in any rocprofiler-sdk release as of
# ROCprofiler-SDK 1.3.5 / ROCm 10.0): its ``rocpd_tables.sql`` (public code index file id
# 63622535314: ``PRAGMA foreign_keys = ON``, ``rocpd_info_category``, ``rocpd_timestamp``,
# ``start_id``/``end_id``/``timestamp_id`` columns) and the ``generateRocpd.cpp`` that writes it
# (index file id 66509154522: ``get_track_id``, ``get_timestamp_id``, ``insert_api_data``,
# ``insert_kernel_dispatch_data``, ``insert_pmc_data``). The metadata ``schema_version`` "4.0.0" is
# the one the test fixtures of a schema 4 reader in the same index write (ids 58084217493,
# 59740610709; that writer's own metadata file was not found). Our own writer again: the column lists,
# types, constraints and foreign keys follow that SQL, the values follow that writer:
#
# * a record's process, thread, agent, queue and stream are a ``rocpd_track`` row (one per
#   distinct combination, as ``get_track_id``); its times are ``rocpd_timestamp`` rows (phase 1
#   start, 2 end, 0 instant) on that track, named by ``start_id``/``end_id``.
# * ``rocpd_event.category_id`` is a ``rocpd_info_category`` row named by the Perfetto category
#   (``kernel_dispatch``, ``hip_api``, ``marker_api``).
# * a roctx range or mark (``MARKER_CORE_RANGE_API``) is a ``rocpd_region`` whose ``name_id`` is
#   the message and whose event ``extdata`` is ``{"message": <operation>}`` (``roctxThreadRangeA``,
#   ``roctxMarkA``); a mark has start == end. The writer writes no ``rocpd_sample`` for markers;
#   ``add_mark(..., as_sample=True)`` writes one (``timestamp_id``, ``name_id`` = the message) to
#   exercise that table.
# * ``rocpd_info_agent.generic_name`` is the gfx target and ``name`` the product name.
# * ``rocpd_info_pmc`` has one row per counter *instance* (``id`` = the instance id, same ``name``,
#   ``symbol`` ``NAME:<qualifier>``); each ``rocpd_pmc_event`` names its instance row.

_J = "JSONB DEFAULT '{}' NOT NULL"
#: logical table -> (column, declaration) besides ``id`` and ``guid``; FKs as (column, parent).
V4_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "rocpd_metadata": (("tag", "TEXT NOT NULL"), ("value", "TEXT NOT NULL")),
    "rocpd_string": (("string", "TEXT NOT NULL UNIQUE ON CONFLICT ABORT"),),
    "rocpd_info_node": (
        ("hash", "BIGINT NOT NULL UNIQUE"),
        ("machine_id", "TEXT NOT NULL UNIQUE"),
        ("name", "TEXT"),
        ("system_name", "TEXT"),
        ("hostname", "TEXT"),
        ("release", "TEXT"),
        ("version", "TEXT"),
        ("hardware_name", "TEXT"),
        ("domain_name", "TEXT"),
    ),
    "rocpd_info_process": (
        ("nid", "INTEGER NOT NULL"),
        ("ppid", "INTEGER"),
        ("pid", "INTEGER NOT NULL"),
        ("name", "TEXT"),
        ("init", "BIGINT"),
        ("fini", "BIGINT"),
        ("start", "BIGINT"),
        ("end", "BIGINT"),
        ("command", "TEXT"),
        ("environment", _J),
        ("extdata", _J),
    ),
    "rocpd_info_thread": (
        ("nid", "INTEGER NOT NULL"),
        ("ppid", "INTEGER"),
        ("pid", "INTEGER NOT NULL"),
        ("tid", "INTEGER NOT NULL"),
        ("name", "TEXT"),
        ("start", "BIGINT"),
        ("end", "BIGINT"),
        ("extdata", _J),
    ),
    "rocpd_info_category": (("name", "TEXT NOT NULL"), ("extdata", _J)),
    "rocpd_info_agent": (
        ("nid", "INTEGER NOT NULL"),
        ("pid", "INTEGER NOT NULL"),
        ("type", "TEXT CHECK (\"type\" IN ('CPU', 'GPU'))"),
        ("absolute_index", "INTEGER"),
        ("logical_index", "INTEGER"),
        ("type_index", "INTEGER"),
        ("uuid", "INTEGER"),
        ("name", "TEXT"),
        ("generic_name", "TEXT"),
        ("model_name", "TEXT"),
        ("vendor_name", "TEXT"),
        ("product_name", "TEXT"),
        ("extdata", _J),
    ),
    "rocpd_info_queue": (("nid", "INTEGER NOT NULL"), ("pid", "INTEGER NOT NULL"), ("name", "TEXT"), ("extdata", _J)),
    "rocpd_info_stream": (("nid", "INTEGER NOT NULL"), ("pid", "INTEGER NOT NULL"), ("name", "TEXT"), ("extdata", _J)),
    "rocpd_info_pmc": (
        ("nid", "INTEGER NOT NULL"),
        ("pid", "INTEGER NOT NULL"),
        ("agent_id", "INTEGER"),
        ("target_arch", "TEXT CHECK (\"target_arch\" IN ('CPU', 'GPU'))"),
        ("event_code", "INT"),
        ("instance_id", "INTEGER"),
        ("name", "TEXT NOT NULL"),
        ("symbol", "TEXT NOT NULL"),
        ("qualifier", "TEXT"),
        ("description", "TEXT"),
        ("long_description", "TEXT DEFAULT ''"),
        ("component", "TEXT"),
        ("units", "TEXT DEFAULT ''"),
        ("value_type", "TEXT CHECK (\"value_type\" IN ('ABS', 'ACCUM', 'RELATIVE'))"),
        ("block", "TEXT"),
        ("expression", "TEXT"),
        ("is_constant", "INTEGER"),
        ("is_derived", "INTEGER"),
        ("extdata", _J),
    ),
    "rocpd_info_code_object": (
        ("nid", "INTEGER NOT NULL"),
        ("pid", "INTEGER NOT NULL"),
        ("agent_id", "INTEGER"),
        ("uri", "TEXT"),
        ("load_base", "BIGINT"),
        ("load_size", "BIGINT"),
        ("load_delta", "BIGINT"),
        ("storage_type", "TEXT CHECK (\"storage_type\" IN ('FILE', 'MEMORY'))"),
        ("extdata", _J),
    ),
    "rocpd_info_kernel_symbol": (
        ("nid", "INTEGER NOT NULL"),
        ("pid", "INTEGER NOT NULL"),
        ("code_object_id", "INTEGER NOT NULL"),
        ("kernel_name", "TEXT"),
        ("display_name", "TEXT"),
        ("kernel_object", "INTEGER"),
        ("kernarg_segment_size", "INTEGER"),
        ("kernarg_segment_alignment", "INTEGER"),
        ("group_segment_size", "INTEGER"),
        ("private_segment_size", "INTEGER"),
        ("sgpr_count", "INTEGER"),
        ("arch_vgpr_count", "INTEGER"),
        ("accum_vgpr_count", "INTEGER"),
        ("extdata", _J),
    ),
    "rocpd_info_address_range": (
        ("nid", "INTEGER NOT NULL"),
        ("pid", "INTEGER NOT NULL"),
        ("address_base", "BIGINT"),
        ("address_low", 'BIGINT CHECK ("address_low" >= "address_base")'),
        ("address_high", 'BIGINT CHECK ("address_high" >= "address_low")'),
        ("extdata", _J),
    ),
    "rocpd_info_source_code": (
        ("nid", "INTEGER NOT NULL"),
        ("pid", "INTEGER NOT NULL"),
        ("address_id", "INTEGER"),
        ("file", "TEXT"),
        ("line_number", "INTEGER"),
        ("lines", "JSONB DEFAULT '[]' NOT NULL"),
        ("instructions", "JSONB DEFAULT '[]' NOT NULL"),
        ("extdata", _J),
    ),
    "rocpd_info_pc": (
        ("nid", "INTEGER NOT NULL"),
        ("pid", "INTEGER NOT NULL"),
        ("function", "TEXT NOT NULL"),
        ("address_id", "INTEGER"),
        ("file", "TEXT"),
        ("line", "INTEGER"),
        ("extdata", _J),
    ),
    "rocpd_track": (
        ("nid", "INTEGER NOT NULL"),
        ("ppid", "INTEGER"),
        ("pid", "INTEGER"),
        ("tid", "INTEGER"),
        ("agent_id", "INTEGER"),
        ("queue_id", "INTEGER"),
        ("stream_id", "INTEGER"),
        ("name_id", "INTEGER"),
        ("extdata", _J),
    ),
    "rocpd_timestamp": (
        ("value", "BIGINT NOT NULL"),
        ("phase", 'INTEGER CHECK ("phase" IN (0, 1, 2))'),
        ("track_id", "INTEGER"),
    ),
    "rocpd_event": (
        ("category_id", "INTEGER"),
        ("stack_id", "INTEGER"),
        ("parent_stack_id", "INTEGER"),
        ("correlation_id", "INTEGER"),
        ("extdata", _J),
    ),
    "rocpd_arg": (
        ("event_id", "INTEGER NOT NULL"),
        ("position", "INTEGER NOT NULL"),
        ("type", "TEXT NOT NULL"),
        ("name", "TEXT NOT NULL"),
        ("value", "TEXT"),
        ("extdata", _J),
    ),
    "rocpd_line_info": (
        ("event_id", "INTEGER NOT NULL"),
        ("source_code_id", "INTEGER"),
        ("pc_id", "INTEGER"),
        ("extdata", _J),
    ),
    "rocpd_call_stack": (
        ("event_id", "INTEGER NOT NULL"),
        ("pc_id", "INTEGER"),
        ("depth", "INTEGER NOT NULL"),
        ("extdata", _J),
    ),
    "rocpd_pmc_event": (
        ("event_id", "INTEGER"),
        ("pmc_id", "INTEGER NOT NULL"),
        ("value", "REAL DEFAULT 0.0"),
        ("extdata", "JSONB DEFAULT '{}'"),
    ),
    "rocpd_region": (
        ("track_id", "INTEGER NOT NULL"),
        ("name_id", "INTEGER NOT NULL"),
        ("start_id", "INTEGER NOT NULL"),
        ("end_id", "INTEGER NOT NULL"),
        ("event_id", "INTEGER"),
        ("extdata", _J),
    ),
    "rocpd_sample": (
        ("track_id", "INTEGER NOT NULL"),
        ("name_id", "INTEGER NOT NULL"),
        ("timestamp_id", "INTEGER NOT NULL"),
        ("event_id", "INTEGER"),
        ("extdata", _J),
    ),
    "rocpd_kernel_dispatch": (
        ("track_id", "INTEGER NOT NULL"),
        ("kernel_id", "INTEGER NOT NULL"),
        ("dispatch_id", "INTEGER NOT NULL"),
        ("start_id", "INTEGER NOT NULL"),
        ("end_id", "INTEGER NOT NULL"),
        ("private_segment_size", "INTEGER"),
        ("group_segment_size", "INTEGER"),
        ("workgroup_size_x", "INTEGER NOT NULL"),
        ("workgroup_size_y", "INTEGER NOT NULL"),
        ("workgroup_size_z", "INTEGER NOT NULL"),
        ("grid_size_x", "INTEGER NOT NULL"),
        ("grid_size_y", "INTEGER NOT NULL"),
        ("grid_size_z", "INTEGER NOT NULL"),
        ("region_name_id", "INTEGER"),
        ("event_id", "INTEGER"),
        ("extdata", _J),
    ),
    "rocpd_memory_copy": (
        ("track_id", "INTEGER NOT NULL"),
        ("start_id", "INTEGER NOT NULL"),
        ("end_id", "INTEGER NOT NULL"),
        ("name_id", "INTEGER NOT NULL"),
        ("dst_agent_id", "INTEGER"),
        ("dst_address", "INTEGER"),
        ("src_agent_id", "INTEGER"),
        ("src_address", "INTEGER"),
        ("size", "INTEGER NOT NULL"),
        ("region_name_id", "INTEGER"),
        ("event_id", "INTEGER"),
        ("extdata", _J),
    ),
    "rocpd_memory_allocate": (
        ("track_id", "INTEGER NOT NULL"),
        ("type", "TEXT CHECK (\"type\" IN ('ALLOC', 'FREE', 'REALLOC', 'RECLAIM'))"),
        ("level", "TEXT CHECK (\"level\" IN ('REAL', 'VIRTUAL', 'SCRATCH'))"),
        ("start_id", "INTEGER NOT NULL"),
        ("end_id", "INTEGER NOT NULL"),
        ("name_id", "INTEGER NOT NULL"),
        ("address", "INTEGER"),
        ("size", "INTEGER NOT NULL"),
        ("region_name_id", "INTEGER"),
        ("event_id", "INTEGER"),
        ("extdata", _J),
    ),
}

_NODE, _PROC, _THREAD, _AGENT = "rocpd_info_node", "rocpd_info_process", "rocpd_info_thread", "rocpd_info_agent"
_OWNER = (("nid", _NODE), ("pid", _PROC))
_TIMES = (("start_id", "rocpd_timestamp"), ("end_id", "rocpd_timestamp"))
V4_FOREIGN_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "rocpd_info_process": (("nid", _NODE),),
    "rocpd_info_thread": _OWNER,
    "rocpd_info_agent": _OWNER,
    "rocpd_info_queue": _OWNER,
    "rocpd_info_stream": _OWNER,
    "rocpd_info_pmc": (*_OWNER, ("agent_id", _AGENT)),
    "rocpd_info_code_object": (*_OWNER, ("agent_id", _AGENT)),
    "rocpd_info_kernel_symbol": (*_OWNER, ("code_object_id", "rocpd_info_code_object")),
    "rocpd_info_address_range": _OWNER,
    "rocpd_info_source_code": (*_OWNER, ("address_id", "rocpd_info_address_range")),
    "rocpd_info_pc": (*_OWNER, ("address_id", "rocpd_info_address_range")),
    "rocpd_track": (
        *_OWNER,
        ("tid", _THREAD),
        ("agent_id", _AGENT),
        ("queue_id", "rocpd_info_queue"),
        ("stream_id", "rocpd_info_stream"),
        ("name_id", "rocpd_string"),
    ),
    "rocpd_timestamp": (("track_id", "rocpd_track"),),
    "rocpd_event": (("category_id", "rocpd_info_category"),),
    "rocpd_arg": (("event_id", "rocpd_event"),),
    "rocpd_line_info": (
        ("event_id", "rocpd_event"),
        ("source_code_id", "rocpd_info_source_code"),
        ("pc_id", "rocpd_info_pc"),
    ),
    "rocpd_call_stack": (("event_id", "rocpd_event"), ("pc_id", "rocpd_info_pc")),
    "rocpd_pmc_event": (("pmc_id", "rocpd_info_pmc"), ("event_id", "rocpd_event")),
    "rocpd_region": (
        ("track_id", "rocpd_track"),
        ("name_id", "rocpd_string"),
        *_TIMES,
        ("event_id", "rocpd_event"),
    ),
    "rocpd_sample": (
        ("track_id", "rocpd_track"),
        ("name_id", "rocpd_string"),
        ("timestamp_id", "rocpd_timestamp"),
        ("event_id", "rocpd_event"),
    ),
    "rocpd_kernel_dispatch": (
        ("track_id", "rocpd_track"),
        ("kernel_id", "rocpd_info_kernel_symbol"),
        *_TIMES,
        ("region_name_id", "rocpd_string"),
        ("event_id", "rocpd_event"),
    ),
    "rocpd_memory_copy": (
        ("track_id", "rocpd_track"),
        *_TIMES,
        ("name_id", "rocpd_string"),
        ("dst_agent_id", _AGENT),
        ("src_agent_id", _AGENT),
        ("region_name_id", "rocpd_string"),
        ("event_id", "rocpd_event"),
    ),
    "rocpd_memory_allocate": (
        ("track_id", "rocpd_track"),
        *_TIMES,
        ("name_id", "rocpd_string"),
        ("region_name_id", "rocpd_string"),
        ("event_id", "rocpd_event"),
    ),
}

#: The phases of a ``rocpd_timestamp`` row (``rocprofiler_callback_phase_t``).
PHASE_NONE, PHASE_ENTER, PHASE_EXIT = 0, 1, 2

#: The roctx operations the schema 4.0 writer stores in a marker's ``extdata`` ``$.message``.
ROCTX_RANGE_OP, ROCTX_MARK_OP = "roctxThreadRangeA", "roctxMarkA"


def _ddl_v4(table: str, sfx: str, guid: str) -> str:
    cols = ['"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT']
    if table != "rocpd_metadata":
        cols.append(f"\"guid\" TEXT DEFAULT '{guid}' NOT NULL")
    cols += [f'"{name}" {decl}' for name, decl in V4_TABLES[table]]
    cols += [
        f'FOREIGN KEY ({col}) REFERENCES "{parent}{sfx}" (id) ON UPDATE CASCADE'
        for col, parent in V4_FOREIGN_KEYS.get(table, ())
    ]
    return f'CREATE TABLE IF NOT EXISTS "{table}{sfx}" ({", ".join(cols)})'


class RocpdV4Builder:
    """Writes one process's rocpd schema 4.0 tables (one uuid suffix) into an open connection.

    The methods take the same arguments as :class:`RocpdBuilder`'s, so one test can write the
    same run in either schema; times are ns. Categories are the Perfetto names the 4.0 writer
    uses (``hip_api``, ``marker_api``, ``kernel_dispatch``). Foreign keys are enforced, as the
    schema's ``PRAGMA foreign_keys = ON`` asks: a test that damages the file turns them off.

    Args:
        conn: the connection (the caller closes it, or use :func:`rocpd_db` with ``schema=4``).
        uuid: the dashed UUID of the process database; tables get its ``_``-form as suffix.
        pid, tid: the OS process id (also the ``rocpd_info_process`` id) and default thread id.
    """

    def __init__(self, conn: sqlite3.Connection, uuid: str = UUID_A, *, pid: int = 4242, tid: int = 4242) -> None:
        self.conn = conn
        self.uuid = uuid
        self.guid = uuid
        self.sfx = suffix(uuid)
        self.pid = pid
        self.tid = tid
        self.nid = 1
        self._strings: dict[str, int] = {}
        self._categories: dict[str, int] = {}
        self._tracks: dict[tuple[object, ...], int] = {}
        self._threads: set[int] = set()
        self._queues: set[int] = set()
        self._streams: set[int] = set()
        self._process = False
        self._code_object: int | None = None
        self._pmc: dict[int, list[int]] = {}  # counter's first instance row -> all its instance rows
        conn.execute("PRAGMA foreign_keys = ON")
        for table in V4_TABLES:
            conn.execute(_ddl_v4(table, self.sfx, self.guid))
        self.insert("rocpd_metadata", tag="schema_version", value="4.0.0")
        self.insert("rocpd_metadata", tag="uuid", value=self.sfx[1:])
        self.insert("rocpd_metadata", tag="guid", value=self.guid)
        self.string("")  # the writer always adds "" (the region name of a dispatch without one)

    # ---- low level ---------------------------------------------------------------------
    def insert(self, table: str, **values: object) -> int:
        """Insert one row into the physical ``table`` of this uuid; return its id."""
        if table != "rocpd_metadata" and "guid" not in values:
            values["guid"] = self.guid
        cols = ", ".join(f'"{c}"' for c in values)
        marks = ", ".join("?" for _ in values)
        cur = self.conn.execute(f'INSERT INTO "{table}{self.sfx}" ({cols}) VALUES ({marks})', list(values.values()))
        assert cur.lastrowid is not None
        return int(cur.lastrowid)

    def string(self, text: str) -> int:
        """The id of ``text`` in ``rocpd_string`` (inserted on first use)."""
        if text not in self._strings:
            self._strings[text] = self.insert("rocpd_string", string=text)
        return self._strings[text]

    def category(self, name: str) -> int:
        """The id of category ``name`` in ``rocpd_info_category`` (inserted on first use)."""
        if name not in self._categories:
            self._categories[name] = self.insert("rocpd_info_category", name=name, extdata="{}")
        return self._categories[name]

    def event(
        self,
        category: str,
        stack_id: int | None,
        *,
        extdata: object = "{}",
        correlation_id: int = 0,
        event_id: int | None = None,
    ) -> int:
        """A ``rocpd_event`` row of ``category`` (a Perfetto category name); ``extdata`` dict or text."""
        text = json.dumps(extdata) if isinstance(extdata, dict) else extdata
        kw: dict[str, object] = {} if event_id is None else {"id": event_id}
        return self.insert(
            "rocpd_event",
            **kw,
            category_id=self.category(category),
            stack_id=stack_id,
            parent_stack_id=stack_id,
            correlation_id=correlation_id,
            extdata=text,
        )

    def _ensure_process(self) -> None:
        if not self._process:
            self.add_node_and_process()

    def thread(self, tid: int) -> int:
        """The ``rocpd_info_thread`` row of OS thread ``tid`` (``id`` = tid, as ``get_thread_id``)."""
        self._ensure_process()
        if tid not in self._threads:
            self._threads.add(tid)
            self.insert("rocpd_info_thread", id=tid, nid=self.nid, ppid=1, pid=self.pid, tid=tid, extdata="{}")
        return tid

    def _queue(self, queue_id: int) -> int:
        if queue_id not in self._queues:
            self._queues.add(queue_id)
            self.insert("rocpd_info_queue", id=queue_id, nid=self.nid, pid=self.pid, name=f"Queue {queue_id}")
        return queue_id

    def _stream(self, stream_id: int) -> int:
        if stream_id not in self._streams:
            self._streams.add(stream_id)
            self.insert("rocpd_info_stream", id=stream_id, nid=self.nid, pid=self.pid, name=f"Stream {stream_id}")
        return stream_id

    def track(
        self,
        *,
        tid: int,
        agent_id: int | None = None,
        queue_id: int | None = None,
        stream_id: int | None = None,
        name_id: int | None = None,
    ) -> int:
        """The ``rocpd_track`` row of one (process, thread, agent, queue, stream, name), as ``get_track_id``."""
        key = (self.thread(tid), agent_id, queue_id, stream_id, name_id)
        if key not in self._tracks:
            self._tracks[key] = self.insert(
                "rocpd_track",
                nid=self.nid,
                ppid=1,
                pid=self.pid,
                tid=tid,
                agent_id=agent_id,
                queue_id=None if queue_id is None else self._queue(queue_id),
                stream_id=None if stream_id is None else self._stream(stream_id),
                name_id=name_id,
                extdata="{}",
            )
        return self._tracks[key]

    def timestamp(self, value: int, phase: int, track_id: int) -> int:
        """A ``rocpd_timestamp`` row (``value`` in ns); returns its id."""
        return self.insert("rocpd_timestamp", value=value, phase=phase, track_id=track_id)

    # ---- info tables ---------------------------------------------------------------------
    def add_node_and_process(self, *, hostname: str = "testhost", command: str = "llama-bench -m m.gguf") -> None:
        """One node, one process (``id`` = OS pid) and its main thread (``id`` = OS tid)."""
        assert not self._process, "node and process already written"
        self._process = True
        self.insert(
            "rocpd_info_node",
            id=self.nid,
            hash=1234,
            machine_id="abc",
            system_name="Linux",
            hostname=hostname,
            release="6.8",
            version="#1",
            hardware_name="x86_64",
            domain_name="",
        )
        self.insert(
            "rocpd_info_process",
            id=self.pid,
            nid=self.nid,
            ppid=1,
            pid=self.pid,
            init=0,
            fini=0,
            start=0,
            end=0,
            command=command,
            environment="{}",
            extdata="{}",
        )
        self.thread(self.tid)

    def add_agent(
        self,
        *,
        agent_type: str = "GPU",
        absolute_index: int = 1,
        logical_index: int = 1,
        type_index: int = 0,
        name: str = "gfx942",
        product_name: str = "AMD Instinct MI300X",
        extdata: object = None,
        agent_id: int | None = None,
    ) -> int:
        """A ``rocpd_info_agent`` row: ``generic_name`` = ``name`` (the gfx target), ``name`` = the product."""
        self._ensure_process()
        if extdata is None:
            extdata = {"cu_count": 304, "simd_count": 1216, "num_xcc": 8, "wave_front_size": 64}
        text = json.dumps(extdata) if isinstance(extdata, dict) else extdata
        return self.insert(
            "rocpd_info_agent",
            id=absolute_index if agent_id is None else agent_id,  # the writer: id = node_id
            nid=self.nid,
            pid=self.pid,
            type=agent_type,
            absolute_index=absolute_index,
            logical_index=logical_index,
            type_index=type_index,
            uuid=0,
            name=product_name or None,
            generic_name=name,
            model_name="aqua_vanjaram",
            vendor_name="AMD",
            product_name=product_name,
            extdata=text,
        )

    def add_kernel_symbol(
        self,
        kernel_name: str,
        display_name: str | None = None,
        *,
        sgpr: int = 16,
        vgpr: int = 32,
        accum_vgpr: int = 0,
        lds: int = 0,
        scratch: int = 0,
    ) -> int:
        """A ``rocpd_info_kernel_symbol`` row (of one code object); returns its id."""
        self._ensure_process()
        if self._code_object is None:
            self._code_object = self.insert(
                "rocpd_info_code_object", nid=self.nid, pid=self.pid, uri="file:///app#offset=0", storage_type="FILE"
            )
        return self.insert(
            "rocpd_info_kernel_symbol",
            nid=self.nid,
            pid=self.pid,
            code_object_id=self._code_object,
            kernel_name=kernel_name,
            display_name=display_name,
            kernel_object=0,
            kernarg_segment_size=64,
            kernarg_segment_alignment=8,
            group_segment_size=lds,
            private_segment_size=scratch,
            sgpr_count=sgpr,
            arch_vgpr_count=vgpr,
            accum_vgpr_count=accum_vgpr,
            extdata="{}",
        )

    def _pmc_row(self, name: str, agent_id: int, instance: int, is_derived: int, pmc_id: int | None) -> int:
        kw: dict[str, object] = {} if pmc_id is None else {"id": pmc_id}
        qualifier = f"instance={instance}"
        return self.insert(
            "rocpd_info_pmc",
            **kw,
            nid=self.nid,
            pid=self.pid,
            agent_id=agent_id,
            target_arch="GPU",
            name=name,
            symbol=f"{name}:{qualifier}",
            qualifier=qualifier,
            description="",
            component="rocm",
            value_type="ABS",
            block=name.split("_", 1)[0],
            expression="",
            is_constant=0,
            is_derived=is_derived,
        )

    def add_pmc(self, name: str, agent_id: int, *, is_derived: int = 0, pmc_id: int | None = None) -> int:
        """The ``rocpd_info_pmc`` row of ``name``'s first instance; :meth:`add_counter` adds the others."""
        first = self._pmc_row(name, agent_id, 0, is_derived, pmc_id)
        self._pmc[first] = [first]
        return first

    # ---- records -------------------------------------------------------------------------
    def add_dispatch(
        self,
        *,
        dispatch_id: int,
        kernel_id: int,
        agent_id: int,
        start: int,
        end: int,
        stack_id: int | None,
        tid: int | None = None,
        grid: tuple[int, int, int] = (1024, 1, 1),
        workgroup: tuple[int, int, int] = (256, 1, 1),
        lds: int = 0,
        scratch: int = 0,
        region: str = "",
        queue_id: int = 1,
        stream_id: int = 0,
        correlation_id: int = 0,
    ) -> Dispatch:
        """A kernel dispatch (``id`` = ``dispatch_id``), its event, track and two timestamps."""
        ev = self.event("kernel_dispatch", stack_id, correlation_id=correlation_id)
        track = self.track(
            tid=self.tid if tid is None else tid, agent_id=agent_id, queue_id=queue_id, stream_id=stream_id
        )
        self.insert(
            "rocpd_kernel_dispatch",
            id=dispatch_id,
            track_id=track,
            kernel_id=kernel_id,
            dispatch_id=dispatch_id,
            start_id=self.timestamp(start, PHASE_ENTER, track),
            end_id=self.timestamp(end, PHASE_EXIT, track),
            private_segment_size=scratch,
            group_segment_size=lds,
            workgroup_size_x=workgroup[0],
            workgroup_size_y=workgroup[1],
            workgroup_size_z=workgroup[2],
            grid_size_x=grid[0],
            grid_size_y=grid[1],
            grid_size_z=grid[2],
            region_name_id=self.string(region),
            event_id=ev,
        )
        return Dispatch(dispatch_id, ev)

    def add_counter(self, event_id: int, pmc_id: int, values: Sequence[float]) -> None:
        """One ``rocpd_pmc_event`` row per instance value, value ``i`` on the counter's instance ``i`` row."""
        rows = self._pmc[pmc_id]
        for i, value in enumerate(values):
            if i == len(rows):
                first = self.conn.execute(
                    f'SELECT name, agent_id, is_derived FROM "rocpd_info_pmc{self.sfx}" WHERE id = ?', (pmc_id,)
                ).fetchone()
                rows.append(self._pmc_row(first[0], first[1], i, first[2], None))
            self.insert("rocpd_pmc_event", event_id=event_id, pmc_id=rows[i], value=value, extdata="{}")

    def add_region(
        self,
        *,
        name: str,
        category: str,
        start: int,
        end: int,
        stack_id: int,
        tid: int | None = None,
        extdata: object = "{}",
    ) -> int:
        """A ``rocpd_region`` (``id`` = the call's internal correlation id), its event, track and timestamps."""
        ev = self.event(category, stack_id, extdata=extdata)
        track = self.track(tid=self.tid if tid is None else tid)
        return self.insert(
            "rocpd_region",
            id=stack_id,
            track_id=track,
            name_id=self.string(name),
            start_id=self.timestamp(start, PHASE_ENTER, track),
            end_id=self.timestamp(end, PHASE_EXIT, track),
            event_id=ev,
        )

    def add_hip_launch(
        self, *, stack_id: int, start: int, end: int, tid: int | None = None, name: str = "hipLaunchKernel"
    ) -> int:
        """The HIP runtime API call (category ``hip_api``) that enqueued a dispatch."""
        return self.add_region(name=name, category="hip_api", start=start, end=end, stack_id=stack_id, tid=tid)

    def add_range(
        self, message: str, *, start: int, end: int, stack_id: int, tid: int | None = None, extdata: object = None
    ) -> int:
        """A roctx thread range: a ``marker_api`` region named ``message``, extdata naming the operation."""
        return self.add_region(
            name=message,
            category="marker_api",
            start=start,
            end=end,
            stack_id=stack_id,
            tid=tid,
            extdata={"message": ROCTX_RANGE_OP} if extdata is None else extdata,
        )

    def add_mark(
        self, message: str, *, timestamp: int, stack_id: int, tid: int | None = None, as_sample: bool = False
    ) -> int:
        """A roctxMark: a region with start == end, as the writer does, or (``as_sample``) a ``rocpd_sample``."""
        if not as_sample:
            return self.add_region(
                name=message,
                category="marker_api",
                start=timestamp,
                end=timestamp,
                stack_id=stack_id,
                tid=tid,
                extdata={"message": ROCTX_MARK_OP},
            )
        track = self.track(tid=self.tid if tid is None else tid, name_id=self.string("marker_api"))
        ev = self.event("marker_api", stack_id, extdata={"message": ROCTX_MARK_OP})
        return self.insert(
            "rocpd_sample",
            id=stack_id,
            track_id=track,
            name_id=self.string(message),
            timestamp_id=self.timestamp(timestamp, PHASE_NONE, track),
            event_id=ev,
        )
