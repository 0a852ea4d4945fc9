"""``rocroof merge``: every run of several databases into one, new ids, known content skipped, versions checked.

Merging into PostgreSQL (and back) is in test_postgres.py; here the databases are SQLite files.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from rocroof.capture.readers import read_capture
from rocroof.cli import cli
from rocroof.errors import InputError, SchemaError
from rocroof.ingest.pipeline import RunFrames, build_run
from rocroof.store import Store
from rocroof.store.merge import merge

from .conftest import fixture_path
from .store_rows import row_counts, table_rows
from .test_store import _frames


def _db(path: Path, runs: list[tuple[RunFrames, dict[str, str]]]) -> str:
    store = Store(path)
    for frames, labels in runs:
        store.write_run(frames, labels=labels)
    store.close()
    return str(path)


def _sql(db: str, *statements: str) -> None:
    conn = sqlite3.connect(db)
    with conn:
        for sql in statements:
            conn.execute(sql)
    conn.close()


@pytest.fixture
def two_dbs(tmp_path: Path) -> tuple[str, str]:
    """a.db: hand-made runs 1 and 2; b.db: the vcopy workload, then a copy of a.db's run 2 (same content)."""
    vcopy = fixture_path("rocprof-compute", "vcopy", "MI300X_A1_rocpd")
    a = _db(tmp_path / "a.db", [(_frames(sha="1" * 64), {"who": "alice"}), (_frames(sha="2" * 64), {"who": "alice"})])
    b = _db(tmp_path / "b.db", [(build_run(read_capture(vcopy)), {"who": "bob"}), (_frames(sha="2" * 64), {})])
    return a, b


def test_merge_copies_every_run_with_all_its_rows(two_dbs: tuple[str, str], tmp_path: Path) -> None:
    a, b = two_dbs
    target = str(tmp_path / "team.db")
    _db(Path(target), [(_frames(sha="0" * 64), {})])  # the target holds a run already: copies follow it
    seen = []
    done = merge([a, b], target, on_run=seen.append)
    assert seen == done
    assert [(r.source, r.source_run_id, r.run_id, r.existing_run_id) for r in done] == [
        (a, 1, 2, None),
        (a, 2, 3, None),
        (b, 1, 4, None),
        (b, 2, None, 3),  # a.db's run 2 came first
    ]
    assert done[3].skipped and done[3].rows == 0 and not done[0].skipped
    for source, old, new in ((a, 1, 2), (a, 2, 3), (b, 1, 4)):
        copied = table_rows(target, new)
        for name, rows in table_rows(source, old).items():
            pd.testing.assert_frame_equal(rows, copied[name], check_exact=True, obj=f"{name} of {source} run {old}")
    # the vcopy workload: thousands of rows (counters stored 16 to a row)
    assert done[2].rows == sum(len(df) for name, df in table_rows(b, 1).items() if name != "run") > 5000
    ro = Store(target, read_only=True)
    labels = ro.query("SELECT run_id, value FROM run_label ORDER BY run_id")
    assert labels.values.tolist() == [[2, "alice"], [3, "alice"], [4, "bob"]]
    # the sources are read, never written
    assert row_counts(a)["run"] == 2 and row_counts(b)["run"] == 2


def test_merging_again_copies_nothing_and_a_database_is_not_merged_into_itself(
    two_dbs: tuple[str, str], tmp_path: Path
) -> None:
    a, b = two_dbs
    target = str(tmp_path / "team.db")
    merge([a, b], target)
    before = row_counts(target)
    again = merge([b, a], target)
    assert all(r.skipped for r in again) and [r.existing_run_id for r in again] == [3, 2, 1, 2]
    assert row_counts(target) == before
    with pytest.raises(InputError, match="is also the target"):
        merge([a, target], target)
    with pytest.raises(InputError, match="is also the target"):
        merge([f"sqlite:///{target}"], target)
    assert row_counts(target) == before


def test_runs_without_a_content_hash_are_always_copied(tmp_path: Path) -> None:
    a = _db(tmp_path / "a.db", [(_frames(sha=None), {})])
    target = str(tmp_path / "t.db")
    assert [r.run_id for r in merge([a, a], target)] == [1, 2]  # nothing tells a duplicate apart


@pytest.mark.parametrize("which", ["source", "target"])
def test_an_out_of_date_schema_asks_for_db_upgrade_and_nothing_is_copied(
    two_dbs: tuple[str, str], tmp_path: Path, which: str
) -> None:
    a, b = two_dbs
    target = _db(tmp_path / "team.db", [])
    Store(target).upgrade()
    old = b if which == "source" else target
    _sql(old, "DELETE FROM rocroof_migration WHERE name = '0002_model'")
    before = row_counts(target)
    with pytest.raises(SchemaError, match=rf"out of date \(1 pending.*'rocroof db upgrade --db {old}'"):
        merge([a, b], target)
    assert row_counts(target) == before  # not even a.db's runs, checked before b.db
    Store(old).upgrade()
    assert len(merge([a, b], target)) == 4


def test_a_newer_or_foreign_database_is_refused_before_anything_is_written(
    two_dbs: tuple[str, str], tmp_path: Path
) -> None:
    a, b = two_dbs
    _sql(b, "INSERT INTO rocroof_migration VALUES ('0999_future', '2030-01-01T00:00:00+00:00')")
    target = tmp_path / "new.db"
    with pytest.raises(SchemaError, match="newer rocroof"):
        merge([a, b], target)
    assert not target.exists()  # a new target is created only once every source passed
    foreign = tmp_path / "other.db"
    _sql(str(foreign), "CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    digest = hashlib.sha256(foreign.read_bytes()).hexdigest()
    with pytest.raises(SchemaError, match="not a rocroof database"):
        merge([a], foreign)
    with pytest.raises(SchemaError, match="not a rocroof database"):
        merge([str(foreign)], tmp_path / "t.db")
    assert hashlib.sha256(foreign.read_bytes()).hexdigest() == digest
    with pytest.raises(InputError, match="no such database"):
        merge([str(tmp_path / "absent.db")], tmp_path / "t.db")


def test_merge_on_the_command_line(two_dbs: tuple[str, str], tmp_path: Path) -> None:
    a, b = two_dbs
    target = str(tmp_path / "team.db")
    result = CliRunner().invoke(cli, ["merge", a, b, "--into", target])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # 23 rows: 1 label, 1 note, 1 setting, 2 passes, 3 op invocations, 5 dispatches, 4 traffic rows, 3 counters,
    # 3 op_total rows (MUL_MAT, ADD and the unattributed dispatch)
    assert lines[0] == f"Copied run 1 of {a} (/captures/hand-made) as run 1 (23 rows)"
    assert lines[3] == f"Skipped run 2 of {b} (/captures/hand-made): already stored as run 2 (same content)"
    assert lines[-1] == f"Merged 3 run(s) into {target} (run ids 1–3); skipped 1 already there."
    again = CliRunner().invoke(cli, ["merge", a, "--into", target])
    assert again.output.splitlines()[-1] == f"Merged 0 run(s) into {target}; skipped 2 already there."
    for args, words in (
        (["merge", a], "Missing option '--into'"),
        (["merge", "--into", target], "Missing argument 'SOURCE...'"),
        (["merge", a, "--into", a], "is also the target"),
        (["merge", str(tmp_path / "nope.db"), "--into", target], "no such database"),
    ):
        bad = CliRunner().invoke(cli, args)
        assert bad.exit_code != 0 and words in bad.output, (args, bad.output)
    assert "rocroof merge alice.db bob.db --into team.db" in CliRunner().invoke(cli, ["merge", "--help"]).output
