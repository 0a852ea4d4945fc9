"""Output a capture cannot hijack, and commands that end in one line whatever the output does.

A kernel name, ggml op or label comes from a capture someone else made: it must not reach a
terminal as an escape sequence, a spreadsheet as a formula, or an HTML page as markup. Results are
streamed, big run ids and odd output paths end in one-line errors, and a full disk is said so.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rocroof.cli import cli
from rocroof.report.tables import csv_text
from rocroof.text import printable

from .rocprof_csv import T0, Kernel, rng, write_pass

#: An OSC sequence that sets the terminal's title, then one that would hide what follows, a CSI
#: cursor move, a C1 CSI (U+009B), a bidi override, and a carriage return that overwrites the line.
HOSTILE = "k\x1b]0;pwned\x07\x1b[8m\x1b[2J\x9b31m\u202eevil\rX"


def run(*args: Any, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env=env)


def _no_controls(text: str) -> None:
    bad = [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"]
    assert not bad, f"control characters reached the output: {bad!r}"


@pytest.fixture
def hostile_db(tmp_path: Path) -> Path:
    """A database with one run whose kernel name, op names and marker text carry escape sequences."""
    kernels = [
        Kernel(1, HOSTILE, 2, T0 + 1_000, T0 + 3_000),
        Kernel(2, '=HYPERLINK("http://x","y")', 4, T0 + 4_000, T0 + 5_000),
        Kernel(3, "+cmd|' /C calc'!A0", 6, T0 + 6_000, T0 + 7_000),
        Kernel(4, "<img src=x onerror=alert`1`>", 8, T0 + 8_000, T0 + 9_000),
    ]
    markers = [
        rng("ggml:MUL_MAT:\x1b]0;title\x07-0:1", 1, T0 + 100, T0 + 900),
        rng("ggml:ADD:@SUM(A1)-0:2", 3, T0 + 1_000, T0 + 1_100),
        rng("ggml:ADD:-2+3-0:3", 5, T0 + 1_200, T0 + 1_300),
    ]
    write_pass(tmp_path / "cap", 1234, kernels=kernels, markers=markers)
    db = tmp_path / "r.db"
    result = run("ingest", tmp_path / "cap", "--db", db)
    assert result.exit_code == 0, result.output
    return db


def test_printable_escapes_every_terminal_control_but_tab_and_newline() -> None:
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("\x1b]0;t\x07") == "\\x1b]0;t\\x07"
    assert printable("\x9b2J") == "\\x9b2J"  # C1 CSI, one character
    assert printable("x\ry") == "x\\x0dy"
    assert printable("\u202eabc") == "\\u202eabc"
    assert printable("caf\u00e9 \u00b5s") == "caf\u00e9 \u00b5s"  # printable non-ASCII passes
    assert printable("bad \udcff byte") == "bad \\xff byte"  # an undecodable byte of a file name
    # invisible characters that make two names look alike: zero-width space/joiner, LRM, BOM, word joiner
    for ch in ("\u200b", "\u200d", "\u200e", "\u061c", "\ufeff", "\u2060"):
        assert printable(f"q4{ch}_k") == f"q4\\u{ord(ch):04x}_k"


def test_a_label_with_a_zero_width_space_is_shown_escaped(tmp_path: Path) -> None:
    """Two labels that differ by an invisible character must not look the same in ``runs``."""
    db = tmp_path / "r.db"
    example = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"
    assert run("ingest", example, "--db", db, "--label", "model=q4\u200b_k").exit_code == 0
    out = run("runs", "--db", db).output
    assert "model=q4\\u200b_k" in out and "\u200b" not in out


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
@pytest.mark.parametrize("by", ["kernel", "dispatch"])
def test_reports_never_print_a_capture_s_control_characters(hostile_db: Path, fmt: str, by: str) -> None:
    result = run("report", "--db", hostile_db, "--by", by, "--format", fmt)
    assert result.exit_code == 0, result.output
    _no_controls(result.output)
    if fmt == "json":  # JSON escapes them itself: the name comes back exactly
        rows = json.loads(result.output)["rows"]
        names = {r["kernel_name"] if "kernel_name" in r else r.get("kernel") for r in rows}
        assert HOSTILE in names
    else:
        assert "\\x1b]0;pwned\\x07" in result.output  # shown, escaped: the user sees what the capture holds


def test_html_report_escapes_markup_and_controls(hostile_db: Path) -> None:
    result = run("report", "--db", hostile_db, "--by", "kernel", "--format", "html")
    assert result.exit_code == 0
    _no_controls(result.output)
    assert "<img" not in result.output
    assert "&lt;img src=x onerror=alert`1`&gt;" in result.output


def test_query_and_runs_escape_controls(hostile_db: Path) -> None:
    for args in (
        ("query", "SELECT message FROM marker_range", "--db", hostile_db),
        ("query", "SELECT kernel_name, op FROM dispatch_dram", "--db", hostile_db),
        ("query", "SELECT kernel_name FROM dispatch", "--db", hostile_db, "--format", "markdown"),
        ("runs", "--db", hostile_db),
        ("runs", "--db", hostile_db, "--notes", "latest"),
    ):
        result = run(*args)
        assert result.exit_code == 0, result.output
        _no_controls(result.output)


def test_an_error_naming_a_hostile_value_is_escaped(hostile_db: Path) -> None:
    result = run("report", "--db", hostile_db, "--run", "\x1b]0;x\x07")
    assert result.exit_code == 1
    _no_controls(result.output)
    assert "\\x1b]0;x\\x07" in result.output


def test_paths_with_a_newline_stay_on_one_line(tmp_path: Path) -> None:
    """A capture path with a newline: the stored line and an error each stay one line, the newline escaped."""
    cap = tmp_path / "run\n2"
    write_pass(cap, 77, kernels=[Kernel(1, "k", 2, T0 + 1_000, T0 + 2_000)])
    trace = cap / "77_kernel_trace.csv"
    trace.write_bytes(trace.read_bytes().rstrip(b"\n"))  # cut inside its last row: a warning names the file
    result = run("ingest", cap, "--db", tmp_path / "r.db")
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("Stored run 1 from ") and first.split(" (")[0].endswith("run\\x0a2")
    cut = [line for line in result.output.splitlines() if "ends inside its last row" in line]
    assert len(cut) == 1 and cut[0].startswith("  - ") and "run\\x0a2/77_kernel_trace.csv" in cut[0]
    assert not any(line.startswith("2/") for line in result.output.splitlines())
    missing = run("ingest", tmp_path / "gone\nhere", "--db", tmp_path / "r.db")
    assert missing.exit_code == 1
    lines = missing.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "gone\\x0ahere" in lines[0]


def test_csv_cells_a_spreadsheet_would_run_get_a_quote_numbers_never(hostile_db: Path) -> None:
    result = run("report", "--db", hostile_db, "--by", "dispatch", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.output)))
    names = {r["kernel_name"] for r in rows}
    assert '\'=HYPERLINK("http://x","y")' in names
    assert "'+cmd|' /C calc'!A0" in names
    for r in rows:  # numbers stay numbers (a negative number is no formula)
        float(r["duration_ns"])
    raw = run("report", "--db", hostile_db, "--by", "dispatch", "--format", "csv", "--raw")
    assert '=HYPERLINK(""http://x"",""y"")' in raw.output  # as stored (CSV doubles the quotes)


def test_csv_text_guards_text_cells_only() -> None:
    import pandas as pd

    df = pd.DataFrame({"name": ["=1+2", "+a", "-b", "@c", "\tx", "ok", None], "value": [-2.5, 1, 2, 3, 4, 5, 6]})
    rows = list(csv.reader(io.StringIO(csv_text(df))))
    assert [r[0] for r in rows[1:]] == ["'=1+2", "'+a", "'-b", "'@c", "'\tx", "ok", ""]
    assert rows[1][1] == "-2.5"
    assert [r[0] for r in csv.reader(io.StringIO(csv_text(df, raw=True)))][1] == "=1+2"


def test_query_csv_guards_formulas_and_raw_opts_out(hostile_db: Path) -> None:
    sql = "SELECT '=1+2' AS f, -5 AS n, '@x' AS g"
    assert run("query", sql, "--db", hostile_db, "--format", "csv").output.splitlines() == ["f,n,g", "'=1+2,-5,'@x"]
    assert run("query", sql, "--db", hostile_db, "--format", "csv", "--raw").output.splitlines()[1] == "=1+2,-5,@x"


def test_query_streams_csv_and_json_in_batches_with_every_row(
    hostile_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rocroof.store as store

    calls: list[int] = []
    real = store.Store.query_batches

    def small_batches(self: Any, sql: str, batch_rows: int | None = 7) -> Any:
        calls.append(batch_rows or 0)
        return real(self, sql, 7)

    monkeypatch.setattr(store.Store, "query_batches", small_batches)
    sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30) SELECT i FROM n"
    out = run("query", sql, "--db", hostile_db, "--format", "csv").output
    assert out.splitlines() == ["i", *[str(i) for i in range(1, 31)]]  # header once, 30 rows in 5 batches
    doc = json.loads(run("query", sql, "--db", hostile_db, "--format", "json").output)
    assert doc == [{"i": i} for i in range(1, 31)]
    empty = run("query", "SELECT 1 AS i WHERE 0", "--db", hostile_db, "--format", "json").output
    assert json.loads(empty) == []
    assert calls


def test_query_table_shows_at_most_max_rows_and_says_so(hostile_db: Path) -> None:
    sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50) SELECT i FROM n"
    result = CliRunner().invoke(cli, ["query", sql, "--db", str(hostile_db), "--max-rows", "5"])
    assert result.exit_code == 0
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert "5" in lines and "6" not in lines
    assert "showing 5 of 50 rows" in result.stderr


def test_sql_starting_with_a_comment_is_sql_not_an_option(hostile_db: Path) -> None:
    result = run("query", "-- how many dispatches\nSELECT COUNT(*) AS n FROM dispatch", "--db", hostile_db)
    assert result.exit_code == 0, result.output
    assert "4" in result.output.split()


@pytest.mark.parametrize("run_id", ["99999999999999999999999", "2147483648", "-1", "0"])
def test_run_ids_beyond_any_stored_one_are_one_line_errors(hostile_db: Path, run_id: str) -> None:
    result = run("report", "--db", hostile_db, "--run", run_id)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"Error: {hostile_db}: no run {int(run_id)} (see 'rocroof runs')"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_output_to_a_full_device_is_one_line(hostile_db: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    for args in (["runs"], ["report", "--by", "dispatch"], ["query", "SELECT * FROM dispatch", "--format", "csv"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run(
                [sys.executable, "-m", "rocroof", *args, "--db", str(hostile_db)],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
            )
        assert proc.returncode == 1
        assert proc.stderr.strip().splitlines() == ["Error: cannot write the output: No space left on device"]


def test_plot_out_into_a_file_or_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    example = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"
    assert run("ingest", example, "--db", db).exit_code == 0
    (tmp_path / "afile").write_text("x")
    for out, says in (("afile/plot", "is not a folder"), ("missing/plot", "does not exist (create it first)")):
        result = run("plot", "--db", db, "--out", tmp_path / out)
        assert result.exit_code == 1
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], result.output
    assert not (tmp_path / "missing").exists()
    assert run("plot", "--db", db, "--out", tmp_path / "ok").exit_code == 0
    assert (tmp_path / "ok.png").stat().st_size > 0 and (tmp_path / "ok.svg").stat().st_size > 0
    assert not list(tmp_path.glob("*.part"))


def test_an_invalid_label_leaves_no_database_behind(tmp_path: Path) -> None:
    write_pass(tmp_path / "cap", 1, kernels=[Kernel(1, "k", 2, T0, T0 + 10)])
    for label in ("novalue", "a=b\nc", "a,b=c"):
        db = tmp_path / "fresh.db"
        result = run("ingest", tmp_path / "cap", "--db", db, "--label", label)
        assert result.exit_code == 1
        assert len(result.output.strip().splitlines()) == 1
        assert not db.exists()
    # a database there already keeps its content
    db = tmp_path / "kept.db"
    assert run("ingest", tmp_path / "cap", "--db", db).exit_code == 0
    assert run("ingest", tmp_path / "cap", "--db", db, "--replace", "--label", "x").exit_code == 1
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM run").fetchone() == (1,)


def test_every_format_and_separator_character_of_this_python_s_unicode_is_escaped() -> None:
    """Unicode categories Cf, Zl, Zp and the controls (but tab and newline) never print as they are."""
    import sys
    import unicodedata

    shown_raw = [
        c
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cf", "Zl", "Zp", "Cc")
        and chr(c) not in "\t\n"
        and printable(chr(c)) == chr(c)
    ]
    assert shown_raw == []
    assert printable("tag\U000e0041") == "tag\\U000e0041"
    assert printable("caf\u00e9 \u4e2d \u05d0") == "caf\u00e9 \u4e2d \u05d0"  # letters of any script pass


# ---- a capture's text in the lines around a report's tables: headers, footers, titles -----------

#: A capture folder's name: an OSC that sets the terminal's title, BEL, and a newline that would start
#: a line of the capture's choosing under a report's first line.
HOSTILE_DIR = "café 漢\x1b]0;PWNED\x07\nline2"
#: ... as every line of rocroof shows it: one line, the controls escaped, the letters as they are.
SHOWN_DIR = "café 漢\\x1b]0;PWNED\\x07\\x0aline2"
#: A kernel name with an OSC and a newline (what a capture's symbol table may hold).
HOSTILE_KERNEL = "void k\x1b]0;K\x07\nFAKEK<int>(int)"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``(folder, database)``: the H200 example ingested from a folder named :data:`HOSTILE_DIR`.

    Its GPU name, a warning, a label, node, tensor and kernel names then get escape sequences and
    newlines, as a hand-made capture (or a damaged database) could give them.
    """
    from .conftest import writable_copy

    root = tmp_path_factory.mktemp("hostile")
    cap = writable_copy(EXAMPLE, root / HOSTILE_DIR)
    db = root / "r.db"
    result = run("ingest", cap, "--db", db, "--label", "model=x")
    assert result.exit_code == 0, result.output
    con = sqlite3.connect(db)
    try:
        con.execute("UPDATE run SET gpu_name = ?", ("H200\x1b]0;GPU\x07\nfakegpu",))
        con.execute("INSERT INTO run_note VALUES (1, 99, 'warning', 'odd', ?)", ("warn\x1b]0;N\x07\nFAKENOTE",))
        con.execute("INSERT INTO run_label VALUES (1, 'evil', ?)", ("v\x1b[2J\nFAKELABEL",))
        con.execute("UPDATE op_invocation SET node_name = ? WHERE node_name LIKE 'norm%'", ("norm\x1b[2J\nFAKENODE",))
        con.execute("UPDATE op_edge SET tensor_name = ?", ("t\x1b\nFAKET",))
        con.execute("UPDATE kernel_symbol SET kernel_name = ? WHERE kernel_index = 0", (HOSTILE_KERNEL,))
        con.commit()
    finally:
        con.close()
    return root, db


def _no_injected_lines(text: str) -> None:
    """No raw control character, and no line that a capture's newline started."""
    assert "\x1b" not in text and "\x07" not in text
    _no_controls(text)
    injected = [line for line in text.splitlines() if line.startswith(("line2", "fakegpu", "FAKE"))]
    assert not injected, injected


@pytest.mark.parametrize("by", ["op", "kernel", "dispatch", "invocation"])
def test_report_header_and_notes_stay_one_line_each(hostile_run: tuple[Path, Path], by: str) -> None:
    """The run's path, GPU, labels and warnings: each one line, the capture's controls shown as escapes.

    The path's newline used to split the header (a second line of the capture's choosing), and the
    terminal table dropped its BEL without a trace.
    """
    root, db = hostile_run
    out = run("report", "--db", db, "--run", "1", "--by", by).output
    lines = out.splitlines()
    assert lines[0] == f"run 1: {root}/{SHOWN_DIR} — ncu+nsys on H200\\x1b]0;GPU\\x07\\x0afakegpu (sm_90)"
    assert lines[1] == "labels: evil=v\\x1b[2J\\x0aFAKELABEL, model=x"
    assert lines[2] == "timings from a trace pass; attribution: launch_api"
    assert "warning: warn\\x1b]0;N\\x07\\x0aFAKENOTE" in lines
    _no_injected_lines(out)


@pytest.mark.parametrize("by", ["op", "kernel", "dispatch", "invocation"])
def test_markdown_report_header_and_notes_stay_one_line_each(hostile_run: tuple[Path, Path], by: str) -> None:
    root, db = hostile_run
    out = run("report", "--db", db, "--run", "1", "--by", by, "--format", "markdown").output
    lines = out.splitlines()
    # the capture's text with Markdown's markup escaped: "]" as "\\]" (so that "[...]" links nothing)
    shown = f"{root}/{SHOWN_DIR}".replace("]", "\\]")
    assert lines[0] == f"**rocroof** run 1: {shown} — ncu+nsys on H200\\x1b\\]0;GPU\\x07\\x0afakegpu (sm_90)  "
    assert lines[1] == "labels: evil=v\\x1b\\[2J\\x0aFAKELABEL, model=x  "
    assert "- **warning** (odd): warn\\x1b\\]0;N\\x07\\x0aFAKENOTE" in lines
    _no_injected_lines(out)


def test_report_footer_names_nodes_on_one_line(hostile_run: tuple[Path, Path]) -> None:
    """The flagged rows' names below the table (op and node names from the capture) stay on the flag's line."""
    _, db = hostile_run
    for fmt, start in (("table", "* "), ("markdown", "_\\* ")):  # Markdown: the mark escaped, no emphasis
        out = run("report", "--db", db, "--run", "1", "--by", "invocation", "--format", fmt).output
        flags = [line for line in out.splitlines() if line.startswith(start) and "FAKENODE" in line]
        node = "norm\\x1b\\[2J\\x0aFAKENODE" if fmt == "markdown" else "norm\\x1b[2J\\x0aFAKENODE"  # "[" escaped
        assert flags and flags[0].startswith(
            f"{start}RMS_NORM+MUL {node} #126, RMS_NORM+MUL {node} #129, "
            "GET_ROWS node_117 #123 and 2 more — measured 1.46–2.75x model: small op:"
        ), flags
        _no_injected_lines(out)


def test_html_report_escapes_the_capture_s_text_and_prints_no_matplotlib_warning(
    hostile_run: tuple[Path, Path],
) -> None:
    """The page's title, run lines and notes escape the controls; nothing but the page leaves the command.

    The roofline's title is the capture's path: drawn as it was, matplotlib warned on stderr that its
    font has no glyph for ESC and BEL (naming its own source files), and for the CJK letter too.
    """
    import subprocess
    import sys

    root, db = hostile_run
    proc = subprocess.run(
        [sys.executable, "-m", "rocroof", "report", "--db", str(db), "--run", "1", "--format", "html"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    page = proc.stdout
    assert f"<title>run 1: {root}/{SHOWN_DIR} — H200\\x1b]0;GPU\\x07\\x0afakegpu (sm_90)</title>" in page
    assert f"<p>run 1: {root}/{SHOWN_DIR} — ncu+nsys on H200\\x1b]0;GPU\\x07\\x0afakegpu (sm_90)</p>" in page
    assert "<p>labels: evil=v\\x1b[2J\\x0aFAKELABEL, model=x</p>" in page
    assert "<li>warning: warn\\x1b]0;N\\x07\\x0aFAKENOTE</li>" in page
    assert "<p>warning: warn\\x1b]0;N\\x07\\x0aFAKENOTE</p>" in page  # the advice section's notes
    assert f"<!-- run 1: {root}/{SHOWN_DIR} — H200\\x1b]0;GPU\\x07\\x0afakegpu (sm_90) -->" in page  # the SVG
    _no_injected_lines(page)


def test_plot_draws_the_capture_s_text_escaped_without_warnings(hostile_run: tuple[Path, Path]) -> None:
    """`rocroof plot`: the title shows the escapes (tests turn warnings into errors: a glyph warning fails)."""
    root, db = hostile_run
    result = run("plot", "--db", db, "--run", "1", "--out", root / "roof")
    assert result.exit_code == 0, result.output
    svg = (root / "roof.svg").read_text(encoding="utf-8")
    assert f"<!-- run 1: {root}/{SHOWN_DIR} — H200\\x1b]0;GPU\\x07\\x0afakegpu (sm_90) -->" in svg
    _no_controls(svg)


def test_plot_text_is_one_line_with_literal_dollars() -> None:
    from rocroof.report.plot import plot_text

    assert plot_text("a\x1b]0;t\x07\nb 漢 $x$") == "a\\x1b]0;t\\x07\\x0ab 漢 \\$x\\$"
    assert plot_text(None) == "None"


def test_a_dollar_in_a_capture_path_is_text_not_mathematics(tmp_path: Path) -> None:
    """Text between two ``$`` was parsed as mathtext: ``$\\notacommand{$`` failed the plot (ParseFatalException)."""
    import pandas as pd

    from rocroof.report.plot import PlotCeilings, save_roofline

    points = pd.DataFrame(
        {"label": ["MUL_MAT$"], "ai_measured": [10.0], "ai_model": [12.0], "flops_per_s": [1e13], "time_share": [1.0]}
    )
    ceilings = PlotCeilings(4800.0, {"FP16 matrix (verified)": 989.0}, source="ceilings: $x$")
    paths = save_roofline(points, ceilings, "run 1: /data/$\\notacommand{$ 漢", tmp_path / "r")
    svg = paths[1].read_text(encoding="utf-8")
    assert "<!-- run 1: /data/$\\notacommand{$ 漢 -->" in svg  # drawn as typed


def test_diff_heading_and_notes_stay_one_line(hostile_run: tuple[Path, Path]) -> None:
    root, db = hostile_run
    table = run("diff", "1", "1", "--db", db, "--format", "table").stdout  # stderr: the same-run warning
    assert table.splitlines()[0] == f"rocroof diff: A = run 1 ({root}/{SHOWN_DIR}), B = run 1 ({root}/{SHOWN_DIR})"
    _no_injected_lines(table)
    markdown = run("diff", "1", "1", "--db", db).stdout.splitlines()
    shown = f"{root}/{SHOWN_DIR}".replace("]", "\\]")  # Markdown: "]" escaped
    assert f"A = run 1 ({shown})  " in markdown
    assert f"B = run 1 ({shown})" in markdown
    _no_injected_lines("\n".join(markdown))

    from rocroof.report.diff import diff_runs, render_diff
    from rocroof.store import Store

    store = Store(str(db), read_only=True)
    try:
        d = diff_runs(store, 1, 1)
    finally:
        store.close()
    d.notes.append("the runs have different GPU architectures (gfx942\x1b[2J\nFAKE vs sm_90)")
    text = render_diff(d, "table")
    assert "Note: the runs have different GPU architectures (gfx942\\x1b[2J\\x0aFAKE vs sm_90)" in text.splitlines()
    _no_injected_lines(text)


def test_graph_dot_names_are_one_line_and_escaped(hostile_run: tuple[Path, Path]) -> None:
    """Node and tensor names: the escapes kept by DOT (a doubled backslash), no line added to a box."""
    _, db = hostile_run
    out = run("graph", "--db", db, "--run", "1").output
    assert 'label="RMS_NORM+MUL\\nnorm\\\\x1b[2J\\\\x0aFAKENODE\\n' in out
    assert '[label="t\\\\x1b\\\\x0aFAKET"' in out
    _no_injected_lines(out)


def test_fleet_diff_lines_name_runs_on_one_line() -> None:
    """The pairs and unpaired runs are named by their labels: one line each, on stdout and in the CI lines."""
    import pandas as pd

    from rocroof.report.fleet import FleetDiff, regressions, render_fleet_diff

    pairs = pd.DataFrame(
        {
            "pair": ["model=q\x1b[2J\nFAKE"],
            "run_a": [1],
            "run_b": [2],
            "us_per_eval_a": [10.0],
            "us_per_eval_b": [12.0],
            "delta_pct": [20.0],
            "nodes_slower": [1],
            "nodes_faster": [0],
        }
    )
    ops = pd.DataFrame(
        {
            c: pd.Series(dtype=float)
            for c in ("us_a", "us_b", "delta_us", "delta_pct", "slower", "faster", "only_a", "only_b")
        }
    ).assign(pair=pd.Series(dtype=object), op=pd.Series(dtype=object), verdict=pd.Series(dtype=object))
    d = FleetDiff(keys=["model"], pairs=pairs, ops=ops, unpaired_a=["model=r\x1b]0;t\x07\nFAKE"])
    lines, failed = regressions(d, 5)
    assert failed
    assert lines == [
        "warning: 1 run(s) only in A were not compared: model=r\\x1b]0;t\\x07\\x0aFAKE",
        "regression: model=q\\x1b[2J\\x0aFAKE (runs 1 → 2) +20.0% GPU time per graph evaluation, "
        "above --fail-on-regression 5%",
    ]
    for fmt in ("table", "markdown"):
        text = render_fleet_diff(d, fmt, "env=a\x1b\nFAKE", "env=b")
        assert "env=a\\x1b\\x0aFAKE → env=b: 1 pair(s), paired by model" in text
        unpaired = "model=r\\x1b\\]0;t\\x07\\x0aFAKE" if fmt == "markdown" else "model=r\\x1b]0;t\\x07\\x0aFAKE"
        assert f"only in A (not compared): {unpaired}" in text.splitlines()
        _no_injected_lines(text)


def test_runs_line_of_shared_labels_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    for i in (1, 2):
        write_pass(tmp_path / f"cap{i}", 100 + i, kernels=[Kernel(1, f"k{i}", 2, T0 + 1_000, T0 + 2_000)])
        assert run("ingest", tmp_path / f"cap{i}", "--db", db, "--label", "model=x").exit_code == 0
    con = sqlite3.connect(db)
    try:
        con.executemany("INSERT INTO run_label VALUES (?, 'evil', ?)", [(i, "v\x1b[2J\nFAKE") for i in (1, 2)])
        con.commit()
    finally:
        con.close()
    for fmt, tail in (("table", ""), ("markdown", "  ")):
        out = run("runs", "--db", db, "--format", fmt).output
        assert out.splitlines()[0] == f"labels of every run below: model=x, evil=v\\x1b[2J\\x0aFAKE{tail}"
        _no_injected_lines(out)


# ---- CSV: escaped by default, as stored with --raw (as JSON carries it) --------------------------


def _csv_rows(data: bytes) -> list[list[str]]:
    """CSV rows as a reader gets them (bytes: CliRunner's ``output`` turns CRLF into LF)."""
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def test_raw_csv_carries_the_kernel_name_as_stored_like_json(hostile_run: tuple[Path, Path]) -> None:
    """--raw: "text cells exactly as stored"; the ESC used to come out as the text ``\\x1b``, the newline raw."""
    _, db = hostile_run
    doc = json.loads(run("report", "--db", db, "--run", "1", "--by", "kernel", "--format", "json").output)
    assert HOSTILE_KERNEL in {r["kernel_name"] for r in doc["rows"]}
    for by, top in (("kernel", ()), ("dispatch", ()), ("dispatch", ("--top", "500"))):  # streamed and built
        result = run("report", "--db", db, "--run", "1", "--by", by, "--format", "csv", "--raw", *top)
        rows = _csv_rows(result.stdout_bytes)
        names = {r[rows[0].index("kernel_name")] for r in rows[1:]}
        assert HOSTILE_KERNEL in names, (by, top)


def test_csv_without_raw_escapes_controls_but_keeps_newlines(hostile_run: tuple[Path, Path]) -> None:
    _, db = hostile_run
    result = run("report", "--db", db, "--run", "1", "--by", "kernel", "--format", "csv")
    assert b"\x1b" not in result.stdout_bytes
    rows = _csv_rows(result.stdout_bytes)
    assert "void k\\x1b]0;K\\x07\nFAKEK<int>(int)" in {r[1] for r in rows[1:]}  # a reader gets the newline back


def test_raw_csv_to_a_terminal_is_escaped_all_the_same(
    hostile_run: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rocroof.cli.app as app

    _, db = hostile_run
    monkeypatch.setattr(app, "_stdout_is_terminal", lambda: True)
    result = run("report", "--db", db, "--run", "1", "--by", "kernel", "--format", "csv", "--raw")
    assert b"\x1b" not in result.stdout_bytes and b"\x07" not in result.stdout_bytes
    assert "void k\\x1b]0;K\\x07\nFAKEK<int>(int)" in {r[1] for r in _csv_rows(result.stdout_bytes)[1:]}


def test_query_raw_csv_keeps_escape_sequences_and_carriage_returns_in_their_cell(hostile_db: Path) -> None:
    """A CSI (which click strips from text to a pipe) and a CR (which Python's csv writer does not quote) survive."""
    sql = "SELECT 'a' || char(27) || '[31mred' || char(13) || 'x' || char(10) || 'y' AS s, 1 AS n"
    raw = run("query", sql, "--db", hostile_db, "--format", "csv", "--raw")
    assert _csv_rows(raw.stdout_bytes) == [["s", "n"], ["a\x1b[31mred\rx\ny", "1"]]
    assert raw.stdout_bytes == b's,n\r\n"a\x1b[31mred\rx\ny",1\r\n'  # CRLF rows: the CR quoted
    guarded = run("query", sql, "--db", hostile_db, "--format", "csv")
    assert guarded.stdout_bytes == b's,n\n"a\\x1b[31mred\\x0dx\ny",1\n'
    diff_raw = run("diff", "1", "1", "--db", hostile_db, "--format", "csv", "--raw", "--by", "kernel")
    names = {r[0] for r in _csv_rows(diff_raw.stdout_bytes)[1:]}
    assert HOSTILE in names  # the hostile capture's kernel, as stored
