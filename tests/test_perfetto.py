"""``rocroof export --format perfetto``: the JSON trace-event format, checked by an independent validator.

The checker below follows the Trace Event Format document (Google, "Trace Event Format", the JSON
object form that chrome://tracing and Perfetto's JSON importer read): a ``traceEvents`` list of
objects with ``ph``, ``pid``, ``tid``, ``ts`` in µs; ``X`` with ``dur`` >= 0; ``B``/``E`` balanced
per thread; ``C`` with numeric ``args``; ``M`` naming processes and threads; complete events on
one thread must nest (a viewer stacks them). Counts and durations are compared with the stored rows
(sqlite3), not with rocroof's output.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rocroof.capture.readers import read_capture
from rocroof.cli import cli
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

from .conftest import overlapping_capture

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
PHASES = {"X", "B", "E", "i", "I", "C", "M"}


def check_trace(doc: Any) -> list[str]:
    """Problems with a trace-event JSON object (empty when it is well formed)."""
    problems: list[str] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not an object with a traceEvents list"]
    stacks: dict[tuple[Any, Any], list[str]] = defaultdict(list)
    slices: dict[tuple[Any, Any], list[tuple[float, float]]] = defaultdict(list)
    for n, e in enumerate(doc["traceEvents"]):
        where = f"event {n}"
        if not isinstance(e, dict) or e.get("ph") not in PHASES:
            problems.append(f"{where}: unknown phase {e.get('ph') if isinstance(e, dict) else e!r}")
            continue
        for key in ("pid", "tid"):
            if not isinstance(e.get(key), int):
                problems.append(f"{where}: {key} is not an integer")
        if not isinstance(e.get("name"), str):
            problems.append(f"{where}: no name")
        ph = e["ph"]
        if ph != "M":
            ts = e.get("ts")
            if not isinstance(ts, int | float) or isinstance(ts, bool) or not math.isfinite(ts):
                problems.append(f"{where}: ts {ts!r} is not a finite number")
                continue
        if ph == "X":
            dur = e.get("dur")
            if not isinstance(dur, int | float) or not math.isfinite(dur) or dur < 0:
                problems.append(f"{where}: dur {dur!r} is not a number >= 0")
            else:
                slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + dur))
        elif ph == "B":
            stacks[(e["pid"], e["tid"])].append(e["name"])
        elif ph == "E":
            if not stacks[(e["pid"], e["tid"])]:
                problems.append(f"{where}: E without B")
            else:
                stacks[(e["pid"], e["tid"])].pop()
        elif ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args:
                problems.append(f"{where}: counter without args")
            elif not all(isinstance(v, int | float) and math.isfinite(v) for v in args.values()):
                problems.append(f"{where}: counter args not numeric")
        elif ph == "M" and e["name"] in ("process_name", "thread_name") and not isinstance(_arg(e, "name"), str):
            problems.append(f"{where}: metadata without a name")
    problems += [f"track {k}: {len(v)} unclosed B" for k, v in stacks.items() if v]
    # complete events on one track: ordered by start, and each either inside the open one or after it
    eps = 1e-6
    for track, spans in slices.items():
        open_ends: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while open_ends and start >= open_ends[-1] - eps:
                open_ends.pop()
            if open_ends and end > open_ends[-1] + eps:
                problems.append(f"track {track}: a slice [{start}, {end}] overlaps its parent ending {open_ends[-1]}")
                break
            open_ends.append(end)
    return problems


def _arg(event: dict[str, Any], key: str) -> Any:
    args = event.get("args")
    return args.get(key) if isinstance(args, dict) else None


def test_the_checker_catches_what_viewers_reject() -> None:
    assert check_trace({"traceEvents": []}) == []
    bad = {
        "traceEvents": [
            {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": -1},
            {"ph": "B", "name": "b", "pid": 1, "tid": 2, "ts": 0},
            {"ph": "C", "name": "c", "pid": 1, "tid": 0, "ts": 0, "args": {"v": "x"}},
            {"ph": "X", "name": "p", "pid": 2, "tid": 1, "ts": 0, "dur": 10},
            {"ph": "X", "name": "q", "pid": 2, "tid": 1, "ts": 5, "dur": 10},
        ]
    }
    found = check_trace(bad)
    assert any("dur" in p for p in found) and any("unclosed" in p for p in found)
    assert any("numeric" in p for p in found) and any("overlaps" in p for p in found)


@pytest.mark.parametrize(
    "capture",
    [EXAMPLES / "h200-counters" / "dense28-decode-flops", EXAMPLES / "h200" / "moe-prefill"],
    ids=lambda p: p.name,
)
def test_export_is_a_valid_trace_with_the_stored_kernels_and_ranges(capture: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    Store(db).write_run(build_run(read_capture(capture)))
    out = tmp_path / "run.json"
    result = CliRunner().invoke(cli, ["export", "--db", str(db), "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert check_trace(doc) == []
    con = sqlite3.connect(db)
    kernels = con.execute(
        "SELECT COUNT(*), SUM(d.end_ns - d.start_ns) FROM dispatch_record d JOIN pass p ON p.run_id = d.run_id "
        "AND p.pass_index = d.pass_index WHERE p.is_timing_pass"
    ).fetchone()
    ranges = con.execute(
        "SELECT COUNT(*), SUM(g.end_ns - g.start_ns) FROM marker_range g JOIN pass p ON p.run_id = g.run_id "
        "AND p.pass_index = g.pass_index WHERE p.is_timing_pass AND g.kind = 'range'"
    ).fetchone()
    marks = con.execute(
        "SELECT COUNT(*) FROM marker_range g JOIN pass p ON p.run_id = g.run_id AND p.pass_index = g.pass_index "
        "WHERE p.is_timing_pass AND g.kind = 'mark'"
    ).fetchone()[0]
    ev = doc["traceEvents"]
    k = [e for e in ev if e["ph"] == "X" and e.get("cat") == "kernel"]
    r = [e for e in ev if e["ph"] == "X" and e.get("cat") == "range"]
    assert len(k) == kernels[0] and len(r) == ranges[0]
    assert sum(e["ph"] == "i" for e in ev) == marks
    # µs in the trace, ns in the database; each duration rounded to the ns
    assert sum(e["dur"] for e in k) == pytest.approx(kernels[1] / 1e3, abs=1e-3 * len(k))
    assert sum(e["dur"] for e in r) == pytest.approx(ranges[1] / 1e3, abs=1e-3 * len(r))
    # every kernel names its op invocation as the database attributes it
    attributed = dict(
        con.execute(
            "SELECT d.dispatch_index, i.invocation FROM dispatch_record d JOIN op_invocation i "
            "ON i.run_id = d.run_id AND i.op_index = d.op_index"
        ).fetchall()
    )
    assert all(e["args"]["invocation"] == attributed.get(e["args"]["dispatch_index"]) for e in k)
    # GPU tracks and host tracks are named
    names = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in k + r} <= names
    # the DRAM counter track carries the measured kernels' GB/s
    measured = con.execute("SELECT COUNT(*) FROM dispatch_dram WHERE achieved_gbps IS NOT NULL").fetchone()[0]
    assert sum(e["ph"] == "C" and e["name"] == "DRAM GB/s" and e["args"]["GB/s"] > 0 for e in ev) == measured


def test_export_to_stdout_and_bad_out(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    Store(db).write_run(build_run(read_capture(EXAMPLES / "h200" / "moe-prefill")))
    result = CliRunner().invoke(cli, ["export", "--db", str(db)])
    assert result.exit_code == 0 and check_trace(json.loads(result.output)) == []
    missing = CliRunner().invoke(cli, ["export", "--db", str(db), "--out", str(tmp_path / "no" / "x.json")])
    assert missing.exit_code != 0 and "Traceback" not in missing.output and "cannot write" in missing.output


def test_overlapping_kernels_get_a_lane_of_their_own(tmp_path: Path) -> None:
    # the decode capture with every third kernel made to start with the one before it (concurrent
    # streams' worth of overlap on one stream): the trace stays valid and keeps every kernel's time
    capture = overlapping_capture(EXAMPLES / "h200-counters" / "dense28-decode-flops", tmp_path / "cap")
    db = tmp_path / "r.db"
    Store(db).write_run(build_run(read_capture(capture)))
    doc = json.loads(CliRunner().invoke(cli, ["export", "--db", str(db)]).output)
    assert check_trace(doc) == []
    lanes = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any("overlapping" in n for n in lanes)
    stored = (
        sqlite3.connect(db)
        .execute(
            "SELECT SUM(d.end_ns - d.start_ns) FROM dispatch_record d JOIN pass p ON p.run_id = d.run_id "
            "AND p.pass_index = d.pass_index WHERE p.is_timing_pass"
        )
        .fetchone()[0]
    )
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert sum(e["dur"] for e in kernels) == pytest.approx(stored / 1e3, abs=1e-3 * len(kernels))


def test_a_run_without_timestamps_has_nothing_to_draw(tmp_path: Path) -> None:
    # Nsight Compute's CSV alone: durations from its replay, no start or end: one line, not an empty trace
    from .conftest import fixture_path

    db = tmp_path / "r.db"
    Store(db).write_run(build_run(read_capture(fixture_path("h200-trial", "dense_ncu_raw.csv.gz"))))
    result = CliRunner().invoke(cli, ["export", "--db", str(db)])
    assert result.exit_code == 1 and "nothing to draw" in result.output and "Traceback" not in result.output


def test_rounded_timestamps_are_unknown_not_a_zero_length_trace(tmp_path: Path) -> None:
    # rocprofiler-compute's timestamps.csv holds 3 dispatches, each started and ended at 8.1097E+14:
    # rounded, so their durations are NULL; they were drawn at ts 0 with dur 0
    from .conftest import fixture_path

    db = tmp_path / "r.db"
    Store(db).write_run(build_run(read_capture(fixture_path("rocprof-compute", "vcopy", "MI300X_A1"))))
    out = tmp_path / "run.json"
    result = CliRunner().invoke(cli, ["export", "--db", str(db), "--out", str(out)])
    assert result.exit_code == 1 and not out.exists(), result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert result.output.startswith("Error: run 1: none of its 3 dispatches has a known start and duration")
    assert "has a known start and duration (3 whose timestamps the profiler rounded: no duration)" in result.output


def test_dispatches_without_a_duration_are_left_out_and_counted(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    Store(db).write_run(build_run(read_capture(EXAMPLES / "h200" / "moe-prefill")))
    con = sqlite3.connect(db)
    timed = (
        "FROM dispatch_record d JOIN pass p ON p.run_id = d.run_id AND p.pass_index = d.pass_index "
        "WHERE p.is_timing_pass"
    )
    stored = con.execute(f"SELECT COUNT(*) {timed}").fetchone()[0]
    # three kernels whose GPU time is unknown though their timestamps are stored and in order (the pass's
    # timestamps are exact, so no rounding), and one that ends before it starts
    unknown, backwards = {0, 5, 7}, 9
    con.execute(f"UPDATE dispatch_record SET duration_ns = NULL WHERE dispatch_index IN {tuple(unknown)}")
    con.execute("UPDATE dispatch_record SET end_ns = start_ns - 1 WHERE dispatch_index = ?", (backwards,))
    con.commit()
    assert con.execute(f"SELECT COUNT(*) {timed} AND NOT p.timestamps_exact").fetchone()[0] == 0
    assert con.execute(f"SELECT COUNT(*) {timed} AND d.end_ns <= d.start_ns").fetchone()[0] == 1
    stamps = dict(con.execute(f"SELECT d.dispatch_index, d.end_ns - d.start_ns {timed}").fetchall())
    con.close()
    result = CliRunner().invoke(cli, ["export", "--db", str(db), "--out", str(tmp_path / "run.json")])
    assert result.exit_code == 0, result.output
    # the reason of each: not "rounded by the profiler, or end before start" for all four
    assert result.stderr == (
        "warning: 4 dispatch(es) left out of the timeline, their time unknown (1 that end before they start; 3 with "
        "a start and a later end but no stored duration (duration_ns is NULL; if the ingest refused the profiler's "
        "duration, 'rocroof runs --notes 1' says so))\n"
    )
    doc = json.loads((tmp_path / "run.json").read_text())
    assert check_trace(doc) == []
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels) == stored - 4 and not (unknown | {backwards}) & {e["args"]["dispatch_index"] for e in kernels}
    for e in kernels:  # each drawn kernel keeps its stored time, µs
        assert e["dur"] == pytest.approx(stamps[e["args"]["dispatch_index"]] / 1e3, abs=1e-3)
    other = doc["otherData"]
    assert (other["dispatches_left_out"], other["dispatches_without_timestamps"]) == (4, 0)
    assert other["dispatches_without_duration"] == 4
    assert other["dispatches_ending_before_start"] == 1
    assert (other["dispatches_with_rounded_timestamps"], other["dispatches_without_stored_duration"]) == (0, 3)
