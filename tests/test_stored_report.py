"""The op report stored with a run (``stored_report``) reads back as the report the tables give.

``rocroof report`` (table, Markdown) of a run ingested with its stored report reads it with
``sqlite3`` alone (rocroof.report.quick): no pandas, no SQLAlchemy. The expected text is always
the full path's (``build_report`` over the run's tables, the roofline of every invocation
recomputed), rendered the same way, so the two are compared character for character over
runs of every kind: measured, sampled, modelled only, fused groups, MoE, no op metadata, AMD.
Every case where the fast path cannot be sure (labels, another grouping, another rocroof
version, a pending migration, a URL, no stored report) must fall back to the full path.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof import __version__
from rocroof.capture.readers import read_capture
from rocroof.cli import cli
from rocroof.ingest.pipeline import build_run
from rocroof.report.quick import stored_report
from rocroof.report.render import render_text
from rocroof.report.tables import build_report, render, stored_reports
from rocroof.store import Store

from .conftest import REPO, fixture_path
from .test_cli_startup import PROBE

EXAMPLES = {
    "measured-prefill": REPO / "examples" / "h200" / "dense-prefill",
    "moe-prefill": REPO / "examples" / "h200" / "moe-prefill",
    "sampled-decode": REPO / "examples" / "h200-sampled" / "dense28-decode-sample",
    "sampled-moe": REPO / "examples" / "h200-sampled" / "moe24-decode-sample",
    "ops-decode": REPO / "examples" / "h200-counters" / "dense28-decode-ops",
    "fusion-off": REPO / "examples" / "h200-sweep" / "moe-tiny-decode-no-fusion-r1",
}


def _write(capture: Path, db: Path) -> int:
    return Store(db).write_run(build_run(read_capture(capture)), reports=stored_reports)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int]]:
    tmp = tmp_path_factory.mktemp("stored")
    out = {}
    for name, capture in EXAMPLES.items():
        db = tmp / f"{name}.db"
        out[name] = (db, _write(capture, db))
    return out


def _same_everywhere(db: Path, rid: int) -> None:
    """Table at several widths and Markdown (with --top, without, every column) as the tables give it."""
    full = Store(db, read_only=True)
    for width in (60, 100, 160, 240):
        quick = stored_report(str(db), str(rid), "op")
        assert quick is not None
        assert render_text(quick, "table", width) == render(build_report(full, rid, by="op"), "table", width)
    for top in (None, 3, 100):
        quick = stored_report(str(db), str(rid), "op", top)
        assert quick is not None
        expected = build_report(full, rid, by="op", top=top)
        assert quick.total_rows == expected.total_rows and len(quick.rows) == len(expected.rows)
        for all_columns in (False, True):
            got = render_text(quick, "markdown", all_columns=all_columns)
            assert got == render(expected, "markdown", all_columns=all_columns)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_the_stored_report_renders_as_the_tables_do(stored: dict[str, tuple[Path, int]], name: str) -> None:
    db, rid = stored[name]
    _same_everywhere(db, rid)


@pytest.mark.parametrize(
    "parts",
    [
        ("rocprof-compute", "vcopy", "MI300X_A1"),  # AMD, no op metadata, no model
        ("rocprofv3-docs",),  # rocprofv3's documented CSVs: kernels without ggml ranges
    ],
    ids=lambda p: "/".join(p),
)
def test_recorded_amd_captures_too(parts: tuple[str, ...], tmp_path: Path) -> None:
    capture = fixture_path(*parts)
    db = tmp_path / "amd.db"
    _same_everywhere(db, _write(capture, db))


def test_the_report_command_needs_neither_pandas_nor_sqlalchemy(stored: dict[str, tuple[Path, int]]) -> None:
    db, rid = stored["sampled-moe"]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "report", "--db", str(db), "--run", str(rid)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "160"},
    )
    assert proc.returncode == 0, proc.stderr
    *shown, last = proc.stdout.rstrip("\n").split("\n")
    result = json.loads(last)
    assert result["code"] in (0, None)
    assert not {"pandas", "sqlalchemy", "numpy"} & set(result["heavy"]), result
    expected = render(build_report(Store(db, read_only=True), rid, by="op"), "table")
    assert "\n".join(shown).rstrip("\n") == expected.rstrip("\n")


def test_what_the_stored_report_holds_is_the_reports_rows(stored: dict[str, tuple[Path, int]]) -> None:
    """Row for row: the op names, invocations and time of the stored rows are the tables' (sums by SQL)."""
    db, rid = stored["fusion-off"]
    with sqlite3.connect(db) as conn:
        doc = json.loads(
            conn.execute("SELECT document FROM stored_report WHERE run_id = ? AND grouping = 'op'", (rid,)).fetchone()[
                0
            ]
        )
        by_sql = {
            op: (n, ns)
            for op, n, ns in conn.execute(
                "SELECT op, COUNT(DISTINCT invocation), SUM(duration_ns) FROM dispatch_dram WHERE run_id = ? "
                "GROUP BY op",
                (rid,),
            )
        }
    rows = [dict(zip(doc["columns"], r, strict=True)) for r in doc["rows"]]
    assert {r["op"]: (r["invocations"], r["duration_ns"]) for r in rows} == by_sql
    times = [r["duration_ns"] for r in rows]
    assert times == sorted(times, reverse=True)  # report order: longest first
    assert doc["total_rows"] == len(rows)


def test_every_uncertain_case_falls_back(stored: dict[str, tuple[Path, int]], tmp_path: Path) -> None:
    db, rid = stored["measured-prefill"]
    assert stored_report(str(db), "latest", "op") is not None
    assert stored_report(str(db), f" {rid} ", "op") is not None
    assert stored_report(str(db), "model=x", "op") is None  # labels of no run: the full path says so
    assert stored_report(str(db), "model", "op") is None  # not a selector
    assert stored_report(str(db), str(rid), "kernel") is None  # not stored
    assert stored_report(str(db), "999", "op") is None  # no such run: the full path says so
    assert stored_report(f"sqlite:///{db}", str(rid), "op") is None
    assert stored_report("postgresql://u@h/db", str(rid), "op") is None
    assert stored_report(str(tmp_path / "missing.db"), "latest", "op") is None
    assert stored_report(str(tmp_path), "latest", "op") is None  # a folder

    other = tmp_path / "other.db"
    other.write_bytes(db.read_bytes())
    with sqlite3.connect(other) as conn:  # built by another rocroof: the tables decide
        conn.execute("UPDATE stored_report SET rocroof_version = '0.0.1'")
    assert stored_report(str(other), str(rid), "op") is None
    with sqlite3.connect(other) as conn:
        conn.execute("UPDATE stored_report SET rocroof_version = ?", (__version__,))
        conn.execute("DELETE FROM rocroof_migration WHERE name = '0009_stored_report'")
    assert stored_report(str(other), str(rid), "op") is None  # a schema this rocroof does not write

    bare = tmp_path / "bare.db"
    bare_rid = Store(bare).write_run(build_run(read_capture(EXAMPLES["measured-prefill"])))  # no reports=
    assert stored_report(str(bare), str(bare_rid), "op") is None
    runner = CliRunner()
    a = runner.invoke(cli, ["report", "--db", str(bare), "--run", str(bare_rid)])
    b = runner.invoke(cli, ["report", "--db", str(db), "--run", str(rid)])
    assert a.exit_code == 0 and b.exit_code == 0
    assert a.output.split("\n", 1)[1] == b.output.split("\n", 1)[1]  # all but the run line (its path)
    missing = runner.invoke(cli, ["report", "--db", str(db), "--run", "999"])
    assert missing.exit_code != 0 and "no run 999" in missing.output


def test_a_failing_report_leaves_nothing_stored(tmp_path: Path) -> None:
    """The reports are built in the run's transaction: if building them fails, the run is not stored."""
    db = tmp_path / "r.db"

    def broken(store: Store, run_id: int) -> dict[str, str]:
        raise RuntimeError("report failed")

    with pytest.raises(RuntimeError, match="report failed"):
        Store(db).write_run(build_run(read_capture(EXAMPLES["measured-prefill"])), reports=broken)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM run").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM dispatch_record").fetchone()[0] == 0


def test_ingest_replace_and_merge_keep_one_stored_report_per_run(tmp_path: Path) -> None:
    runner = CliRunner()
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    capture = str(EXAMPLES["sampled-decode"])
    for args in (["ingest", capture, "--db", str(a)], ["ingest", capture, "--db", str(a), "--replace"]):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["merge", str(a), "--into", str(b)])
    assert result.exit_code == 0, result.output
    for db in (a, b):
        with sqlite3.connect(db) as conn:
            runs = [r for (r,) in conn.execute("SELECT run_id FROM run")]
            reports = [r for (r,) in conn.execute("SELECT run_id FROM stored_report")]
        assert len(runs) == 1 and reports == runs
        _same_everywhere(db, runs[0])


@pytest.mark.parametrize("name", ["schema1-81fc4a9", "schema7-42e22b0"])
def test_db_upgrade_stores_the_reports_of_older_runs(name: str, tmp_path: Path) -> None:
    """Runs of a database written by an older rocroof get their stored report from `db upgrade`."""
    import gzip

    db = tmp_path / "old.db"
    db.write_bytes(gzip.decompress((REPO / "tests" / "data" / "old-databases" / f"{name}.db.gz").read_bytes()))
    runner = CliRunner()
    result = runner.invoke(cli, ["db", "upgrade", "--db", str(db)])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(db) as conn:
        runs = [r for (r,) in conn.execute("SELECT run_id FROM run ORDER BY run_id")]
        reports = [r for (r,) in conn.execute("SELECT run_id FROM stored_report ORDER BY run_id")]
    assert runs and reports == runs
    assert f"stored the op report of {len(runs)} run(s)" in result.output
    for rid in runs:
        _same_everywhere(db, rid)
    again = runner.invoke(cli, ["db", "upgrade", "--db", str(db)])
    assert again.exit_code == 0 and "stored the op report" not in again.output  # nothing left to do


def test_runs_picked_by_labels_read_their_stored_report(tmp_path: Path) -> None:
    """--run model=x (and latest:..., * patterns) picks the run as the store does; ambiguity goes the full way."""
    db = tmp_path / "l.db"
    store = Store(db)
    ids = {}
    for name, labels in (
        ("measured-prefill", {"model": "dense", "case": "prefill"}),
        ("moe-prefill", {"model": "moe", "case": "prefill"}),
        ("sampled-decode", {"model": "dense", "case": "decode"}),
    ):
        ids[name] = store.write_run(build_run(read_capture(EXAMPLES[name])), labels=labels, reports=stored_reports)
    resolver = Store(db, read_only=True)
    for spec in ("model=moe", "model=dense,case=decode", "case=pre*,model=d*", "latest:model=dense", "latest:case=*"):
        quick = stored_report(str(db), spec, "op")
        assert quick is not None, spec
        rid = resolver.resolve_run(spec)
        assert quick.run["run_id"] == rid
        assert render_text(quick, "table", 160) == render(build_report(resolver, rid, by="op"), "table", 160)
    for spec in ("model=dense", "case=*", "model=gpt", "model=dense,model=moe", "=x"):
        assert stored_report(str(db), spec, "op") is None, spec  # several, none or a bad selector
    runner = CliRunner()
    several = runner.invoke(cli, ["report", "--db", str(db), "--run", "model=dense"])
    assert several.exit_code != 0 and "match runs" in several.output


#: Hand edits of a stored document that still parse as JSON: each must give the tables' report, never a traceback.
DAMAGE = [
    "json_replace(document, '$.rows[0][3]', 'abc')",  # a time that is text
    "json_replace(document, '$.rows[0][1]', json('null'))",  # invocations unknown
    "json_replace(document, '$.rows[0][1]', 'many')",
    "json_replace(document, '$.rows[0]', json('{\"op\": 1}'))",  # a row that is an object
    "json_replace(document, '$.rows[0]', json('[1]'))",  # a short row
    "json_replace(document, '$.rows', 'rows')",
    "json_replace(document, '$.total_rows', 1e300)",
    'replace(document, \'"total_rows":\', \'"total_rows":1e999,"x":\')',  # Infinity
    'replace(document, \'"fused":[\', \'"fused":[["A","A+B",1e999],\')',
    "replace(document, '\"rows\":[[', '\"rows\":[[1' || printf('%.*c', 400, '0') || ',')",  # 10^400
    "printf('%.*c%.*c', 50000, '[', 50000, ']')",  # nested past Python's recursion limit
    "'{\"columns\": 5}'",
    "'not json'",
]


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_stored_document_gives_the_tables_report(
    stored: dict[str, tuple[Path, int]], tmp_path: Path, damage: str
) -> None:
    db, rid = stored["sampled-decode"]
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(db.read_bytes())
    with sqlite3.connect(damaged) as conn:
        conn.execute(f"UPDATE stored_report SET document = {damage}")
    runner = CliRunner()
    for args in ([], ["--format", "markdown"]):
        result = runner.invoke(cli, ["report", "--db", str(damaged), "--run", str(rid), *args])
        assert result.exit_code == 0 and result.exception is None, result.output
        expected = render(
            build_report(Store(db, read_only=True), rid, by="op", top=100 if args else None),
            "markdown" if args else "table",
        )
        assert result.output.split("\n", 1)[1] == expected.split("\n", 1)[1]  # all but the path in the first line


def test_run_specs_with_spaces_resolve_alike_on_both_paths(stored: dict[str, tuple[Path, int]]) -> None:
    db, rid = stored["fusion-off"]
    for spec in (" latest", "latest ", "\tlatest", f" {rid}"):
        assert Store(db, read_only=True).resolve_run(spec) == rid
        quick = stored_report(str(db), spec, "op")
        assert quick is not None and quick.run["run_id"] == rid


def test_odd_file_names_and_read_only_folders(
    stored: dict[str, tuple[Path, int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'?', '#' and '%' in a database's name are part of the name on both paths; a read-only folder reads immutable."""
    db, rid = stored["measured-prefill"]
    runner = CliRunner()
    for name in ("a?mode=rwc.db", "b#frag.db", "c%20d.db"):
        odd = tmp_path / name
        odd.write_bytes(db.read_bytes())
        assert stored_report(str(odd), str(rid), "op") is not None
        result = runner.invoke(cli, ["report", "--db", str(odd), "--run", str(rid), "--by", "kernel"])
        assert result.exit_code == 0, result.output
    assert not (tmp_path / "b").exists()  # the fragment is not a file of its own
    import rocroof.dbfile

    monkeypatch.setattr(rocroof.dbfile.os, "access", lambda path, mode: False)  # as a read-only mount reads
    assert rocroof.dbfile.read_only_uri(db).endswith("?mode=ro&immutable=1")
    assert stored_report(str(db), str(rid), "op") is not None


def test_a_merged_run_reads_its_own_run_id(tmp_path: Path) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    _write(EXAMPLES["measured-prefill"], b)  # the target holds a run already: the copy gets id 2
    _write(EXAMPLES["sampled-decode"], a)
    result = CliRunner().invoke(cli, ["merge", str(a), "--into", str(b)])
    assert result.exit_code == 0, result.output
    quick = stored_report(str(b), "2", "op")
    assert quick is not None and {r["run_id"] for r in quick.rows.rows} == {2}
