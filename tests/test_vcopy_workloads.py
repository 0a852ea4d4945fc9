"""Acceptance: AMD's recorded vcopy workloads give 8 MiB read and 8 MiB written per dispatch.

The truth comes from the kernel (c[i] = a[i] over 1,048,576 doubles), not from rocroof.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from rocroof.capture.readers import read_capture
from rocroof.ingest.pipeline import build_run
from rocroof.report.tables import build_report
from rocroof.store import Store

from .conftest import VCOPY_BYTES, fixture_path


def _ingest(name: str, db: Path) -> tuple[Store, int]:
    capture = read_capture(fixture_path("rocprof-compute", "vcopy", name))
    store = Store(db)
    run_id = store.write_run(build_run(capture))
    return Store(db, read_only=True), run_id


def _dispatch_rows(name: str, db: Path) -> list[dict[str, object]]:
    store, run_id = _ingest(name, db)
    rep = build_report(store, run_id, by="dispatch")
    return rep.rows.to_dict("records")


@pytest.mark.parametrize("name", ["MI300X_A1", "MI300X_A1_rocpd"])
def test_mi300x_read_and_write_bytes_within_1pct(name: str, db_path: Path) -> None:
    rows = _dispatch_rows(name, db_path)
    assert len(rows) == 3
    for row in rows:
        assert row["kernel_name"].startswith("vecCopy")
        assert row["dram_read_bytes"] == pytest.approx(VCOPY_BYTES, rel=0.01)
        assert row["dram_write_bytes"] == pytest.approx(VCOPY_BYTES, rel=0.01)


def test_mi300x_64_byte_only_formula_would_be_off_by_2x(db_path: Path) -> None:
    """TCC_EA0_RDREQ x 64 (ignoring 128-byte requests) gives half the truth on MI300X."""
    store, run_id = _ingest("MI300X_A1_rocpd", db_path)
    df = store.query(
        f"SELECT c.value FROM counter_value c JOIN dispatch d "
        f"ON d.run_id=c.run_id AND d.dispatch_index=c.dispatch_index "
        f"WHERE c.run_id={run_id} AND c.counter_name='TCC_EA0_RDREQ_sum'"
    )
    assert len(df) == 3
    for requests in df["value"]:
        assert requests * 64 == pytest.approx(VCOPY_BYTES / 2, rel=0.01)
    rows = build_report(store, run_id, by="dispatch").rows
    assert (rows["dram_read_bytes"] / (df["value"].to_numpy() * 64)).round(1).tolist() == [2.0, 2.0, 2.0]


def test_mi300x_rounded_timestamps_give_unknown_bandwidth_against_sysinfo_ceiling(db_path: Path) -> None:
    store, run_id = _ingest("MI300X_A1", db_path)
    with open(fixture_path("rocprof-compute", "vcopy", "MI300X_A1", "sysinfo.csv"), newline="") as fh:
        sysinfo = next(csv.DictReader(fh))
    rep = build_report(store, run_id, by="dispatch")
    assert rep.run["dram_peak_gbps"] == pytest.approx(float(sysinfo["hbm_bw"]))
    assert "sysinfo.csv" in rep.run["dram_peak_source"]
    # timestamps.csv holds 8.1097E+14: durations (and so bandwidth) are unknown, not zero
    assert rep.rows["duration_ns"].isna().all()
    assert rep.rows["achieved_gbps"].isna().all()
    assert any(n.code == "timestamps-rounded" for n in rep.notes)


def test_mi300x_rocpd_bandwidth_against_datasheet_ceiling(db_path: Path) -> None:
    store, run_id = _ingest("MI300X_A1_rocpd", db_path)
    rep = build_report(store, run_id, by="dispatch")
    # sysinfo.csv of this workload has no hbm_bw: the MI300X datasheet applies, 8192 bit x 5.2 Gbps / 8
    peak = 8192 * 5.2 / 8
    assert rep.run["dram_peak_gbps"] == pytest.approx(peak)
    assert "MI300X" in rep.run["dram_peak_source"]
    for row in rep.rows.to_dict("records"):
        expected = (row["dram_read_bytes"] + row["dram_write_bytes"]) / row["duration_ns"]
        assert row["achieved_gbps"] == pytest.approx(expected)
        assert row["pct_of_dram_peak"] == pytest.approx(100 * expected / peak)
    assert rep.run["serialised_timings"]


def test_mi350_joins_counter_passes_and_bounds_undetermined_reads(db_path: Path) -> None:
    store, run_id = _ingest("MI350", db_path)
    rows = build_report(store, run_id, by="dispatch").rows.to_dict("records")
    assert len(rows) == 3
    for row in rows:
        assert row["dram_write_bytes"] == pytest.approx(VCOPY_BYTES, rel=0.01)
        # request size unrecorded: no confident number, but bounds that contain the truth
        assert row["dram_read_bytes"] is None or row["dram_read_bytes"] != row["dram_read_bytes"]
        assert row["dram_read_bytes_min"] <= VCOPY_BYTES <= row["dram_read_bytes_max"]
        assert "TCC_EA0_RDREQ_128B" in row["dram_bytes_note"]
    passes = store.query(f"SELECT label, dispatch_count, matched_count FROM pass WHERE run_id={run_id}")
    pmc_passes = passes[passes["label"].str.startswith("pmc_perf_")]
    assert len(pmc_passes) == 8  # pmc_perf_0..7.csv, one application run each
    assert (passes["matched_count"] == 3).all()
    # the write counters come from one pass and the read counters from another
    sources = store.query(
        f"SELECT c.counter_name, p.label FROM counter_value c JOIN dispatch d ON d.run_id=c.run_id "
        f"AND d.dispatch_index=c.dispatch_index JOIN pass p ON p.run_id=d.run_id AND p.pass_index=d.pass_index "
        f"WHERE c.run_id={run_id} AND c.counter_name IN ('TCC_EA0_WRREQ_64B_sum','TCC_EA0_RDREQ_sum')"
    )
    assert sources.groupby("counter_name")["label"].first().nunique() == 2


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _channel_sums(rows: list[dict[str, str]], name: str) -> list[float]:
    """Per dispatch, the sum of the per-channel columns ``name[n]`` (MI100: 32 TCC channels)."""
    cols = [c for c in rows[0] if c.startswith(name + "[")]
    assert len(cols) == 32
    return [sum(float(r[c]) for c in cols) for r in rows]


def test_mi100_rocprof_v1_backend_workload_reads_8_mib_and_writes_by_hand(db_path: Path) -> None:
    """rocprofiler-compute through rocprof v1 on MI100 (gfx908): hex sig/obj, obj_N, DispatchNs columns."""
    folder = fixture_path("rocprof-compute", "vcopy", "MI100")
    rows = _dispatch_rows("MI100", db_path)
    assert [r["dispatch_id"] for r in rows] == [0, 1, 2]
    perf = _csv_rows(folder / "pmc_perf.csv")
    # writes by hand (rocprof v1 metrics.xml WRITE_SIZE for gfx908, in bytes): a write request is 32 bytes
    # unless it is one of the 64-byte ones; the _sum columns come from one pass (perfmon/pmc_perf_4.txt)
    hand = [
        (float(r["TCC_EA_WRREQ_sum"]) - float(r["TCC_EA_WRREQ_64B_sum"])) * 32 + float(r["TCC_EA_WRREQ_64B_sum"]) * 64
        for r in perf
    ]
    # the per-channel columns of another pass (another run of the application) agree within 1%
    channels = [
        (w - w64) * 32 + w64 * 64
        for w, w64 in zip(_channel_sums(perf, "TCC_EA_WRREQ"), _channel_sums(perf, "TCC_EA_WRREQ_64B"), strict=True)
    ]
    assert channels == pytest.approx(hand, rel=0.01)
    stamps = _csv_rows(folder / "timestamps.csv")
    for i, row in enumerate(rows):
        assert row["kernel_name"] == "vecCopy(double*, double*, double*, int, int)"
        assert row["dram_read_bytes"] == pytest.approx(VCOPY_BYTES, rel=0.01)
        assert row["dram_write_bytes"] == pytest.approx(hand[i])
        # GPU time from timestamps.csv's Start/End (rocprof v1 BeginNs/EndNs), not DispatchNs/CompleteNs
        assert row["duration_ns"] == int(stamps[i]["End_Timestamp"]) - int(stamps[i]["Start_Timestamp"])
    assert rows[0]["dram_write_bytes"] == pytest.approx(VCOPY_BYTES, rel=0.01)
    # dispatches 1 and 2 leave part of the output in the write-back L2: about 5.55 MB reach DRAM
    for row in rows[1:]:
        assert 5.4e6 < row["dram_write_bytes"] < 5.7e6


def test_mi100_workload_keeps_no_property_column_as_a_counter(db_path: Path) -> None:
    store, run_id = _ingest("MI100", db_path)
    names = set(store.query(f"SELECT DISTINCT counter_name FROM counter_value WHERE run_id={run_id}")["counter_name"])
    for not_a_counter in ("sig", "obj", "obj_1", "obj_16", "wave_size", "wave_size_3", "queue-id", "queue-index"):
        assert not_a_counter not in names
    for not_a_counter in ("pid", "tid", "DispatchNs", "CompleteNs", "Start_Timestamp", "Dispatch_ID"):
        assert not_a_counter not in names
    assert {"TCC_EA_RDREQ_sum", "SQC_DCACHE_REQ_READ_16", "GRBM_GUI_ACTIVE"} <= names
    # the SQ_*.csv passes keep their host thread and queue
    disp = store.query(f"SELECT DISTINCT queue_id, process_id, thread_id FROM dispatch WHERE run_id={run_id}")
    with open(fixture_path("rocprof-compute", "vcopy", "MI100", "SQ_LEVEL_WAVES.csv"), newline="") as fh:
        first = next(csv.DictReader(fh))
    assert int(first["pid"]) in set(disp["process_id"].dropna())


#: Omniperf 1.x kept rocprof v1's own header names (src/utils/perfagg.py at v1.0.10: no renaming).
_V1_NAMES = {
    "Dispatch_ID": "Index",
    "Kernel_Name": "KernelName",
    "GPU_ID": "gpu-id",
    "Grid_Size": "grd",
    "Workgroup_Size": "wgr",
    "LDS_Per_Workgroup": "lds",
    "Scratch_Per_Workitem": "scr",
    "Arch_VGPR": "arch_vgpr",
    "Accum_VGPR": "accum_vgpr",
    "SGPR": "sgpr",
    "Start_Timestamp": "BeginNs",
    "End_Timestamp": "EndNs",
}


def test_an_omniperf_1x_workload_with_rocprof_v1_names_reads_the_same(tmp_path: Path) -> None:
    import shutil

    src = fixture_path("rocprof-compute", "vcopy", "MI100")
    old = tmp_path / "old"
    shutil.copytree(src, old)
    for name in ("timestamps.csv", "pmc_perf.csv"):
        rows = _csv_rows(old / name)
        with open(old / name, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow([_V1_NAMES.get(c, c) for c in rows[0]])
            writer.writerows([list(r.values()) for r in rows])
    current = _dispatch_rows("MI100", tmp_path / "a.db")
    store = Store(tmp_path / "b.db")
    run_id = store.write_run(build_run(read_capture(old)))
    v1_named = build_report(Store(tmp_path / "b.db", read_only=True), run_id, by="dispatch").rows.to_dict("records")
    keys = ("dispatch_id", "kernel_name", "duration_ns", "dram_read_bytes", "dram_write_bytes")
    assert [{k: r[k] for k in keys} for r in v1_named] == [{k: r[k] for k in keys} for r in current]
    assert len(current) == 3 and all(r["dram_read_bytes"] > 0 for r in current)


def _edit_csv(path: Path, edit: Any) -> None:
    rows = _csv_rows(path)
    header = list(rows[0])
    rows, header = edit(rows, header)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def test_a_workload_counter_that_no_counter_gives_is_refused_with_its_row(tmp_path: Path) -> None:
    import shutil

    from rocroof.errors import ParseError

    work = tmp_path / "w"
    shutil.copytree(fixture_path("rocprof-compute", "vcopy", "MI100"), work)

    def negative(rows: list[dict[str, str]], header: list[str]) -> tuple[list[dict[str, str]], list[str]]:
        rows[1]["TCC_EA_RDREQ_sum"] = "-131072"
        return rows, header

    _edit_csv(work / "pmc_perf.csv", negative)
    with pytest.raises(ParseError, match=r"pmc_perf.csv:3: TCC_EA_RDREQ_sum is -131072; expected a counter value"):
        read_capture(work)


def test_host_times_only_give_upper_bound_durations_as_in_legacy_rocprof(tmp_path: Path) -> None:
    import shutil

    work = tmp_path / "w"
    shutil.copytree(fixture_path("rocprof-compute", "vcopy", "MI100"), work)
    stamps = _csv_rows(work / "timestamps.csv")

    def host_only(rows: list[dict[str, str]], header: list[str]) -> tuple[list[dict[str, str]], list[str]]:
        return rows, [h for h in header if h not in ("Start_Timestamp", "End_Timestamp")]

    _edit_csv(work / "timestamps.csv", host_only)
    store = Store(tmp_path / "r.db")
    run_id = store.write_run(build_run(read_capture(work)))
    ro = Store(tmp_path / "r.db", read_only=True)
    got = ro.query(f"SELECT duration_ns FROM dispatch_dram WHERE run_id = {run_id} ORDER BY dispatch_id")
    assert got["duration_ns"].tolist() == [int(r["CompleteNs"]) - int(r["DispatchNs"]) for r in stamps]
    notes = ro.query(f"SELECT severity, code FROM run_note WHERE run_id = {run_id}")
    assert ("warning", "duration-upper-bound") in list(zip(notes["severity"], notes["code"], strict=True))


def test_omniperf_1x_sysinfo_names_the_gpu_and_its_bandwidth(tmp_path: Path) -> None:
    """Omniperf 1.x sysinfo.csv: gpu_soc, name, numCU, hbmBW (rocprofiler-compute d5ecf1d tests/workloads)."""
    import shutil

    work = tmp_path / "w"
    shutil.copytree(fixture_path("rocprof-compute", "vcopy", "MI100"), work)
    new = _csv_rows(work / "sysinfo.csv")[0]
    old = {"gpu_soc": new["gpu_arch"], "name": "mi100", "numCU": new["cu_per_gpu"], "hbmBW": new["hbm_bw"]}
    with open(work / "sysinfo.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(old))
        writer.writeheader()
        writer.writerow(old)
    store = Store(tmp_path / "r.db")
    run_id = store.write_run(build_run(read_capture(work)))
    run = Store(tmp_path / "r.db", read_only=True).query(
        f"SELECT gpu_arch, gpu_name, dram_peak_gbps FROM run WHERE run_id = {run_id}"
    )
    assert run.iloc[0].tolist() == ["gfx908", "mi100", float(new["hbm_bw"])]
    rows = build_report(Store(tmp_path / "r.db", read_only=True), run_id, by="dispatch").rows
    assert rows["dram_read_bytes"].tolist() == pytest.approx([VCOPY_BYTES] * 3, rel=0.01)


def test_a_counter_pass_that_skipped_a_dispatch_joins_by_dispatch_id(tmp_path: Path) -> None:
    """A kernel-filtered pass holds dispatches 1..2 of the trace's 0..2: ids, not positions, line them up."""
    import shutil

    work = tmp_path / "w"
    shutil.copytree(fixture_path("rocprof-compute", "vcopy", "MI100"), work)
    for path in work.glob("*.csv"):
        if path.name in ("timestamps.csv", "sysinfo.csv", "pmc_dispatch_info.csv"):
            continue
        _edit_csv(path, lambda rows, header: (rows[1:], header))  # dispatch 0 left out
    run_id = Store(tmp_path / "r.db").write_run(build_run(read_capture(work)))
    rows = build_report(Store(tmp_path / "r.db", read_only=True), run_id, by="dispatch").rows
    perf = _csv_rows(fixture_path("rocprof-compute", "vcopy", "MI100", "pmc_perf.csv"))
    hand = [
        (float(r["TCC_EA_WRREQ_sum"]) - float(r["TCC_EA_WRREQ_64B_sum"])) * 32 + float(r["TCC_EA_WRREQ_64B_sum"]) * 64
        for r in perf
    ]
    assert pd_isna(rows["dram_write_bytes"].iloc[0])
    assert rows["dram_write_bytes"].iloc[1:].tolist() == pytest.approx(hand[1:])


def pd_isna(value: object) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def test_a_negative_counter_in_a_long_form_workload_is_refused(tmp_path: Path) -> None:
    """The long form (rocpd-backed workloads) refuses what the wide form refuses: a count below zero."""
    import shutil

    from rocroof.errors import ParseError

    work = tmp_path / "MI300X_A1_rocpd"
    shutil.copytree(fixture_path("rocprof-compute", "vcopy", "MI300X_A1_rocpd"), work)
    with open(work / "pmc_perf.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    name, value = rows[0].index("Counter_Name"), rows[0].index("Counter_Value")
    line = next(i for i, r in enumerate(rows) if r[name] == "TCC_EA0_RDREQ_sum") + 1  # 1-based file line
    rows[line - 1][value] = "-12345.0"
    with open(work / "pmc_perf.csv", "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)
    with pytest.raises(ParseError) as err:
        read_capture(work)
    expected = f"{work / 'pmc_perf.csv'}:{line}: Counter_Value is -12345; expected a counter value"
    assert str(err.value).startswith(expected)


def test_a_workload_without_its_sysinfo_is_named_as_one(tmp_path: Path) -> None:
    """Without sysinfo.csv the long-form workload matches no format: the message says what is missing."""
    import shutil

    from rocroof.errors import InputError

    work = tmp_path / "w"
    shutil.copytree(fixture_path("rocprof-compute", "vcopy", "MI300X_A1_rocpd"), work)
    (work / "sysinfo.csv").unlink()
    with pytest.raises(InputError) as err:
        read_capture(work)
    assert str(err.value) == (
        f"{work}: holds pmc_perf.csv of a rocprofiler-compute workload but no sysinfo.csv beside it (it names the "
        "GPU and its clocks); copy the workload directory whole"
    )
