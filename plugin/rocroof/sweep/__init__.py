"""YAML-configured sweeps: one command template over a matrix of values, each point profiled and stored.

``rocroof sweep FILE`` reads a sweep file (:mod:`.spec`), expands it into points with stable
ids (:mod:`.expand`), skips the points the database already holds, and runs the others through
an executor (:mod:`.executors`: the local one runs several at once, one per GPU; :mod:`.slurm`
submits them as a Slurm job array whose tasks run ``rocroof sweep FILE --point ID``); each point is
profiled like ``rocroof collect`` (or, for ``profiler: replay``, a recorded capture is read) and
ingested in its own transaction, labelled with its matrix values and ``sweep_point=<id>``
(:mod:`.run`). A rerun resumes: stored points are skipped, failed and interrupted ones run again.
"""

from __future__ import annotations

from .executors import Executor, LocalExecutor, Slot, SweepEvent, make_executor, parse_gpus, pin_env
from .expand import Point, expand, point_id, select
from .run import PointResult, PointRunner, SweepOutcome, cancellable_runner, read_status, run_sweep, stored_points
from .spec import ProfilerSpec, Sweep, SweepFileError, load_sweep

__all__ = [
    "Executor",
    "LocalExecutor",
    "Point",
    "PointResult",
    "PointRunner",
    "ProfilerSpec",
    "Slot",
    "Sweep",
    "SweepEvent",
    "SweepFileError",
    "SweepOutcome",
    "cancellable_runner",
    "expand",
    "load_sweep",
    "make_executor",
    "parse_gpus",
    "pin_env",
    "point_id",
    "read_status",
    "run_sweep",
    "select",
    "stored_points",
]
