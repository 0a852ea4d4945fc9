"""Reading a capture leaves it as it was: no -wal, -shm or other file appears, no file changes.

SQLite opened ``mode=ro`` on a database in WAL journal mode still makes an empty ``-wal`` and a
``-shm`` index beside it (seen in a trial: every database kept 0-byte -wal/-shm files after each
command). The databases here are WAL-mode copies made by the tests of the recorded fixtures
(Nsight Systems export, RPD trace, rocprof v1 results.db) and a rocpd database the test builds;
the expected dispatch counts are counted by the test with its own SQL on the same files.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.capture.readers import detect, read_capture, sqlite_arrow
from rocroof.cli import cli
from rocroof.fileio import sqlite_connect, sqlite_file

from .conftest import fixture_path, writable_copy
from .rocpd_builder import UUID_A, RocpdBuilder, create_views, rocpd_db, suffix

GFX942 = "gfx942"
#: An old, round mtime (2001-09-09 01:46:40 UTC) set on every capture file: any write shows.
OLD_NS = 1_000_000_000 * 10**9


def _wal(db: Path) -> None:
    """Put ``db`` in WAL journal mode; closing leaves no -wal or -shm (SQLite removes them)."""
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    finally:
        con.close()


def _gunzip(gz: Path, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(gz, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def _count(db: Path, sql: str) -> int:
    con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        (n,) = con.execute(sql).fetchone()
    finally:
        con.close()
    return int(n)


def _rocpd(cap: Path) -> tuple[Path, int]:
    db = cap / "1_results.db"
    with rocpd_db(db) as b:
        _one_gpu_kernel(b, dispatches=3)
    return db, 3


def _one_gpu_kernel(b: RocpdBuilder, dispatches: int) -> None:
    b.add_node_and_process()
    gpu = b.add_agent(name=GFX942)
    k = b.add_kernel_symbol("k", "k()")
    for i in range(1, dispatches + 1):
        b.add_dispatch(dispatch_id=i, kernel_id=k, agent_id=gpu, start=100 * i, end=100 * i + 50, stack_id=i)


def _nsys(cap: Path) -> tuple[Path, int]:
    db = _gunzip(fixture_path("h200-trial", "dense_nsys.sqlite.gz"), cap / "dense_nsys.sqlite")
    return db, _count(db, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")


def _rpd(cap: Path) -> tuple[Path, int]:
    db = _gunzip(fixture_path("rpd", "mytrace.rpd.gz"), cap / "mytrace.rpd")
    # rpd_tracer's GPU ops that run kernels: KernelExecution, and Task (kernels of HIP graphs)
    n = _count(
        db,
        "SELECT COUNT(*) FROM rocpd_op o JOIN rocpd_string t ON t.id = o.opType_id "
        "WHERE t.string IN ('KernelExecution', 'Task')",
    )
    return db, n


def _rocprof_v1(cap: Path) -> tuple[Path, int]:
    writable_copy(fixture_path("rocprof-v1", "mi250x-laplacian-kernel2"), cap)
    with open(cap / "results.csv") as fh:
        rows = sum(1 for line in fh if line.strip()) - 1  # kernel trace rows below the header
    return cap / "results.db", rows


FORMATS: dict[str, Callable[[Path], tuple[Path, int]]] = {
    "rocpd": _rocpd,
    "nsys": _nsys,
    "rpd": _rpd,
    "rocprof-v1": _rocprof_v1,
}


def _capture(tmp_path: Path, fmt: str) -> tuple[Path, Path, int]:
    cap = tmp_path / "capture"
    db, dispatches = FORMATS[fmt](cap)
    _wal(db)
    for f in [cap, *cap.rglob("*")]:
        os.utime(f, ns=(OLD_NS, OLD_NS))
    assert not [p.name for p in cap.rglob("*") if p.name.endswith(("-wal", "-shm", "-journal"))]
    return cap, db, dispatches


def _state(folder: Path) -> dict[str, tuple[int, int]]:
    """Every entry below ``folder`` (itself included) with its size and mtime in ns."""
    out = {}
    for p in [folder, *folder.rglob("*")]:
        st = p.stat()
        out[str(p.relative_to(folder))] = (st.st_size if p.is_file() else 0, st.st_mtime_ns)
    return out


def _dispatches(cap: Path) -> int:
    capture = read_capture(cap)
    return sum(len(p.dispatches) for p in capture.passes if p.kind == "trace") or len(capture.passes[0].dispatches)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_reading_a_wal_mode_capture_changes_nothing_in_its_folder(tmp_path: Path, fmt: str) -> None:
    cap, db, dispatches = _capture(tmp_path, fmt)
    before = _state(cap)
    assert detect(db) == detect(cap)
    assert _dispatches(cap) == dispatches
    read_capture(db)
    assert _state(cap) == before


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_ingest_into_another_folder_changes_nothing_in_the_capture(tmp_path: Path, fmt: str) -> None:
    cap, _, _ = _capture(tmp_path, fmt)
    before = _state(cap)
    (tmp_path / "store").mkdir()
    result = CliRunner().invoke(cli, ["ingest", str(cap), "--db", str(tmp_path / "store" / "results.db")])
    assert result.exit_code == 0, result.output
    assert _state(cap) == before


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_read_only_capture_folder_is_read_and_left_as_it_was(tmp_path: Path, fmt: str) -> None:
    """chmod 555 / 444. Run as root, the modes stop no write: the file list and mtimes say what happened."""
    cap, _, dispatches = _capture(tmp_path, fmt)
    for p in sorted(cap.rglob("*"), key=lambda p: -len(p.parts)):
        p.chmod(0o555 if p.is_dir() else 0o444)
    cap.chmod(0o555)
    before = _state(cap)
    try:
        assert _dispatches(cap) == dispatches
        assert _state(cap) == before
    finally:
        for p in [cap, *cap.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


def _crashed_writer(db: Path, code: str) -> None:
    """Run ``code`` (Python; ``con`` is a connection to ``db``) in a process that dies without closing."""
    prog = f"import os, sqlite3\ncon = sqlite3.connect({str(db)!r})\n{code}\nos._exit(0)\n"
    subprocess.run([sys.executable, "-c", prog], check=True)


def test_commits_still_in_the_wal_are_read_and_no_shm_is_made(tmp_path: Path) -> None:
    """A capture copied while its writer ran: the database and its non-empty -wal, no -shm.

    The rows are only in the -wal: they are read, and no -shm (or anything else) appears.
    """
    writing = tmp_path / "writer" / "1_results.db"
    writing.parent.mkdir()
    con = sqlite3.connect(writing)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA wal_autocheckpoint=0")
        b = RocpdBuilder(con, UUID_A)
        create_views(con, [UUID_A])
        _one_gpu_kernel(b, dispatches=3)
        con.commit()
        cap = tmp_path / "capture"
        cap.mkdir()
        for name in ("1_results.db", "1_results.db-wal"):
            shutil.copyfile(writing.parent / name, cap / name)
    finally:
        con.close()
    assert (cap / "1_results.db-wal").stat().st_size > 0
    before = _state(cap)
    capture = read_capture(cap)
    assert sorted(capture.passes[0].dispatches["dispatch_id"].tolist()) == [1, 2, 3]
    assert [n.code for n in capture.notes if n.severity == "warning"] == ["database-being-written"]
    assert _state(cap) == before


def test_a_write_cut_short_is_rolled_back_in_a_copy_not_read_half_done(tmp_path: Path) -> None:
    """A writer died mid-transaction (hot -journal): the committed rows are read, the capture is not touched."""
    cap = tmp_path / "capture"
    db = cap / "1_results.db"
    with rocpd_db(db) as b:
        _one_gpu_kernel(b, dispatches=2)
    table = f"rocpd_kernel_dispatch{suffix(UUID_A)}"
    # cache_size=1 makes SQLite write the changed pages into the database before the commit
    _crashed_writer(
        db,
        "con.execute('PRAGMA cache_size=1')\ncon.execute('BEGIN')\n"
        f"con.execute('UPDATE \"{table}\" SET start = start + 1000000, end = end + 1000000')\n"
        'con.execute("CREATE TABLE filler (x)")\n'
        "con.executemany('INSERT INTO filler VALUES (?)', [(b'\\x00' * 4000,) for _ in range(200)])",
    )
    assert (cap / "1_results.db-journal").stat().st_size > 0
    before = _state(cap)
    d = read_capture(cap).passes[0].dispatches
    assert sorted(zip(d["start_ns"].tolist(), d["end_ns"].tolist(), strict=True)) == [(100, 150), (200, 250)]
    assert _state(cap) == before


def test_a_file_name_with_hash_and_question_mark_is_the_file_it_names(tmp_path: Path) -> None:
    """``#`` and ``?`` are percent-encoded in the URI: an unencoded ``#`` made SQLite open (and create) ``run``."""
    cap = tmp_path / "capture"
    db = cap / "run#1?_results.db"
    with rocpd_db(db) as b:
        _one_gpu_kernel(b, dispatches=2)
    _wal(db)
    before = _state(cap)
    assert len(read_capture(cap).passes[0].dispatches) == 2
    assert _state(cap) == before


def test_adbc_reads_through_the_immutable_uri_and_writes_nothing(tmp_path: Path) -> None:
    """ADBC's SQLite driver takes the ``file:`` URI with ``immutable=1`` (values written by the test)."""
    pytest.importorskip("adbc_driver_sqlite")
    cap = tmp_path / "capture"
    cap.mkdir()
    db = cap / "a b#c.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE t (a INTEGER)")
    con.executemany("INSERT INTO t VALUES (?)", [(7,), (11,)])
    con.commit()
    con.close()
    before = _state(cap)
    with sqlite_file(db) as plain:
        assert plain == db
        conn = sqlite_connect(plain)
        try:
            cols = sqlite_arrow.arrow_columns(conn, "SELECT a FROM t ORDER BY a")
        finally:
            conn.close()
    assert cols is not None
    assert cols["a"].to_list() == [7, 11]
    assert _state(cap) == before
