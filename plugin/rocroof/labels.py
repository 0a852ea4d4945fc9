"""Run labels picked by selectors: ``key=value[,key=value...]`` with ``*`` matching any text.

Used by the store (``--run model=x``, ``runs --label``) and by the stored-report fast path of
``rocroof report`` (:mod:`rocroof.report.quick`), which must not import the store (SQLAlchemy).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .errors import InputError


def parse_selector(text: str) -> dict[str, str]:
    """``key=value[,key=value...]`` as a dict (values may hold ``*``; keys and values stripped).

    Raises:
        InputError: a part without ``=`` or with an empty key.
    """
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise InputError(f"labels {text!r}: expected key=value[,key=value...], e.g. model=dense,env=fusion")
        if key.strip() in out:
            raise InputError(f"labels {text!r}: {key.strip()!r} given twice (a run has one value per label)")
        out[key.strip()] = value.strip()
    return out


def parse_selectors(texts: Iterable[str], base: dict[str, str] | None = None) -> dict[str, str]:
    """Several :func:`parse_selector` texts (repeated ``--label`` options) as one selector, on top of ``base``.

    Raises:
        InputError: as :func:`parse_selector`, or a key set to two values (a run has one value per
            label, so both cannot match).
    """
    out = dict(base or {})
    for text in texts:
        for key, value in parse_selector(text).items():
            if key in out and out[key] != value:
                raise InputError(
                    f"--label {key}={value}: {key} is already {out[key]!r}; a run has one value per label, "
                    "so both cannot match (use * to match several: --label 'env=*')"
                )
            out[key] = value
    return out


def labels_match(labels: dict[str, str], selector: dict[str, str]) -> bool:
    """Whether every ``key: pattern`` of ``selector`` matches a label (``*``: any text)."""
    for key, pattern in selector.items():
        value = labels.get(key)
        if value is None:
            return False
        regex = ".*".join(re.escape(piece) for piece in pattern.split("*"))
        if not re.fullmatch(regex, value, flags=re.DOTALL):
            return False
    return True


def parse_run_labels(text: str) -> tuple[bool, dict[str, str]]:
    """A ``--run`` given by labels: ``[latest:]key=value[,key=value...]`` -> (newest of several, selector).

    Raises:
        InputError: as :func:`parse_selector`.
    """
    newest = text.lower().startswith("latest:")
    return newest, parse_selector(text.split(":", 1)[1] if newest else text)


def runs_matching(labels_by_run: dict[int, dict[str, str]], selector: dict[str, str]) -> list[int]:
    """Ids of the runs (every key of ``labels_by_run``, with its labels) that ``selector`` matches, ascending."""
    return sorted(rid for rid, labels in labels_by_run.items() if labels_match(labels, selector))
