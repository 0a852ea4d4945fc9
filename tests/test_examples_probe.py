"""The committed capture with a measured DRAM ceiling (examples/h200-probe): the copy-bandwidth probe
that ``rocroof collect --profiler ncu`` ran on the H200 becomes the run's ceiling.

Expected values come from outside rocroof: the probe's own JSON (read here with gzip and json), the
H200 SXM datasheet's 4.8 TB/s HBM3e bandwidth (NVIDIA H200 Tensor Core GPU datasheet), and the
definition of the percentage of the ceiling (achieved bytes per second over the ceiling).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from rocroof.capture.readers import read_capture
from rocroof.ingest.pipeline import build_run
from rocroof.report.tables import build_report
from rocroof.store import Store

CAPTURE = Path(__file__).resolve().parent.parent / "examples" / "h200-probe" / "dense-prefill"
DATASHEET_GBPS = 4800.0  # H200 SXM, HBM3e


def probe() -> dict[str, object]:
    raw = json.loads(gzip.decompress((CAPTURE / "probe" / "bandwidth.json.gz").read_bytes()))
    assert isinstance(raw, dict)
    return raw


def test_the_recorded_probe_is_a_real_copy_below_the_datasheet_peak() -> None:
    got = probe()
    best, median = float(got["gbps_best"]), float(got["gbps_median"])  # type: ignore[arg-type]
    assert got["device"] == "NVIDIA H200" and got["bytes_per_copy"] == 1 << 30 and got["repeats"] == 10
    # a copy cannot beat the pins; a device-to-device copy on HBM reaches most of them
    assert median <= best < DATASHEET_GBPS
    assert best > 0.8 * DATASHEET_GBPS


def test_the_probe_is_the_runs_ceiling_and_percentages_use_it(tmp_path: Path) -> None:
    run_id = Store(tmp_path / "r.db").write_run(build_run(read_capture(CAPTURE)))
    store = Store(tmp_path / "r.db", read_only=True)
    run = store.query("SELECT dram_peak_gbps, dram_peak_source FROM run").iloc[0]
    best = float(probe()["gbps_best"])  # type: ignore[arg-type]
    assert run["dram_peak_gbps"] == pytest.approx(best, rel=1e-12)
    assert run["dram_peak_source"].startswith("measured: NVIDIA H200 device-to-device copy")
    add = build_report(store, run_id, by="op").rows.set_index("op").loc["ADD"]
    achieved_gbps = (add["dram_read_bytes"] + add["dram_write_bytes"]) / add["duration_ns"]  # B/ns = GB/s
    assert add["pct_of_dram_peak"] == pytest.approx(100 * achieved_gbps / best, rel=1e-9)


def _capture_with_probe(tmp_path: Path, **changes: object) -> Path:
    """A copy of the capture whose probe result has ``changes`` (None removes the file)."""
    copy = tmp_path / "cap"
    shutil.copytree(CAPTURE, copy)
    target = copy / "probe" / "bandwidth.json.gz"
    if changes.get("remove"):
        target.unlink()
        return copy
    target.write_bytes(gzip.compress(json.dumps({**probe(), **changes}).encode()))
    return copy


def _ceiling_and_notes(capture: Path) -> tuple[float, str, dict[str, str]]:
    run = build_run(read_capture(capture))
    return run.run["dram_peak_gbps"], run.run["dram_peak_source"], {n.code: n.message for n in run.notes}


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"device": "AMD Instinct MI300X"}, "probe-other-gpu"),  # measured on another GPU
        ({"gbps_best": 6000.0, "gbps_median": 5900.0}, "measured-ceiling-implausible"),  # 1.25x the pins
        ({"remove": True}, "probe-missing"),  # the manifest lists the probe, its result is gone
        ({"gbps_best": 50.0, "gbps_median": 49.0}, "measured-ceiling-implausible"),  # 1% of the pins
        ({"bytes_per_copy": 4096}, "probe-too-small"),  # 4 KiB copies time the caches
    ],
)
def test_a_probe_result_that_cannot_be_this_gpus_falls_back_to_the_datasheet_with_a_warning(
    tmp_path: Path, changes: dict[str, object], code: str
) -> None:
    gbps, source, notes = _ceiling_and_notes(_capture_with_probe(tmp_path, **changes))
    # the derived H200 peak: 3.201 GHz x 2 (DDR) x 6016-bit bus / 8 (configs/peaks.yaml arithmetic)
    assert gbps == pytest.approx(2 * 3.201e9 * 6016 / 8 / 1e9, abs=0.05)
    assert "measured" not in source.split(":")[0]
    assert code in notes, notes
