"""Text from a capture made safe to show: no terminal controls, no undecodable bytes, no Markdown.

Kernel names, roctx messages, labels and paths come from files someone else wrote. Every line
rocroof prints (reports, query results, errors, progress) passes :func:`printable`, so that such
text cannot move the cursor, set the window title, hide the rest of the output or reorder it.
In Markdown output such text also passes :func:`markdown_text` (or :func:`markdown_code`), so that
``void foo<float, 4>(T*)`` renders as written, not as an HTML tag and the start of emphasis.
"""

from __future__ import annotations

import re

#: Characters a capture must not send to a terminal: C0 controls but tab and newline (ESC starts
#: escape sequences that set the window title or swallow output, CR overwrites a line), DEL, C1
#: controls (U+0080-U+009F, CSI and OSC among them), and the characters that show nothing or move
#: others: every format character (Unicode category Cf: the bidirectional embeddings, overrides,
#: isolates and marks, zero-width space, joiners, word joiner, soft hyphen, byte-order mark, tag
#: characters...), the line and paragraph separators (Zl, Zp) and the other default-ignorable code
#: points (combining grapheme joiner, Hangul fillers, variation selectors). Two labels or kernel
#: names that differ by one of them must not look alike. The ranges are those of Unicode 15.1
#: (DerivedCoreProperties.txt, Default_Ignorable_Code_Point, and UnicodeData.txt category Cf).
_INVISIBLE = (
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u115f-\u1160\u17b4-\u17b5"
    "\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
    "\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")
#: ... and in one table cell, tab and newline too (they would break the cell's line).
_UNSAFE_CELL = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}]")


#: Surrogates other than U+DC80-U+DCFF (the bytes Python's ``surrogateescape`` keeps undecoded).
_LONE_SURROGATE = re.compile("[\ud800-\udc7f\udd00-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def storable(text: str) -> str:
    """``text`` that UTF-8 can encode (stored and printed as it is otherwise).

    Undecodable bytes of a file name (surrogate escapes) become ``\\xNN``, any other lone
    surrogate (``\\ud800`` from a JSON escape) ``\\ud800``.

    >>> storable("bad \\udcff byte, lone \\ud800")
    'bad \\\\xff byte, lone \\\\ud800'
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    text = _LONE_SURROGATE.sub(_escape, text)  # surrogates that are no escaped byte, as text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def printable(text: str) -> str:
    """``text`` safe on any terminal: undecodable bytes become ``\\xNN``, controls ``\\x1b``, ``\\u202e``.

    Tab and newline pass; everything else is printed as is.

    >>> printable("k\\x1b]0;title\\x07")
    'k\\\\x1b]0;title\\\\x07'
    """
    return _UNSAFE.sub(_escape, storable(text))


def one_line(text: str) -> str:
    """:func:`printable` for text that must stay on one line (an error, a table cell): tab and newline escaped too.

    >>> one_line("/data/run\\n2: not found")
    '/data/run\\\\x0a2: not found'
    """
    return _UNSAFE_CELL.sub(_escape, storable(text))


#: One table cell's text (:func:`one_line`).
cell_text = one_line


#: Characters Markdown (CommonMark, GitHub Flavored) reads as markup wherever they stand: code spans
#: (`), emphasis (*), raw HTML (< >), links ([ ]), strikethrough (~, GFM) and table cells (|, GFM).
_MARKDOWN_ALWAYS = "`*<>[]~|"
#: ASCII punctuation: the characters a backslash escapes in CommonMark (spec 0.31, section 2.4).
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def markdown_text(text: str) -> str:
    """:func:`one_line` text that Markdown shows as it is: its markup characters backslash-escaped.

    Escaped: `` ` * < > [ ] ~ | ``; ``_`` unless it stands between two letters or digits (``MUL_MAT``
    stays: an underscore inside a word starts no emphasis); a backslash before ASCII punctuation
    (else it would escape that character). Apply it once, to the text as stored: the escapes it
    writes are themselves markup, and a second pass would show them.

    >>> markdown_text("void foo<float, 4>(T*) | MUL_MAT _x")
    'void foo\\\\<float, 4\\\\>(T\\\\*) \\\\| MUL_MAT \\\\_x'
    """
    text = one_line(text)
    out = []
    for i, ch in enumerate(text):
        if ch in _MARKDOWN_ALWAYS:
            out.append("\\" + ch)
        elif ch == "_":
            before, after = text[i - 1 : i], text[i + 1 : i + 2]
            inside = before.isalnum() and after.isalnum()
            out.append(ch if inside else "\\_")
        elif ch == "\\" and text[i + 1 : i + 2] in _ASCII_PUNCTUATION:
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


def markdown_code(text: str) -> str:
    """:func:`one_line` text as a Markdown code span, shown character for character (a kernel name).

    The span's fence is one backtick longer than the longest run of backticks in the text (padded
    with a space where the text starts or ends with one), so nothing in it is replaced; ``|`` is
    escaped, which a GitHub table needs even inside a code span. ``""`` stays empty.

    >>> markdown_code("void foo<float, 4>(T*)")
    '`void foo<float, 4>(T*)`'
    """
    text = one_line(text)
    if not text:
        return ""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"
