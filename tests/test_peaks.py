"""The roofline ceilings: configs/peaks.yaml, find_peak/find_ceilings, and roofline.csv.

Expected numbers are recomputed here from their inputs, and the roofline.csv fixture is parsed
here with the csv module, independently of rocroof's readers.
"""

from __future__ import annotations

import csv
import gzip
import math
import re
from pathlib import Path
from typing import Any

import pytest

from rocroof.analysis.peaks import (
    MARKS,
    Ceiling,
    Ceilings,
    DramCeiling,
    choose_dram_ceiling,
    combine_ceilings,
    evaluate_arithmetic,
    find_ceilings,
    find_peak,
    load_peaks,
    peaks_path,
)
from rocroof.capture.readers.rocprof_compute import ROOFLINE_SOURCE, read_roofline_ceilings, read_roofline_peak
from rocroof.errors import ConfigError, ParseError

from .conftest import REPO, fixture_path

TABLE = REPO / "configs" / "peaks.yaml"
CEILING_KEYS = ("dram_gbps", "fp16_matrix_tflops", "bf16_matrix_tflops", "fp32_vector_tflops", "llc_bytes")
REQUIRED_GPUS = (
    "MI100",
    "MI210",
    "MI250",
    "MI250X",
    "MI300A",
    "MI300X",
    "MI325X",
    "MI350X",
    "MI355X",
    "W7900",
    "RX 7900 XTX",
    "Ryzen AI Max+ 395",
    "RX 9070 XT",
    "A100 SXM4 80GB",
    "A100 SXM4 40GB",
    "A100 PCIe 40GB",
    "A100 PCIe 80GB",
    "H100 PCIe",
    "H100 SXM",
    "H200 SXM",
)
#: Plausible ranges per key: (low, high) in the key's unit.
SANE = {
    "dram_gbps": (100, 20_000),
    "fp16_matrix_tflops": (10, 10_000),
    "bf16_matrix_tflops": (10, 10_000),
    "fp32_vector_tflops": (5, 1_000),
    "int8_matrix_tops": (10, 20_000),
    "l2_bytes": (1 << 20, 1 << 30),
    "llc_bytes": (1 << 20, 1 << 30),
    "compute_units": (8, 1024),
}
MIB = 2**20


def _gpus() -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in load_peaks(TABLE)}


def _arith(expr: str) -> float:
    """This test's own evaluation of a table's arithmetic (plain numbers and operators only)."""
    assert re.fullmatch(r"[0-9.\s*/+()-]+", expr), expr
    return float(eval(expr, {"__builtins__": {}}, {}))  # digits and operators only, checked above


def test_shipped_table_is_configs_peaks_yaml() -> None:
    assert peaks_path().resolve() == TABLE.resolve()


def test_every_value_is_sourced_marked_and_in_sane_units() -> None:
    gpus = _gpus()
    assert set(REQUIRED_GPUS) <= set(gpus)
    for name in REQUIRED_GPUS:
        gpu = gpus[name]
        for key in (*CEILING_KEYS, "compute_units", "l2_bytes"):
            assert isinstance(gpu.get(key), dict), f"{name} lacks {key}"
    for name, gpu in gpus.items():
        assert gpu.get("gfx_arch"), name
        for key, val in gpu.items():
            if not isinstance(val, dict):
                continue
            where = f"{name}.{key}"
            assert val["mark"] in MARKS, where
            assert str(val["source"]).strip(), where
            if val["mark"] == "unverified":
                assert str(val.get("reason", "")).strip(), f"{where}: unverified without a reason"
            if val["mark"] == "derived":
                assert val.get("arithmetic"), f"{where}: derived without its arithmetic"
            low, high = SANE[key]
            assert low <= val["value"] <= high, f"{where} = {val['value']} outside {low}..{high}"
            if key.endswith("_bytes") or key == "compute_units":
                assert float(val["value"]).is_integer(), where
        if "l2_bytes" in gpu or "llc_bytes" in gpu:  # both or neither (a row may leave an unknown cache out)
            assert gpu["l2_bytes"]["value"] <= gpu["llc_bytes"]["value"], name
            assert gpu["llc_bytes"].get("level"), f"{name}: llc_bytes must say which cache it is"
        if "bf16_matrix_tflops" in gpu:
            assert gpu["bf16_matrix_tflops"]["value"] <= 2 * gpu["fp16_matrix_tflops"]["value"], name


def test_every_arithmetic_gives_its_value() -> None:
    checked = 0
    for name, gpu in _gpus().items():
        for key, val in gpu.items():
            if isinstance(val, dict) and val.get("arithmetic"):
                expr = str(val["arithmetic"]).replace("**", "^")
                # the test's evaluator allows no power operator: expand "n * 2^20" itself
                expr = expr.replace("2^20", str(MIB))
                assert math.isclose(_arith(expr), val["value"], rel_tol=1e-3), f"{name}.{key}: {val['arithmetic']}"
                assert math.isclose(evaluate_arithmetic(val["arithmetic"]), _arith(expr), rel_tol=1e-12)
                checked += 1
    assert checked >= 20


def test_derived_values_recomputed_from_their_inputs() -> None:
    gpus = _gpus()
    # AMD footnote MI300-05A: 8192-bit HBM3 x 5.2 Gbps / 8 bits = 5,324.8 GB/s (AMD prints 5.325 TB/s)
    assert gpus["MI300X"]["dram_gbps"]["mark"] == "derived"
    assert gpus["MI300X"]["dram_gbps"]["value"] == pytest.approx(8192 * 5.2 / 8) == pytest.approx(5324.8)
    # AMD's MI300X table: 2048 FP16 / 256 FP32 FLOP per clock per CU; 304 CUs at max_sclk 2.1 GHz
    assert gpus["MI300X"]["fp16_matrix_tflops"]["value"] == pytest.approx(304 * 2048 * 2.1e9 / 1e12, abs=0.05)
    assert gpus["MI300X"]["fp32_vector_tflops"]["value"] == pytest.approx(304 * 256 * 2.1e9 / 1e12, abs=0.05)
    # the same table: Matrix INT8 4096 OPS per clock per CU (twice FP16, as on every matrix engine listed)
    assert gpus["MI300X"]["int8_matrix_tops"]["value"] == pytest.approx(304 * 4096 * 2.1e9 / 1e12, abs=0.05)
    # AMD's MI350 table prints INT8 at 2x FP16 too; NVIDIA's dense INT8 is 2x its dense FP16
    for name in ("MI350X", "MI355X", "MI350P", "H100 SXM", "H200 SXM"):
        gpu = gpus[name]
        assert gpu["int8_matrix_tops"]["value"] == pytest.approx(2 * gpu["fp16_matrix_tflops"]["value"], rel=1e-3)
    # H200: HBM3e at 3.201 GHz, double data rate, 6016-bit bus (as the device reports them)
    assert gpus["H200 SXM"]["dram_gbps"]["mark"] == "derived"
    assert gpus["H200 SXM"]["dram_gbps"]["value"] == pytest.approx(2 * 3.201e9 * 6016 / 8 / 1e9, abs=0.05)
    # cache sizes in bytes: MiB as the vendors print them
    assert gpus["MI300X"]["llc_bytes"]["value"] == 256 * MIB
    assert gpus["MI300X"]["l2_bytes"]["value"] == 32 * MIB
    assert gpus["H200 SXM"]["l2_bytes"]["value"] == 62_914_560 == 60 * MIB
    assert gpus["Ryzen AI Max+ 395"]["dram_gbps"]["value"] == pytest.approx(256 * 8000e6 / 8 / 1e9)
    assert gpus["RX 9070 XT"]["dram_gbps"]["value"] == pytest.approx(256 * 20e9 / 8 / 1e9)


def test_h200_entry_matches_the_recorded_device_attributes() -> None:
    path = fixture_path("h200-trial", "dense_ncu_raw.csv.gz")
    with gzip.open(path, "rt", newline="") as fh:
        rows = csv.reader(fh)
        header, _units, first = next(rows), next(rows), next(rows)
    attr = {h: first[i].replace(",", "") for i, h in enumerate(header) if h.startswith("device__attribute_")}
    assert attr["device__attribute_display_name"] == "NVIDIA H200"
    h200 = find_ceilings(attr["device__attribute_display_name"], "sm_90")
    assert h200 is not None and h200.gpu == "H200 SXM"
    assert h200.l2_bytes is not None and h200.l2_bytes.value == int(attr["device__attribute_l2_cache_size"])
    assert h200.compute_units is not None
    assert h200.compute_units.value == int(attr["device__attribute_multiprocessor_count"])
    clock_hz = int(attr["device__attribute_memory_clock_rate"]) * 1e3
    bus_bits = int(attr["device__attribute_global_memory_bus_width"])
    assert h200.dram_gbps is not None
    assert h200.dram_gbps.value == pytest.approx(2 * clock_hz * bus_bits / 8 / 1e9, abs=0.05)


@pytest.mark.parametrize(
    ("product", "arch", "gpu", "matched_by"),
    [
        ("MI300X_A1", "gfx942", "MI300X", "product name"),
        ("AMD Instinct MI300X", "gfx942:sramecc+:xnack-", "MI300X", "product name"),
        ("AMD Instinct MI325X", "gfx942", "MI325X", "product name"),
        ("MI350", "gfx950", "MI350X", "product name"),  # rocprofiler-compute's gpu_model
        ("AMD Instinct MI350X", "gfx950", "MI350X", "product name"),
        ("MI355", "gfx950", "MI355X", "product name"),
        ("AMD Instinct MI355X", None, "MI355X", "product name"),
        ("AMD Instinct MI350P", "gfx950", "MI350P", "product name"),  # not the MI350X: longest alias wins
        ("AMD Radeon PRO W7900", "gfx1100", "W7900", "product name"),
        ("AMD Radeon RX 7900 XTX", "gfx1100", "RX 7900 XTX", "product name"),
        ("AMD Ryzen AI Max+ 395 w/ Radeon 8060S", "gfx1151", "Ryzen AI Max+ 395", "product name"),
        ("AMD Radeon 8060S Graphics", "gfx1151", "Ryzen AI Max+ 395", "product name"),
        ("AMD Radeon RX 9070 XT", "gfx1201", "RX 9070 XT", "product name"),
        ("NVIDIA H100 80GB HBM3", "sm_90", "H100 SXM", "product name"),
        ("NVIDIA H200", "sm_90", "H200 SXM", "product name"),
        (None, "gfx942", "MI300X", "architecture gfx942 default"),
        (None, "gfx950", "MI350X", "architecture gfx950 default"),
        ("AMD Radeon Graphics", "gfx1151", "Ryzen AI Max+ 395", "architecture gfx1151 default"),
        (None, "gfx1100", "RX 7900 XTX", "architecture gfx1100 default"),
        (None, "gfx1201", "RX 9070 XT", "architecture gfx1201 default"),
        (None, "sm_90", "H200 SXM", "architecture sm_90 default"),
        # a product name contradicting the architecture is not trusted
        ("MI300X", "gfx950", "MI350X", "architecture gfx950 default"),
    ],
)
def test_find_ceilings_matches_each_gpu(product: str | None, arch: str | None, gpu: str, matched_by: str) -> None:
    found = find_ceilings(product, arch, TABLE)
    assert found is not None
    assert (found.gpu, found.matched_by) == (gpu, matched_by)
    entry = _gpus()[gpu]
    for key in (*CEILING_KEYS, "compute_units", "l2_bytes"):
        ceiling = getattr(found, key)
        assert isinstance(ceiling, Ceiling)
        assert ceiling.value == pytest.approx(entry[key]["value"])
        assert (ceiling.mark, ceiling.source) == (entry[key]["mark"], str(entry[key]["source"]).strip())
    # the peak the pipeline uses comes from the same entry
    peak = find_peak("dram_gbps", product, arch, TABLE)
    assert peak is not None and (peak.gpu, peak.value) == (gpu, entry["dram_gbps"]["value"])


def test_unknown_gpu_has_no_ceilings() -> None:
    assert find_ceilings("AMD Radeon RX 6900 XT", "gfx1030", TABLE) is None
    assert find_ceilings(None, None, TABLE) is None
    assert find_peak("dram_gbps", "Unknown", "gfx1030", TABLE) is None


def test_ceilings_carry_units_levels_and_reasons() -> None:
    mi300x = find_ceilings("MI300X_A1", "gfx942", TABLE)
    assert mi300x is not None
    assert mi300x.dram_gbps is not None and mi300x.dram_gbps.unit == "GB/s"
    assert mi300x.dram_gbps.arithmetic == "8192 * 5.2 / 8"
    assert "5,324.8 GB/s (derived: 8192 * 5.2 / 8" in mi300x.dram_gbps.describe()
    assert mi300x.fp16_matrix_tflops is not None and mi300x.fp16_matrix_tflops.unit == "TFLOP/s"
    assert mi300x.llc_bytes is not None and mi300x.llc_bytes.unit == "bytes"
    assert mi300x.llc_bytes.level is not None and "Infinity Cache" in mi300x.llc_bytes.level
    assert mi300x.compute_units is not None and mi300x.compute_units.value == 304
    # FLOP per DRAM byte where the FP16 matrix roof meets the DRAM roof
    assert mi300x.ridge_point() == pytest.approx(1307.4e12 / 5324.8e9)
    h100 = find_ceilings("NVIDIA H100 80GB HBM3", "sm_90", TABLE)
    assert h100 is not None and h100.llc_bytes is not None and h100.llc_bytes.level is not None
    assert h100.llc_bytes.level.startswith("L2")
    assert h100.dram_gbps is not None and h100.dram_gbps.mark == "unverified"
    assert h100.dram_gbps.note is not None and h100.dram_gbps.note.startswith("unverified because")


def test_find_peak_keeps_working_for_existing_callers() -> None:
    peak = find_peak("dram_gbps", "MI300X_A1", "gfx942")  # the shipped table, as the pipeline calls it
    assert peak is not None and peak.value == pytest.approx(8192 * 5.2 / 8)
    assert peak.describe().startswith("configs/peaks.yaml MI300X (derived, matched by product name)")
    fp32 = find_peak("fp32_vector_tflops", "NVIDIA H200", "sm_90")
    assert fp32 is not None and fp32.value == pytest.approx(66.9)


def test_loader_rejects_arithmetic_that_does_not_give_the_value(tmp_path: Path) -> None:
    bad = tmp_path / "peaks.yaml"
    bad.write_text(
        "gpus:\n  - name: X\n    dram_gbps: {value: 5325, mark: derived, source: s, arithmetic: '8192 * 5.0 / 8'}\n"
    )
    with pytest.raises(ConfigError, match="gives 5120, not the value 5325"):
        load_peaks(bad)
    bad.write_text("gpus:\n  - name: X\n    dram_gbps: {value: 1, mark: derived, source: s, arithmetic: 'open(1)'}\n")
    with pytest.raises(ConfigError, match="arithmetic"):
        load_peaks(bad)
    bad.write_text("gpus:\n  - name: X\n    dram_gbps: {value: 1, mark: guessed, source: s}\n")
    with pytest.raises(ConfigError, match="mark"):
        load_peaks(bad)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("int8_matrix_tops: {value: -5, mark: verified, source: s}", "value is -5; a ceiling is a positive, finite"),
        ("int8_matrix_tops: {value: 0, mark: verified, source: s}", "value is 0;"),
        ("int8_matrix_tops: {value: .inf, mark: verified, source: s}", "value is inf;"),
        ("int8_matrix_tops: {value: .nan, mark: verified, source: s}", "value is nan;"),
        ("int8_matrix_tops: 1978.9", "int8_matrix_tops is 1978.9; expected a mapping"),
        ("int8_matrix_tflops: {value: 1, mark: verified, source: s}", "int8_matrix_tflops: unknown key"),
        ("int8_matrix_tops: {value: 1, mark: unverified, source: s}", "unverified without a 'reason'"),
        ("dram_gbps: {value: 1, mark: derived, source: s, arithmetc: '1'}", "dram_gbps.arithmetc: unknown key"),
        ("compute_units: {value: 131.5, mark: verified, source: s}", "value is 131.5; expected a whole number"),
    ],
)
def test_loader_refuses_values_a_ceiling_cannot_have(tmp_path: Path, entry: str, expected: str) -> None:
    bad = tmp_path / "peaks.yaml"
    bad.write_text(f"gpus:\n  - name: X\n    {entry}\n")
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_peaks(bad)


def test_loader_refuses_unknown_top_level_keys_and_gpus_listed_twice(tmp_path: Path) -> None:
    bad = tmp_path / "peaks.yaml"
    bad.write_text("gpu: []\ngpus: []\n")
    with pytest.raises(ConfigError, match="gpu: unknown top-level key"):
        load_peaks(bad)
    bad.write_text("gpus:\n  - name: X\n  - name: X\n")
    with pytest.raises(ConfigError, match=r"gpus\[1\]: 'X' is listed twice \(also gpus\[0\]\)"):
        load_peaks(bad)


def test_evaluate_arithmetic_refuses_anything_but_numbers() -> None:
    assert evaluate_arithmetic("256 * 2**20") == 256 * MIB
    assert evaluate_arithmetic("-(1 + 2) / 4") == -0.75
    for expr in ("__import__('os')", "x * 2", "2 ** 1000", "1 / 0", "1 +"):
        with pytest.raises(ValueError):
            evaluate_arithmetic(expr)


# ----------------------------------------------------------------------------- roofline.csv

#: roofline.csv column -> (Ceilings attribute or extra key, factor from the file's unit)
_EXPECTED_COLUMNS = {
    "HBMBw": ("dram_gbps", 1.0),
    "L2Bw": ("l2_gbps", 1.0),
    "L1Bw": ("l1_gbps", 1.0),
    "LDSBw": ("lds_gbps", 1.0),
    "FP32Flops": ("fp32_vector_tflops", 1e-3),  # GFLOP/s -> TFLOP/s
    "MFMAF16Flops": ("fp16_matrix_tflops", 1e-3),
    "MFMABF16Flops": ("bf16_matrix_tflops", 1e-3),
    "FP64Flops": ("fp64_vector_tflops", 1e-3),
    "MFMAF32Flops": ("fp32_matrix_tflops", 1e-3),
    "MFMAF64Flops": ("fp64_matrix_tflops", 1e-3),
    "MFMAI8Ops": ("int8_matrix_tops", 1e-3),  # GOP/s -> TOP/s
}


def _value(c: Ceilings, key: str) -> Ceiling | None:
    return c.values().get(key)


def test_roofline_fixture_reads_to_the_numbers_in_the_file() -> None:
    workload = fixture_path("rocprof-compute", "roofline-benchmark", "MI200")
    with open(workload / "roofline.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4
    for row in rows:
        measured = read_roofline_ceilings(workload, device=row["device"])
        assert measured is not None
        assert (measured.gpu, measured.matched_by) == (f"roofline.csv device {row['device']}", "measured")
        for column, (key, factor) in _EXPECTED_COLUMNS.items():
            ceiling = _value(measured, key)
            assert ceiling is not None, key
            assert ceiling.value == pytest.approx(float(row[column]) * factor, rel=1e-12), key
            assert (ceiling.source, ceiling.mark) == (ROOFLINE_SOURCE, "measured")
            assert ceiling.note is not None and f"column {column}" in ceiling.note
        assert measured.dram_gbps is not None and measured.dram_gbps.unit == "GB/s"
        assert measured.fp16_matrix_tflops is not None and measured.fp16_matrix_tflops.unit == "TFLOP/s"
        # the HBM bound column is spelt hbmBwHigh in this (pre-3.5) file
        low, high = float(row["HBMBwLow"]), float(row["hbmBwHigh"])
        assert measured.dram_gbps.note is not None
        assert f"{low:,.6g}-{high:,.6g} GB/s" in measured.dram_gbps.note
        # nothing in roofline.csv about cache sizes, CUs or (on gfx90a) the Infinity Cache
        assert measured.llc_gbps is None and measured.llc_bytes is None and measured.compute_units is None
    first = read_roofline_ceilings(workload)
    assert first is not None and first.dram_gbps is not None
    assert first.dram_gbps.value == pytest.approx(float(rows[0]["HBMBw"]))
    assert read_roofline_ceilings(workload / "roofline.csv", device=2) == read_roofline_ceilings(workload, device=2)
    # the HBMBw path the pipeline uses is unchanged: the largest device's HBMBw
    assert read_roofline_peak(workload) == pytest.approx(max(float(r["HBMBw"]) for r in rows))


NEW_HEADER = (
    "device,HBMBw,HBMBwLow,HBMBwHigh,MALLBw,MALLBwLow,MALLBwHigh,L2Bw,L2BwLow,L2BwHigh,"
    "FP16Flops,FP16FlopsLow,FP16FlopsHigh,FP32Flops,FP32FlopsLow,FP32FlopsHigh,"
    "MFMAF16Flops,MFMAF16FlopsLow,MFMAF16FlopsHigh,MFMAF8Flops,MFMAF8FlopsLow,MFMAF8FlopsHigh\n"
)


def test_roofline_csv_of_newer_versions_and_skipped_tests(tmp_path: Path) -> None:
    # benchmark.py (rocprofiler-compute >= 3.5) writes MALLBw and FP16Flops; a skipped test is 0
    (tmp_path / "roofline.csv").write_text(
        NEW_HEADER + "0,4200.5,4190,4210,0,0,0,14000,13900,14100,80000,79000,81000,81000,80000,82000,"
        "1100000,1090000,1110000,2200000,2190000,2210000\n"
    )
    measured = read_roofline_ceilings(tmp_path)
    assert measured is not None
    assert measured.dram_gbps is not None and measured.dram_gbps.value == 4200.5
    assert measured.llc_gbps is None  # MALLBw 0: not measured on this architecture
    assert measured.l2_gbps is not None and measured.l2_gbps.value == 14000
    assert measured.fp16_matrix_tflops is not None and measured.fp16_matrix_tflops.value == pytest.approx(1100)
    assert measured.extra["fp16_vector_tflops"].value == pytest.approx(80)
    assert measured.extra["fp8_matrix_tflops"].value == pytest.approx(2200)
    assert measured.bf16_matrix_tflops is None  # no column


def test_roofline_csv_errors_name_file_and_row(tmp_path: Path) -> None:
    assert read_roofline_ceilings(tmp_path) is None  # no roofline.csv: nothing measured
    path = tmp_path / "roofline.csv"
    path.write_text(NEW_HEADER)
    with pytest.raises(ParseError, match="no data row"):
        read_roofline_ceilings(tmp_path)
    path.write_text(NEW_HEADER + "0,fast,1,2,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1\n")
    with pytest.raises(ParseError, match=r"roofline\.csv:2: .*HBMBw"):
        read_roofline_ceilings(tmp_path)
    path.write_text(NEW_HEADER + "0,-5,1,2,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1\n")
    with pytest.raises(ParseError, match=r"roofline\.csv:2: .*>= 0"):
        read_roofline_ceilings(tmp_path)
    path.write_text(NEW_HEADER + "0,5,1,2,0,0,0,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1\n")
    with pytest.raises(ParseError, match=r"no row for device 3 \(devices measured: 0\)"):
        read_roofline_ceilings(tmp_path, device=3)


def test_measured_ceilings_override_the_datasheet(tmp_path: Path) -> None:
    (tmp_path / "roofline.csv").write_text(
        NEW_HEADER + "0,4200.5,4190,4210,0,0,0,14000,13900,14100,80000,79000,81000,81000,80000,82000,"
        "1100000,1090000,1110000,2200000,2190000,2210000\n"
    )
    measured = read_roofline_ceilings(tmp_path)
    datasheet = find_ceilings("MI300X_A1", "gfx942", TABLE)
    both = combine_ceilings(measured, datasheet)
    assert both is not None and datasheet is not None and measured is not None
    assert both.gpu == "MI300X"
    assert both.dram_gbps == measured.dram_gbps  # measured wins
    assert both.fp16_matrix_tflops == measured.fp16_matrix_tflops
    assert both.bf16_matrix_tflops == datasheet.bf16_matrix_tflops  # not measured: the datasheet's
    assert both.llc_bytes == datasheet.llc_bytes and both.compute_units == datasheet.compute_units
    assert both.extra["fp8_matrix_tflops"] == measured.extra["fp8_matrix_tflops"]
    assert "measured values from roofline.csv device 0" in both.matched_by
    assert combine_ceilings(None, datasheet) is datasheet
    assert combine_ceilings(measured, None) is measured
    assert combine_ceilings(None, None) is None


# ---- naming the GPU: PCI device id, product name, CU count, architecture ------------------------


@pytest.mark.parametrize(
    ("product", "arch", "cus", "device", "gpu", "matched_by"),
    [
        # rocminfo cannot tell the two CDNA2 packages apart by name; one GCD's CUs can (104 vs 110)
        ("AMD Instinct MI250X/MI250", "gfx90a", 104, 0x740C, "MI250", "PCI device id 0x740c"),
        ("AMD Instinct MI250X / MI250", "gfx90a", 110, 0x740C, "MI250X", "PCI device id 0x740c"),
        ("AMD Instinct MI250X / MI250", "gfx90a", 110, None, "MI250X", "product name"),
        ("AMD Instinct MI250X / MI250", "gfx90a", 104, None, "MI250", "product name"),
        # newer rocprofiler-compute calls every gfx90a "MI210"; 110 CUs is an MI250X GCD
        ("MI210", "gfx90a", 110, None, "MI250X", "architecture gfx90a and 110 CUs"),
        ("MI200", "gfx90a", 104, None, "MI210", "product name"),
        ("MI100", "gfx908", 120, None, "MI100", "product name"),
        (None, "gfx908", None, None, "MI100", "architecture gfx908 default"),
        # a generic gfx942 name: the PCI device id names the part (amdgpu.ids: 74A5 = MI325X, 74A0 = MI300A)
        ("MI300", "gfx942", 304, 0x74A5, "MI325X", "PCI device id 0x74a5"),
        ("AMD Instinct MI300A", "gfx942", 228, 0x74A0, "MI300A", "PCI device id 0x74a0"),
        ("MI300A_A1", "gfx942", 228, None, "MI300A", "product name"),
        # a compute partition (CPX: 38 of 304 CUs, an eighth) is still the chip its device id names
        ("MI300X_A1", "gfx942", 38, 0x74A1, "MI300X", "PCI device id 0x74a1"),
        # a CU count the table does not know, of a listed chip: its PCI id still names it
        ("MI300X_A1", "gfx942", 300, 0x74A1, "MI300X", "PCI device id 0x74a1 (CU count differs)"),
        # MI350 in a compute partition: half of its 256 CUs; the name, not the MI350P (128 CUs)
        ("MI350", "gfx950", 128, None, "MI350X", "product name"),
        ("MI350", "gfx950", 128, 0x75A0, "MI350X", "PCI device id 0x75a0"),
        # "NVIDIA H100" (an H100 SXM alias) is part of these names: the longer alias and the SM count win
        ("NVIDIA H100 PCIe", "sm_90", 114, None, "H100 PCIe", "product name"),
        ("NVIDIA H100 NVL", "sm_90", 132, None, "H100 NVL", "product name"),
        ("NVIDIA A100-SXM4-80GB", "sm_80", 108, None, "A100 SXM4 80GB", "product name"),
        ("NVIDIA A100-SXM4-40GB", "sm_80", 108, None, "A100 SXM4 40GB", "product name"),
        ("NVIDIA A100-PCIE-40GB", "sm_80", 108, None, "A100 PCIe 40GB", "product name"),
        ("NVIDIA A100 80GB PCIe", "sm_80", 108, None, "A100 PCIe 80GB", "product name"),
        ("NVIDIA L40S", "sm_89", 142, None, "L40S", "product name"),
    ],
)
def test_the_gpu_is_named_by_device_id_name_and_cu_count(
    product: str | None, arch: str, cus: int | None, device: int | None, gpu: str, matched_by: str
) -> None:
    found = find_ceilings(product, arch, TABLE, cu_count=cus, device_id=device)
    assert found is not None
    assert (found.gpu, found.matched_by) == (gpu, matched_by)
    assert found.dram_gbps is not None and found.dram_gbps.value == _gpus()[gpu]["dram_gbps"]["value"]


def test_per_gcd_rows_are_half_the_package() -> None:
    gpus = _gpus()
    # AMD's MI250X/MI250 figures are for two GCDs: 3.2768 TB/s (8192-bit HBM2e at 3.2 Gbps), 383.0 / 362.1 TFLOPS FP16
    assert gpus["MI250X"]["dram_gbps"]["value"] * 2 == pytest.approx(8192 * 3.2 / 8)
    assert gpus["MI250"]["dram_gbps"]["value"] * 2 == pytest.approx(8192 * 3.2 / 8)
    assert gpus["MI250X"]["fp16_matrix_tflops"]["value"] * 2 == pytest.approx(383.0, abs=0.1)
    assert gpus["MI250"]["fp16_matrix_tflops"]["value"] * 2 == pytest.approx(362.1, abs=0.1)
    assert gpus["MI250"]["compute_units"]["value"] * 2 == 208 and gpus["MI250X"]["compute_units"]["value"] * 2 == 220


def test_pci_device_ids_must_be_four_hex_digits(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "version: 2\ngpus:\n  - name: X\n    gfx_arch: gfx942\n    pci_device_ids: [74a1x]\n"
        "    dram_gbps: {value: 1, mark: verified, source: s}\n"
    )
    with pytest.raises(ConfigError, match=r"pci_device_ids is \['74a1x'\]; expected a list of 4-digit hex ids"):
        load_peaks(path)


def test_ceiling_precedence_and_plausibility() -> None:
    # a measured probe within 25-105% of the named GPU's peak wins
    probe = choose_dram_ceiling((4194.8, "probe", "probe"), "NVIDIA H200", "sm_90")
    assert (probe.gbps, probe.rule, probe.warnings) == (4194.8, "probe", ())
    # one above the pins is a broken measurement: the table, with a warning
    broken = choose_dram_ceiling((9000.0, "probe", "probe"), "NVIDIA H200", "sm_90")
    assert broken.gbps == pytest.approx(2 * 3.201 * 6016 / 8) and broken.rule == "table_name"
    assert "187% of the GPU's peak" in broken.warnings[0]
    # rocprofiler-compute's hbm_bw for an MI325X computed with the MI300X's memory clock: 5324.8 is 89% of
    # the MI325X's 6,000 GB/s, not the table value nor an even share of it -> the table row
    mi325 = choose_dram_ceiling((5324.8, "sysinfo.csv hbm_bw", "capture"), "MI325X", "gfx942", cu_count=304)
    assert (mi325.gbps, mi325.rule) == (6000, "table_name")
    assert "89% of the MI325X's 6,000.0 GB/s" in mi325.warnings[0]
    # an NPS4 memory partition: a quarter of the MI300X's 5,324.8 GB/s is plausible
    nps4 = choose_dram_ceiling((1331.2, "sysinfo.csv hbm_bw", "capture"), "MI300X_A1", "gfx942")
    assert (nps4.gbps, nps4.rule, nps4.warnings) == (1331.2, "capture", ())
    # against an architecture default only, the capture's own figure is the more specific one ...
    mystery = choose_dram_ceiling((4000.0, "nsys", "capture"), None, "sm_90")
    assert (mystery.gbps, mystery.rule) == (4000.0, "capture")
    # ... unless it is beyond twice the default GPU's (53,248 GB/s is 10x the MI300X's 5,324.8)
    absurd = choose_dram_ceiling((53_248.0, "sysinfo.csv hbm_bw", "capture"), None, "gfx942")
    assert (absurd.gbps, absurd.rule) == (pytest.approx(8192 * 5.2 / 8), "table_arch")
    assert "10x the 5,324.8 GB/s of MI300X" in absurd.warnings[0]
    huge = choose_dram_ceiling((1e308, "sysinfo.csv hbm_bw", "capture"), None, "gfx942")
    assert "1e+308 GB/s" in huge.warnings[0] and len(huge.warnings[0]) < 300
    # nothing recorded: the table, by the rule that named the GPU
    assert choose_dram_ceiling(None, None, "gfx90a").rule == "table_arch"
    assert choose_dram_ceiling(None, "MI300", "gfx942", device_id=0x74A5).rule == "table_device"
    assert choose_dram_ceiling(None, None, None) == DramCeiling(None, None, None)


def test_a_workload_with_roofline_csv_uses_its_measured_compute_and_l2_ceilings(tmp_path: Path) -> None:
    # a rocprofiler-compute workload beside the roofline benchmark's file (from another machine here:
    # what matters is that the run's ceilings are the file's numbers, not the peaks table's)
    import shutil
    import sqlite3

    from rocroof.capture.readers import read_capture
    from rocroof.ingest.pipeline import build_run
    from rocroof.store import Store

    workload = tmp_path / "vcopy"
    shutil.copytree(fixture_path("rocprof-compute", "vcopy", "MI300X_A1"), workload)
    bench = fixture_path("rocprof-compute", "roofline-benchmark", "MI200") / "roofline.csv"
    shutil.copy(bench, workload / "roofline.csv")
    with open(bench, newline="") as fh:
        first = next(csv.DictReader(fh))
    Store(tmp_path / "r.db").write_run(build_run(read_capture(workload)))
    stored = {
        name: (value, mark)
        for name, value, mark in sqlite3.connect(tmp_path / "r.db").execute("SELECT name, value, mark FROM run_ceiling")
    }
    for column, name, factor in (
        ("FP32Flops", "fp32_vector_tflops", 1e-3),
        ("MFMAF16Flops", "fp16_matrix_tflops", 1e-3),
        ("MFMABF16Flops", "bf16_matrix_tflops", 1e-3),
        ("MFMAI8Ops", "int8_matrix_tops", 1e-3),
        ("L2Bw", "l2_gbps", 1.0),
    ):
        assert stored[name][0] == pytest.approx(float(first[column]) * factor, rel=1e-12), name
        assert stored[name][1] == "measured"
    # the DRAM ceiling stays the file's largest HBMBw (read_roofline_peak), the CU count the table's
    assert stored["dram_gbps"][1] == "measured"
    assert stored["compute_units"][1] != "measured"


def test_loaded_table_reread_when_the_file_changes(tmp_path: Path) -> None:
    """The table is parsed once while unchanged (one per window of an ingest), again once edited; callers get copies."""
    from rocroof.analysis.peaks import load_peaks

    path = tmp_path / "peaks.yaml"
    shipped = (REPO / "configs" / "peaks.yaml").read_text(encoding="utf-8")
    path.write_text(shipped, encoding="utf-8")
    first = load_peaks(path)
    names = [g["name"] for g in first]
    first.clear()  # a caller's change does not reach the next caller
    assert [g["name"] for g in load_peaks(path)] == names
    parts = shipped.split("\n  - name:")
    one = parts[0] + "\n  - name:" + parts[1]  # the header and the first GPU only
    assert one.count("- name:") == 1
    path.write_text(one, encoding="utf-8")
    assert [g["name"] for g in load_peaks(path)] == names[:1]
    path.write_text("gpus: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="expected a mapping with a 'gpus' list"):
        load_peaks(path)
