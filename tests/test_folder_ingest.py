"""``rocroof ingest FOLDER``: which captures a folder holds, each stored as a run of its own.

The rule (``rocroof.capture.readers.find_captures``): a folder with the ``rocroof collect``
manifest, a rocprofiler-compute workload, or a folder with counter-pass sub-folders (rocprofv3's
``pmc_<n>/`` and ``pass_<n>/``) is one capture; in any other folder each sub-folder with profiler
output is a capture (or a folder of them) and the folder's own files one per profiler. Expected
run and dispatch counts come from what the tests write, or from the inputs read without rocroof.
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rocroof.capture.readers import find_captures, read_capture
from rocroof.cli import cli
from rocroof.errors import InputError
from rocroof.store import Store

from .conftest import REPO
from .rocprof_csv import T0, Kernel, write_pass
from .rpd_files import Call, write_rpd
from .test_rocpd import LAUNCHES, _write_llama_pass

H200 = REPO / "examples" / "h200"


def _ingest(*args: Any) -> Result:
    return CliRunner().invoke(cli, ["ingest", *(str(a) for a in args)])


def _runs(db: Path) -> dict[str, dict[str, Any]]:
    """Each stored run by its source path: its passes (label, kind) and its timing-pass dispatches."""
    store = Store(db, read_only=True)
    try:
        runs = store.query("SELECT run_id, source_path FROM run ORDER BY run_id")
        out = {}
        for rid, source in zip(runs["run_id"], runs["source_path"], strict=True):
            passes = store.query(f"SELECT label, kind FROM pass WHERE run_id = {rid} ORDER BY label")
            timing = store.query(
                f"SELECT COUNT(*) AS n FROM dispatch WHERE run_id = {rid} AND timing_dispatch_index = dispatch_index"
            )["n"].iloc[0]
            out[str(source)] = {"passes": list(zip(passes["label"], passes["kind"], strict=True)), "dispatches": timing}
        return out
    finally:
        store.close()


def _kernels(n: int, *, first_corr: int = 1) -> list[Kernel]:
    """``n`` kernels, one after the other on one queue."""
    return [Kernel(i + 1, f"kernel_{i % 3}", first_corr + i, T0 + 1_000 * i, T0 + 1_000 * i + 700) for i in range(n)]


def _csv_run(directory: Path, pid: int, n: int) -> Path:
    """A rocprofv3 ``--kernel-trace -f csv`` run of ``n`` kernels (``<pid>_kernel_trace.csv``)."""
    return write_pass(directory, pid, kernels=_kernels(n))


def _counter_run(directory: Path, pid: int, n: int, counter: str) -> Path:
    """A rocprofv3 counter pass of the same ``n`` kernels: kernel trace and one counter per dispatch."""
    kernels = _kernels(n, first_corr=10 * pid)
    return write_pass(directory, pid, kernels=kernels, counters={k.dispatch_id: {counter: 100.0} for k in kernels})


def _nsys_kernels(capture: Path) -> int:
    """The kernels in a collect capture's Nsight Systems export, counted with sqlite3."""
    plain = capture.parent / f"{capture.name}-nsys.sqlite"
    plain.write_bytes(gzip.decompress((capture / "trace" / "nsys.sqlite.gz").read_bytes()))
    con = sqlite3.connect(plain)
    try:
        return int(con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0])
    finally:
        con.close()
        plain.unlink()


# ---- sub-folders are captures of their own -------------------------------------------------------


def test_two_rocprofv3_runs_in_sub_folders_are_two_runs(tmp_path: Path) -> None:
    """The trial: ``cp -r csv-300 m/run1; cp -r csv-2000 m/run2`` gave one run of 2 passes."""
    top = tmp_path / "m"
    _csv_run(top / "run1", 111, 3)
    _csv_run(top / "run2", 222, 5)
    db = tmp_path / "r.db"
    result = _ingest(top, "--db", db)
    assert result.exit_code == 0, result.output
    assert result.output.count("Stored run") == 2
    assert _runs(db) == {
        str(top / "run1"): {"passes": [("pass 1", "trace")], "dispatches": 3},
        str(top / "run2"): {"passes": [("pass 1", "trace")], "dispatches": 5},
    }


def test_two_identical_runs_in_sub_folders_are_one_run_and_the_copy_is_named(tmp_path: Path) -> None:
    top = tmp_path / "m"
    _csv_run(top / "run1", 111, 4)
    shutil.copytree(top / "run1", top / "run2")
    db = tmp_path / "r.db"
    result = _ingest(top, "--db", db)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"Stored run 1 from {top / 'run1'} ")
    assert f"Skipped {top / 'run2'}: this capture is already stored as run 1 (same content)" in result.output
    assert _runs(db) == {str(top / "run1"): {"passes": [("pass 1", "trace")], "dispatches": 4}}


@pytest.mark.parametrize("pass_dir", ["pmc", "pass"])
def test_a_multi_pass_rocprofv3_capture_is_one_run_also_in_a_folder_of_captures(tmp_path: Path, pass_dir: str) -> None:
    """rocprofv3 writes ``<out>/pmc_<n>/<host>/`` (text input) or ``pass_<n>/`` (YAML/JSON jobs): one run."""
    top = tmp_path / "captures"
    multi = top / "multi"
    _counter_run(multi / f"{pass_dir}_1" / "node7", 301, 6, "SQ_WAVES")
    _counter_run(multi / f"{pass_dir}_2" / "node7", 302, 6, "GRBM_COUNT")
    _csv_run(top / "single", 400, 2)
    assert [f.path for f in find_captures(multi)] == [multi]
    assert [f.path for f in find_captures(top)] == [multi, top / "single"]
    db = tmp_path / "r.db"
    result = _ingest(top, "--db", db)
    assert result.exit_code == 0, result.output
    runs = _runs(db)
    assert runs[str(multi)] == {
        "passes": [(f"{pass_dir}_1/node7", "counter"), (f"{pass_dir}_2/node7", "counter")],
        "dispatches": 6,
    }
    assert runs[str(top / "single")] == {"passes": [("pass 1", "trace")], "dispatches": 2}
    assert len(runs) == 2


def test_a_trace_beside_counter_pass_folders_is_one_run(tmp_path: Path) -> None:
    """The trace of another rocprofv3 run in ``<out>/<host>/`` beside ``<out>/pmc_1/<host>/``: its passes."""
    cap = tmp_path / "out"
    _csv_run(cap / "node7", 100, 3)
    _counter_run(cap / "pmc_1" / "node7", 201, 3, "SQ_WAVES")
    assert [f.path for f in find_captures(cap)] == [cap]
    db = tmp_path / "r.db"
    assert _ingest(cap, "--db", db).exit_code == 0
    assert _runs(db) == {str(cap): {"passes": [("node7", "trace"), ("pmc_1/node7", "counter")], "dispatches": 3}}


def test_collect_captures_and_a_plain_capture_are_all_stored(tmp_path: Path) -> None:
    """The trial: ``multi4/{a=<moe-prefill>, b=<rocprofv3 CSV>}`` stored a/ alone and said nothing of b/."""
    top = tmp_path / "multi4"
    shutil.copytree(H200 / "moe-prefill", top / "a")
    _csv_run(top / "b", 222, 7)
    db = tmp_path / "r.db"
    result = _ingest(top, "--keep-warmup", "--db", db)
    assert result.exit_code == 0, result.output
    runs = _runs(db)
    assert runs[str(top / "a")]["dispatches"] == _nsys_kernels(H200 / "moe-prefill")
    assert runs[str(top / "b")] == {"passes": [("pass 1", "trace")], "dispatches": 7}
    assert len(runs) == 2


def test_loose_rocpd_and_rpd_files_beside_collect_captures_are_runs_of_their_own(tmp_path: Path) -> None:
    """The trial: 2 collect captures + a rocpd ``*_results.db`` + an RPD trace stored 2 runs, exit 0."""
    top = tmp_path / "folder"
    for case in ("dense-prefill", "moe-prefill"):
        shutil.copytree(H200 / case, top / case)
    _write_llama_pass(top / "4242_results.db", pid=4242)
    ops = [
        Call("hipLaunchKernel", 10 * i, 10 * i + 5, ops=[("k", 1_000 + 100 * i, 1_050 + 100 * i, "KernelExecution")])
        for i in range(9)
    ]
    write_rpd(top / "mytrace.rpd", ops)
    db = tmp_path / "r.db"
    result = _ingest(top, "--keep-warmup", "--db", db)
    assert result.exit_code == 0, result.output
    runs = _runs(db)
    assert sorted(runs) == sorted(
        str(p) for p in (top / "4242_results.db", top / "mytrace.rpd", top / "dense-prefill", top / "moe-prefill")
    )
    assert runs[str(top / "4242_results.db")]["dispatches"] == len(LAUNCHES)
    assert runs[str(top / "mytrace.rpd")]["dispatches"] == 9
    for case in ("dense-prefill", "moe-prefill"):
        assert runs[str(top / case)]["dispatches"] == _nsys_kernels(H200 / case)


def test_an_nsight_capture_and_a_rocpd_capture_in_folders_of_their_own_are_two_runs(tmp_path: Path) -> None:
    """The trial: ``a/`` Nsight, ``b/`` rocpd was refused as '2 profilers ...; ingest each in a folder of its own'."""
    top = tmp_path / "two"
    shutil.copytree(H200 / "dense-prefill", top / "a")
    (top / "a" / "rocroof-collect.json").unlink()  # the folder alone says what it is: trace/ and ncu/
    _write_llama_pass(top / "b" / "4242_results.db", pid=4242)
    db = tmp_path / "r.db"
    result = _ingest(top, "--keep-warmup", "--db", db)
    assert result.exit_code == 0, result.output
    runs = _runs(db)
    assert runs[str(top / "a")]["passes"] == [("ncu", "counter"), ("trace", "trace")]
    assert runs[str(top / "a")]["dispatches"] == _nsys_kernels(H200 / "dense-prefill")
    assert runs[str(top / "b")] == {"passes": [("pass 1", "counter")], "dispatches": len(LAUNCHES)}


def test_two_rpd_traces_in_one_folder_are_two_runs(tmp_path: Path) -> None:
    top = tmp_path / "rpds"
    top.mkdir()
    for name, n in (("a.rpd", 2), ("b.rpd", 3)):
        write_rpd(
            top / name,
            [
                Call("hipLaunchKernel", 10 * i, 10 * i + 5, ops=[("k", 100 * i, 100 * i + 50, "KernelExecution")])
                for i in range(1, n + 1)
            ],
        )
    db = tmp_path / "r.db"
    result = _ingest(top, "--db", db)
    assert result.exit_code == 0, result.output
    assert {k: v["dispatches"] for k, v in _runs(db).items()} == {str(top / "a.rpd"): 2, str(top / "b.rpd"): 3}


def test_a_folder_of_links_to_captures_is_one_run_each(tmp_path: Path) -> None:
    """Links to folders are followed, once: a link back up (``loop``) adds nothing."""
    _csv_run(tmp_path / "caps" / "x", 111, 2)
    _csv_run(tmp_path / "caps" / "y", 222, 3)
    top = tmp_path / "m"
    top.mkdir()
    (top / "a").symlink_to(tmp_path / "caps" / "x")
    (top / "b").symlink_to(tmp_path / "caps" / "y")
    (top / "loop").symlink_to(top)
    db = tmp_path / "r.db"
    result = _ingest(top, "--db", db)
    assert result.exit_code == 0, result.output
    assert {k: v["dispatches"] for k, v in _runs(db).items()} == {str(top / "a"): 2, str(top / "b"): 3}


def test_one_capture_in_a_sub_folder_is_its_folder_read_whole(tmp_path: Path) -> None:
    """rocprofv3's default output, ``<cwd>/<host>/<pid>_*.csv``: the folder given is the run, as before."""
    top = tmp_path / "out"
    _csv_run(top / "node7", 100, 3)
    (top / "notes").mkdir()
    (top / "notes" / "README.md").write_text("how it was run\n")
    assert [(f.path, f.files) for f in find_captures(top)] == [(top, None)]
    db = tmp_path / "r.db"
    assert _ingest(top, "--db", db).exit_code == 0
    assert _runs(db) == {str(top): {"passes": [("node7", "trace")], "dispatches": 3}}


# ---- what cannot be stored is named, and the exit status says so ---------------------------------


def test_op_metadata_beside_several_captures_is_refused_before_storing_anything(tmp_path: Path) -> None:
    top = tmp_path / "m"
    _csv_run(top / "run1", 111, 3)
    _csv_run(top / "run2", 222, 5)
    (top / "ggml-op-meta.json").write_text('{"rows": []}')
    db = tmp_path / "r.db"
    result = _ingest(top, "--db", db)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"Error: {top}: ggml-op-meta.json lies beside 2 captures (run1, run2) and belongs to one of them"
    )
    assert "move it into its capture's folder, or ingest that capture alone with --attach FILE" in lines[0]
    assert not db.exists() or _runs(db) == {}


def test_a_folder_that_looks_like_a_capture_but_is_none_is_named_and_the_status_is_1(tmp_path: Path) -> None:
    top = tmp_path / "m"
    _csv_run(top / "run1", 111, 3)
    _csv_run(top / "run2", 222, 5)
    (top / "broken").mkdir()
    (top / "broken" / "1234_results.db").write_bytes(b"not a database")
    db = tmp_path / "r.db"
    result = _ingest(top, "--db", db)
    assert result.exit_code == 1
    assert f"Error: {top / 'broken'}: 1234_results.db is not a database rocroof reads" in result.output
    assert result.output.strip().splitlines()[-1] == (
        f"Error: 1 of 3 capture(s) not stored: {top / 'broken'} (errors above)"
    )
    assert {k: v["dispatches"] for k, v in _runs(db).items()} == {str(top / "run1"): 3, str(top / "run2"): 5}


def test_a_stored_capture_given_as_a_path_is_an_error_also_beside_other_paths(tmp_path: Path) -> None:
    """Alone or among several PATHs, a PATH already stored fails (exit 1); found inside a folder it is skipped."""
    top = tmp_path / "m"
    _csv_run(top / "run1", 111, 3)
    _csv_run(top / "run2", 222, 5)
    db = tmp_path / "r.db"
    assert _ingest(top / "run1", "--db", db).exit_code == 0
    alone = _ingest(top / "run1", "--db", db)
    assert alone.exit_code == 1 and "already stored as run 1" in alone.output
    several = _ingest(top / "run1", top / "run2", "--db", db)
    assert several.exit_code == 1
    assert f"Error: {top / 'run1'}: this capture is already stored as run 1 (same content)" in several.output
    assert f"Stored run 2 from {top / 'run2'} " in several.output
    assert (
        several.output.strip().splitlines()[-1] == f"Error: 1 of 2 capture(s) not stored: {top / 'run1'} (errors above)"
    )
    folder = _ingest(top, "--db", db)
    assert folder.exit_code == 0 and folder.output.count("Skipped") == 2


# ---- read_capture on a folder of several captures -------------------------------------------------


def test_reading_a_folder_of_two_profilers_captures_names_where_each_lies(tmp_path: Path) -> None:
    top = tmp_path / "two"
    shutil.copytree(H200 / "dense-prefill", top / "a")
    _write_llama_pass(top / "b" / "4242_results.db", pid=4242)
    with pytest.raises(InputError) as err:
        read_capture(top)
    msg = str(err.value)
    assert msg.startswith(f"{top}: holds ")
    assert "b/4242_results.db" in msg and "ingest each in a folder of its own" not in msg
