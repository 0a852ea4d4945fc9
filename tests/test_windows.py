"""A run built a window at a time (rocroof.ingest.windows) holds the rows of the whole build.

The reference is :func:`rocroof.ingest.pipeline.build_run` over the whole capture: every table,
the run row and the notes of the windowed build, stacked, must equal it. Captures: the real H200
Nsight Systems traces of ``examples/`` and the ``h200-trial`` fixture (their trace pass on its own:
one pass with launch calls), and the benchmark generator's rocprofv3 CSV and rocpd captures (three
host threads whose evaluations overlap), cut into windows of a few to a few hundred dispatches.
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from rocroof.capture.readers import read_capture
from rocroof.ingest import windows as W
from rocroof.ingest.pipeline import build_run, with_range_messages
from rocroof.records import Capture, Note
from rocroof.store import Store

from . import synthetic

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ROCROOF_SHARED", REPO.parent / "shared"))
TRIAL = SHARED / "fixtures" / "h200-trial" / "dense_nsys.sqlite.gz"

#: Real traces (their Nsight Systems pass alone) and a window size giving 10-40 windows.
REAL = [
    ("examples/h200/dense500m-decode/trace/nsys.sqlite.gz", 40),
    ("examples/h200/moe-prefill/trace/nsys.sqlite.gz", 8),
    ("examples/h200-sweep/moe-tiny-decode-fusion-r1/trace/nsys.sqlite.gz", 40),
    ("examples/h200-sweep/dense-tiny-decode-no-fusion-r1/trace/nsys.sqlite.gz", 3),
    ("examples/h200-sampled/moe24-decode-sample/trace/nsys.sqlite.gz", 600),
]


def _values(column: pd.Series) -> list[Any]:
    """A column as comparable Python values: missing -> None, numbers -> float, booleans -> int, text."""
    out: list[Any] = []
    for v in column.astype(object).tolist():
        if v is None or (not isinstance(v, str) and pd.isna(v)):
            out.append(None)
        elif isinstance(v, (bool, np.bool_)):
            out.append(int(v))
        elif isinstance(v, (int, float, np.integer, np.floating)):
            out.append(float(v))
        else:
            out.append(str(v))
    return out


_KEYS: dict[str, list[str]] = {
    "marker_range": ["range_index"],
    "dispatch": ["dispatch_index"],
    "op_invocation": ["op_index"],
    # a window takes its dispatches' values in the capture's order: the store keys them by dispatch
    "counter_value": ["dispatch_index", "counter_name"],
    "counter_instance": ["dispatch_index", "counter_name", "instance"],
}


def _table(frame: pd.DataFrame | None, name: str) -> dict[str, list[Any]]:
    if frame is None or not len(frame):
        return {}
    if name == "marker_range":
        frame = with_range_messages(frame)
    key = [k for k in _KEYS.get(name, []) if k in frame]
    if key:
        frame = frame.sort_values(key, kind="stable")
    return {c: _values(frame[c]) for c in frame.columns}


def assert_same_run(whole: Any, windowed: Any) -> None:
    """Every table, the run row and the notes of two RunFrames are equal (values, not dtypes)."""
    names = set(whole.tables) | set(windowed.tables)
    for name in sorted(names):
        a, b = _table(whole.tables.get(name), name), _table(windowed.tables.get(name), name)
        assert list(a) == list(b), f"{name}: columns {list(a)} != {list(b)}"
        for column in a:
            assert a[column] == b[column], f"{name}.{column} differs"
    assert {k: str(v) for k, v in whole.run.items()} == {k: str(v) for k, v in windowed.run.items()}
    assert whole.notes == windowed.notes
    assert whole.settings == windowed.settings


def _both(read: Any, size: int, **kw: Any) -> tuple[Any, Any, int]:
    """``(whole build, windowed build stacked, windows)`` of the capture ``read()`` gives."""
    whole = build_run(read(), source_path="c", release=True, **{k: v for k, v in kw.items() if k == "keep_warmup"})
    capture = read()
    plan = W.plan_windows(capture, size=size, keep_warmup=kw.get("keep_warmup", False))
    assert plan is not None, "not windowed"
    count = len(plan.windows)
    frames = W.build_windows(capture, plan, source_path="c", arch_override=kw.get("arch_override"))
    return whole, W.materialise(frames), count


def _stored_alike(read: Any, size: int, folder: Path, name: str = "", *, windows: int = 2) -> None:
    """The captures ``read()`` returns, stored whole and stored windowed (``size``), make the same database."""
    from .test_store_windows import assert_same_run as assert_same_stored_run

    whole, windowed = folder / f"{name}whole.db", folder / f"{name}windowed.db"
    Store(whole).write_run(build_run(read(), source_path="c", release=True))
    capture = read()
    plan = W.plan_windows(capture, size=size)
    assert plan is not None and len(plan.windows) >= windows
    Store(windowed).write_run(W.build_windows(capture, plan, source_path="c"))
    assert_same_stored_run(whole, windowed)


@pytest.mark.parametrize(("relative", "size"), REAL)
def test_real_traces_same_rows_as_the_whole_build(relative: str, size: int) -> None:
    path = REPO / relative
    whole, windowed, count = _both(lambda: read_capture(path), size)
    assert count >= 3
    assert_same_run(whole, windowed)


@pytest.mark.skipif(not TRIAL.is_file(), reason=f"shared fixtures not found ({TRIAL}); set ROCROOF_SHARED")
@pytest.mark.parametrize("size", [1, 9, 100])
def test_h200_trial_trace_any_window_size(size: int) -> None:
    whole, windowed, count = _both(lambda: read_capture(TRIAL), size)
    assert count > 1
    assert_same_run(whole, windowed)


def test_a_hash_still_computed_goes_to_the_store_and_into_the_run_after_the_last_window(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The windows are built while the input files are still hashed: the run row gets the hash after the last."""
    path = synthetic.capture("csv", 3000, tmp_path_factory.getbasetemp() / "synthetic")
    whole = build_run(read_capture(path), source_path="c", release=True)
    capture = read_capture(path)
    digest = capture.content_sha256  # waits for the reader's hash
    job: Future[str] = Future()
    capture._hash_job = job  # as the reader leaves it while the hash is still being computed
    plan = W.plan_windows(capture, size=500)
    assert plan is not None
    frames = W.build_windows(capture, plan, source_path="c")
    assert frames.pending_sha256 is job and frames.run["content_sha256"] is None
    windows = iter(frames.windows or [])
    next(windows)  # the first windows are built without it
    job.set_result(digest)
    list(windows)
    assert frames.run["content_sha256"] == digest == whole.run["content_sha256"]


@pytest.mark.parametrize("fmt", ["csv", "rocpd"])
@pytest.mark.parametrize("size", [64, 500])
def test_overlapping_threads_same_rows(fmt: str, size: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = tmp_path_factory.getbasetemp() / "synthetic"
    path = synthetic.capture(fmt, 3000, cache)
    whole, windowed, count = _both(lambda: read_capture(path), size)
    assert count >= 2
    assert whole.tables["dispatch"]["attribution_method"].astype(str).eq("launch_api").all()
    assert_same_run(whole, windowed)


def _damaged(path: Path) -> Capture:
    """The capture with three dispatches (far apart) ending before they start and one lasting two hours."""
    capture = read_capture(path)
    d = capture.passes[0].dispatches
    start = d["start_ns"].astype("Int64").to_numpy(dtype=np.int64, na_value=0)
    end = d["end_ns"].astype("Int64").to_numpy(dtype=np.int64, na_value=0).copy()
    n = len(d)
    for row in (5, n // 2, n - 3):
        end[row] = start[row] - 1
    end[n // 3] = start[n // 3] + 2 * 3600 * 10**9
    end[2 * n // 3] = start[2 * n // 3] + 3 * 3600 * 10**9  # the longest: the example the note names
    d["end_ns"] = pd.array(end, dtype="Int64")
    d["duration_ns"] = pd.array([None] * n, dtype="Int64")
    return capture


def test_counted_notes_summed_over_windows(tmp_path_factory: pytest.TempPathFactory) -> None:
    path = synthetic.capture("csv", 3000, tmp_path_factory.getbasetemp() / "synthetic")
    whole, windowed, count = _both(lambda: _damaged(path), 300)
    assert count >= 3
    codes = {n.code: n.message for n in whole.notes}
    assert "3 dispatch(es) end before they start" in codes["negative-duration"]
    assert "2 dispatch(es) last over an hour" in codes["implausible-duration"]
    assert "10,800 s from its start" in codes["implausible-duration"]
    assert_same_run(whole, windowed)


def test_warmup_cut_before_windows() -> None:
    """A trace with a 'ggml reset' mark: the warm-up goes before the windows are cut, as the whole build drops it."""
    path = REPO / "examples/h200/dense500m-decode/trace/nsys.sqlite.gz"
    capture = read_capture(path)
    m = capture.passes[0].markers
    ranges = m[(m["kind"] == "range").to_numpy(dtype=bool)]
    middle = int(ranges["start_ns"].astype("Int64").iloc[len(ranges) // 3]) - 1

    def with_reset() -> Capture:
        c = read_capture(path)
        p = c.passes[0]
        mark = pd.DataFrame(
            {
                "process_id": [p.markers["process_id"].iloc[0]],
                "thread_id": [p.markers["thread_id"].iloc[0]],
                "start_ns": [middle],
                "end_ns": [middle],
                "message": ["ggml reset"],
                "kind": ["mark"],
                "correlation_id": [None],
            }
        ).astype(
            {
                k: str(v)
                for k, v in p.markers.dtypes.items()
                if k in {"process_id", "thread_id", "start_ns", "end_ns", "correlation_id"}
            }
        )
        p.markers = (
            pd.concat([p.markers, mark], ignore_index=True)
            .sort_values("start_ns", kind="stable")
            .reset_index(drop=True)
        )
        return c

    whole, windowed, count = _both(with_reset, 40)
    assert count >= 3
    assert any(n.code == "warmup-dropped" for n in whole.notes)
    assert len(whole.tables["dispatch"]) < len(capture.passes[0].dispatches)
    assert_same_run(whole, windowed)
    whole, windowed, _ = _both(with_reset, 40, keep_warmup=True)
    assert len(whole.tables["dispatch"]) == len(capture.passes[0].dispatches)
    assert_same_run(whole, windowed)


def test_clean_cuts_by_hand() -> None:
    # ranges [0,10] [5,20] [25,30] [30,40] [41,50]: open somewhere until 20, then 25-40 (30 touches 30)
    starts = np.array([0, 5, 25, 30, 41], dtype=np.int64)
    ends = np.array([10, 20, 30, 40, 50], dtype=np.int64)
    assert W._clean_cuts(starts, ends).tolist() == [25, 41]
    assert W._clean_cuts(starts[::-1].copy(), ends[::-1].copy()).tolist() == [25, 41]  # any order
    assert W._clean_cuts(starts[:1], ends[:1]).tolist() == []


def test_not_windowed(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Captures the windows do not cover are built whole: two passes, op metadata, small, size 0."""
    cache = tmp_path_factory.getbasetemp() / "synthetic"
    two_passes = read_capture(synthetic.capture("nvidia", 3000, cache))
    assert len(two_passes.passes) == 2
    unattributed = dataclasses.replace(two_passes.passes[1], dispatches=two_passes.passes[1].dispatches.copy())
    for column in ("region", "region_op", "region_node", "region_invocation"):  # text, or its parts
        unattributed.dispatches.loc[7, column] = None  # an Nsight Compute kernel outside every ggml range
    damaged = dataclasses.replace(two_passes, passes=[two_passes.passes[0], unattributed])
    assert W.plan_windows(damaged, size=100) is None
    assert W.plan_windows(two_passes, size=100) is not None  # two passes: Nsight Systems + Compute
    with_sidecar = read_capture(REPO / "examples/h200/dense500m-decode")
    assert with_sidecar.op_metadata is not None
    assert W.plan_windows(with_sidecar, size=40) is None
    one = read_capture(synthetic.capture("csv", 3000, cache))
    assert W.plan_windows(one, size=3000) is None  # one window: the whole build
    assert W.plan_windows(one, size=0) is None
    assert W.plan_windows(one, size=500) is not None
    no_launches = read_capture(synthetic.capture("csv", 3000, cache))
    no_launches.passes[0] = dataclasses.replace(no_launches.passes[0], launches=no_launches.passes[0].launches.iloc[:0])
    assert W.plan_windows(no_launches, size=100) is None  # attributed by enqueue order: not windowed


def test_window_size_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROCROOF_WINDOW_DISPATCHES", raising=False)
    assert W.window_size() == W.WINDOW_DISPATCHES
    monkeypatch.setenv("ROCROOF_WINDOW_DISPATCHES", "1000")
    assert W.window_size() == 1000
    monkeypatch.setenv("ROCROOF_WINDOW_DISPATCHES", "0")
    assert W.window_size() == 0
    monkeypatch.setenv("ROCROOF_WINDOW_DISPATCHES", "lots")
    assert W.window_size() == W.WINDOW_DISPATCHES


#: Note texts of the merge test (the wording of rocroof.ingest.pipeline's notes).
_FUSED = "ggml-fused group(s) name an invocation this capture has no op for (e.g. warm-up)"
_ABOVE = "dispatch(es) moved DRAM bytes faster than 2x the 4,800 GB/s ceiling"


def test_notes_merged_by_hand() -> None:
    """Counts summed, the first window's example kept, the worst example where the note names the worst."""
    notes = W._Notes()
    notes.add([Note("info", "reader", "a reader note")], first=True)
    notes.add(
        [
            Note("info", "reader", "a reader note"),
            Note("info", "no-ceiling", "no DRAM bandwidth ceiling known"),
            Note("warning", "malformed-range", "p: 1,200 range(s) start with 'ggml:' but ... (e.g. 'ggml:x')"),
            Note(
                "warning",
                "fused-unmatched",
                f"1 of 2 {_FUSED}",
            ),
        ]
    )
    notes.add(
        [
            Note("info", "reader", "a reader note"),
            Note(
                "warning",
                "dram-above-ceiling",
                f"3 {_ABOVE} (dispatch 7: 2.5x): damaged",
            ),
            Note("warning", "malformed-range", "p: 3 range(s) start with 'ggml:' but ... (e.g. 'ggml:y')"),
            Note(
                "info",
                "fused-unmatched",
                f"1 of 1 {_FUSED}",
            ),
            Note("info", "no-ceiling", "no DRAM bandwidth ceiling known"),
        ]
    )
    notes.add(
        [
            Note(
                "warning",
                "dram-above-ceiling",
                f"1,000 {_ABOVE} (dispatch 9: 12.5x): damaged",
            ),
        ]
    )
    assert notes.notes() == [
        Note("info", "reader", "a reader note"),
        Note("warning", "malformed-range", "p: 1,203 range(s) start with 'ggml:' but ... (e.g. 'ggml:x')"),
        Note(
            "info",
            "fused-unmatched",
            f"2 of 3 {_FUSED}",
        ),
        Note(
            "warning",
            "dram-above-ceiling",
            f"1,003 {_ABOVE} (dispatch 9: 12.5x): damaged",
        ),
        Note("info", "no-ceiling", "no DRAM bandwidth ceiling known"),
    ]


def test_clean_cuts_a_block_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The block-wise sweep over chosen rows finds the cuts of the whole-array sweep."""
    rng = np.random.default_rng(7)
    starts = rng.integers(0, 10_000, 3_000).astype(np.int64)
    ends = starts + rng.integers(0, 40, 3_000)
    rows = np.flatnonzero(rng.random(3_000) < 0.7)
    expected = W._clean_cuts(starts[rows], ends[rows])
    assert len(expected) > 10
    for block in (1, 7, 64, 1 << 16):
        monkeypatch.setattr(W, "_BLOCK", block)
        assert W._clean_cuts_of(starts, ends, rows).tolist() == expected.tolist()


def test_windowed_only_where_the_read_is_on_disk(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``build`` windows a pass whose rows the reader spilled; one held in memory is built whole (it peaks lower)."""
    from rocroof import spill

    path = synthetic.capture("csv", 3000, tmp_path_factory.getbasetemp() / "synthetic")
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", spill._min_bytes(None))  # the default, whatever the environment sets
    in_memory = read_capture(path)
    assert W.plan_windows(in_memory, size=500, on_disk_only=True) is None
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    on_disk = read_capture(path)
    assert W.plan_windows(on_disk, size=500, on_disk_only=True) is not None
    monkeypatch.setenv("ROCROOF_WINDOW_DISPATCHES", "500")
    whole = build_run(read_capture(path), source_path="c", release=True)
    windowed = W.build(read_capture(path), source_path="c", release=True)
    assert windowed.windows is not None
    assert_same_run(whole, W.materialise(windowed))
    monkeypatch.setenv("ROCROOF_WINDOW_DISPATCHES", "0")
    assert W.build(read_capture(path), source_path="c", release=True).windows is None


def test_the_plan_holds_its_rows_and_texts_on_disk(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The windows' row arrays are views of spill files, the marker texts codes + spilled texts; the same rows."""
    from rocroof import spill
    from rocroof.records import SpilledTexts

    path = synthetic.capture("csv", 3000, tmp_path_factory.getbasetemp() / "synthetic")
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    monkeypatch.setattr(W, "_MANY_TEXTS", 0)  # every text column of the markers, not only the fused marks' messages
    capture = read_capture(path)
    texts = {
        name: capture.passes[0].markers[name].astype(object).tolist()
        for name in capture.passes[0].markers.columns
        if isinstance(capture.passes[0].markers[name].array, pd.Categorical)
    }
    assert "message" in texts
    plan = W.plan_windows(capture, size=500, on_disk_only=True)
    assert plan is not None and len(plan.windows) >= 2
    for w in plan.windows:
        assert all(spill.is_spilled(a) for a in (w.markers, w.owned, w.launches))
    markers = plan.passdata.markers
    assert set(plan.marker_texts) == set(texts)
    for name, table in plan.marker_texts.items():
        assert isinstance(table, SpilledTexts)
        codes = markers[name].to_numpy()
        assert codes.dtype.kind == "i"
        # rows as read (no warm-up in this capture): the codes give back each row's text
        got = [None if t is None else t for t in table[codes].tolist()]
        assert got == [None if pd.isna(t) else t for t in texts[name]]
    monkeypatch.setenv("ROCROOF_WINDOW_DISPATCHES", "500")
    whole = build_run(read_capture(path), source_path="c", release=True)
    windowed = W.build(read_capture(path), source_path="c", release=True)
    assert windowed.windows is not None
    assert_same_run(whole, W.materialise(windowed))


def test_counters_out_of_dispatch_order(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """Counter values not in dispatch order are found per window by a scan, with the whole build's rows."""
    path = synthetic.capture("csv", 3000, tmp_path_factory.getbasetemp() / "synthetic")

    def shuffled() -> Capture:
        capture = read_capture(path)
        p = capture.passes[0]
        order = np.random.default_rng(3).permutation(len(p.counters))
        p.counters = p.counters.iloc[order].reset_index(drop=True)
        return capture

    capture = shuffled()
    plan = W.plan_windows(capture, size=500)
    assert plan is not None and plan.in_row_order == {"counters": False}
    whole, windowed, count = _both(shuffled, 500)
    assert count >= 2
    assert_same_run(whole, windowed)
    # stored: the counters numbered as the whole run numbers them (the first window sees them in another order)
    _stored_alike(shuffled, 500, tmp_path)


# -- two passes: Nsight Systems (timing) + Nsight Compute (counters), design step 5


def _nvidia(n: int, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic.capture("nvidia", n, tmp_path_factory.getbasetemp() / "synthetic")


def _with_reset(read: Any, at: float = 0.3) -> Any:
    """``read`` with a ``ggml reset`` mark at a clean cut ``at`` of the way through the trace pass's ggml ranges."""

    def capture() -> Capture:
        c = read()
        p = c.passes[0]
        m = p.markers
        ggml_rows, _inv = W._ggml_invocations(m)
        starts = m["start_ns"].astype("Int64").to_numpy(dtype=np.int64)
        ends = m["end_ns"].astype("Int64").to_numpy(dtype=np.int64)
        cuts = W._clean_cuts(starts[ggml_rows], ends[ggml_rows])
        t = int(cuts[int(len(cuts) * at)]) - 1
        mark = pd.DataFrame(
            {
                "process_id": [m["process_id"].iloc[0]],
                "thread_id": [m["thread_id"].iloc[0]],
                "start_ns": [t],
                "end_ns": [t],
                "message": ["ggml reset"],
                "kind": ["mark"],
                "correlation_id": [None],
            }
        ).astype({k: str(v) for k, v in m.dtypes.items() if k in {"process_id", "thread_id", "start_ns", "end_ns"}})
        mark["correlation_id"] = mark["correlation_id"].astype(m["correlation_id"].dtype)
        merged = pd.concat([m.astype({"message": object}), mark], ignore_index=True)
        p.markers = merged.sort_values("start_ns", kind="stable").reset_index(drop=True)
        return c

    return capture


@pytest.mark.parametrize("size", [37, 250, 1000])
def test_nsight_two_passes_same_rows(size: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Nsight Compute's kernels go with the windows of their op invocations: every row as built whole."""
    path = _nvidia(3000, tmp_path_factory)
    whole, windowed, count = _both(lambda: read_capture(path), size)
    assert count >= 2
    d = whole.tables["dispatch"]
    assert (d["pass_index"] == 1).sum() == 3000 and len(whole.tables["counter_value"]) == 24000
    assert d["timing_dispatch_index"].notna().all()  # every Nsight Compute kernel matched by (invocation, ordinal)
    assert_same_run(whole, windowed)


@pytest.mark.parametrize("keep_warmup", [False, True])
def test_nsight_two_passes_warmup_cut(keep_warmup: bool, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A 'ggml reset' in the trace: Nsight Compute's warm-up is its kernels before the first measured invocation."""
    path = _nvidia(3000, tmp_path_factory)
    read = _with_reset(lambda: read_capture(path))
    whole, windowed, count = _both(read, 200, keep_warmup=keep_warmup)
    assert count >= 3
    warmup = [n.message for n in whole.notes if n.code == "warmup-dropped"]
    if keep_warmup:
        assert not warmup
    else:
        assert len(warmup) == 2 and "op invocations <" in warmup[1]
        assert 0 < (whole.tables["dispatch"]["pass_index"] == 1).sum() < 3000
    assert_same_run(whole, windowed)


def test_nsight_pass_mismatch_note_summed(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Nsight Compute kernels missing or renamed in several windows: the whole build's pass-mismatch note."""
    path = _nvidia(3000, tmp_path_factory)
    inv = W._region_invocations(read_capture(path).passes[1].dispatches)
    assert inv is not None
    dropped = inv[[100, 1500, 2900]]  # three ops whose kernels Nsight Compute did not profile
    gone = int(np.isin(inv, dropped).sum())

    def damaged(rename: bool) -> Any:
        def read() -> Capture:
            c = read_capture(path)
            q = c.passes[1]
            keep = ~np.isin(W._region_invocations(q.dispatches), dropped)
            d = q.dispatches.copy()
            if rename:
                d["kernel_name"] = d["kernel_name"].astype(object)
                for row in (400, 2000, 2500):
                    d.loc[row, "kernel_name"] = f"other_kernel_{row}"
            rows = np.flatnonzero(keep)
            renumber = np.cumsum(keep) - 1
            counters = q.counters[keep[q.counters["row"].to_numpy()]].reset_index(drop=True)
            counters["row"] = renumber[counters["row"].to_numpy()]
            c.passes[1] = dataclasses.replace(q, dispatches=d.iloc[rows].reset_index(drop=True), counters=counters)
            return c

        return read

    for rename in (False, True):
        whole, windowed, count = _both(damaged(rename), 300)
        assert count >= 3
        (note,) = [n for n in whole.notes if n.code == "pass-mismatch"]
        left = 3000 - gone
        if rename:
            assert note.message.startswith(f"ncu: 3 of {left} dispatches do not match the timing pass trace ({left} vs")
            assert "first difference at invocation" in note.message and "other_kernel_400" in note.message
        else:
            assert note.message.startswith(f"ncu: {gone} of 3000 dispatches of the timing pass trace have no row")
        assert_same_run(whole, windowed)


def _trial_two_passes(tmp_path: Path) -> Path:
    """The h200-trial fixture's Nsight Systems and Compute files as one capture folder."""
    import shutil

    shutil.copy(TRIAL, tmp_path / "nsys.sqlite.gz")
    shutil.copy(TRIAL.with_name("dense_ncu_raw.csv.gz"), tmp_path / "ncu_raw.csv.gz")
    return tmp_path


def _no_sidecar(path: Path) -> Any:
    """``path`` read without its op metadata and fused-group logs (a capture with them is built whole)."""
    return lambda: dataclasses.replace(read_capture(path), op_metadata=None, fused_groups={})


@pytest.mark.skipif(not TRIAL.is_file(), reason=f"shared fixtures not found ({TRIAL}); set ROCROOF_SHARED")
@pytest.mark.parametrize("size", [1, 17, 68])
def test_nsight_two_passes_real(size: int, tmp_path: Path) -> None:
    """Real H200 Nsight Systems + Compute captures (ncu spells kernels its own way): windows of 1 to 68 dispatches."""
    trial = _no_sidecar(_trial_two_passes(tmp_path))
    whole, windowed, count = _both(trial, size)
    assert count >= 5
    assert (whole.tables["dispatch"]["pass_index"] == 1).sum() == 343
    assert_same_run(whole, windowed)
    example = _no_sidecar(REPO / "examples/h200/dense500m-decode")
    whole, windowed, count = _both(example, size * 3)
    assert count >= 3
    assert_same_run(whole, windowed)
    with_sidecar = read_capture(REPO / "examples/h200/dense500m-decode")
    assert W.plan_windows(with_sidecar, size=size) is None  # op metadata: built whole


def test_nsight_two_passes_stored(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """Stored windowed, a two-pass run is the database of the whole build (kernel and counter ids too)."""
    _stored_alike(_with_reset(lambda: read_capture(_nvidia(3000, tmp_path_factory))), 200, tmp_path, windows=3)
    if TRIAL.is_file():
        _stored_alike(_no_sidecar(_trial_two_passes(tmp_path)), 17, tmp_path, "trial-")


def test_nsight_windowed_where_both_reads_are_on_disk(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``build`` windows an Nsight capture whose two reads spilled their rows (text as codes), as built whole."""
    from rocroof import spill

    path = _nvidia(3000, tmp_path_factory)
    assert W.plan_windows(read_capture(path), size=500, on_disk_only=True) is None  # small: read in memory
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    on_disk = read_capture(path)
    assert isinstance(on_disk.passes[1].dispatches["region"].array, pd.Categorical)
    assert on_disk.passes[0].markers["message"].isna().any()  # the ggml ranges' messages as their parts
    monkeypatch.setattr(W, "_MANY_TEXTS", 0)  # every marker text column given to windows as text
    plan = W.plan_windows(on_disk, size=500, on_disk_only=True)
    assert plan is not None and plan.region_texts is not None and "message" in plan.marker_texts
    monkeypatch.setenv("ROCROOF_WINDOW_DISPATCHES", "500")
    for read in (lambda: read_capture(path), _with_reset(lambda: read_capture(path))):
        whole = build_run(read(), source_path="c", release=True)
        windowed = W.build(read(), source_path="c", release=True)
        assert windowed.windows is not None
        assert_same_run(whole, W.materialise(windowed))


def test_a_window_that_disagrees_rolls_back_and_the_run_is_built_whole(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WindowsDisagree from a window mid-write: the transaction goes; the capture is read again, stored whole once."""
    from click.testing import CliRunner

    from rocroof import spill
    from rocroof.cli import cli
    from rocroof.ingest import pipeline

    from .test_store_windows import assert_same_run as assert_same_stored_run

    path = synthetic.capture("csv", 3000, tmp_path_factory.getbasetemp() / "synthetic")
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)  # the read on disk: windowed
    monkeypatch.setenv("ROCROOF_WINDOW_DISPATCHES", "0")
    whole = tmp_path / "whole.db"
    assert CliRunner().invoke(cli, ["ingest", str(path), "--db", str(whole)]).exit_code == 0

    monkeypatch.setenv("ROCROOF_WINDOW_DISPATCHES", "500")
    real = pipeline.build_run
    calls = tmp_path / "calls"  # a line per build_run call, whichever process builds (rocroof.ingest.forked)
    calls.touch()
    reads: list[Path] = []
    real_read = W.build

    def build_run(capture: Capture, **kwargs: Any) -> Any:
        with calls.open("a") as fh:
            fh.write("call\n")
        if len(calls.read_text().splitlines()) == 2:  # the second window's: one the plan could not tell apart
            raise W.WindowsDisagree("window 1: as a test")
        return real(capture, **kwargs)

    def build(capture: Capture, **kwargs: Any) -> Any:
        reads.append(Path(capture.files_read[0]))
        return real_read(capture, **kwargs)

    monkeypatch.setattr(pipeline, "build_run", build_run)
    monkeypatch.setattr(W, "build", build)
    got = tmp_path / "got.db"
    result = CliRunner().invoke(cli, ["ingest", str(path), "--db", str(got)])
    assert result.exit_code == 0, result.output
    # the first window, the second refused; then one whole build
    assert len(reads) == 2 and len(calls.read_text().splitlines()) == 3
    assert Store(got, read_only=True).query("SELECT COUNT(*) AS n FROM run")["n"].iloc[0] == 1
    assert_same_stored_run(whole, got)


@pytest.mark.parametrize("on_disk", [False, True])
def test_launch_calls_by_hand(on_disk: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each dispatch's launch call is the first call with its correlation id, in either order of the calls."""
    from rocroof import spill

    if on_disk:
        monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    monkeypatch.setattr(W, "_BLOCK", 2)  # several blocks
    d = pd.DataFrame({"correlation_id": pd.array([3, 1, 3, 2, 5], dtype="Int64")})
    in_order = pd.DataFrame(  # calls by correlation id; id 3 twice (the first, row 2, launches)
        {
            "correlation_id": pd.array([1, 2, 3, 3, 5], dtype="Int64"),
            "start_ns": pd.array([10, 20, 30, 31, 50], dtype="Int64"),
        }
    )
    got = W._launch_calls(d, in_order)
    assert got is not None
    assert got[0].tolist() == [30, 10, 30, 20, 50]
    assert got[1].tolist() == [2, 0, 2, 1, 4]
    assert got[1].dtype == np.int32  # row numbers of fewer than 2**31 calls
    assert spill.is_spilled(got[0]) == on_disk and spill.is_spilled(got[1]) == on_disk
    shuffled = in_order.iloc[[4, 2, 0, 3, 1]].reset_index(drop=True)  # the join's path
    got = W._launch_calls(d, shuffled)
    assert got is not None
    assert got[0].tolist() == [30, 10, 30, 20, 50]
    assert got[1].tolist() == [1, 2, 1, 4, 0]
    # a dispatch whose call has no start time, or no call at all: no plan
    no_start = in_order.assign(start_ns=pd.array([10, None, 30, 31, 50], dtype="Int64"))
    assert W._launch_calls(d, no_start) is None
    assert W._launch_calls(d, in_order.iloc[:4]) is None


def test_ggml_invocations_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows and invocations of the ggml ranges only, over several blocks."""
    monkeypatch.setattr(W, "_BLOCK", 2)
    m = pd.DataFrame(
        {
            "kind": ["range", "mark", "range", "range", "range"],
            "message": [
                "ggml:MUL_MAT:q-0:7",
                "ggml-fused:8:RMS_NORM+MUL:norm-0|attn_norm-0",
                "app",
                None,
                "ggml:ADD:x:9",
            ],
        }
    )
    rows, inv = W._ggml_invocations(m)
    assert rows.tolist() == [0, 4]
    assert inv.tolist() == [7, 9]


def test_clean_cuts_of_ranges_in_start_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges that come in start order are swept as they lie (no sort), with the whole-array sweep's cuts."""
    rng = np.random.default_rng(11)
    starts = np.sort(rng.integers(0, 10_000, 3_000)).astype(np.int64)
    ends = starts + rng.integers(0, 40, 3_000)
    rows = np.flatnonzero(rng.random(3_000) < 0.7)
    expected = W._clean_cuts(starts[rows], ends[rows])
    assert len(expected) > 10
    assert W._starts_ordered(starts, rows) and not W._starts_ordered(starts[::-1].copy(), rows)
    for block in (1, 7, 1 << 16):
        monkeypatch.setattr(W, "_BLOCK", block)
        assert W._clean_cuts_of(starts, ends, rows).tolist() == expected.tolist()
