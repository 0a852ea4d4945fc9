"""Inputs that would fill memory or disk, nest without end, or hide a cut: bounded, refused, or said.

Each test plants the case (a decompression bomb, a endless line, a deeply nested document, a file
cut inside its last field, a gunzipped copy of a stored capture) and checks the one-line outcome.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import rocroof.fileio as fileio
from rocroof.cli import cli
from rocroof.errors import ParseError

from .rocprof_csv import COUNTERS_70, KERNEL_TRACE_70, T0, Kernel, write_csv


def run(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def one_line_error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


@pytest.fixture
def small_gzip_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Check the ratio from the first MiB, so that a test bomb can be small and quick."""
    monkeypatch.setattr(fileio, "MIN_GZIP_CHECK_BYTES", 1 << 20)


def test_a_gzip_bomb_is_refused_once_it_outgrows_its_ratio(tmp_path: Path, small_gzip_bound: None) -> None:
    bomb = tmp_path / "cap" / "1_kernel_trace.csv.gz"
    bomb.parent.mkdir()
    body = (",".join(KERNEL_TRACE_70) + "\n").encode() + b"\n" * (40 << 20)  # 40 MiB of empty lines
    bomb.write_bytes(gzip.compress(body, 9))
    assert bomb.stat().st_size * fileio.MAX_GZIP_RATIO < len(body)  # beyond the ratio: the case under test
    message = one_line_error(run("ingest", bomb.parent, "--db", tmp_path / "r.db"))
    assert "1_kernel_trace.csv.gz: decompresses to more than 100x its size" in message
    assert not (tmp_path / "r.db").exists()


def test_a_gzip_within_its_ratio_reads_whole(tmp_path: Path, small_gzip_bound: None) -> None:
    # real profiler text compresses 3-20x: 2 MiB of varied rows is read to the end
    rows = "".join(f"{i},{i * 7919 % 100003},kernel_{i % 97}\n" for i in range(120_000)).encode()
    path = tmp_path / "plain.csv.gz"
    path.write_bytes(gzip.compress(b"a,b,c\n" + rows))
    with fileio.open_binary(path) as fh:
        assert fh.read() == b"a,b,c\n" + rows


def test_a_gzipped_sqlite_bomb_is_refused_before_it_fills_the_disk(tmp_path: Path, small_gzip_bound: None) -> None:
    bomb = tmp_path / "trace.db.gz"
    bomb.write_bytes(gzip.compress(b"SQLite format 3\0" + b"\0" * (40 << 20), 9))
    with (
        pytest.raises(ParseError, match=r"trace.db.gz: decompresses to more than 100x its size"),
        fileio.sqlite_file(bomb),
    ):
        pass


def test_a_line_longer_than_the_bound_names_its_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fileio, "MAX_LINE_BYTES", 10_000)
    path = tmp_path / "long.csv"
    path.write_bytes(b"a,b\n1,2\n3," + b"x" * 50_000 + b"\n5,6\n")
    with pytest.raises(ParseError) as err:
        list(fileio.read_csv_chunks(path))
    assert str(err.value) == f"{path}:3: a line longer than 10,000 bytes (damaged, or not a CSV file)"


def test_deeply_nested_documents_are_one_line_errors(tmp_path: Path) -> None:
    deep = tmp_path / "peaks.yaml"
    deep.write_text("gpus: " + "[" * 20_000 + "]" * 20_000 + "\n")
    example = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"
    result = CliRunner().invoke(
        cli, ["ingest", str(example), "--db", str(tmp_path / "r.db")], env={"ROCROOF_PEAKS": str(deep)}
    )
    assert one_line_error(result) == f"Error: {deep}: nested too deeply (a peaks table is a few levels deep)"
    cap = tmp_path / "cap"
    shutil.copytree(example, cap)
    (cap / "rocroof-collect.json").write_text('{"a":' * 20_000 + "1" + "}" * 20_000)
    assert "rocroof-collect.json: invalid JSON" in one_line_error(run("scrub", cap, "--out", tmp_path / "out"))
    assert "rocroof-collect.json: invalid JSON: nested too deeply" in one_line_error(
        run("ingest", cap, "--db", tmp_path / "r.db")
    )


def test_scrub_reads_a_csv_field_over_128_kib_and_still_redacts_it(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    k = Kernel(1, "k" * 200_000 + " ping alice@example.org", 2, T0, T0 + 100)
    write_csv(cap / "1_kernel_trace.csv", KERNEL_TRACE_70, [k.row70()])
    result = run("scrub", cap, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out" / "1_kernel_trace.csv").read_text()
    assert "alice" not in text and "example.org" not in text
    assert "k" * 200_000 in text


def _cut_counter_capture(tmp_path: Path) -> Path:
    """A rocprofv3 pass whose counter_collection.csv was cut inside the last field of its last row."""
    cap = tmp_path / "cap"
    kernels = [Kernel(i, f"k{i}", 2 * i, T0 + 1_000 * i, T0 + 1_000 * i + 500) for i in (1, 2, 3)]
    write_csv(cap / "7_kernel_trace.csv", KERNEL_TRACE_70, [k.row70() for k in kernels])
    rows = [r for k in kernels for r in k.counter_rows(7, {"TCC_EA0_RDREQ_sum": 123_456.0})]
    buf = io.StringIO()
    w = csv.DictWriter(buf, COUNTERS_70, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    text = buf.getvalue()
    (cap / "7_counter_collection.csv").write_text(text[:-6])  # "...,<End_Timestamp>\n" loses 5 digits and the newline
    return cap


def test_a_counter_file_cut_inside_its_last_field_is_said(tmp_path: Path) -> None:
    cap = _cut_counter_capture(tmp_path)
    db = tmp_path / "r.db"
    result = run("ingest", cap, "--db", db, "--arch", "gfx942")
    assert result.exit_code == 0, result.output
    assert "7_counter_collection.csv: the file ends inside its last row" in result.output
    notes = run("runs", "--db", db, "--notes", "latest", "--format", "json")
    cut = [n for n in json.loads(notes.output) if n["code"] == "file-cut"]
    assert len(cut) == 1 and cut[0]["severity"] == "warning"


def test_a_whole_file_gets_no_cut_note(tmp_path: Path) -> None:
    cap = _cut_counter_capture(tmp_path)
    path = cap / "7_counter_collection.csv"
    assert fileio.ends_mid_row(path)
    path.write_text(path.read_text() + "99999\n")
    assert not fileio.ends_mid_row(path)
    gz = cap / "x.csv.gz"
    gz.write_bytes(gzip.compress(b"a,b\n1,2"))
    assert fileio.ends_mid_row(gz)
    gz.write_bytes(gzip.compress(b"a,b\n1,2\n"))
    assert not fileio.ends_mid_row(gz)
    empty = cap / "empty.csv"
    empty.write_bytes(b"")
    assert not fileio.ends_mid_row(empty)


def test_a_gunzipped_copy_of_a_stored_capture_is_the_same_capture(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense-prefill"
    plain = tmp_path / "plain"
    shutil.copytree(example, plain)
    gzipped = list(plain.rglob("*.gz"))
    assert gzipped, "the example should hold gzip files"
    for f in gzipped:
        f.with_suffix("").write_bytes(gzip.decompress(f.read_bytes()))
        f.unlink()
    db = tmp_path / "r.db"
    assert run("ingest", example, "--db", db).exit_code == 0
    message = one_line_error(run("ingest", plain, "--db", db))
    assert message == (
        f"Error: {plain}: this capture is already stored as run 1 (same content); use --replace to re-ingest it"
    )
