"""rocroof.open(db): the Python API for notebooks, and the README's example of it run as written."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sqlite3
from pathlib import Path

import pytest

import rocroof
from rocroof.errors import InputError
from rocroof.store import Store

from .conftest import REPO
from .test_store import _frames


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding demo/rocroof-demo.db as `make demo` writes it (examples/h200 ingested)."""
    from click.testing import CliRunner

    from rocroof.cli import cli

    root = tmp_path_factory.mktemp("demo")
    db = root / "demo" / "rocroof-demo.db"
    db.parent.mkdir()
    result = CliRunner().invoke(cli, ["ingest", str(REPO / "examples" / "h200"), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return root


def test_the_readme_example_runs_as_written(demo_dir: Path) -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## From Python (notebooks)", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert block is not None
    out = io.StringIO()
    cwd = os.getcwd()
    try:
        os.chdir(demo_dir)
        with contextlib.redirect_stdout(out):
            exec(compile(block.group(1), "README.md", "exec"), {})  # noqa: S102 - the README's own code
    finally:
        os.chdir(cwd)
    text = out.getvalue()
    assert "MUL_MAT" in text and "dense-prefill" in text


def test_dataframes_hold_the_stored_values(demo_dir: Path) -> None:
    """Sums of the API's frames equal sums taken from the database with sqlite3 (no rocroof code)."""
    path = demo_dir / "demo" / "rocroof-demo.db"
    con = sqlite3.connect(path)
    with rocroof.open(path) as db:
        runs = db.runs()
        assert list(runs["run_id"]) == [r[0] for r in con.execute("SELECT run_id FROM run ORDER BY run_id")]
        for rid in runs["run_id"]:
            (total_ns, n) = con.execute(
                "SELECT SUM(duration_ns), COUNT(*) FROM dispatch_record "
                "WHERE run_id = ? AND timing_dispatch_index = dispatch_index",
                (int(rid),),
            ).fetchone()
            ops = db.ops(int(rid))
            assert int(ops["duration_ns"].sum()) == total_ns and int(ops["dispatches"].sum()) == n
            assert int(db.kernels(int(rid))["duration_ns"].sum()) == total_ns
            assert len(db.dispatches(int(rid))) == n
            n_ops = con.execute("SELECT COUNT(*) FROM op_invocation WHERE run_id = ?", (int(rid),)).fetchone()[0]
            assert len(db.invocations(int(rid))) == n_ops
        roof = db.roofline("latest")
        assert {"op", "bound", "pct_of_ceiling", "time_at_roof_ns"} <= set(roof.columns)
        assert db.run_id("latest") == int(runs["run_id"].max())
        d = db.diff(1, 1)  # a run against itself: every op matched, no change, and said so
        assert any("same run" in note for note in d.notes)
        assert set(d.by_node["verdict"]) <= {"noise", "same"} or (d.by_node["delta_us"].abs() < 1e-9).all()
        with pytest.raises(InputError, match="no run 99"):
            db.ops(99)
    con.close()


def test_runs_are_selected_by_label(tmp_path: Path) -> None:
    store = Store(tmp_path / "l.db")
    for i, model in enumerate(["dense", "moe-a", "moe-b"]):
        store.write_run(_frames(sha=str(i) * 64), labels={"model": model})
    store.close()
    with rocroof.open(tmp_path / "l.db") as db:
        assert list(db.runs(model="moe*")["run_id"]) == [2, 3]
        assert db.runs(model="moe-a")["labels"].iloc[0] == {"model": "moe-a"}
        assert db.run_id("model=dense") == 1 and db.run_id("latest:model=moe*") == 3
        assert len(db.ops("model=moe-b")) > 0


def test_import_rocroof_stays_light() -> None:
    import subprocess
    import sys

    code = "import sys, rocroof; print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'sqlalchemy'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_closed_database_answers_nothing(tmp_path: Path) -> None:
    Store(tmp_path / "c.db").write_run(_frames())
    db = rocroof.open(tmp_path / "c.db")
    assert len(db.runs()) == 1
    db.close()
    for call in (db.runs, lambda: db.ops(1), lambda: db.query("SELECT 1")):
        with pytest.raises(InputError, match="was closed"):
            call()
