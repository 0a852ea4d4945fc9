"""Writers for small rocmProfileData (RPD) traces with the schema rpd_tracer's files have.

DDL: ``ROCm/rocmProfileData`` ``rocpd_python/rocpd/schema_data/tableSchema.cmd`` (schema 2, as in
the recorded ``raptor/tests/mytrace.rpd``; schema 3 moves API arguments to ``rocpd_ustring`` and
adds ``domain_id``/``category_id`` and ``rocpd_counter``). What the tracer writes
(``RoctracerDataSource.cpp``, ``ApiTable.cpp``, ``OpTable.cpp``): ``rocpd_api.id`` is the call's
correlation id, ``rocpd_api_ops`` links it to its ops, a roctx push/pop pair is one ``UserMarker``
row from push to pop with the message in ``args``, a mark has ``start == end``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

_V2 = """
CREATE TABLE "rocpd_string" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "string" varchar(4096) NOT NULL);
CREATE TABLE "rocpd_op" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "gpuId" integer NOT NULL,
  "queueId" integer NOT NULL, "sequenceId" integer NOT NULL, "completionSignal" varchar(18) NOT NULL,
  "start" integer NOT NULL, "end" integer NOT NULL, "description_id" integer NOT NULL, "opType_id" integer NOT NULL);
CREATE TABLE "rocpd_api" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "pid" integer NOT NULL,
  "tid" integer NOT NULL, "start" integer NOT NULL, "end" integer NOT NULL, "apiName_id" integer NOT NULL,
  "args_id" integer NOT NULL);
CREATE TABLE "rocpd_api_ops" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "api_id" integer NOT NULL,
  "op_id" integer NOT NULL);
CREATE TABLE "rocpd_kernelapi" ("api_ptr_id" integer NOT NULL PRIMARY KEY, "stream" varchar(18) NOT NULL,
  "gridX" integer NOT NULL, "gridY" integer NOT NULL, "gridZ" integer NOT NULL, "workgroupX" integer NOT NULL,
  "workgroupY" integer NOT NULL, "workgroupZ" integer NOT NULL, "groupSegmentSize" integer NOT NULL,
  "privateSegmentSize" integer NOT NULL, "kernelArgAddress" varchar(18) NOT NULL, "aquireFence" varchar(8) NOT NULL,
  "releaseFence" varchar(8) NOT NULL, "codeObject_id" integer NOT NULL, "kernelName_id" integer NOT NULL);
CREATE TABLE "rocpd_metadata" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "tag" varchar(4096) NOT NULL,
  "value" varchar(4096) NOT NULL);
INSERT INTO "rocpd_metadata"(tag, value) VALUES ("schema_version", "2");
"""

_V3 = """
CREATE TABLE "rocpd_string" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "string" varchar(4096) NOT NULL);
CREATE TABLE "rocpd_ustring" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "string" varchar(4096) NOT NULL);
CREATE TABLE "rocpd_op" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "gpuId" integer NOT NULL,
  "queueId" integer NOT NULL, "sequenceId" integer NOT NULL, "start" integer NOT NULL, "end" integer NOT NULL,
  "description_id" bigint NOT NULL, "opType_id" bigint NOT NULL);
CREATE TABLE "rocpd_api" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "pid" integer NOT NULL,
  "tid" integer NOT NULL, "start" integer NOT NULL, "end" integer NOT NULL, "apiName_id" bigint NOT NULL,
  "category_id" bigint NOT NULL, "domain_id" bigint NOT NULL, "args_id" bigint NOT NULL);
CREATE TABLE "rocpd_api_ops" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "api_id" bigint NOT NULL,
  "op_id" bigint NOT NULL);
CREATE TABLE "rocpd_kernelapi" ("api_ptr_id" bigint NOT NULL PRIMARY KEY, "stream" varchar(18) NOT NULL,
  "gridX" integer NOT NULL, "gridY" integer NOT NULL, "gridZ" integer NOT NULL, "workgroupX" integer NOT NULL,
  "workgroupY" integer NOT NULL, "workgroupZ" integer NOT NULL, "groupSegmentSize" integer NOT NULL,
  "privateSegmentSize" integer NOT NULL, "kernelName_id" bigint NOT NULL);
CREATE TABLE "rocpd_counter" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "value" real NOT NULL,
  "op_id" bigint NOT NULL, "name_id" bigint NOT NULL);
CREATE TABLE "rocpd_metadata" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "tag" varchar(4096) NOT NULL,
  "value" varchar(4096) NOT NULL);
INSERT INTO "rocpd_metadata"(tag, value) VALUES ("schema_version", "3");
"""


@dataclass
class Call:
    """A host API call (``rocpd_api``); ``ops`` are the GPU ops it launched as ``(name, start, end, type)``."""

    name: str
    start: int
    end: int
    tid: int = 500
    pid: int = 500
    ops: list[tuple[str, int, int, str]] = field(default_factory=list)
    grid: tuple[int, int, int] | None = None
    workgroup: tuple[int, int, int] = (256, 1, 1)


@dataclass
class Marker:
    """A ``UserMarker`` row: a roctx push/pop range, or a mark when ``start == end``."""

    message: str
    start: int
    end: int
    tid: int = 500
    pid: int = 500


def write_rpd(
    path: Path,
    calls: Sequence[Call],
    markers: Sequence[Marker] = (),
    *,
    schema: int = 2,
    gpu_id: int = 2,
    counters: dict[int, dict[str, float]] | None = None,
) -> Path:
    """An RPD file. Ids follow the tracer's: API ids are correlation ids; ops are numbered in call order.

    ``counters`` maps an op's 0-based position (in call order) to counter values (schema 3 only).
    """
    con = sqlite3.connect(path)
    con.executescript(_V3 if schema == 3 else _V2)
    strings: dict[str, int] = {}

    def sid(text: str, table: str = "rocpd_string") -> int:
        if table == "rocpd_ustring":  # not deduplicated (schema 3)
            return int(con.execute("INSERT INTO rocpd_ustring(string) VALUES (?)", (text,)).lastrowid or 0)
        if text not in strings:
            strings[text] = int(con.execute("INSERT INTO rocpd_string(string) VALUES (?)", (text,)).lastrowid or 0)
        return strings[text]

    sid("")
    args_table = "rocpd_ustring" if schema == 3 else "rocpd_string"
    op_index = 0
    for api_id, call in enumerate(calls, start=1):
        cols = '(id, pid, tid, start, "end", apiName_id, args_id' + (
            ", category_id, domain_id)" if schema == 3 else ")"
        )
        values = [api_id, call.pid, call.tid, call.start, call.end, sid(call.name), sid("", args_table)]
        if schema == 3:
            values += [sid(""), sid("")]
        con.execute(f"INSERT INTO rocpd_api {cols} VALUES ({','.join('?' * len(values))})", values)
        for name, start, end, op_type in call.ops:
            row = {"gpuId": gpu_id, "queueId": 0, "sequenceId": 0, "start": start, "end": end}
            row |= {"description_id": sid(name), "opType_id": sid(op_type)}
            if schema == 2:
                row["completionSignal"] = ""
            names = ", ".join(f'"{k}"' for k in row)
            sql = f"INSERT INTO rocpd_op({names}) VALUES ({','.join('?' * len(row))})"
            op_id = con.execute(sql, list(row.values())).lastrowid
            con.execute("INSERT INTO rocpd_api_ops(api_id, op_id) VALUES (?, ?)", (api_id, op_id))
            for counter, value in (counters or {}).get(op_index, {}).items():
                con.execute(
                    "INSERT INTO rocpd_counter(value, op_id, name_id) VALUES (?, ?, ?)", (value, op_id, sid(counter))
                )
            op_index += 1
        if call.grid is not None:
            base = [api_id, "0x0", *call.grid, *call.workgroup, 0, 0]
            extra = ["", "", "", 0] if schema == 2 else []
            row = [*base, *extra, sid(call.ops[0][0] if call.ops else "")]
            con.execute(f"INSERT INTO rocpd_kernelapi VALUES ({','.join('?' * len(row))})", row)
    # roctx rows: ids above 2**31, assigned at pop time (ApiTable.cpp), i.e. in end order
    for n, m in enumerate(sorted(markers, key=lambda m: m.end), start=1):
        values = [2**31 + n, m.pid, m.tid, m.start, m.end, sid("UserMarker"), sid(m.message, args_table)]
        cols = '(id, pid, tid, start, "end", apiName_id, args_id'
        if schema == 3:
            values += [sid(""), sid("UserMarker")]
            cols += ", category_id, domain_id"
        con.execute(f"INSERT INTO rocpd_api {cols}) VALUES ({','.join('?' * len(values))})", values)
    con.commit()
    con.close()
    return path
