"""rocroof for notebooks and scripts: a results database as pandas DataFrames.

    import rocroof

    with rocroof.open("rocroof.db") as db:
        db.runs(model="dense*")               # one row per run, labels as a dict column
        ops = db.ops("latest")                # one row per ggml op, with the roofline columns
        ops.sort_values("time_at_roof_ns")    # ... the rows `rocroof report --by op --format json` has
        db.diff("env=fusion", "env=no-fusion").by_op

Every method that takes a run accepts what ``--run`` accepts on the command line: a run id,
``"latest"``, or labels (``"model=dense,env=fusion"``, ``"latest:env=fusion"``). Values are in
the units their column names say (``_ns`` ns, ``_bytes`` bytes, ``_gbps`` GB/s = 1e9 B/s,
``_tflops`` 1e12 FLOP/s); NaN/None where unknown. The database is opened read-only.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

import pandas as pd

from .errors import InputError
from .report.diff import Diff, diff_runs
from .report.tables import build_report, runs_frame
from .store import Store

RunSpec = int | str


class Results:
    """A rocroof results database (SQLite file or PostgreSQL URL), read-only, as DataFrames.

    Raises (from the constructor and every method): :class:`rocroof.errors.RocroofError`
    subclasses: ``InputError`` for a missing file or an unknown run, ``SchemaError`` for a
    database of another schema version (``rocroof db upgrade``), ``QueryError`` for bad SQL.
    """

    def __init__(self, db: str | Path) -> None:
        self.store = Store(db, read_only=True)
        self.store.check()
        self._closed = False

    # ---- runs -----------------------------------------------------------------------------------------
    def runs(self, **labels: str) -> pd.DataFrame:
        """One row per stored run (``rocroof runs --format json``'s columns), oldest first.

        Keyword arguments select runs by label (``model="moe*"``: ``*`` matches any text); the
        ``labels`` column holds each run's labels as a dict.
        """
        store = self._open()
        df = runs_frame(store, labels_as_mapping=True)
        if labels:
            df = df[df["run_id"].isin(store.runs_with_labels(labels))]
        return df.reset_index(drop=True)

    def run_id(self, run: RunSpec = "latest") -> int:
        """The id of ``run`` (an id, ``"latest"`` or labels that pick one run)."""
        return self._open().resolve_run(run)

    # ---- one run's rows ------------------------------------------------------------------------------
    def ops(self, run: RunSpec = "latest") -> pd.DataFrame:
        """One row per ggml op of a run: time, DRAM bytes, GB/s and, with op metadata, the roofline.

        The rows and columns of ``rocroof report --by op --format json`` (``rows``): ``op`` (None
        for dispatches outside any ggml range), ``invocations``, ``dispatches``, ``duration_ns``,
        ``share_of_time_pct``, ``dram_read_bytes``, ``dram_write_bytes``, ``achieved_gbps``,
        ``pct_of_dram_peak`` and, where modelled, ``model_read_bytes``, ``flops``,
        ``arithmetic_intensity``, ``bound``, ``pct_of_ceiling``, ``time_at_roof_ns``..., longest first.
        """
        return self._rows(run, "op")

    def invocations(self, run: RunSpec = "latest") -> pd.DataFrame:
        """One row per op invocation (a ggml node, or fused group, launched once), longest first."""
        return self._rows(run, "invocation")

    def kernels(self, run: RunSpec = "latest") -> pd.DataFrame:
        """One row per kernel name of a run: time, DRAM bytes, GB/s, longest first."""
        return self._rows(run, "kernel")

    def dispatches(self, run: RunSpec = "latest") -> pd.DataFrame:
        """One row per timing dispatch (kernel launch) of a run, in launch order, with its op and DRAM bytes."""
        return self._rows(run, "dispatch")

    def roofline(self, run: RunSpec = "latest") -> pd.DataFrame:
        """The ops of a run placed on the roofline: the columns a roofline plot and its verdicts need.

        ``op``, ``duration_ns``, ``share_of_time_pct``, ``arithmetic_intensity`` (FLOP per measured
        DRAM byte), ``model_arithmetic_intensity``, ``achieved_tflops``, ``governing_ceiling``,
        ``attainable_tflops``, ``pct_of_ceiling``, ``bound``, ``time_at_roof_ns``, ``measured_over_model``
        (those the run has: without op metadata there is no model and no FLOP).
        """
        ops = self.ops(run)
        wanted = [
            "op",
            "duration_ns",
            "share_of_time_pct",
            "achieved_gbps",
            "arithmetic_intensity",
            "model_arithmetic_intensity",
            "achieved_tflops",
            "governing_ceiling",
            "attainable_tflops",
            "pct_of_ceiling",
            "bound",
            "time_at_roof_ns",
            "measured_over_model",
        ]
        return ops[[c for c in wanted if c in ops.columns]]

    def diff(self, a: RunSpec, b: RunSpec, *, min_change_pct: float = 5.0, min_change_us: float = 0.25) -> Diff:
        """Run B against run A per ggml op, as ``rocroof diff`` (its ``by_op``, ``by_node``, ``total`` frames).

        Args:
            a: run A, before (an id, ``"latest"`` or labels).
            b: run B, after.
            min_change_pct: changes under this % of A's time are noise.
            min_change_us: changes under this many µs per call are noise.
        """
        return diff_runs(
            self._open(),
            self.run_id(a),
            self.run_id(b),
            min_change=min_change_pct / 100,
            min_change_us=min_change_us,
        )

    def query(self, sql: str) -> pd.DataFrame:
        """The result of one read-only SQL statement (the tables and views of docs/schema.md)."""
        return self._open().query(sql)

    # ---- plumbing ------------------------------------------------------------------------------------
    def _rows(self, run: RunSpec, by: Any) -> pd.DataFrame:
        report = build_report(self._open(), self.run_id(run), by=by)
        return report.rows.drop(columns=["time_share"], errors="ignore").reset_index(drop=True)

    def close(self) -> None:
        """Release the database connections; the object answers nothing after (InputError)."""
        self.store.close()
        self._closed = True

    def _open(self) -> Store:
        if self._closed:
            raise InputError(f"{self.store.location}: this rocroof.open() was closed; open the database again")
        return self.store

    def __enter__(self) -> Results:
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"rocroof.Results({self.store.location!r})"
