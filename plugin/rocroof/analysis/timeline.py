"""Launch overhead from a trace pass: the GPU's idle share per graph evaluation, host time per op.

A decode token of a small model is a few hundred short kernels; between them the GPU waits for
the host to launch the next one. This module measures that wait from the timing pass's kernel
intervals and the launching API calls' host times, per graph evaluation (one ``llama_decode``,
:func:`rocroof.analysis.graph.graph_evaluations`).

Definitions (all times in ns, on the trace's clocks):

* **wall** of an evaluation: ``last end - first start`` over its attributed kernels.
* **busy**: the length of the union of *every* timing-pass kernel interval (attributed or not)
  inside that window, so that kernels running concurrently on several streams count once, and a
  memset or copy the evaluation waits on counts as busy.
* **idle share**: ``1 - busy / wall``. CUDA/HIP graphs launch a whole evaluation at once and
  recover at most the idle time: :data:`GRAPHS_RECOVER_AT_MOST` names that estimate.
* **host time per op**: the time between the launch calls of consecutive ops of one evaluation
  (the first launch of each op invocation, in launch order), on the host thread's clock. When the
  host takes longer per op than the GPU runs it, the GPU starves (launch-bound).

Pure functions of frames; nothing here reads files or the database.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: What the idle time estimates when the trace cannot show graphs on (the hook's markers need
#: one launch per op): an upper bound on what CUDA/HIP graphs recover.
GRAPHS_RECOVER_AT_MOST = "estimate: graphs recover at most the idle time"


def merge_intervals(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals ``[start, end)`` as disjoint, sorted intervals.

    Args:
        start_ns: int64 array of interval starts (ns).
        end_ns: int64 array of interval ends (ns), the same length; pairs with a missing bound
            must be dropped by the caller (an end before its start counts as empty).

    Returns:
        ``(starts, ends)`` of the merged intervals, sorted, non-overlapping, touching ones joined.
    """
    s = np.asarray(start_ns, dtype=np.int64)
    e = np.asarray(end_ns, dtype=np.int64)
    if not len(s):
        return s.copy(), e.copy()
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum(e[order], s[order])
    reach = np.maximum.accumulate(e)  # the furthest end seen so far
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]  # a gap before this interval: a new merged interval starts
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(s) - 1]
    return s[first], reach[last]


def busy_in_window(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> int:
    """Length (ns) of merged intervals ``(starts, ends)`` (:func:`merge_intervals`) inside ``[lo, hi)``."""
    if hi <= lo or not len(starts):
        return 0
    i0 = int(np.searchsorted(ends, lo, side="right"))  # first interval ending after lo
    i1 = int(np.searchsorted(starts, hi, side="left"))  # intervals starting before hi
    if i1 <= i0:
        return 0
    s = np.maximum(starts[i0:i1], lo)
    e = np.minimum(ends[i0:i1], hi)
    return int(np.clip(e - s, 0, None).sum())


def evaluation_timeline(kernels: pd.DataFrame) -> pd.DataFrame:
    """Wall, busy and idle time per graph evaluation, and the host's launch pace.

    Args:
        kernels: the timing pass's dispatches, one row each: ``start_ns``, ``end_ns`` (GPU ns),
            ``launch_ns`` (host ns of the launching call; NA where the trace has none),
            ``op_index`` (NA = unattributed) and ``evaluation`` (NA outside any evaluation).
            Unattributed kernels count as busy time of the window they fall in.

    Returns:
        One row per evaluation, in order: ``evaluation``, ``ops`` (op invocations),
        ``dispatches``, ``first_start_ns``, ``last_end_ns``, ``wall_ns``, ``busy_ns`` (union of
        kernel intervals inside the window), ``kernel_sum_ns`` (sum of the evaluation's kernel
        durations: above ``busy_ns`` when kernels overlap), ``idle_ns`` (wall - busy),
        ``idle_share`` (idle / wall, 0..1; NaN for a zero-length window), ``host_span_ns``
        (last - first launch call of the evaluation's ops; NA without launch times) and
        ``host_ns_per_op`` (host_span / (ops - 1)).
    """
    cols = [
        "evaluation",
        "ops",
        "dispatches",
        "first_start_ns",
        "last_end_ns",
        "wall_ns",
        "busy_ns",
        "kernel_sum_ns",
        "idle_ns",
        "idle_share",
        "host_span_ns",
        "host_ns_per_op",
    ]
    start = pd.to_numeric(kernels["start_ns"], errors="coerce").astype("Float64")
    end = pd.to_numeric(kernels["end_ns"], errors="coerce").astype("Float64")
    timed = (start.notna() & end.notna() & (end >= start)).to_numpy(dtype=bool)
    ms, me = merge_intervals(
        start[timed].to_numpy(dtype=np.int64, na_value=0), end[timed].to_numpy(dtype=np.int64, na_value=0)
    )
    ev = pd.to_numeric(kernels["evaluation"], errors="coerce")
    own = kernels.assign(_s=start, _e=end)[ev.notna().to_numpy(dtype=bool) & timed]
    if not len(own):
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    own = own.assign(evaluation=pd.to_numeric(own["evaluation"]).astype(np.int64))
    # the host's pace from the gaps between the ops' first launches: span = their sum, per op = their mean
    gaps = host_gaps(kernels).groupby("evaluation")["host_gap_ns"]
    span_of, per_op_of = gaps.sum(), gaps.mean()
    rows = []
    for e, g in own.groupby("evaluation", sort=True):
        lo, hi = int(g["_s"].min()), int(g["_e"].max())
        busy = busy_in_window(ms, me, lo, hi)
        wall = hi - lo
        ops = g["op_index"].dropna().nunique()
        rows.append(
            {
                "evaluation": int(e),
                "ops": int(ops),
                "dispatches": len(g),
                "first_start_ns": lo,
                "last_end_ns": hi,
                "wall_ns": wall,
                "busy_ns": busy,
                "kernel_sum_ns": int((g["_e"] - g["_s"]).sum()),
                "idle_ns": wall - busy,
                "idle_share": (wall - busy) / wall if wall > 0 else float("nan"),
                "host_span_ns": float(span_of.get(e, float("nan"))),
                "host_ns_per_op": float(per_op_of.get(e, float("nan"))),
            }
        )
    return pd.DataFrame(rows, columns=cols)


def host_gaps(kernels: pd.DataFrame) -> pd.DataFrame:
    """Host time from each op invocation's first launch call to the next op's, per evaluation.

    Args:
        kernels: as :func:`evaluation_timeline`, with ``op_index``, ``evaluation`` and ``launch_ns``.

    Returns:
        One row per op invocation that has a successor in its evaluation: ``op_index``,
        ``evaluation``, ``first_launch_ns`` and ``host_gap_ns`` (the next op's first launch minus
        this op's; the host time the op cost between launches, its own launch calls included).
    """
    k = kernels[kernels["op_index"].notna() & kernels["evaluation"].notna() & kernels["launch_ns"].notna()]
    if not len(k):
        return pd.DataFrame(columns=["op_index", "evaluation", "first_launch_ns", "host_gap_ns"])
    first = (
        k.assign(launch_ns=pd.to_numeric(k["launch_ns"]).astype(np.int64))
        .groupby(["evaluation", "op_index"], as_index=False)["launch_ns"]
        .min()
        .rename(columns={"launch_ns": "first_launch_ns"})
        .sort_values(["evaluation", "first_launch_ns"], kind="stable")
    )
    nxt = first.groupby("evaluation")["first_launch_ns"].shift(-1)
    first["host_gap_ns"] = nxt - first["first_launch_ns"]
    return first[first["host_gap_ns"].notna()].reset_index(drop=True)
