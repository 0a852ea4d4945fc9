"""Writers for synthetic rocprofv3 CSV files with the exact headers of each ROCm version.

Headers: rocprofiler-sdk ``source/lib/output/generateCSV.cpp`` (ROCm 7.0) and the ROCm 6.3
standalone repository (see ``shared/reference/rocprofv3-formats.md`` section 2). Like
rocprofv3, every header field and every string value is quoted and numbers are bare.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KERNEL_TRACE_70 = (
    "Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,"
    "Start_Timestamp,End_Timestamp,LDS_Block_Size,Scratch_Size,VGPR_Count,Accum_VGPR_Count,SGPR_Count,"
    "Workgroup_Size_X,Workgroup_Size_Y,Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z"
).split(",")

KERNEL_TRACE_63 = (
    "Kind,Agent_Id,Queue_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,"
    "End_Timestamp,Private_Segment_Size,Group_Segment_Size,Workgroup_Size_X,Workgroup_Size_Y,Workgroup_Size_Z,"
    "Grid_Size_X,Grid_Size_Y,Grid_Size_Z"
).split(",")

COUNTERS_70 = (
    "Correlation_Id,Dispatch_Id,Agent_Id,Queue_Id,Process_Id,Thread_Id,Grid_Size,Kernel_Id,Kernel_Name,"
    "Workgroup_Size,LDS_Block_Size,Scratch_Size,VGPR_Count,Accum_VGPR_Count,SGPR_Count,Counter_Name,"
    "Counter_Value,Start_Timestamp,End_Timestamp"
).split(",")

COUNTERS_6X = (
    "Correlation_Id,Dispatch_Id,Agent_Id,Queue_Id,Process_Id,Thread_Id,Grid_Size,Kernel_Id,Kernel_Name,"
    "Workgroup_Size,LDS_Block_Size,Scratch_Size,VGPR_Count,SGPR_Count,Counter_Name,Counter_Value"
).split(",")

AGENT_INFO = (
    "Node_Id,Logical_Node_Id,Agent_Type,Cpu_Cores_Count,Simd_Count,Cpu_Core_Id_Base,Simd_Id_Base,Max_Waves_Per_Simd,"
    "Lds_Size_In_Kb,Gds_Size_In_Kb,Num_Gws,Wave_Front_Size,Num_Xcc,Cu_Count,Array_Count,Num_Shader_Banks,"
    "Simd_Arrays_Per_Engine,Cu_Per_Simd_Array,Simd_Per_Cu,Max_Slots_Scratch_Cu,Gfx_Target_Version,Vendor_Id,Device_Id,"
    "Location_Id,Domain,Drm_Render_Minor,Num_Sdma_Engines,Num_Sdma_Xgmi_Engines,Num_Sdma_Queues_Per_Engine,"
    "Num_Cp_Queues,Max_Engine_Clk_Ccompute,Max_Engine_Clk_Fcompute,Sdma_Fw_Version,Fw_Version,Capability,"
    "Cu_Per_Engine,Max_Waves_Per_Cu,Family_Id,Workgroup_Max_Size,Grid_Max_Size,Local_Mem_Size,Hive_Id,Gpu_Id,"
    "Workgroup_Max_Dim_X,Workgroup_Max_Dim_Y,Workgroup_Max_Dim_Z,Grid_Max_Dim_X,Grid_Max_Dim_Y,Grid_Max_Dim_Z,Name,"
    "Vendor_Name,Product_Name,Model_Name"
).split(",")

API_TRACE = "Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp".split(",")

#: A 17-digit base for host and GPU timestamps: float64 cannot hold these exactly.
T0 = 12_345_678_901_234_567


class Raw(str):
    """Cell text written as is, unquoted (e.g. a number in scientific notation, or a malformed one)."""


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, float):
        return f"{value:f}"  # rocprofv3 prints counter values like 16384.000000
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"'
    return str(value)


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Mapping[str, Any]], *, compress: bool = False) -> Path:
    """Write ``rows`` (dicts keyed by header names; absent keys are empty cells) under ``header``."""
    lines = [",".join(f'"{h}"' for h in header)]
    for row in rows:
        unknown = set(row) - set(header)
        assert not unknown, f"columns {unknown} are not in the header"
        lines.append(",".join(_cell(row.get(h)) for h in header))
    data = ("\n".join(lines) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        with gzip.open(path, "wb") as fh:
            fh.write(data)
    else:
        path.write_bytes(data)
    return path


@dataclass(frozen=True)
class Kernel:
    """One kernel dispatch, as rocprofv3 traces it."""

    dispatch_id: int
    name: str
    corr: int
    start: int
    end: int
    tid: int = 1234
    queue: int = 1
    agent: str = "Agent 4"
    grid: tuple[int, int, int] = (4096, 1, 1)
    workgroup: tuple[int, int, int] = (256, 1, 1)

    def row70(self) -> dict[str, Any]:
        return {
            "Kind": "KERNEL_DISPATCH",
            "Agent_Id": self.agent,
            "Queue_Id": self.queue,
            "Stream_Id": self.queue,
            "Thread_Id": self.tid,
            "Dispatch_Id": self.dispatch_id,
            "Kernel_Id": 10 + len(self.name),
            "Kernel_Name": self.name,
            "Correlation_Id": self.corr,
            "Start_Timestamp": self.start,
            "End_Timestamp": self.end,
            "LDS_Block_Size": 0,
            "Scratch_Size": 0,
            "VGPR_Count": 8,
            "Accum_VGPR_Count": 0,
            "SGPR_Count": 16,
            "Workgroup_Size_X": self.workgroup[0],
            "Workgroup_Size_Y": self.workgroup[1],
            "Workgroup_Size_Z": self.workgroup[2],
            "Grid_Size_X": self.grid[0],
            "Grid_Size_Y": self.grid[1],
            "Grid_Size_Z": self.grid[2],
        }

    def counter_rows(self, pid: int, counters: Mapping[str, float]) -> list[dict[str, Any]]:
        base = {
            "Correlation_Id": self.corr,
            "Dispatch_Id": self.dispatch_id,
            "Agent_Id": self.agent,
            "Queue_Id": self.queue,
            "Process_Id": pid,
            "Thread_Id": self.tid,
            "Grid_Size": self.grid[0] * self.grid[1] * self.grid[2],
            "Kernel_Id": 10 + len(self.name),
            "Kernel_Name": self.name,
            "Workgroup_Size": self.workgroup[0] * self.workgroup[1] * self.workgroup[2],
            "LDS_Block_Size": 0,
            "Scratch_Size": 0,
            "VGPR_Count": 8,
            "Accum_VGPR_Count": 0,
            "SGPR_Count": 16,
            "Start_Timestamp": self.start,
            "End_Timestamp": self.end,
        }
        return [{**base, "Counter_Name": name, "Counter_Value": float(value)} for name, value in counters.items()]


def api(function: str, corr: int, start: int, end: int, *, pid: int = 1234, tid: int = 1234) -> dict[str, Any]:
    """A HIP runtime API call row."""
    return {
        "Domain": "HIP_RUNTIME_API_EXT",
        "Function": function,
        "Process_Id": pid,
        "Thread_Id": tid,
        "Correlation_Id": corr,
        "Start_Timestamp": start,
        "End_Timestamp": end,
    }


def rng(message: str, corr: int, start: int, end: int, *, pid: int = 1234, tid: int = 1234) -> dict[str, Any]:
    """A roctx thread range (push/pop) row: ``Function`` is the user message."""
    return {
        "Domain": "MARKER_CORE_RANGE_API",
        "Function": message,
        "Process_Id": pid,
        "Thread_Id": tid,
        "Correlation_Id": corr,
        "Start_Timestamp": start,
        "End_Timestamp": end,
    }


def mark(message: str, corr: int, t: int, *, pid: int = 1234, tid: int = 1234) -> dict[str, Any]:
    """A roctxMarkA row (start == end)."""
    return {
        "Domain": "MARKER_CORE_API",
        "Function": message,
        "Process_Id": pid,
        "Thread_Id": tid,
        "Correlation_Id": corr,
        "Start_Timestamp": t,
        "End_Timestamp": t,
    }


def write_pass(
    directory: Path,
    pid: int,
    *,
    kernels: Sequence[Kernel] | None = None,
    markers: Sequence[Mapping[str, Any]] | None = None,
    apis: Sequence[Mapping[str, Any]] | None = None,
    counters: Mapping[int, Mapping[str, float]] | None = None,
    counter_kernels: Sequence[Kernel] | None = None,
) -> Path:
    """Write one pass directory as rocprofv3 ``-f csv`` names it (``<pid>_<domain>.csv``).

    ``counters`` maps a dispatch id to its counter values; their rows come from
    ``counter_kernels`` (default: ``kernels``).
    """
    if kernels is not None:
        write_csv(directory / f"{pid}_kernel_trace.csv", KERNEL_TRACE_70, [k.row70() for k in kernels])
    if markers is not None:
        write_csv(directory / f"{pid}_marker_api_trace.csv", API_TRACE, markers)
    if apis is not None:
        write_csv(directory / f"{pid}_hip_api_trace.csv", API_TRACE, apis)
    if counters is not None:
        source = {k.dispatch_id: k for k in (counter_kernels if counter_kernels is not None else kernels or [])}
        rows = [r for did, values in counters.items() for r in source[did].counter_rows(pid, values)]
        write_csv(directory / f"{pid}_counter_collection.csv", COUNTERS_70, rows)
    return directory


class Recorder:
    """A host process under ``rocprofv3 --kernel-trace --marker-trace --hip-runtime-trace``.

    Host threads push and pop roctx ranges and launch kernels; every roctx and HIP call takes
    the next id of one process-wide correlation counter, as rocprofiler-sdk does. The GPU runs
    the kernels in launch order, each starting ``gpu_lag`` ns after its launch returned at the
    earliest, so (like llama.cpp, which enqueues a whole graph and synchronises later) kernels
    run after the range that launched them has closed.
    """

    def __init__(self, pid: int = 4242, *, t0: int = T0, host_step: int = 40, gpu_lag: int = 150, kernel_ns: int = 700):
        self.pid = pid
        self.t = t0
        self.host_step = host_step
        self.gpu_lag = gpu_lag
        self.kernel_ns = kernel_ns
        self.corr = 0
        self.gpu_free = t0
        self.markers: list[dict[str, Any]] = []
        self.apis: list[dict[str, Any]] = []
        self.kernels: list[Kernel] = []
        #: dispatch id -> messages of the ranges open on the launching thread (outermost first)
        self.open_at_launch: dict[int, list[str]] = {}
        self._stacks: dict[int, list[tuple[str, int, int]]] = {}

    def _tick(self, step: int | None = None) -> int:
        self.t += self.host_step if step is None else step
        return self.t

    def _next_corr(self) -> int:
        self.corr += 1
        return self.corr

    def push(self, message: str, tid: int | None = None) -> None:
        tid = self.pid if tid is None else tid
        self._stacks.setdefault(tid, []).append((message, self._next_corr(), self._tick()))

    def pop(self, tid: int | None = None) -> None:
        tid = self.pid if tid is None else tid
        message, corr, start = self._stacks[tid].pop()
        self.markers.append(rng(message, corr, start, self._tick(), pid=self.pid, tid=tid))

    def mark(self, message: str, tid: int | None = None) -> None:
        tid = self.pid if tid is None else tid
        self.markers.append(mark(message, self._next_corr(), self._tick(), pid=self.pid, tid=tid))

    def launch(self, name: str, tid: int | None = None) -> Kernel:
        tid = self.pid if tid is None else tid
        corr = self._next_corr()
        start = self._tick()
        end = self._tick(10)
        self.apis.append(api("hipLaunchKernel", corr, start, end, pid=self.pid, tid=tid))
        gpu_start = max(self.gpu_free, end + self.gpu_lag)
        kernel = Kernel(len(self.kernels) + 1, name, corr, gpu_start, gpu_start + self.kernel_ns, tid=tid)
        self.gpu_free = kernel.end
        self.kernels.append(kernel)
        self.open_at_launch[kernel.dispatch_id] = [m for m, _, _ in self._stacks.get(tid, [])]
        return kernel

    def call(self, function: str, tid: int | None = None, *, duration: int = 30) -> None:
        """A HIP call that launches no kernel (hipMemcpy, hipMalloc...)."""
        tid = self.pid if tid is None else tid
        corr = self._next_corr()
        start = self._tick()
        self.apis.append(api(function, corr, start, self._tick(duration), pid=self.pid, tid=tid))

    def sync(self, tid: int | None = None) -> None:
        """hipStreamSynchronize: the host waits until the GPU has run every kernel."""
        tid = self.pid if tid is None else tid
        corr = self._next_corr()
        start = self._tick()
        end = max(start, self.gpu_free) + 5
        self.apis.append(api("hipStreamSynchronize", corr, start, end, pid=self.pid, tid=tid))
        self.t = end

    def write(self, directory: Path, *, hip: bool = True, markers: bool = True) -> Path:
        """Write the pass as ``<pid>_kernel_trace.csv`` etc. (records in completion order)."""
        assert not any(self._stacks.values()), "ranges left open"
        return write_pass(
            directory,
            self.pid,
            kernels=self.kernels,
            markers=self.markers if markers else None,
            apis=self.apis if hip else None,
        )


#: rocprofv3 of ROCm 6.2 (rocprofiler-sdk generateCSV.cpp at tag rocm-6.2.0): no Dispatch_Id, no Thread_Id.
KERNEL_TRACE_62 = (
    "Kind,Agent_Id,Queue_Id,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,End_Timestamp,Private_Segment_Size,"
    "Group_Segment_Size,Workgroup_Size_X,Workgroup_Size_Y,Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z"
).split(",")
#: ... and its counter_collection.csv: 15 columns, integer values, no Kernel_Id, no timestamps.
COUNTERS_62 = (
    "Correlation_Id,Dispatch_Id,Agent_Id,Queue_Id,Process_Id,Thread_Id,Grid_Size,Kernel_Name,Workgroup_Size,"
    "LDS_Block_Size,Scratch_Size,VGPR_Count,SGPR_Count,Counter_Name,Counter_Value"
).split(",")


def row62(k: Kernel) -> dict[str, Any]:
    """A ROCm 6.2 kernel_trace.csv row (Agent_Id a plain logical node id)."""
    full = k.row70()
    full["Agent_Id"] = 4
    full["Private_Segment_Size"], full["Group_Segment_Size"] = 0, 0
    return {h: full[h] for h in KERNEL_TRACE_62}


def counter_rows62(k: Kernel, pid: int, counters: Mapping[str, int]) -> list[dict[str, Any]]:
    """ROCm 6.2 counter_collection.csv rows of one dispatch (values printed as integers)."""
    rows = []
    for row in k.counter_rows(pid, {n: float(v) for n, v in counters.items()}):
        row["Agent_Id"] = 4
        row["Counter_Value"] = Raw(str(int(row["Counter_Value"])))
        rows.append({h: row[h] for h in COUNTERS_62})
    return rows
