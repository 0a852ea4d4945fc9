"""Writers for synthetic legacy rocprof captures, modelled on what rocprof v1 and rocprofv2 write.

Formats read at their source, ``ROCm/rocprofiler`` ``7fa8139``: ``bin/tblextr.py`` (the kernel
CSV: ``Index,KernelName``, properties, counters, ``DispatchNs,BeginNs,EndNs,CompleteNs``;
``None`` for missing cells; the ``rocTX`` table with marks as ``[t, t + 1]``), ``bin/sqlitedb.py``
(``--stats`` re-dumps the CSV from SQLite with every header name quoted and ``DurationNs``
appended), ``test/tool/tool.cpp`` (the property columns by ROCm version) and
``plugin/file/file.cpp`` (rocprofv2 ``results_<pid>.csv``, a blank line after the header).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Property columns of rocprof v1 from ROCm 5.3 on (test/tool/tool.cpp).
PROPS_53 = "gpu-id queue-id queue-index pid tid grd wgr lds scr arch_vgpr accum_vgpr sgpr wave_size sig obj".split()
#: Before ROCm 5.3: vgpr, sgpr, fbar.
PROPS_OLD = "gpu-id queue-id queue-index pid tid grd wgr lds scr vgpr sgpr fbar sig obj".split()
TIMES = ["DispatchNs", "BeginNs", "EndNs", "CompleteNs"]

V2_HEADER = (
    "Dispatch_ID,GPU_ID,Queue_ID,Queue_Index,PID,TID,GRD,WGR,LDS,SCR,Arch_VGPR,ACCUM_VGPR,SGPR,Wave_Size,SIG,OBJ,"
    "Kernel_Name,Start_Timestamp,End_Timestamp,Correlation_ID"
).split(",")


@dataclass
class Kernel:
    """One dispatch: its name, host dispatch time and GPU start/end (ns), and counter values."""

    name: str
    dispatch_ns: int | None
    begin_ns: int | None
    end_ns: int | None
    complete_ns: int | None = None
    counters: dict[str, float] = field(default_factory=dict)
    pid: int = 4242
    tid: int = 4242
    gpu_id: int = 2


def _props(k: Kernel, index: int, columns: Sequence[str]) -> list[str]:
    values = {
        "gpu-id": str(k.gpu_id),
        "queue-id": "0",
        "queue-index": str(index * 2),
        "pid": str(k.pid),
        "tid": str(k.tid),
        "grd": "1048576",
        "wgr": "256",
        "lds": "0",
        "scr": "0",
        "arch_vgpr": "8",
        "accum_vgpr": "4",
        "vgpr": "8",
        "sgpr": "16",
        "fbar": "0",
        "wave_size": "64",
        "sig": "0x0",
        "obj": "0x7febef7c8ec0",
    }
    return [values[c] for c in columns]


def _num(v: float | int | None) -> str:
    if v is None:
        return "None"
    return f"{v:.10f}" if isinstance(v, float) else str(v)


def kernel_csv(
    path: Path,
    kernels: Sequence[Kernel],
    *,
    counters: Sequence[str] = (),
    timestamps: bool = True,
    stats: bool = False,
    props: Sequence[str] = PROPS_53,
) -> Path:
    """A rocprof v1 kernel CSV: plain (``--timestamp on``) or quoted with ``DurationNs`` (``--stats``)."""
    header = ["Index", "KernelName", *props, *counters, *(TIMES if timestamps else [])]
    if stats:
        header.append("DurationNs")
    lines = [",".join(f'"{h}"' for h in header) if stats else ",".join(header)]
    for i, k in enumerate(kernels):
        # sqlitedb.py quotes every TEXT value when --stats re-dumps the table: the name and sig/obj
        texts = [f'"{p}"' if stats and p.startswith("0x") else p for p in _props(k, i, props)]
        cells = [str(i), f'"{k.name}"', *texts]
        cells += [_num(k.counters.get(c)) for c in counters]
        if timestamps:
            cells += [_num(k.dispatch_ns), _num(k.begin_ns), _num(k.end_ns), _num(k.complete_ns)]
        if stats:
            duration = k.end_ns - k.begin_ns if k.end_ns is not None and k.begin_ns is not None else None
            cells.append(_num(duration))
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Roctx:
    """One line of roctx_trace.txt: ``cid`` 0 mark, 1 push, 2 pop, 3 start, 4 stop."""

    ns: int
    cid: int
    message: str = ""
    rid: int = 0
    pid: int = 4242
    tid: int = 4242


def roctx_trace(path: Path, calls: Sequence[Roctx]) -> Path:
    """A raw roctx_trace.txt (roctracer's file plugin): ``<ns> <pid>:<tid> <cid>:<rid>:"<msg>"``."""
    path.write_text("".join(f'{c.ns} {c.pid}:{c.tid} {c.cid}:{c.rid}:"{c.message}"\n' for c in calls))
    return path


def results_db(
    path: Path, kernels: Sequence[Kernel] = (), roctx: Sequence[tuple[int, int, int, int, str]] = ()
) -> Path:
    """rocprof v1's results.db: ``KERN`` as tblextr.py types it, and ``rocTX`` rows
    ``(BeginNs, EndNs, pid, tid, Name)`` (a mark is ``(t, t + 1, ...)``)."""
    con = sqlite3.connect(path)
    cols = ["Index", "KernelName", *PROPS_53, *TIMES, "DurationNs"]
    con.execute("CREATE TABLE KERN (" + ", ".join(f'"{c}"' for c in cols) + ")")
    for i, k in enumerate(kernels):
        props = _props(k, i, PROPS_53)
        row = [i, f'"{k.name}"', *[p if p.startswith("0x") else int(p) for p in props]]
        row += [k.dispatch_ns, k.begin_ns, k.end_ns, k.complete_ns, (k.end_ns or 0) - (k.begin_ns or 0)]
        con.execute(f"INSERT INTO KERN VALUES ({','.join('?' * len(cols))})", row)
    con.execute(
        'CREATE TABLE rocTX ("BeginNs" INTEGER, "EndNs" INTEGER, "pid" INTEGER, "tid" INTEGER, '
        '"Name" TEXT, "Index" INTEGER, "__section" INTEGER, "__lane" INTEGER)'
    )
    for n, (b, e, pid, tid, name) in enumerate(roctx):
        con.execute("INSERT INTO rocTX VALUES (?, ?, ?, ?, ?, ?, 0, ?)", (b, e, str(pid), tid, name, n, tid))
    con.commit()
    con.close()
    return path


SYSINFO = """CMD: /opt/rocm-6.0.2/bin/rocminfo
ROCk module is loaded
=====================
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD EPYC 7763 64-Core Processor
  Marketing Name:          AMD EPYC 7763 64-Core Processor
  Device Type:             CPU
  Node:                    0
  Compute Unit:            64
  Pool Info:
    Pool 1
      Segment:                 GLOBAL; FLAGS: COARSE GRAINED
*******
Agent 2
*******
  Name:                    AMD EPYC 7763 64-Core Processor
  Marketing Name:          AMD EPYC 7763 64-Core Processor
  Device Type:             CPU
  Node:                    1
  Compute Unit:            64
*******
Agent 3
*******
  Name:                    gfx90a
  Uuid:                    GPU-0123456789abcdef
  Marketing Name:          {marketing}
  Device Type:             GPU
  Cache Info:
    L1:                      16(0x10) KB
    L2:                      8192(0x2000) KB
  Node:                    2
  Compute Unit:            {cus}
  Max Clock Freq. (MHz):   1700
  Wavefront Size:          64(0x40)
"""


def sysinfo(path: Path, marketing: str = "AMD Instinct MI250X / MI250", cus: int = 110) -> Path:
    """rocminfo output as rocprof v1 saves it (``results.sysinfo.txt``): two CPU agents, one GPU on node 2."""
    path.write_text(SYSINFO.format(marketing=marketing, cus=cus))
    return path


def v2_results(path: Path, kernels: Sequence[Kernel], counters: Sequence[str] = ()) -> Path:
    """A rocprofv2 ``results_<pid>.csv``: the header, a blank line, then the rows (plugin/file/file.cpp)."""
    lines = [",".join([*V2_HEADER, *counters]), ""]
    for i, k in enumerate(kernels, start=1):
        cells = [
            str(i),
            str(k.gpu_id),
            "1",
            str(i),
            str(k.pid),
            str(k.tid),
            "1048576",
            "256",
            "0",
            "0",
            "8",
            "4",
            "16",
            "64",
            "0x0",
            "0x7f0",
            f'"{k.name}"',
            _num(k.begin_ns),
            _num(k.end_ns),
            str(i),
        ]
        cells += [_num(k.counters.get(c)) for c in counters]
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path
