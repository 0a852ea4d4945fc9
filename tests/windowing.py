"""A whole run's frames cut into windows, as a windowed build would hand them to the store.

:func:`split_run` takes the :class:`~rocroof.ingest.pipeline.RunFrames` of :func:`build_run` (a run
given whole) and returns the same run given as windows (``RunFrames.windows``), following the
rules the store expects of them:

- cuts fall between dispatches of the timing pass where no op has dispatches on both sides;
- every other dispatch goes to the window of its op, else of its timing dispatch, else of the
  dispatch before it in its pass; an op with no timing dispatch goes to the window of its first
  dispatch; windows are merged until every pass's dispatches come in increasing order over the
  windows and no dispatch's timing dispatch is in a later window;
- counter readings and DRAM bytes go with their dispatch, op nodes and operands with their op, a
  marker range to the window of the first dispatch that names it (a range no dispatch names: the
  window of the range before it), so that a dispatch names ranges of its own or earlier windows.

The run-level frames (``agent``, ``pass``, ``op_model``, ``op_edge``, ``run_ceiling``) stay in
``tables``; the window frames are new frames (row numbers from 0), the whole run's are not changed.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import numpy as np
import pandas as pd

from rocroof.ingest.pipeline import RunFrames
from rocroof.records import WINDOW_FRAMES


def _ints(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A column as int64, -1 where missing (all -1 when the frame lacks it)."""
    if column not in frame or not len(frame):
        return np.full(len(frame), -1, dtype=np.int64)
    return frame[column].astype("Int64").to_numpy(dtype=np.int64, na_value=-1)


def _carried(window: np.ndarray) -> np.ndarray:
    """``window`` with each -1 replaced by the last value before it (0 at the start)."""
    out = window.copy()
    last = 0
    for i, w in enumerate(out.tolist()):
        if w < 0:
            out[i] = last
        else:
            last = w
    return out


def _cuts(timing_ops: np.ndarray, windows: int | None) -> np.ndarray:
    """Cut positions (1 .. n-1) in the timing pass's dispatches: every clean one (None) or ``windows - 1`` of them.

    A position is clean when no op has timing dispatches both before and after it.
    """
    n = len(timing_ops)
    if n < 2 or windows == 1:
        return np.zeros(0, dtype=np.int64)
    covered = np.zeros(n + 1, dtype=np.int64)  # +1 over (first, last] of each op: a cut there splits it
    attributed = timing_ops >= 0
    if attributed.any():
        ops = pd.Series(np.flatnonzero(attributed)).groupby(timing_ops[attributed])
        first, last = ops.min().to_numpy(), ops.max().to_numpy()
        np.add.at(covered, first + 1, 1)
        np.add.at(covered, last + 1, -1)
    clean = np.flatnonzero(np.cumsum(covered)[:n] == 0)
    clean = clean[clean >= 1]
    if windows is None or len(clean) <= windows - 1:
        return clean
    wanted = np.arange(1, windows) * n / windows  # evenly spaced, each moved to the nearest clean cut
    return np.unique(clean[np.abs(clean[None, :] - wanted[:, None]).argmin(axis=1)])


def _merge(window: np.ndarray, order_groups: list[np.ndarray], refs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Merge consecutive windows until each group's rows (positions in order) have non-decreasing
    windows and each ``refs`` pair (row, referred row) has the referred row's window <= the row's."""
    while True:
        joined = np.zeros(int(window.max(initial=0)) + 2, dtype=bool)  # joined[k]: window k merges into k - 1
        for rows in order_groups:
            w = window[rows]
            reach = np.maximum.accumulate(w) if len(w) else w
            bad = np.flatnonzero(w < reach)
            for lo, hi in zip(w[bad].tolist(), reach[bad].tolist(), strict=True):
                joined[lo + 1 : hi + 1] = True
        row, referred = refs
        bad = np.flatnonzero(window[referred] > window[row])
        for lo, hi in zip(window[row][bad].tolist(), window[referred][bad].tolist(), strict=True):
            joined[lo + 1 : hi + 1] = True
        if not joined.any():
            return window
        window = (np.cumsum(~joined) - 1)[window]


def window_of_dispatches(frames: RunFrames, windows: int | None) -> np.ndarray:
    """The window of each row of ``frames.tables["dispatch"]`` (0, 1, ...): at most ``windows`` of them,
    or one per clean cut (None: one op, or one unattributed timing dispatch, per window)."""
    d = frames.tables["dispatch"]
    n = len(d)
    if not n:
        return np.zeros(0, dtype=np.int64)
    ids = _ints(d, "dispatch_index")
    pass_index = _ints(d, "pass_index")
    ops = _ints(d, "op_index")
    timing_of = _ints(d, "timing_dispatch_index")
    row_of = pd.Index(ids)
    passes = frames.tables["pass"]
    timing_passes = passes.loc[passes["is_timing_pass"].astype(bool), "pass_index"].tolist()
    window = np.full(n, -1, dtype=np.int64)
    if timing_passes:
        timing_rows = np.flatnonzero(pass_index == int(timing_passes[0]))
        timing_rows = timing_rows[np.argsort(ids[timing_rows], kind="stable")]
        cuts = _cuts(ops[timing_rows], windows)
        window[timing_rows] = np.searchsorted(cuts, np.arange(len(timing_rows)), side="right")
    else:
        timing_rows = np.zeros(0, dtype=np.int64)
    # an op's window: that of its first timing dispatch, else of its first dispatch that has one
    op_window: dict[int, int] = {}
    for row in timing_rows.tolist():
        if ops[row] >= 0:
            op_window.setdefault(int(ops[row]), int(window[row]))
    for row in range(n):
        if window[row] >= 0:
            continue
        if ops[row] >= 0 and int(ops[row]) in op_window:
            window[row] = op_window[int(ops[row])]
        elif timing_of[row] >= 0 and timing_of[row] in row_of:
            window[row] = window[row_of.get_loc(int(timing_of[row]))]
    groups = []
    for p in np.unique(pass_index).tolist():
        rows = np.flatnonzero(pass_index == p)
        rows = rows[np.argsort(ids[rows], kind="stable")]
        window[rows] = _carried(window[rows])
        groups.append(rows)
    for row in range(n):  # ops of no timing dispatch: all their dispatches to the window of the first
        if ops[row] >= 0:
            window[row] = op_window.setdefault(int(ops[row]), int(window[row]))
    with_timing = np.flatnonzero((timing_of >= 0) & np.isin(timing_of, ids))
    refs = (with_timing, row_of.get_indexer(timing_of[with_timing]))
    while True:  # merging keeps an op's dispatches together: they share a window, which stays shared
        merged = _merge(window, groups, refs)
        if np.array_equal(merged, window):
            return window
        window = merged


def whole_run_names(frames: RunFrames) -> dict[str, pd.DataFrame]:
    """The ``kernel_symbol``, ``dram_text`` and ``counter`` rows of a whole run, as a producer gives them up front.

    Names in order of first appearance over the whole run's frames (the kernels over ``dispatch``;
    the DRAM formulas, then the notes, over ``dram_traffic``; the counters over ``counter_value``,
    then ``counter_instance``), missing ones left out.
    """
    t = frames.tables

    def first_seen(*columns: pd.Series) -> list[object]:
        values = pd.concat([c.astype(object) for c in columns], ignore_index=True) if columns else pd.Series([])
        return list(pd.unique(values.dropna()))

    dram = t.get("dram_traffic", pd.DataFrame())
    kernels = first_seen(t["dispatch"]["kernel_name"]) if len(t["dispatch"]) else []
    texts = first_seen(*(dram[c] for c in ("dram_formula", "dram_bytes_note") if c in dram)) if len(dram) else []
    counters = first_seen(*(t[n]["counter_name"] for n in ("counter_value", "counter_instance") if len(t[n])))
    out = {
        "kernel_symbol": pd.DataFrame({"kernel_index": np.arange(len(kernels)), "kernel_name": kernels}),
        "dram_text": pd.DataFrame({"text_index": np.arange(len(texts)), "text": texts}),
        "counter": pd.DataFrame({"counter_index": np.arange(len(counters)), "counter_name": counters}),
    }
    return {name: df for name, df in out.items() if len(df)}


def split_run(frames: RunFrames, windows: int | None, *, numbered: bool = True) -> RunFrames:
    """``frames`` (a whole run) as the same run given as windows (see the module's docstring).

    Args:
        frames: from :func:`~rocroof.ingest.pipeline.build_run` (not released; left as it is).
        windows: how many windows at most (fewer where the run has fewer clean cuts); None for
            every clean cut (one op per window).
        numbered: give the whole run's kernel, DRAM text and counter numbering up front
            (:func:`whole_run_names`), as a multi-pass run needs; False: leave it to the store.

    Returns:
        New :class:`RunFrames` whose ``windows`` is a list of the window dicts.
    """
    t = frames.tables
    d = t["dispatch"]
    of_dispatch = window_of_dispatches(frames, windows)
    count = int(of_dispatch.max()) + 1 if len(of_dispatch) else 1
    by_dispatch = pd.Series(of_dispatch, index=_ints(d, "dispatch_index"))
    # ops: the window of their dispatches; ops of none follow the op before them
    ops = t.get("op_invocation", pd.DataFrame())
    op_ids = _ints(ops, "op_index")
    op_rows = pd.Series(of_dispatch, index=_ints(d, "op_index"))
    op_rows = op_rows[op_rows.index >= 0]
    op_window = op_rows.groupby(level=0).min()
    of_op = pd.Series(op_window.reindex(op_ids).fillna(-1).to_numpy(dtype=np.int64), index=op_ids)
    order = np.argsort(op_ids, kind="stable")
    carried = np.empty(len(op_ids), dtype=np.int64)
    carried[order] = _carried(of_op.to_numpy()[order])
    of_op = pd.Series(carried, index=op_ids)
    # ranges: the window of the first dispatch that names them; others follow the range before them
    ranges = t.get("marker_range", pd.DataFrame())
    range_ids = _ints(ranges, "range_index")
    named = pd.Series(of_dispatch, index=_ints(d, "range_index"))
    named = named[named.index >= 0].groupby(level=0).min()
    first = named.reindex(range_ids).fillna(-1).to_numpy(dtype=np.int64)
    order = np.argsort(range_ids, kind="stable")
    of_range = np.empty(len(range_ids), dtype=np.int64)
    of_range[order] = _carried(first[order])

    def rows_in(name: str) -> np.ndarray:
        """The window of each row of frame ``name``."""
        df = t[name]
        if name in ("dispatch", "counter_value", "counter_instance", "dram_traffic"):
            return by_dispatch.reindex(_ints(df, "dispatch_index")).to_numpy(dtype=np.int64)
        if name in ("op_invocation", "op_node", "op_operand"):
            return of_op.reindex(_ints(df, "op_index")).to_numpy(dtype=np.int64)
        return of_range

    where = {name: rows_in(name) for name in WINDOW_FRAMES if name in t and len(t[name])}
    parts = [
        {name: t[name][w == k].reset_index(drop=True) for name, w in where.items() if (w == k).any()}
        for k in range(count)
    ]
    run_level = {name: df for name, df in t.items() if name not in WINDOW_FRAMES}
    if numbered:
        run_level.update(whole_run_names(frames))
    out = RunFrames(
        run=dict(frames.run),
        tables=dict(run_level),
        notes=list(frames.notes),
        settings=dict(frames.settings),
        windows=parts,
    )
    check_windows(out)
    return out


def check_windows(frames: RunFrames) -> None:
    """Assert that ``frames.windows`` (a list) keeps the store's rules (see :class:`RunFrames`)."""
    assert isinstance(frames.windows, list)
    seen_dispatches: set[int] = set()
    seen_ranges: set[int] = set()
    last_of_pass: dict[int, int] = {}
    for window in frames.windows:
        d = window.get("dispatch", pd.DataFrame())
        ranges = set(_ints(window.get("marker_range", pd.DataFrame()), "range_index").tolist())
        assert not ranges & seen_ranges
        seen_ranges |= ranges
        ids = _ints(d, "dispatch_index")
        ops = set(_ints(window.get("op_invocation", pd.DataFrame()), "op_index").tolist())
        used = set(_ints(d, "op_index").tolist()) - {-1}
        # an op's dispatches are in its window (an op index of no op row anywhere stays unchecked)
        assert not (used - ops) & set(_ints(_all(frames, "op_invocation"), "op_index").tolist())
        for name in ("op_node", "op_operand"):
            assert set(_ints(window.get(name, pd.DataFrame()), "op_index").tolist()) <= ops
        for p, group in pd.Series(ids).groupby(_ints(d, "pass_index")):
            values = group.to_numpy()
            assert (np.diff(values) > 0).all()
            assert values[0] > last_of_pass.get(int(p), -1)
            last_of_pass[int(p)] = int(values[-1])
        seen_dispatches |= set(ids.tolist())
        timing = set(_ints(d, "timing_dispatch_index").tolist()) - {-1}
        assert timing <= seen_dispatches | (timing - _all_ids(frames))  # same or earlier window
        named = set(_ints(d, "range_index").tolist()) - {-1}
        assert named <= seen_ranges | (named - _all_ranges(frames))
        for name in ("counter_value", "counter_instance", "dram_traffic"):
            assert set(_ints(window.get(name, pd.DataFrame()), "dispatch_index").tolist()) <= set(ids.tolist())


def _all(frames: RunFrames, name: str) -> pd.DataFrame:
    parts = [w[name] for w in frames.windows or [] if name in w]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _all_ids(frames: RunFrames) -> set[int]:
    return set(_ints(_all(frames, "dispatch"), "dispatch_index").tolist())


def _all_ranges(frames: RunFrames) -> set[int]:
    return set(_ints(_all(frames, "marker_range"), "range_index").tolist())


def produced(frames: RunFrames, blank: tuple[str, ...] = ()) -> RunFrames:
    """``frames`` (from :func:`split_run`) as a producer that fills the run's final values while it yields.

    The returned frames start with the run row's ``blank`` keys set to None, no notes, settings
    or run-level tables after the windows (the names numbered up front stay), and the ``pass``
    rows' counts at 0; a generator yields the windows and puts the final values back after the
    last (the store reads them then).
    """
    final = copy.copy(frames)
    out = RunFrames(
        run={k: (None if k in blank else v) for k, v in frames.run.items()},
        tables={
            "agent": frames.tables["agent"],
            "pass": frames.tables["pass"].assign(dispatch_count=0, matched_count=0),
            **{n: df for n, df in frames.tables.items() if n in ("kernel_symbol", "dram_text", "counter")},
        },
    )

    def windows() -> Iterator[dict[str, pd.DataFrame]]:
        yield from final.windows or []
        out.run.update(final.run)
        out.notes.extend(final.notes)
        out.settings.update(final.settings)
        out.tables.update(final.tables)  # the pass rows' counts, op_model, op_edge, run_ceiling

    out.windows = windows()
    return out
