"""Build small rocpd SQLite databases for tests, in the documented schema.

The layout follows rocprofiler-sdk ``rocpd_tables.sql`` / ``rocpd_views.sql`` (schema
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


def create_views(conn: sqlite3.Connection, uuids: Sequence[str]) -> None:
    """Create the unsuffixed ``rocpd_<table>`` views (``UNION ALL`` over several uuids, as ``rocpd merge``)."""
    for table in TABLES:
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
    path: Path, *, uuid: str = UUID_A, views: bool = True, pid: int = 4242, tid: int = 4242
) -> Iterator[RocpdBuilder]:
    """A new one-process rocpd database at ``path``, with its views unless ``views`` is False.

    Yields the builder; on exit commits and closes the connection (also on error, so no
    ResourceWarning leaks).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        builder = RocpdBuilder(conn, uuid, pid=pid, tid=tid)
        if views:  # the writer creates the views right after the tables, before any data
            create_views(conn, [uuid])
        yield builder
        conn.commit()
    finally:
        conn.close()
