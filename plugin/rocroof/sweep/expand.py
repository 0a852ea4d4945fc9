"""Sweep expansion: every combination of the matrix, times each repeat, is one :class:`Point`.

A point's id is the first 12 hex digits of the SHA-256 of its identity written as canonical
JSON (sorted keys): the expanded command, the environment, the matrix values, the profiler and
its options (``arch`` aside: it only skips detection), the sweep's own labels and the repeat
index. The same measurement described in another order, or in another file, has the same id;
the database label ``sweep_point=<id>`` is how a rerun knows it is stored.

Repeats are the outer loop (every combination once, then every combination again), so that a
drift of the machine over the sweep spreads over all combinations instead of one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .spec import NOT_IN_ID, Sweep, fill

ID_LENGTH = 12


@dataclass(frozen=True)
class Point:
    """One run of a sweep.

    Attributes:
        id: stable short hash (see the module docstring).
        index: 1-based position in the sweep (expansion order).
        repeat: 1-based repeat index.
        params: placeholder values, matrix order, ``repeat`` last.
        labels: every label the run is stored with: the matrix's, ``repeat``, the sweep's own,
            ``sweep`` and ``sweep_point``.
        command: the application command (empty for a replay sweep without a command).
        env: environment variables from the matrix's ``env`` axis.
        capture_dir: where the capture is: ``<out>/<id>`` (written by the profiler), or for
            replay the recorded capture.
    """

    id: str
    index: int
    repeat: int
    params: dict[str, str]
    labels: dict[str, str]
    command: tuple[str, ...]
    env: dict[str, str]
    capture_dir: Path

    @property
    def matrix_labels(self) -> dict[str, str]:
        """The labels that tell this point from the others of its sweep (matrix values and repeat)."""
        return {k: v for k, v in self.labels.items() if k not in ("sweep", "sweep_point")}


def point_id(identity: dict[str, Any]) -> str:
    """The id of a point: 12 hex digits of SHA-256 over ``identity`` as canonical JSON.

    >>> point_id({"b": 1, "a": [2]}) == point_id({"a": [2], "b": 1})
    True
    """
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:ID_LENGTH]


def expand(sweep: Sweep) -> list[Point]:
    """Every point of ``sweep``: repeats outermost, then the matrix axes in file order.

    Raises:
        ConfigError: two points that are the same measurement (same id), or replay points that
            map to the same capture.
    """
    axes = [axis.entries for axis in sweep.matrix]
    options = {k: v for k, v in sweep.profiler.options.items() if k not in NOT_IN_ID}
    options = {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}
    points: list[Point] = []
    seen: dict[str, Point] = {}
    captures: dict[Path, Point] = {}
    for repeat in range(1, sweep.repeats + 1):
        for combo in itertools.product(*axes) if axes else [()]:
            params: dict[str, str] = {}
            labels: dict[str, str] = {}
            env: dict[str, str] = {}
            for entry in combo:
                params.update(entry.params)
                labels.update(entry.labels)
                env.update(entry.env)
            params["repeat"] = str(repeat)
            command = tuple(fill(word, params) for word in sweep.command)
            capture = fill(sweep.profiler.options["capture"], params) if sweep.profiler.replay else None
            identity = {
                "command": list(command),
                "env": env,
                "params": params,
                "profiler": sweep.profiler.name,
                "options": options,
                "capture": capture,
                "labels": sweep.labels,
            }
            pid = point_id(identity)
            labels["repeat"] = str(repeat)
            labels.update(sweep.labels)
            labels["sweep"] = sweep.name
            labels["sweep_point"] = pid
            point = Point(
                id=pid,
                index=len(points) + 1,
                repeat=repeat,
                params=params,
                labels=labels,
                command=command,
                env=env,
                capture_dir=Path(capture) if capture is not None else sweep.out / pid,
            )
            if pid in seen:
                raise ConfigError(
                    f"{sweep.path}: points {seen[pid].index} and {point.index} are the same measurement "
                    f"({_params_text(point)}); remove the duplicate matrix value"
                )
            if capture is not None and point.capture_dir in captures:
                other = captures[point.capture_dir]
                raise ConfigError(
                    f"{sweep.path}: points {other.index} ({_params_text(other)}) and {point.index} "
                    f"({_params_text(point)}) both replay {capture}; a capture is stored once, so map each point to "
                    "its own (profiler.capture)"
                )
            seen[pid] = point
            if capture is not None:
                captures[point.capture_dir] = point
            points.append(point)
    return points


def _params_text(point: Point) -> str:
    return " ".join(f"{k}={v}" for k, v in point.matrix_labels.items())


def select(points: list[Point], wanted: tuple[str, ...] | list[str], sweep: Sweep) -> list[Point]:
    """The points named by id or by a unique id prefix (``--point``), in sweep order.

    Raises:
        ConfigError: an id that matches no point, or a prefix that matches several.
    """
    chosen: set[str] = set()
    for want in wanted:
        want = want.strip().lower()
        matches = [p for p in points if p.id.startswith(want)] if want else []
        if not matches:
            raise ConfigError(f"--point {want!r}: no such point in {sweep.path} (rocroof sweep --dry-run lists them)")
        if len(matches) > 1 and not any(p.id == want for p in matches):
            raise ConfigError(
                f"--point {want!r}: matches {len(matches)} points ({', '.join(p.id for p in matches[:4])}...); "
                "give more of the id"
            )
        chosen.add(next((p.id for p in matches if p.id == want), matches[0].id))
    return [p for p in points if p.id in chosen]
