"""The key line under a human report explains exactly the columns the table shows.

For every ``--by``, on a run without the byte/FLOP model (AMD's recorded MI300X vcopy workload)
and runs with it (the H200 examples), in Markdown and in terminal tables of several widths: each
clause of the key names a column that is shown, and each shown column that needs a key has one.
The compute-ceiling header line appears only where the roofline columns (FLOP/B, % roof) show.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocroof.capture.readers import read_capture
from rocroof.ingest.pipeline import build_run
from rocroof.report.tables import build_report, render
from rocroof.store import Store

from .conftest import REPO, fixture_path

#: The headers a key clause explains, by the clause's subject (the text before " = ").
SUBJECTS = {
    "#": {"#"},
    "op #N": {"op"},
    "time µs": {"time µs"},
    "% time": {"% time"},
    "read/write MB": {"read MB", "write MB"},
    "read MB": {"read MB"},
    "write MB": {"write MB"},
    "GB/s": {"GB/s"},
    "% peak": {"% peak"},
    "µs at peak": {"µs at peak"},
    "µs/call": {"µs/call"},
    "model MB": {"model MB"},
    "meas/model": {"meas/model"},
    "FLOP/B": {"FLOP/B"},
    "bound": {"bound"},
    "% roof": {"% roof"},
    "µs at roof": {"µs at roof"},
}
#: Every header a key explains (the name columns, counts and ``disp.`` need none).
KEYED = set().union(*SUBJECTS.values())
#: Headers in the order the widest table shows them (longest first, so that "µs at peak" is not read as "% peak").
ALL_HEADERS = sorted(
    KEYED | {"ggml op", "kernel", "op invocation", "invocations", "inv.", "dispatches", "disp."}, key=len
)[::-1]


def _store(capture: Path, tmp_path: Path) -> tuple[Store, int]:
    db = tmp_path / f"{capture.name}.db"
    rid = Store(db).write_run(build_run(read_capture(capture)))
    return Store(db, read_only=True), rid


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Store, int]]:
    tmp = tmp_path_factory.mktemp("key")
    return {
        "amd-no-model": _store(fixture_path("rocprof-compute", "vcopy", "MI300X_A1"), tmp),
        "h200-prefill": _store(REPO / "examples" / "h200" / "dense-prefill", tmp),
        "h200-sampled": _store(REPO / "examples" / "h200-sampled" / "dense28-decode-sample", tmp),
    }


def _key_headers(text: str) -> set[str]:
    """The headers the ``key:`` line explains (the whole line: table output may wrap it)."""
    body = text.split("key: ", 1)[1]
    body = re.split(r"\n(?=\S+ of \S+ dispatches|\(\d+ info|warning:|\d+ warning|- \*\*|_\()", body, maxsplit=1)[0]
    body = " ".join(re.sub(r"\\(.)", r"\1", body.replace("_", "")).split())  # Markdown's escapes undone
    out: set[str] = set()
    for clause in body.split("; "):
        subject = clause.split(" = ", 1)[0].strip()
        if subject == "~":
            continue
        assert subject in SUBJECTS, f"a key clause for no known column: {clause!r}"
        out |= SUBJECTS[subject]
    return out


def _markdown_headers(text: str) -> set[str]:
    row = next(line for line in text.splitlines() if line.startswith("| "))
    return {cell.strip() for cell in row.strip("|").split("|")}


def _table_headers(text: str) -> set[str]:
    """Headers of a terminal table: the line above the heavy rule, read longest name first."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("━"))
    header = lines[rule - 1]
    found = set()
    for name in ALL_HEADERS:
        if re.search(rf"(^|\s){re.escape(name)}(\s|$)", header):
            found.add(name)
            header = re.sub(rf"(^|\s){re.escape(name)}(\s|$)", "  ", header, count=1)
    return found


@pytest.mark.parametrize("run", ["amd-no-model", "h200-prefill", "h200-sampled"])
@pytest.mark.parametrize("by", ["op", "invocation", "kernel", "dispatch"])
@pytest.mark.parametrize("fmt", ["markdown", "table-80", "table-120", "table-200"])
def test_the_key_explains_exactly_the_columns_shown(
    runs: dict[str, tuple[Store, int]], run: str, by: str, fmt: str
) -> None:
    store, rid = runs[run]
    report = build_report(store, rid, by=by, top=20)  # type: ignore[arg-type]
    if fmt == "markdown":
        text = render(report, "markdown")
        shown = _markdown_headers(text)
    else:
        text = render(report, "table", width=int(fmt.split("-")[1]))
        if any(line.startswith("━") for line in text.splitlines()):
            shown = _table_headers(text)
        else:  # too narrow for any table: one block of "header: value" lines per row, every column
            shown = {m.group(1) for m in re.finditer(r"^\s*([^:\n]+?): ", text, re.MULTILINE)} & set(ALL_HEADERS)
            assert "-- row 1 --" in text
    if not len(report.rows):
        assert "key: " not in text
        return
    assert _key_headers(text) == shown & KEYED, text
    roofline = bool(shown & {"FLOP/B", "% roof"})
    assert ("compute ceilings:" in text) == roofline


def test_the_amd_run_without_a_model_has_no_roofline_key(runs: dict[str, tuple[Store, int]]) -> None:
    """The issue's case: GB/s, % peak and µs at peak shown, and only those explained."""
    store, rid = runs["amd-no-model"]
    text = render(build_report(store, rid, by="op"), "table", width=160)
    assert {"GB/s", "% peak", "µs at peak"} <= _key_headers(text)
    for absent in ("µs/call", "meas/model", "FLOP/B", "bound", "% roof", "compute ceilings"):
        assert absent not in text


def test_query_and_diff_tables_right_align_numbers() -> None:
    """render_frame (rocroof query, runs, diff --format table) aligns number columns right, text left."""
    import pandas as pd

    from rocroof.report.tables import render_frame

    df = pd.DataFrame({"op": ["ADD", "MUL_MAT_ID"], "dispatches": [7, 123456], "change": ["+1.5%", "-12.0%"]})
    lines = [line.rstrip() for line in render_frame(df, "table", width=100).splitlines() if line.strip()]
    header, rule, *rows = lines
    assert rule.startswith("━")
    for column, values in (("dispatches", ["7", "123456"]), ("change", ["+1.5%", "-12.0%"])):
        end = header.index(column) + len(column)
        for row, value in zip(rows, values, strict=True):
            assert row[:end].endswith(value), (row, column)  # the value's last character under the header's
    assert rows[0].startswith("ADD ") and rows[1].startswith("MUL_MAT_ID")  # text stays left
    md = render_frame(df, "markdown").splitlines()[1]
    assert md == "|---|---:|---:|"


@pytest.mark.parametrize("run", ["amd-no-model", "h200-prefill", "h200-sampled"])
@pytest.mark.parametrize("by", ["op", "invocation", "kernel", "dispatch"])
def test_markdown_fits_a_review_and_keeps_the_verdicts(runs: dict[str, tuple[Store, int]], run: str, by: str) -> None:
    """At most 9 columns (bound and % roof kept), the others named under the table; all with --all-columns."""
    store, rid = runs[run]
    report = build_report(store, rid, by=by, top=20)  # type: ignore[arg-type]
    text = render(report, "markdown")
    if not len(report.rows):  # a run without ggml ops has no invocation rows: it says so instead
        assert "no ggml op invocations in this run" in text and "left out" not in text
        return
    wide = render(report, "markdown", all_columns=True)
    shown, every = _markdown_headers(text), _markdown_headers(wide)
    assert len(shown) <= 9 and shown <= every
    assert {"bound", "% roof"} & every <= shown  # the verdicts stay
    left_out = every - shown
    if left_out:
        line = next(x for x in text.splitlines() if "left out to fit a review" in x)
        assert all(name in line for name in left_out)
    else:
        assert "left out to fit" not in text
    assert "<details><summary>how it was measured</summary>" in text  # provenance folded, not dropped
    assert text.splitlines()[0].startswith("**rocroof** run ") and len(text.splitlines()[0]) < 160


def test_piped_reports_keep_each_line_of_prose_whole(
    runs: dict[str, tuple[Store, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Into a file or pipe, header and footer lines are not hard-wrapped (a PR or a log reflows them)."""
    import rocroof.report.render as render_module

    monkeypatch.setattr(render_module, "_stdout_is_terminal", lambda: False)  # whatever runs the tests
    store, rid = runs["h200-prefill"]
    piped = render(build_report(store, rid, by="op"), "table")  # no width: as the CLI renders for a pipe
    key = next(line for line in piped.splitlines() if line.startswith("key: "))
    assert key.endswith("µs at roof = the time at that roof")  # the whole key on its one line
    table_lines = [line for line in piped.splitlines() if line.startswith(("MUL_MAT", "━"))]
    assert table_lines and all(len(line) <= 160 for line in table_lines)  # the table still fits
    narrow = render(build_report(store, rid, by="op"), "table", width=100)  # a terminal's width: wrapped
    assert max(len(line) for line in narrow.splitlines()) <= 100
