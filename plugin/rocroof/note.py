"""A finding about a capture that the user must see: :class:`Note` (stored per run, shown in reports).

Its own module, without pandas, so that reports read back from the database (rocroof.report.render)
need none; :mod:`rocroof.records` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["info", "warning", "error"]


@dataclass(frozen=True)
class Note:
    """A finding about a capture that the user must see (stored per run, shown in reports).

    Attributes:
        severity: ``info``, ``warning`` (a number may be off or missing) or ``error``.
        code: a stable machine-readable key, e.g. ``missing-counter``.
        message: one line of prose.
    """

    severity: Severity
    code: str
    message: str
