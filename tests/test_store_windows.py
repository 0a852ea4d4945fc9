"""A run given to the store as a sequence of windows (``RunFrames.windows``) is stored as the whole run.

Issue 15 (flat ingest, step 4): the windowed build hands the store one window of whole op
invocations at a time. Each test cuts the frames of :func:`build_run` into windows
(:func:`tests.windowing.split_run`) and compares the database with the one the whole frames
give: every table row by row (every column but ``run_id`` and ``created_at``; on SQLite the rowid
order too) and ``rocroof report --by op``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

import rocroof.store as store_mod
from rocroof.capture.readers import read_capture
from rocroof.cli import cli
from rocroof.errors import DuplicateRunError
from rocroof.ingest.pipeline import RunFrames, build_run
from rocroof.store import Store, schema

from . import synthetic
from .conftest import REPO, fixture_path
from .store_rows import table_rows
from .test_postgres import pg_server, pg_url  # noqa: F401  (fixtures)
from .windowing import produced, split_run, window_of_dispatches

EXAMPLES = sorted(str(p.relative_to(REPO)) for p in REPO.glob("examples/*/*") if p.is_dir())
FIXTURE_CASES = [
    "rocprofv3-docs",  # rocprofv3 CSV: one pass, counters, a DRAM note, ranges
    "rocprofv3-docs-2024-07",
    "rocprof-compute/vcopy/MI300X_A1",  # multi-pass counters with per-instance readings, DRAM bytes
    "rocprof-compute/vcopy/MI300X_A1_rocpd",
    "rocprof-compute/vcopy/MI350",
    "rocprof-compute/vcopy/MI100",
    "rpd/mytrace.rpd.gz",  # an RPD trace: 11,884 ranges the dispatches name
    "rocprof-v1/mi250x-laplacian-kernel2",
]
SYNTHETIC = [f"synthetic:{fmt}" for fmt in synthetic.FORMATS]  # rocprofv3 CSV, rocpd, Nsight: ggml ops, counters
#: "One op per window" for runs of at most this many clean cuts (the prefill examples, the fixtures);
#: larger runs are cut into :data:`MANY_WINDOWS` instead (a window costs ~20-60 ms: 5,564 would take minutes).
MOST_WINDOWS = 140
MANY_WINDOWS = 24


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("captures")


def _capture(case: str, cache: Path) -> Path:
    if case.startswith("synthetic:"):
        return synthetic.capture(case.split(":", 1)[1], 600, cache)
    if case.startswith("examples/"):
        return REPO / case
    return fixture_path(*case.split("/"))


def _frames(case: str, cache: Path) -> RunFrames:
    return build_run(read_capture(_capture(case, cache)))


def _write(db: Path | str, frames: RunFrames, **kwargs: Any) -> int:
    store = Store(db)
    try:
        return store.write_run(frames, **kwargs)
    finally:
        store.close()


def _rowid_order(db: Path, run_id: int) -> dict[str, list[tuple[object, ...]]]:
    """The rows of each table with rowids, in rowid order (SQLite)."""
    con = sqlite3.connect(db)
    try:
        out = {}
        for table in schema.metadata.sorted_tables:
            if "run_id" not in table.c or table.name == "run":
                continue
            try:
                rows = con.execute(f'SELECT rowid, * FROM "{table.name}" WHERE run_id = ? ORDER BY rowid', (run_id,))
            except sqlite3.OperationalError:  # WITHOUT ROWID: its order is its key's
                continue
            out[table.name] = [r[:2] + r[3:] for r in rows.fetchall()]  # run_id (column 1 of the table) left out
        return out
    finally:
        con.close()


def _report(db: Path | str, run_id: int) -> str:
    """``rocroof report --by op`` of a run, the run's id in it written N."""
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "--run", str(run_id), "--by", "op"])
    assert result.exit_code == 0, result.output
    return re.sub(rf"(\brun |--run |--notes ){run_id}\b", r"\1N", result.output)


def assert_same_run(a: Path | str, b: Path | str, run_a: int = 1, run_b: int = 1, *, same_hash: bool = True) -> None:
    """Run ``run_a`` of database ``a`` and ``run_b`` of ``b`` hold the same rows, table by table, and report alike."""
    rows_a, rows_b = table_rows(str(a), run_a), table_rows(str(b), run_b)
    assert rows_a.keys() == rows_b.keys()
    assert len(rows_a["dispatch_record"]) or len(rows_a["marker_range"]), "an empty run compares nothing"
    for name, df in rows_a.items():
        other = rows_b[name]
        if name == "run" and not same_hash:
            df, other = df.drop(columns="content_sha256"), other.drop(columns="content_sha256")
        pd.testing.assert_frame_equal(df, other, check_exact=True, obj=name)
    if not str(a).startswith("postgresql") and run_a == run_b:
        assert _rowid_order(Path(a), run_a) == _rowid_order(Path(b), run_b)
    assert _report(a, run_a) == _report(b, run_b)


def _cuts(frames: RunFrames) -> list[int | None]:
    """The window counts each run is written with: 1, 2, 3 and one op per window (None) where that is not too many."""
    most = int(window_of_dispatches(frames, MOST_WINDOWS + 1).max(initial=0)) + 1
    return [1, 2, 3, None if most <= MOST_WINDOWS else MANY_WINDOWS]


@pytest.mark.parametrize("case", EXAMPLES + FIXTURE_CASES + SYNTHETIC)
def test_a_run_given_as_windows_is_stored_as_the_whole_run(case: str, cache: Path, tmp_path: Path) -> None:
    frames = _frames(case, cache)
    _write(tmp_path / "whole.db", frames)
    cut = {}
    for windows in _cuts(frames):
        split = split_run(frames, windows)
        cut[windows] = len(split.windows or [])
        db = tmp_path / f"windows-{windows}.db"
        _write(db, split)
        assert_same_run(tmp_path / "whole.db", db)
    # the runs were cut as asked (a run with fewer clean cuts than windows: into as many as it has)
    assert cut[1] == 1
    if cut.get(None, 0) > 3:
        assert cut[2] == 2 and cut[3] == 3


@pytest.mark.parametrize(
    "case",
    ["rpd/mytrace.rpd.gz", "rocprofv3-docs", "synthetic:csv", "synthetic:rocpd", "rocprof-compute/vcopy/MI300X_A1"],
)
def test_the_windows_numbering_of_names_is_the_whole_runs_for_one_pass(case: str, cache: Path, tmp_path: Path) -> None:
    """Without the names numbered up front, the store's one map per run numbers them as the whole run does
    where the names first appear over the windows in the whole run's order: one pass, or passes
    that repeat the first's kernels and counters (rocprofiler-compute's)."""
    frames = _frames(case, cache)
    _write(tmp_path / "whole.db", frames)
    for windows in (2, 7):
        db = tmp_path / f"windows-{windows}.db"
        _write(db, split_run(frames, windows, numbered=False))
        assert_same_run(tmp_path / "whole.db", db)


def test_a_multi_pass_run_numbered_by_the_store_keeps_its_names(cache: Path, tmp_path: Path) -> None:
    """Nsight's two passes spell kernels apart: numbered window by window, a name of the counter pass can take
    an id before a name the timing pass has only later; the rows stay the same read through names."""
    frames = _frames("examples/h200-counters/dense28-decode-flops", cache)
    _write(tmp_path / "whole.db", frames)
    _write(tmp_path / "windows.db", split_run(frames, 7, numbered=False))
    whole, windows = (Store(tmp_path / n, read_only=True) for n in ("whole.db", "windows.db"))
    try:
        for view, key in (("dispatch", "dispatch_index"), ("counter_value", "dispatch_index, counter_name")):
            sql = f"SELECT * FROM {view} ORDER BY {key}"
            a, b = whole.query(sql), windows.query(sql)
            pd.testing.assert_frame_equal(a.drop(columns="run_id"), b.drop(columns="run_id"), check_exact=True)
        ids = "SELECT kernel_index, kernel_name FROM kernel_symbol ORDER BY kernel_index"
        assert not whole.query(ids).equals(windows.query(ids))  # what numbering up front is for
    finally:
        whole.close()
        windows.close()


@pytest.mark.parametrize(
    "case", ["examples/h200/dense-prefill", "examples/h200-counters/dense28-decode-flops", "synthetic:rocpd"]
)
def test_a_producer_that_fills_the_run_while_it_yields(case: str, cache: Path, tmp_path: Path) -> None:
    """The run row (the ceiling included), notes, settings, pass counts and run-level tables final only after the last
    window: the store writes them then, and sums the ops' time at the ceiling again from the stored rows."""
    frames = _frames(case, cache)
    assert frames.run["dram_peak_gbps"] and frames.notes and len(frames.tables["run_ceiling"])
    _write(tmp_path / "whole.db", frames)
    blank = ("gpu_arch", "gpu_name", "attribution_method", "dram_peak_gbps", "dram_peak_source", "serialised_timings")
    _write(tmp_path / "windows.db", produced(split_run(frames, 3), blank=blank))
    assert_same_run(tmp_path / "whole.db", tmp_path / "windows.db")


@pytest.mark.parametrize("late_ceiling", [False, True])
def test_op_totals_are_the_whole_runs_to_the_last_bit_over_many_chunks(
    late_ceiling: bool, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """op_total sums chunk by chunk: windows that cut the chunks elsewhere sum the same floats in the same order."""
    monkeypatch.setattr(store_mod, "_OP_TOTAL_CHUNK", 64)  # 1,960 dispatches: 31 chunks, cut by 13 windows
    frames = _frames("examples/h200/dense500m-decode", cache)
    _write(tmp_path / "whole.db", frames)
    split = split_run(frames, 13)
    _write(tmp_path / "windows.db", produced(split, blank=("dram_peak_gbps",)) if late_ceiling else split)
    assert_same_run(tmp_path / "whole.db", tmp_path / "windows.db")
    # float sums, not whole numbers only: the time at the ceiling is bytes / GB/s
    totals = Store(tmp_path / "whole.db", read_only=True).query("SELECT dram_time_at_peak_ns FROM op_total")
    assert (totals["dram_time_at_peak_ns"] % 1 != 0).any()


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_a_chunk_split_over_windows_sums_in_row_order(cut: int) -> None:
    """A chunk's values cut by a window are summed on from the chunk's sum so far, not summed apart and added.

    Durations 1, 1e16, -1e16, 1 (ns) of two MUL_MAT invocations (one per window) in one chunk: in
    row order 1 + 1e16 rounds to 1e16 (float64's spacing there is 2, the tie goes to even), - 1e16
    gives 0, + 1 gives 1.0. Summed in two parts and added they would give (1e16) + (-1e16) = 0.0 at
    a cut after the second row, (1) + (1) = 2.0 at a cut after the first.
    """
    totals = store_mod._WindowOpTotals(None)
    spans = store_mod._KeySpans()
    durations = [1.0, 1e16, -1e16, 1.0]
    for window, (lo, hi) in enumerate(((0, cut), (cut, 4))):
        record = pd.DataFrame(
            {
                "dispatch_index": np.arange(lo, hi),
                "timing_dispatch_index": np.arange(lo, hi),
                "op_index": np.full(hi - lo, window, dtype=np.int64),
                "duration_ns": durations[lo:hi],
            }
        )
        ops = pd.DataFrame({"op_index": [window], "op": ["MUL_MAT"]})
        spans.add(ops["op_index"].to_numpy())
        totals.add_window(record, ops, spans)
    totals.finish(4)
    rows = totals.frame(spans)
    assert rows["op"].tolist() == ["MUL_MAT"]
    assert rows["duration_ns"].tolist() == [1.0]


def _failing(windows: list[dict[str, pd.DataFrame]], after: int) -> Iterator[dict[str, pd.DataFrame]]:
    for i, window in enumerate(windows):
        if i == after:
            raise RuntimeError("the windowed build failed")
        yield window


@pytest.mark.parametrize("target", ["sqlite", "postgres"])
def test_a_window_iterator_that_fails_midway_stores_nothing(
    target: str, cache: Path, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    db = str(tmp_path / "r.db") if target == "sqlite" else request.getfixturevalue("pg_url")
    kept = _frames("examples/h200/dense-prefill", cache)
    assert _write(db, kept) == 1
    before = table_rows(db)
    other = split_run(_frames("examples/h200/moe-prefill", cache), 3)
    other.windows = _failing(list(other.windows or []), after=2)
    with pytest.raises(RuntimeError, match="windowed build failed"):
        _write(db, other)
    again = split_run(kept, 3)  # replacing the stored run: the delete is undone with the rest
    again.windows = _failing(list(again.windows or []), after=1)
    with pytest.raises(RuntimeError, match="windowed build failed"):
        _write(db, again, replace=True)
    after = table_rows(db)
    for name, df in before.items():
        pd.testing.assert_frame_equal(df, after[name], check_exact=True, obj=name)


def test_a_duplicate_is_refused_before_any_window_is_asked_for(cache: Path, tmp_path: Path) -> None:
    frames = _frames("examples/h200/dense-prefill", cache)
    _write(tmp_path / "r.db", frames)
    asked: list[int] = []
    split = split_run(frames, 3)
    windows = split.windows or []

    def watched() -> Iterator[dict[str, pd.DataFrame]]:
        for i, window in enumerate(windows):
            asked.append(i)
            yield window

    split.windows = watched()
    with pytest.raises(DuplicateRunError, match="already stored as run 1"):
        _write(tmp_path / "r.db", split)
    assert asked == []


def _hash_pending(split: RunFrames, done_at: int | None) -> tuple[RunFrames, list[int]]:
    """``split`` as a windowed build whose content hash is still computed while its windows are asked for.

    The hash job (``pending_sha256``) is done once window ``done_at`` is asked for (None: after the
    last window); the run row's hash is None until the producer puts it back after the last window,
    as :func:`rocroof.ingest.windows.build_windows` does. Returns the frames and the list of windows asked.
    """
    digest = split.run["content_sha256"]
    assert digest
    job: Future[str] = Future()
    asked: list[int] = []
    windows = list(split.windows or [])
    out = produced(split, blank=("content_sha256",))
    out.pending_sha256 = job
    inner = out.windows or []

    def watched() -> Iterator[dict[str, pd.DataFrame]]:
        for i, window in enumerate(inner):
            asked.append(i)
            if i == done_at:
                job.set_result(digest)
            yield window
        assert len(asked) == len(windows)
        if not job.done():
            job.set_result(digest)

    out.windows = watched()
    return out, asked


@pytest.mark.parametrize("done_at", [0, 1, None])
def test_a_hash_done_while_the_windows_are_written_is_claimed_then(
    done_at: int | None, cache: Path, tmp_path: Path
) -> None:
    frames = _frames("examples/h200/dense-prefill", cache)
    _write(tmp_path / "whole.db", frames)
    late, asked = _hash_pending(split_run(frames, 3), done_at)
    _write(tmp_path / "windows.db", late)
    assert asked == [0, 1, 2]
    assert_same_run(tmp_path / "whole.db", tmp_path / "windows.db")  # the hash stored, as the whole run's


def test_a_duplicate_found_once_its_hash_is_done_is_refused_and_stores_nothing(cache: Path, tmp_path: Path) -> None:
    frames = _frames("examples/h200/dense-prefill", cache)
    db = tmp_path / "r.db"
    _write(db, frames)
    before = table_rows(str(db))
    late, asked = _hash_pending(split_run(frames, 3), done_at=0)
    with pytest.raises(DuplicateRunError, match="already stored as run 1"):
        _write(db, late)
    assert asked == [0]  # refused after the window during which the hash was done, not after the build
    after = table_rows(str(db))
    for name, df in before.items():
        pd.testing.assert_frame_equal(df, after[name], check_exact=True, obj=name)


@pytest.mark.parametrize("done_at", [1, None])
def test_a_replace_claimed_late_deletes_the_old_run_and_keeps_its_labels(
    done_at: int | None, cache: Path, tmp_path: Path
) -> None:
    frames = _frames("examples/h200/dense-prefill", cache)
    db = tmp_path / "r.db"
    _write(db, frames, labels={"model": "dense", "batch": "1"})
    late, _ = _hash_pending(split_run(frames, 3), done_at)
    store = Store(db)
    try:
        new_id = store.write_run(late, labels={"batch": "2"}, replace=True)
        assert store.replaced_run_id == 1  # what `rocroof ingest --replace` tells the user
    finally:
        store.close()
    assert new_id == 2  # past the replaced run's id
    con = sqlite3.connect(db)
    try:
        assert con.execute("SELECT run_id FROM run").fetchall() == [(2,)]
        assert dict(con.execute("SELECT key, value FROM run_label WHERE run_id = 2").fetchall()) == {
            "model": "dense",
            "batch": "2",
        }
        assert con.execute("SELECT COUNT(*) FROM dispatch_record WHERE run_id = 1").fetchone() == (0,)
    finally:
        con.close()
    _write(tmp_path / "whole.db", frames, labels={"model": "dense", "batch": "2"})
    assert_same_run(tmp_path / "whole.db", db, 1, 2)


def test_windows_that_break_the_rules_are_refused_and_store_nothing(cache: Path, tmp_path: Path) -> None:
    frames = _frames("examples/h200/dense-prefill", cache)
    db = tmp_path / "r.db"

    def attempt(split: RunFrames, match: str) -> None:
        with pytest.raises(ValueError, match=match):
            _write(db, split)
        with sa.create_engine(f"sqlite:///{db}").connect() as conn:
            assert conn.execute(sa.text("SELECT COUNT(*) FROM run")).scalar() == 0

    # a dispatch of an op whose row an earlier window held
    split = split_run(frames, 3)
    first, second = (split.windows or [])[:2]
    moved = first["dispatch"]["op_index"].notna() & (first["dispatch"]["pass_index"] == 0)
    last = int(np.flatnonzero(moved.to_numpy())[-1])
    second["dispatch"] = pd.concat([first["dispatch"].iloc[[last]], second["dispatch"]], ignore_index=True)
    first["dispatch"] = first["dispatch"].drop(index=last).reset_index(drop=True)
    attempt(split, "of an earlier window")
    # a window's frame among the run's tables, and a run table in a window
    split = split_run(frames, 2)
    split.tables["op_node"] = frames.tables["op_node"]
    attempt(split, "op_node belong in the windows")
    split = split_run(frames, 2)
    (split.windows or [])[0]["op_model"] = frames.tables["op_model"]
    attempt(split, "a window holds op_model")
    # a name numbered up front that no window has
    split = split_run(frames, 2)
    symbols = split.tables["kernel_symbol"]
    split.tables["kernel_symbol"] = pd.concat(
        [symbols, pd.DataFrame({"kernel_index": [len(symbols)], "kernel_name": ["never_launched"]})], ignore_index=True
    )
    attempt(split, "numbers 'never_launched', which no window has")


def test_release_lets_each_window_go_once_written(cache: Path, tmp_path: Path) -> None:
    frames = _frames("examples/h200/dense-prefill", cache)
    _write(tmp_path / "whole.db", frames)
    split = split_run(frames, 3)
    windows = list(split.windows or [])
    seen: list[int] = []

    def given() -> Iterator[dict[str, pd.DataFrame]]:
        for i, window in enumerate(windows):
            if i:  # the window before was written and let go before this one is asked for
                assert windows[i - 1] == {}
            seen.append(i)
            yield window

    split.windows = given()
    _write(tmp_path / "windows.db", split, release=True)
    assert seen == [0, 1, 2] and all(w == {} for w in windows)
    assert not split.tables  # agent, pass, the names, op_model, op_edge, run_ceiling: written and let go
    assert_same_run(tmp_path / "whole.db", tmp_path / "windows.db")


def test_progress_counts_the_rows_of_the_windows_received(cache: Path, tmp_path: Path) -> None:
    frames = _frames("examples/h200/dense-prefill", cache)
    calls: list[tuple[str, int, int]] = []
    _write(tmp_path / "r.db", split_run(frames, 3), progress=lambda s, d, t: calls.append((s, d, t)))
    done, total = [d for _, d, _ in calls], [t for _, _, t in calls]
    assert done == sorted(done) and total == sorted(total)  # the total grows as the windows come
    assert {s for s, _, _ in calls} >= {"agent", "pass", "dispatch_record", "op_invocation", "op_total"}
    stored = Store(tmp_path / "r.db", read_only=True)
    rows = sum(len(df) for name, df in table_rows(str(tmp_path / "r.db"), 1).items() if name in store_mod._TABLE_ORDER)
    stored.close()
    assert done[-1] == rows


@pytest.mark.parametrize(
    ("case", "windows"),
    [
        ("examples/h200/dense-prefill", None),
        ("examples/h200-counters/dense28-decode-flops", 3),
        ("rocprof-compute/vcopy/MI300X_A1", 2),
        ("rocprofv3-docs", None),
        ("synthetic:csv", 3),
    ],
)
def test_windows_on_postgres_store_the_whole_runs_rows(
    case: str, windows: int | None, cache: Path, request: pytest.FixtureRequest
) -> None:
    """The COPY path: the whole run and its windows (under another content hash) in one PostgreSQL database."""
    url = request.getfixturevalue("pg_url")
    frames = _frames(case, cache)
    assert _write(url, frames) == 1
    split = split_run(frames, windows)
    split.run["content_sha256"] = "0" * 64
    assert _write(url, produced(split, blank=("dram_peak_gbps", "gpu_arch"))) == 2
    assert_same_run(url, url, 1, 2, same_hash=False)


def test_key_spans_hold_the_keys_added() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        spans, keys = store_mod._KeySpans(), set()
        for _ in range(rng.integers(1, 6)):
            added = rng.integers(-5, 60, size=rng.integers(0, 20))
            spans.add(added)
            keys |= set(added.tolist())
        probe = np.arange(-10, 70)
        assert spans.contains(probe).tolist() == [int(k) in keys for k in probe]
        assert (spans.stops[:-1] < spans.starts[1:]).all()  # disjoint, not touching: merged
    dense = store_mod._KeySpans()
    for lo in range(0, 10_000, 1_000):
        dense.add(np.arange(lo, lo + 1_000))
    assert len(dense.starts) == 1  # keys numbered without gaps: one span, however many windows
