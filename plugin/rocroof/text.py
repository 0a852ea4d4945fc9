"""Text from a capture made safe to show: no terminal controls, no undecodable bytes.

Kernel names, roctx messages, labels and paths come from files someone else wrote. Every line
rocroof prints (reports, query results, errors, progress) passes :func:`printable`, so that such
text cannot move the cursor, set the window title, hide the rest of the output or reorder it.
"""

from __future__ import annotations

import re

#: Characters a capture must not send to a terminal: C0 controls but tab and newline (ESC starts
#: escape sequences that set the window title or swallow output, CR overwrites a line), DEL, C1
#: controls (U+0080-U+009F, CSI and OSC among them), the Unicode line and paragraph separators,
#: the bidirectional embeddings, overrides, isolates and marks (U+202A-U+202E, U+2066-U+2069,
#: U+200E/U+200F, U+061C), and the invisible characters that make two different names look alike
#: (zero-width space, non-joiner and joiner U+200B-U+200D, word joiner and invisible operators
#: U+2060-U+2064, the byte-order mark U+FEFF).
_INVISIBLE = "\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")
#: ... and in one table cell, tab and newline too (they would break the cell's line).
_UNSAFE_CELL = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` safe on any terminal: undecodable bytes become ``\\xNN``, controls ``\\x1b``, ``\\u202e``.

    Tab and newline pass; everything else is printed as is.

    >>> printable("k\\x1b]0;title\\x07")
    'k\\\\x1b]0;title\\\\x07'
    """
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _UNSAFE.sub(_escape, text)


def cell_text(text: str) -> str:
    """:func:`printable` for one table cell: tab and newline escaped too."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _UNSAFE_CELL.sub(_escape, text)
