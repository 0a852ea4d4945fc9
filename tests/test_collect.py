"""rocroof collect: pass planning, command construction and the run/ingest loop, without a GPU.

The rocprofv3 listing below is written in the format printed by rocprofiler-sdk's
``source/bin/rocprofv3-avail.py`` (``listing``): ``GPU``/``Name``/``PMC`` header lines padded to
30 columns, then counter names separated by spaces. The fake runner writes files with the
ROCm 7.0 CSV headers (rocprofiler-sdk ``generateCSV.cpp``).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.capture.collect import execute, make_plan
from rocroof.capture.profilers.base import Device
from rocroof.capture.profilers.rocprofv3 import (
    BLOCK_LIMITS,
    Rocprofv3,
    block_of,
    choose_format,
    parse_list_avail,
    plan_groups,
    resolve_counters,
)
from rocroof.capture.readers import read_capture
from rocroof.cli import cli
from rocroof.errors import ConfigError, ProfilerFailed, ProfilerNotFound
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

LISTING = (
    "{:30}:\t{}\n{:30}:\t{}\n{:30}:\n\n".format("GPU", 0, "Name", "gfx942", "PMC")
    + "GRBM_COUNT      SQ_WAVES        TCC_BUBBLE      TCC_BUBBLE_sum  TCC_EA0_RDREQ   TCC_EA0_RDREQ_sum\n"
    + "TCC_EA0_RDREQ_32B TCC_EA0_RDREQ_32B_sum TCC_EA0_WRREQ TCC_EA0_WRREQ_sum TCC_EA0_WRREQ_64B\n"
    + "TCC_EA0_WRREQ_64B_sum FETCH_SIZE WRITE_SIZE\n\n\n"
    + "{:30}:\t{}\n{:30}:\t{}\n{:30}:\n\n".format("GPU", 1, "Name", "gfx90a", "PMC")
    + "TCC_EA_RDREQ_sum TCC_EA_RDREQ_32B_sum\n"
)


class FakeRocprofv3(Rocprofv3):
    """rocprofv3 with a recorded listing and version instead of a GPU."""

    def __init__(self, version: str | None = "1.0.0", output_format: str | None = None) -> None:
        super().__init__(executable="rocprofv3-fake", output_format=output_format)
        self._version = version

    def locate(self) -> str:
        return "/opt/rocm/bin/rocprofv3"

    def version(self) -> str | None:
        return self._version

    def detect(self) -> Device:
        return parse_list_avail(LISTING)[0]


def test_parse_list_avail_reads_each_gpu_and_its_counters() -> None:
    devices = parse_list_avail(LISTING)
    assert [d.arch for d in devices] == ["gfx942", "gfx90a"]
    assert "TCC_EA0_WRREQ_64B_sum" in devices[0].counters
    assert "WRITE_SIZE" in devices[0].counters
    assert devices[1].counters == {"TCC_EA_RDREQ_sum", "TCC_EA_RDREQ_32B_sum"}


def test_dram_preset_keeps_read_and_write_counters_in_their_own_bundles() -> None:
    bundles = resolve_counters("dram", "gfx942")
    assert bundles == [
        ("TCC_EA0_RDREQ_sum", "TCC_EA0_RDREQ_32B_sum", "TCC_BUBBLE_sum"),
        ("TCC_EA0_WRREQ_sum", "TCC_EA0_WRREQ_64B_sum"),
    ]
    # five TCC counters do not fit the 4 TCC slots of one pass: two passes, formulas intact
    assert plan_groups(bundles, "gfx942") == bundles
    # four TCC counters on gfx90a fit one pass
    assert len(plan_groups(resolve_counters("dram", "gfx90a"), "gfx90a")) == 1


def test_groups_never_exceed_block_limits() -> None:
    names = [f"TCC_COUNTER{i}_sum" for i in range(9)] + [f"SQ_INSTS_X{i}" for i in range(10)] + ["TA_BUSY_sum"] * 1
    groups = plan_groups([(n,) for n in names], "gfx942")
    for group in groups:
        per_block: dict[str, int] = {}
        for name in group:
            per_block[block_of(name)] = per_block.get(block_of(name), 0) + 1
        assert all(n <= BLOCK_LIMITS[b] for b, n in per_block.items())
    assert sorted(c for g in groups for c in g) == sorted(names)
    assert len(groups) == 3  # 9 TCC counters need ceil(9/4) passes


def test_derived_counters_cost_their_inputs() -> None:
    # FETCH_SIZE on gfx942 expands to TCC_BUBBLE, TCC_EA0_RDREQ, TCC_EA0_RDREQ_32B (3 TCC slots)
    assert plan_groups([("FETCH_SIZE",), ("WRITE_SIZE",)], "gfx942") == [("FETCH_SIZE",), ("WRITE_SIZE",)]
    with pytest.raises(ConfigError, match="needs 3 TCC"):
        plan_groups([("FETCH_SIZE",)], "gfx942", limits={"TCC": 2})


def test_output_format_follows_the_sdk_version() -> None:
    assert choose_format("1.0.0") == "rocpd"  # ROCm 7.0
    assert choose_format("0.6.0") == "csv"  # ROCm 6.4
    assert choose_format(None) == "csv"
    assert choose_format("1.0.0", "csv") == "csv"


def test_plan_commands(tmp_path: Path) -> None:
    out = tmp_path / "cap"
    plan = make_plan(["llama-bench", "-m", "m.gguf"], out, profiler=FakeRocprofv3())
    assert [r.label for r in plan.runs] == ["trace", "pass_1", "pass_2"]
    trace, p1, _ = plan.runs
    assert trace.counters == ()
    assert "--pmc" not in trace.argv
    for flag in ("--kernel-trace", "--marker-trace", "--hip-runtime-trace"):
        assert flag in trace.argv and flag in p1.argv
    assert trace.argv[trace.argv.index("--output-format") + 1] == "rocpd"
    assert trace.argv[trace.argv.index("-d") + 1] == str(out / "trace")
    assert trace.argv[-4:] == ("--", "llama-bench", "-m", "m.gguf")
    assert p1.argv[1:5] == ("--pmc", "TCC_EA0_RDREQ_sum", "TCC_EA0_RDREQ_32B_sum", "TCC_BUBBLE_sum")
    assert trace.env.get("GGML_CUDA_MARKERS") == "1"
    assert trace.env["GGML_CUDA_OP_META"] == str(out / "trace" / "ggml-op-meta.json")
    assert "GGML_CUDA_OP_META" not in p1.env  # the MoE read-back only perturbs the trace pass


def test_plan_refuses_counters_the_gpu_does_not_list(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not list counter"):
        make_plan(["app"], tmp_path / "o", counters="NOT_A_COUNTER", profiler=FakeRocprofv3())


def test_plan_refuses_a_non_empty_output_dir_and_an_empty_command(tmp_path: Path) -> None:
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "x").write_text("x")
    from rocroof.errors import InputError

    with pytest.raises(InputError, match="not empty"):
        make_plan(["app"], tmp_path / "o", profiler=FakeRocprofv3())
    with pytest.raises(InputError, match="no application command"):
        make_plan([], tmp_path / "p", profiler=FakeRocprofv3())


def test_missing_rocprofv3_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ProfilerNotFound, match="rocroof ingest"):
        Rocprofv3(executable="rocprofv3-definitely-not-installed").locate()
    for args, start in (
        ([], "Error: no profiler on PATH: rocroof collect drives rocprofv3 (AMD"),
        (["--profiler", "rocprofv3"], "Error: rocprofv3 not found on PATH"),
        (["--profiler", "ncu"], "Error: ncu not found on PATH"),
    ):
        result = CliRunner().invoke(
            cli, ["collect", *args, "--out", str(tmp_path / "o"), "--", "true"], env={"PATH": "/nonexistent"}
        )
        assert result.exit_code == 1
        assert result.output.startswith(start)
        assert "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_dry_run_prints_the_plan_without_a_gpu(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["collect", "--dry-run", "--arch", "gfx942", "--out", str(tmp_path / "o"), "--", "llama-bench", "-m", "x"],
        env={"PATH": "/nonexistent"},
    )
    assert result.exit_code == 0, result.output
    assert "3 application run(s)" in result.output
    assert "--pmc TCC_EA0_WRREQ_sum TCC_EA0_WRREQ_64B_sum" in result.output
    assert not (tmp_path / "o").exists()


# ---- execute with a fake rocprofv3 that writes CSV output ------------------------------

KERNEL_HEADER = (
    "Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,"
    "End_Timestamp,LDS_Block_Size,Scratch_Size,VGPR_Count,Accum_VGPR_Count,SGPR_Count,Workgroup_Size_X,"
    "Workgroup_Size_Y,Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z"
).split(",")
COUNTER_HEADER = (
    "Correlation_Id,Dispatch_Id,Agent_Id,Queue_Id,Process_Id,Thread_Id,Grid_Size,Kernel_Id,Kernel_Name,"
    "Workgroup_Size,LDS_Block_Size,Scratch_Size,VGPR_Count,Accum_VGPR_Count,SGPR_Count,Counter_Name,Counter_Value,"
    "Start_Timestamp,End_Timestamp"
).split(",")
API_HEADER = "Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp".split(",")
AGENT_HEADER = ["Node_Id", "Logical_Node_Id", "Agent_Type", "Name", "Product_Name", "Cu_Count"]

# two ggml ops; op 1 launches two kernels. Per kernel: (invocation, name, counter values)
KERNELS = [
    (
        1,
        "mul_mat_vec_q",
        {
            "TCC_EA0_RDREQ_sum": 1100,
            "TCC_EA0_RDREQ_32B_sum": 0,
            "TCC_BUBBLE_sum": 1000,
            "TCC_EA0_WRREQ_sum": 10,
            "TCC_EA0_WRREQ_64B_sum": 10,
        },
    ),
    (
        2,
        "quantize_q8_1",
        {
            "TCC_EA0_RDREQ_sum": 40,
            "TCC_EA0_RDREQ_32B_sum": 8,
            "TCC_BUBBLE_sum": 0,
            "TCC_EA0_WRREQ_sum": 20,
            "TCC_EA0_WRREQ_64B_sum": 4,
        },
    ),
    (
        2,
        "mul_mat_q",
        {
            "TCC_EA0_RDREQ_sum": 500,
            "TCC_EA0_RDREQ_32B_sum": 0,
            "TCC_BUBBLE_sum": 500,
            "TCC_EA0_WRREQ_sum": 2,
            "TCC_EA0_WRREQ_64B_sum": 2,
        },
    ),
]
OPS = {1: "ggml:MUL_MAT:Qcur-0:1", 2: "ggml:MUL_MAT:ffn_up-0:2"}


def _write(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        w.writerow(header)
        w.writerows(rows)


def fake_runner(missing: set[str] = frozenset()) -> object:  # type: ignore[assignment]
    """A runner that writes one pass of rocprofv3 CSV output for the planned command."""

    def run(argv: Sequence[str], env: dict[str, str], log: Path) -> int:
        out = Path(argv[list(argv).index("-d") + 1])
        out.mkdir(parents=True, exist_ok=True)
        log.write_text("fake rocprofv3\n")
        pid, tid = 4242, 4242
        counters = []
        if "--pmc" in argv:
            i = list(argv).index("--pmc") + 1
            while not argv[i].startswith("--"):
                counters.append(argv[i])
                i += 1
        t, corr = 1_000_000_000_000_000, 1
        markers, api, kernels, values = [], [], [], []
        by_op: dict[int, list[int]] = {}
        for k, (inv, _, _) in enumerate(KERNELS):
            by_op.setdefault(inv, []).append(k)
        dispatch = 0
        for inv, ks in by_op.items():
            start = t
            corr_push = corr
            corr += 1
            for k in ks:
                dispatch += 1
                launch = t + 100
                api.append(["HIP_RUNTIME_API_EXT", "hipLaunchKernel", pid, tid, corr, launch, launch + 50])
                gpu_start = t + 100_000  # the GPU runs it long after the range closed
                kernels.append(
                    [
                        "KERNEL_DISPATCH",
                        "Agent 1",
                        1,
                        1,
                        tid,
                        dispatch,
                        k,
                        KERNELS[k][1],
                        corr,
                        gpu_start,
                        gpu_start + 5000,
                        0,
                        0,
                        8,
                        0,
                        16,
                        256,
                        1,
                        1,
                        4096,
                        1,
                        1,
                    ]
                )
                for name in counters:
                    if name not in missing:
                        values.append(
                            [
                                corr,
                                dispatch,
                                "Agent 1",
                                1,
                                pid,
                                tid,
                                4096,
                                k,
                                KERNELS[k][1],
                                256,
                                0,
                                0,
                                8,
                                0,
                                16,
                                name,
                                float(KERNELS[k][2][name]),
                                gpu_start,
                                gpu_start + 5000,
                            ]
                        )
                corr += 1
                t += 1000
            markers.append(["MARKER_CORE_RANGE_API", OPS[inv], pid, tid, corr_push, start, t])
            t += 10
        _write(out / f"{pid}_kernel_trace.csv", KERNEL_HEADER, kernels)
        _write(out / f"{pid}_hip_api_trace.csv", API_HEADER, api)
        _write(out / f"{pid}_marker_api_trace.csv", API_HEADER, markers)
        _write(
            out / f"{pid}_agent_info.csv",
            AGENT_HEADER,
            [[0, 0, "CPU", "cpu", "EPYC", 0], [1, 1, "GPU", "gfx942", "MI300X", 304]],
        )
        if counters:
            _write(out / f"{pid}_counter_collection.csv", COUNTER_HEADER, values)
        return 0

    return run


def _gfx942(c: dict[str, int]) -> tuple[int, int]:
    read = (
        128 * c["TCC_BUBBLE_sum"]
        + 32 * c["TCC_EA0_RDREQ_32B_sum"]
        + 64 * (c["TCC_EA0_RDREQ_sum"] - c["TCC_BUBBLE_sum"] - c["TCC_EA0_RDREQ_32B_sum"])
    )
    write = 32 * (c["TCC_EA0_WRREQ_sum"] - c["TCC_EA0_WRREQ_64B_sum"]) + 64 * c["TCC_EA0_WRREQ_64B_sum"]
    return read, write


def test_execute_then_ingest_joins_passes_per_invocation(tmp_path: Path) -> None:
    app = ["llama-completion", "-m", "tiny.gguf"]
    plan = make_plan(app, tmp_path / "cap", profiler=FakeRocprofv3(output_format="csv"))
    capture_dir = execute(plan, app, runner=fake_runner())  # type: ignore[arg-type]
    manifest = json.loads((capture_dir / "rocroof-collect.json").read_text())
    assert manifest["command"] == app
    assert [p["dir"] for p in manifest["passes"]] == ["trace", "pass_1", "pass_2"]

    capture = read_capture(capture_dir)
    db = tmp_path / "r.db"
    run_id = Store(db).write_run(build_run(capture))
    ro = Store(db, read_only=True)
    rows = ro.query(
        f"SELECT invocation, op, kernel_name, duration_ns, dram_read_bytes, dram_write_bytes, attribution_method "
        f"FROM dispatch_dram WHERE run_id={run_id} ORDER BY dispatch_index"
    ).to_dict("records")
    assert [r["kernel_name"] for r in rows] == [k[1] for k in KERNELS]
    assert [r["invocation"] for r in rows] == [k[0] for k in KERNELS]
    for row, (_, _, counters) in zip(rows, KERNELS, strict=True):
        read, write = _gfx942(counters)
        assert row["dram_read_bytes"] == read
        assert row["dram_write_bytes"] == write
        assert row["duration_ns"] == 5000
        assert row["attribution_method"] == "launch_api"
    run = ro.query(f"SELECT timing_source, command, gpu_arch FROM run WHERE run_id={run_id}").iloc[0]
    assert run["timing_source"] == "trace"
    assert run["command"] == "llama-completion -m tiny.gguf"
    assert run["gpu_arch"] == "gfx942"


def test_a_requested_counter_missing_from_the_output_is_reported(tmp_path: Path) -> None:
    app = ["app"]
    plan = make_plan(app, tmp_path / "cap", profiler=FakeRocprofv3(output_format="csv"))
    capture_dir = execute(plan, app, runner=fake_runner(missing={"TCC_BUBBLE_sum"}))  # type: ignore[arg-type]
    frames = build_run(read_capture(capture_dir))
    codes = {n.code: n.message for n in frames.notes}
    assert "TCC_BUBBLE_sum" in codes["missing-counter"]
    dram = frames.tables["dram_traffic"]
    assert dram["dram_read_bytes"].isna().all()  # never silently zero
    assert dram["dram_write_bytes"].notna().all()


def test_a_failing_run_reports_its_log_tail(tmp_path: Path) -> None:
    def failing(argv: Sequence[str], env: dict[str, str], log: Path) -> int:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("starting\nE tool.cpp:123] Request exceeds the capabilities of the hardware to collect\n")
        return 134

    plan = make_plan(["app"], tmp_path / "cap", profiler=FakeRocprofv3())
    with pytest.raises(ProfilerFailed, match="status 134: E tool.cpp:123] Request exceeds"):
        execute(plan, ["app"], runner=failing)
