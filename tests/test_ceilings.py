"""Which DRAM ceiling a run gets, and how the report says why (run.dram_peak_rule).

Values are read from the capture files here (csv, sqlite3) or from the peaks table's own rows.
"""

from __future__ import annotations

import csv
import gzip
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from rocroof.analysis.peaks import load_peaks
from rocroof.capture.readers import read_capture
from rocroof.ingest.pipeline import build_run
from rocroof.report.tables import build_report, render
from rocroof.store import Store

from .conftest import REPO, fixture_path


def _ingest(path: Path, db: Path) -> tuple[Store, int]:
    run_id = Store(db).write_run(build_run(read_capture(path)))
    return Store(db, read_only=True), run_id


def _table_row(name: str) -> dict[str, Any]:
    return next(g for g in load_peaks(REPO / "configs" / "peaks.yaml") if g["name"] == name)


def _workload_as(tmp_path: Path, **sysinfo: str) -> Path:
    """The recorded MI300X workload with some sysinfo.csv fields rewritten (as another GPU would write them)."""
    src = fixture_path("rocprof-compute", "vcopy", "MI300X_A1")
    dst = tmp_path / "workload"
    shutil.copytree(src, dst)
    with open(dst / "sysinfo.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    rows[0].update(sysinfo)
    with open(dst / "sysinfo.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return dst


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"gpu_model": "MI325X"}, "table_name"),
        # an older rocprofiler-compute names an unknown gfx942 chip "MI300"; its PCI id is the MI325X's (74A5)
        ({"gpu_model": "MI300", "gpu_chip_id": "29861"}, "table_device"),
    ],
)
def test_an_mi325x_workload_gets_the_mi325x_ceiling_not_its_hbm_bw(
    tmp_path: Path, fields: dict[str, str], rule: str
) -> None:
    # rocprofiler-compute computed hbm_bw 5324.8 (the MI300X's memory clock) for this GPU
    store, run_id = _ingest(_workload_as(tmp_path, hbm_bw="5324.8", **fields), tmp_path / "r.db")
    run = store.query(f"SELECT gpu_name, dram_peak_gbps, dram_peak_rule FROM run WHERE run_id = {run_id}").iloc[0]
    assert run["dram_peak_gbps"] == _table_row("MI325X")["dram_gbps"]["value"]
    assert run["dram_peak_rule"] == rule
    notes = store.query(f"SELECT code, message FROM run_note WHERE run_id = {run_id}")
    assert "recorded-ceiling-implausible" in notes["code"].tolist()
    text = render(build_report(store, run_id, by="dispatch"), "markdown")
    assert "MI325X" in text and "(peaks table, GPU matched by" in text


def test_a_plausible_hbm_bw_stays_the_ceiling_and_is_marked_recorded(tmp_path: Path) -> None:
    store, run_id = _ingest(fixture_path("rocprof-compute", "vcopy", "MI300X_A1"), tmp_path / "r.db")
    with open(fixture_path("rocprof-compute", "vcopy", "MI300X_A1", "sysinfo.csv"), newline="") as fh:
        hbm_bw = float(next(csv.DictReader(fh))["hbm_bw"])
    run = store.query(f"SELECT dram_peak_gbps, dram_peak_rule FROM run WHERE run_id = {run_id}").iloc[0]
    assert (run["dram_peak_gbps"], run["dram_peak_rule"]) == (hbm_bw, "capture")
    mark = store.query(f"SELECT mark FROM run_ceiling WHERE run_id = {run_id} AND name = 'dram_gbps'")["mark"]
    assert mark.tolist() == ["recorded"]


def test_an_nsys_export_that_states_memory_bandwidth_gives_a_recorded_ceiling(tmp_path: Path) -> None:
    capture = REPO / "examples" / "h200" / "dense500m-decode"
    (export,) = list((capture / "trace").glob("*.sqlite*"))
    plain = tmp_path / "nsys.sqlite"
    with gzip.open(export, "rb") if export.suffix == ".gz" else open(export, "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(plain)
    (bandwidth,) = con.execute("SELECT memoryBandwidth FROM TARGET_INFO_GPU").fetchone()  # bytes per second
    con.close()
    store, run_id = _ingest(capture, tmp_path / "r.db")
    run = store.query(f"SELECT dram_peak_gbps, dram_peak_rule, dram_peak_source FROM run WHERE run_id={run_id}").iloc[0]
    assert run["dram_peak_gbps"] == pytest.approx(bandwidth / 1e9, abs=0.05)
    assert run["dram_peak_rule"] == "capture" and "memoryBandwidth" in run["dram_peak_source"]
    text = render(build_report(store, run_id, by="op"), "table", width=200)
    assert "(recorded by the capture)" in text


def test_a_match_by_architecture_and_cus_that_several_gpus_share_does_not_override_the_recorded_bandwidth() -> None:
    """An nsys export without the GPU's name: sm_90 with 132 SMs is an H100 SXM, an H100 NVL or an H200.

    The capture's own 4,814.3 GB/s (an H200's driver-reported bandwidth) is kept, not replaced by
    the first row that shares the CU count (H100 NVL, 3,900 GB/s).
    """
    from rocroof.analysis.peaks import AMBIGUOUS, choose_dram_ceiling, find_peak

    guess = find_peak("dram_gbps", None, "sm_90", cu_count=132)
    assert guess is not None and f"({AMBIGUOUS} " in guess.matched_by and "H200" in guess.matched_by
    recorded = (4814.3, "nsys TARGET_INFO_GPU.memoryBandwidth", "capture")
    chosen = choose_dram_ceiling(recorded, None, "sm_90", cu_count=132)
    assert chosen.gbps == 4814.3 and chosen.rule == "capture" and not chosen.warnings
    # ten times the guess is no GPU of that architecture: the table's value, with a warning
    wild = choose_dram_ceiling((48143.0, "nsys", "capture"), None, "sm_90", cu_count=132)
    assert wild.gbps == guess.value and "matched by architecture sm_90 and 132 CUs" in wild.warnings[0]
