"""Run labels picked by selectors: ``key=value[,key=value...]`` with ``*`` matching any text.

Used by the store (``--run model=x``, ``runs --label``) and by the stored-report fast path of
``rocroof report`` (:mod:`rocroof.report.quick`), which must not import the store (SQLAlchemy).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .errors import InputError

#: The selector wildcard: ``*`` in a selector's value matches any text. A label's own value
#: cannot hold it (:func:`label_problem` refuses it), since no selector could tell it from the wildcard.
WILDCARD = "*"


#: Control characters (C0, DEL, C1): a newline or escape sequence in a label would reach every
#: terminal that lists the runs.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def label_problem(key: str, value: str) -> str:
    """Why ``key=value`` cannot be a run's label, or '' when it can: the one rule for every way in.

    A stored label must be one the run selector (:func:`parse_selector`: ``--run``, ``--label``,
    ``rocroof.open(db).ops("k=v")``) can pick again, and one plain line: ``--label`` on the command
    line (``ingest``, ``collect``), a sweep file's ``labels`` and matrix values, and
    :meth:`rocroof.store.Store.write_run` all check it.

    Args:
        key: the label's key, as stored.
        value: its value, as stored.

    Returns:
        A phrase naming the problem (no trailing period), or ''.
    """
    for what, text in (("key", key), ("value", value)):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return f"the label's {what} holds bytes that are not UTF-8"
        bad = CONTROL.search(text)
        if bad:
            return f"control character {bad.group()!r} in the label's {what} {text!r}; labels are one plain line"
        if "," in text:
            return (
                f"a label cannot hold ',' (labels are listed and selected as key=value,key=value), "
                f"and its {what} {text!r} does"
            )
    if not key.strip():
        return "the label's key is empty"
    if "=" in key:
        return f"a label's key cannot hold '=' (a selector reads key=value up to the first '='), and {key!r} does"
    if key.lower().startswith("latest:"):
        return (
            f"a label's key cannot start with 'latest:' (a selector reads that as 'the newest run'), and {key!r} does"
        )
    if WILDCARD in value:
        return (
            f"a label value cannot hold '{WILDCARD}', the wildcard of label selectors (--run model={WILDCARD} matches "
            "every model), so no selector could match this value alone; use another character"
        )
    for what, text in (("key", key), ("value", value)):
        if text != text.strip():
            return f"the label's {what} {text!r} starts or ends with a space, which a selector strips"
    return ""


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
        regex = ".*".join(re.escape(piece) for piece in pattern.split(WILDCARD))
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
