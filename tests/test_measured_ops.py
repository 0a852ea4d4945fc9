"""Measured operations from counters (rocroof.analysis.ops) and the per-opcode cells of ncu's CSV.

Expected values are the H200 counter probe's known instruction counts (tools/h200/counter-probe:
132 blocks x 128 threads x 1,024 loop iterations), worked by hand from the formulas' sources.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rocroof.analysis.ops import DP4A_COUNTER, counter_names, measured_ops
from rocroof.capture.readers.nvidia import instance_cells

THREADS = 132 * 128
LOOP = 1024


def test_nvidia_probe_counts() -> None:
    # the probe's four kernels as Nsight Compute counted them (docs/measured-ops.md)
    wide = pd.DataFrame(
        {
            "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": [0, 0, 0, 0],
            "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": [0, 0, 0, 0],
            "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": [0, THREADS * LOOP, 0, 0],
            "sm__sass_thread_inst_executed_op_hadd_pred_on.sum": [0, 0, 0, 0],
            "sm__sass_thread_inst_executed_op_hmul_pred_on.sum": [0, 0, 0, 0],
            "sm__sass_thread_inst_executed_op_hfma_pred_on.sum": [16_896, 16_896, 0, 0],
            "sm__sass_thread_inst_executed_op_dadd_pred_on.sum": [0, 0, 0, 0],
            "sm__sass_thread_inst_executed_op_dmul_pred_on.sum": [0, 0, 0, 0],
            "sm__sass_thread_inst_executed_op_dfma_pred_on.sum": [0, 0, 0, 0],
            "sm__ops_path_tensor_src_fp16.sum": [0, 0, 0, 2_214_592_512],
            "sm__ops_path_tensor_src_int8.sum": [0, 0, 4_429_185_024, 0],
            DP4A_COUNTER: [THREADS * LOOP, 0, 0, 0],
        },
        index=["k_dp4a", "k_ffma", "k_imma", "k_hmma"],
    ).astype("float64")
    ops = measured_ops(wide, "sm_90")
    warps = THREADS // 32
    # dp4a: 4 int8 multiply-adds = 8 ops per thread instruction
    assert ops.loc["k_dp4a", "dp4a_ops"] == 8 * THREADS * LOOP
    # FFMA: 2 FLOP per thread instruction
    assert ops.loc["k_ffma", "fp32_flop"] == 2 * THREADS * LOOP
    # IMMA m16n8k32 per warp instruction: 2 x 16 x 8 x 32 ops; HMMA m16n8k16: 2 x 16 x 8 x 16
    assert ops.loc["k_imma", "tensor_int_ops"] == warps * LOOP * 2 * 16 * 8 * 32
    assert ops.loc["k_hmma", "tensor_flop"] == warps * LOOP * 2 * 16 * 8 * 16
    # the HFMA2.MMA register moves of the dp4a and FFMA loops count as FP16 FLOPs (4 per hfma)
    assert ops.loc["k_dp4a", "fp16_flop"] == 4 * 16_896
    assert ops.loc["k_imma", "measured_int_ops"] == warps * LOOP * 8192
    assert ops.loc["k_dp4a", "measured_int_ops"] == 8 * THREADS * LOOP


def test_a_total_is_unknown_without_one_of_its_counters() -> None:
    wide = pd.DataFrame({"sm__ops_path_tensor_src_int8.sum": [100.0]})
    ops = measured_ops(wide, "sm_90")
    assert np.isnan(ops.loc[0, "dp4a_ops"]) and np.isnan(ops.loc[0, "measured_int_ops"])
    assert ops.loc[0, "tensor_int_ops"] == 100
    assert np.isnan(ops.loc[0, "measured_flop"])


def test_amd_cdna_formulas() -> None:
    # rocprofiler-compute: 64 lanes per VALU instruction, MFMA MOPS in units of 512 ops
    names = counter_names("gfx942")
    wide = pd.DataFrame({n: [0.0] for n in names})
    wide["SQ_INSTS_VALU_FMA_F32"] = 10.0
    wide["SQ_INSTS_VALU_ADD_F16"] = 3.0
    wide["SQ_INSTS_VALU_MFMA_MOPS_BF16"] = 2.0
    wide["SQ_INSTS_VALU_INT32"] = 5.0
    wide["SQ_INSTS_VALU_MFMA_MOPS_I8"] = 7.0
    ops = measured_ops(wide, "gfx942:sramecc+:xnack-")
    assert ops.loc[0, "valu_flop"] == 64 * (2 * 10 + 3)
    assert ops.loc[0, "mfma_flop"] == 512 * 2
    assert ops.loc[0, "measured_flop"] == 64 * 23 + 1024
    assert ops.loc[0, "measured_int_ops"] == 64 * 5 + 512 * 7
    # rocprofv3 names summed counters with _sum; MOPS_F8 is optional (absent before gfx942)
    renamed = wide.drop(columns=["SQ_INSTS_VALU_MFMA_MOPS_F8"]).rename(columns=lambda c: f"{c}_sum")
    assert measured_ops(renamed, "gfx90a").loc[0, "measured_flop"] == 64 * 23 + 1024


def test_no_counters_on_gfx908_or_unknown() -> None:
    wide = pd.DataFrame({"SQ_INSTS_VALU_FMA_F32": [1.0]})
    for arch in ("gfx908", None, "gfx1100"):
        ops = measured_ops(wide, arch)
        assert np.isnan(ops.loc[0, "measured_flop"]) and np.isnan(ops.loc[0, "measured_int_ops"])


def test_instance_cells_keep_arithmetic_opcodes() -> None:
    # cells as `ncu --print-metric-instances details` writes them (recorded in
    # examples/h200-counters/dense28-decode-flops/ncu/opcodes.txt.gz, one kernel of MUL_MAT Qcur-0)
    column = pd.Series(
        [
            "12,961,792 (IMAD: 1,720,320; LOP3: 1,703,936; IDP: 655,360; FFMA: 655,360; FADD: 655,360)",
            "199,776 (UIMAD: 26,624; FADD: 10,240; HFMA2: 2,048; FFMA: 2,048)",
            "n/a",
            "12,961,792 (IMAD: 1,720,320; LOP3: 1,703,936; IDP: 655,360; FFMA: 655,360; FADD: 655,360)",
        ]
    )
    parsed = instance_cells(column)
    assert parsed is not None
    totals, per = parsed
    assert totals.tolist()[:2] == [12_961_792, 199_776] and np.isnan(totals[2])
    assert set(per) == {"IDP", "FFMA", "FADD", "HFMA2"}  # IMAD, LOP3, UIMAD: not arithmetic rocroof counts
    assert per["IDP"].tolist()[:2] == [655_360, 0]  # not listed: not executed
    assert np.isnan(per["IDP"][2])
    assert per["HFMA2"][1] == 2_048
    assert instance_cells(pd.Series(["1,024", "2"])) is None


@pytest.mark.parametrize("cell", ["5 (IDP 3)", "5 (IDP: x)", "(IDP: 3)"])
def test_damaged_instance_cells_do_not_invent_counts(cell: str) -> None:
    parsed = instance_cells(pd.Series([cell]))
    assert parsed is not None
    assert "IDP" not in parsed[1]


def test_the_recorded_probe_export_gives_the_known_counts() -> None:
    # Nsight Compute's own CSV of the probe (ncu --import ... --csv --page raw --print-metric-instances
    # details, H200, tools/h200/counter-probe): read as rocroof reads any ncu export
    from pathlib import Path

    from rocroof.capture.readers.nvidia import read_ncu_csv

    path = Path(__file__).resolve().parent.parent / "tools" / "h200" / "counter-probe" / "probe_details.csv.gz"
    p, _ = read_ncu_csv(path, "probe")
    c = p.counters.assign(counter_name=p.counters["counter_name"].astype(str))
    wide = c.pivot(index="row", columns="counter_name", values="value")
    wide.index = [str(n).split("(")[0] for n in p.dispatches["kernel_name"]]
    # the probe collected only some of the formulas' counters: count the parts it has
    counted = wide.reindex(
        columns=[DP4A_COUNTER, "sm__ops_path_tensor_src_int8.sum", "sm__ops_path_tensor_src_fp16.sum"]
    )
    warps = THREADS // 32
    assert counted.loc["k_dp4a", DP4A_COUNTER] == THREADS * LOOP
    assert counted.loc["k_imma", "sm__ops_path_tensor_src_int8.sum"] == warps * LOOP * 2 * 16 * 8 * 32
    assert counted.loc["k_hmma", "sm__ops_path_tensor_src_fp16.sum"] == warps * LOOP * 2 * 16 * 8 * 16
    assert wide.loc["k_ffma", "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"] == THREADS * LOOP
    # IDP appears only in the dp4a kernel; the others list their opcodes without it: 0, not unknown
    assert counted.loc[["k_ffma", "k_imma", "k_hmma"], DP4A_COUNTER].tolist() == [0, 0, 0]
    assert wide.loc["k_imma", "sass__thread_inst_executed_true_per_opcode:IMMA"] == THREADS * LOOP


def test_amd_vcopy_workload_counts_no_flops_and_its_integer_instructions(tmp_path: Path) -> None:
    # AMD's recorded MI300X vcopy workload (rocprofiler-compute): a copy kernel does no floating-point
    # arithmetic; its integer VALU instructions (index math) are 64 lanes each. Hand values from
    # pmc_perf.csv, read with the csv module; rocroof's from the stored counter rows.
    import csv
    import sqlite3

    from rocroof.capture.readers import read_capture
    from rocroof.ingest.pipeline import build_run
    from rocroof.store import Store

    from .conftest import fixture_path

    workload = fixture_path("rocprof-compute", "vcopy", "MI300X_A1")
    with open(workload / "pmc_perf.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    expected_int = [64 * (float(r["SQ_INSTS_VALU_INT32"]) + float(r["SQ_INSTS_VALU_INT64"])) for r in rows]
    Store(tmp_path / "v.db").write_run(build_run(read_capture(workload)))
    # each counter comes from one of the workload's passes (a few, not these, from several: the first
    # is taken): a dispatch's counters meet at its timing dispatch
    stored = pd.read_sql(
        "SELECT d.timing_dispatch_index AS dispatch, d.pass_index, c.counter_name, c.value FROM counter_value c "
        "JOIN dispatch_record d ON d.run_id = c.run_id AND d.dispatch_index = c.dispatch_index "
        "ORDER BY d.pass_index",
        sqlite3.connect(tmp_path / "v.db"),
    ).drop_duplicates(["dispatch", "counter_name"])
    wide = stored.pivot(index="dispatch", columns="counter_name", values="value")
    ops = measured_ops(wide, "gfx942")
    assert ops["measured_flop"].tolist() == [0.0] * len(rows)
    assert sorted(ops["measured_int_ops"].tolist()) == sorted(expected_int)
    assert expected_int[0] == 64 * (49_152 + 32_768)
