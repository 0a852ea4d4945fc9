"""Robustness of ingest: a real SIGKILL mid-ingest, double ingests, and safe YAML/JSON parsing.

Captures come from ``benchmarks/generate.py`` (see :mod:`tests.synthetic`). The kill tests run
the ingest in a child process and kill it with SIGKILL at random points (the seed is printed);
afterwards the database must hold the whole run or none of it, ``rocroof db status`` must work
and a later ingest must succeed. The 10^5-dispatch variants are marked ``large``:

    .venv/bin/python -m pytest -m large
"""

from __future__ import annotations

import ast
import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.analysis import peaks
from rocroof.capture.readers import MANIFEST, ggml_meta, read_capture
from rocroof.capture.readers import rocprof_compute as rc
from rocroof.cli import cli
from rocroof.errors import ConfigError, ParseError

from . import synthetic
from .parallel import ingest_at_once
from .synthetic import of_run, row_counts, run_ids

REPO = Path(__file__).resolve().parents[1]

#: The ingest a killed child runs: the library calls ``rocroof ingest`` makes, with a line on
#: stdout before the write transaction and after each chunk of rows inserted.
CHILD = r"""
import sys
from pathlib import Path
from rocroof.ingest.pipeline import build_run
from rocroof.capture.readers import read_capture
from rocroof.report.tables import stored_reports
from rocroof.store import Store

capture, db = Path(sys.argv[1]), sys.argv[2]
frames = build_run(read_capture(capture), source_path=str(capture))
print("writing", flush=True)
store = Store(db)
store.write_run(
    frames,
    progress=lambda stage, done, total: print("progress", stage, done, flush=True),
    reports=stored_reports,
)
store.close()
print("done", flush=True)
"""

#: :data:`CHILD` built as ``rocroof ingest`` builds a large capture: in windows, by a second
#: process (rocroof.ingest.forked) where it is cut into two windows or more.
CHILD_WINDOWED = CHILD.replace(
    "from rocroof.ingest.pipeline import build_run", "from rocroof.ingest.windows import build"
).replace("frames = build_run(read_capture(capture),", "frames = build(read_capture(capture), release=True,")


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("captures")


def cli_run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.output


class Child:
    """The ingest child, with its stdout lines read by a thread (``seen`` keeps all of them)."""

    def __init__(self, capture: Path, db: Path, script: str = CHILD) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, str(capture), str(db)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=REPO,
        )
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.seen.append(line.strip())
            self.lines.put((time.monotonic(), line.strip()))
        self.lines.put((time.monotonic(), "<eof>"))

    def wait_for(self, prefix: str, count: int = 1, timeout: float = 600) -> bool:
        """Wait for the ``count``-th line starting with ``prefix``; False when the child ended first."""
        seen = 0
        deadline = time.monotonic() + timeout
        while True:
            _, line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line == "<eof>":
                return False
            if line.startswith(prefix):
                seen += 1
                if seen >= count:
                    return True

    def finish(self) -> int:
        status = self.proc.wait()
        self.thread.join()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return status


def _reference(capture: Path, db: Path, script: str = CHILD) -> tuple[dict[str, int], float, float, int]:
    """Row counts of a complete ingest, its wall time, its write time and its progress lines."""
    t0 = time.monotonic()
    child = Child(capture, db, script)
    stamps = []
    while True:
        t, line = child.lines.get(timeout=600)
        stamps.append((t, line))
        if line == "<eof>":
            break
    assert child.finish() == 0
    t_write = next(t for t, line in stamps if line == "writing")
    t_done = next(t for t, line in stamps if line == "done")
    progress = sum(1 for _, line in stamps if line.startswith("progress"))
    counts = row_counts(db)
    (rid,) = run_ids(counts)
    return of_run(counts, rid), t_done - t0, t_done - t_write, progress


def _kill_trials(capture: Path, tmp_path: Path, small: Path, trials: int, seed: int, script: str = CHILD) -> list[str]:
    """Kill ingests of ``capture`` at random points; check the database after each; return where they died."""
    expected, t_full, t_write, n_progress = _reference(capture, tmp_path / "reference.db", script)
    rng = random.Random(seed)
    where = []
    for trial in range(trials):
        db = tmp_path / f"trial{trial}.db"
        # another run is stored first: a killed ingest must not touch it
        code, out = cli_run("ingest", small, "--db", db)
        assert code == 0, out
        before = row_counts(db)
        (other,) = run_ids(before)
        mode = ("anytime", "write", "progress")[trial % 3]
        child = Child(capture, db, script)
        if mode == "anytime":
            time.sleep(rng.uniform(0.2, t_full))
        elif mode == "write":
            if child.wait_for("writing"):
                time.sleep(rng.uniform(0.0, t_write))
        else:
            child.wait_for("progress", rng.randint(1, max(1, n_progress)))
        child.proc.send_signal(signal.SIGKILL)
        status = child.finish()
        died = "finished" if "done" in child.seen else "writing" if "writing" in child.seen else "before writing"
        where.append(f"trial {trial} ({mode}, seed {seed}): status {status}, {died}")

        # the database opens read-only (a fresh process would: db status) without recovery trouble
        code, out = cli_run("db", "status", "--db", db)
        assert code == 0, (where[-1], out)
        code, out = cli_run("runs", "--db", db)
        assert code == 0, (where[-1], out)
        after = row_counts(db)
        assert of_run(after, other) == of_run(before, other), where[-1]
        victim = run_ids(after) - {other}
        assert len(victim) <= 1, (where[-1], after)
        for rid in victim:  # all or nothing
            assert of_run(after, rid) == expected, where[-1]
        if not victim:
            leftover = {t: n for t, per in after.items() for r, n in per.items() if r != other}
            assert not leftover, (where[-1], leftover)

        # a later ingest works (refused as a duplicate if the run made it, then replaced)
        code, out = cli_run("ingest", capture, "--db", db)
        if victim:
            assert code == 1 and "already stored" in out, (where[-1], out)
            code, out = cli_run("ingest", capture, "--db", db, "--replace")
        assert code == 0, (where[-1], out)
        final = row_counts(db)
        assert len(run_ids(final)) == 2 and of_run(final, other) == of_run(before, other)
        (new,) = run_ids(final) - {other}
        assert of_run(final, new) == expected
    return where


def test_sigkill_during_ingest_leaves_the_whole_run_or_none(tmp_path: Path, cache: Path) -> None:
    capture = synthetic.capture("csv", 3_000, cache)
    small = synthetic.capture("rocpd", 50, cache)
    seed = int(os.environ.get("ROCROOF_KILL_SEED", random.randrange(1 << 30)))
    where = _kill_trials(capture, tmp_path, small, trials=3, seed=seed)
    print("\n".join(where))


def _live_processes_naming(text: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line contains ``text`` (Linux ``/proc``)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next(x for x in (entry / "status").read_text().splitlines() if x.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if text in cmdline and "\tZ" not in state:
            out.append(int(entry.name))
    return out


def _no_builder_left(tmp_path: Path) -> bool:
    """True once no live process names ``tmp_path`` (the trials' databases), waiting up to 5 s."""
    deadline = time.monotonic() + 5
    while _live_processes_naming(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _live_processes_naming(str(tmp_path))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the window builder process is Linux's")
def test_sigkill_during_a_windowed_ingest_leaves_the_whole_run_or_none(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, built in windows by a second process (rocroof.ingest.forked): no builder outlives a kill."""
    monkeypatch.setenv("ROCROOF_SPILL_MIN_BYTES", "0")  # the read on disk, so the ingest child builds windows
    monkeypatch.setenv("ROCROOF_WINDOW_DISPATCHES", "500")
    capture = synthetic.capture("csv", 3_000, cache)
    small = synthetic.capture("rocpd", 50, cache)
    seed = int(os.environ.get("ROCROOF_KILL_SEED", random.randrange(1 << 30)))
    where = _kill_trials(capture, tmp_path, small, trials=4, seed=seed, script=CHILD_WINDOWED)
    print("\n".join(where))
    assert _no_builder_left(tmp_path), where  # every window builder died with its ingest


@pytest.mark.large
@pytest.mark.parametrize("fmt", ["csv", "rocpd"])
def test_sigkill_during_a_large_ingest_leaves_the_whole_run_or_none(tmp_path: Path, cache: Path, fmt: str) -> None:
    capture = synthetic.capture(fmt, 100_000, cache)
    small = synthetic.capture("nvidia", 50, cache)
    seed = int(os.environ.get("ROCROOF_KILL_SEED", random.randrange(1 << 30)))
    where = _kill_trials(capture, tmp_path, small, trials=6, seed=seed)
    print("\n".join(where))
    assert any("writing" in w for w in where), where  # some kills landed inside the write transaction


@pytest.mark.large
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the window builder process is Linux's")
@pytest.mark.parametrize("fmt", ["csv", "rocpd"])
def test_sigkill_during_a_large_windowed_ingest_leaves_the_whole_run_or_none(
    tmp_path: Path, cache: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10^5 dispatches built as `rocroof ingest` builds 10^6: on disk, in windows, by a second process."""
    monkeypatch.setenv("ROCROOF_SPILL_MIN_BYTES", "0")  # at 10^5 the columns would stay in memory: built whole
    capture = synthetic.capture(fmt, 100_000, cache)
    small = synthetic.capture("nvidia", 50, cache)
    seed = int(os.environ.get("ROCROOF_KILL_SEED", random.randrange(1 << 30)))
    where = _kill_trials(capture, tmp_path, small, trials=6, seed=seed, script=CHILD_WINDOWED)
    print("\n".join(where))
    assert any("writing" in w for w in where), where
    assert _no_builder_left(tmp_path), where  # no window builder outlived its ingest


# ---- the same capture twice ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", synthetic.FORMATS)
def test_the_same_capture_again_is_refused_or_replaced_never_duplicated(tmp_path: Path, cache: Path, fmt: str) -> None:
    capture = synthetic.capture(fmt, 400, cache)
    db = tmp_path / "r.db"
    assert cli_run("ingest", capture, "--db", db)[0] == 0
    first = row_counts(db)
    (rid,) = run_ids(first)
    code, out = cli_run("ingest", capture, "--db", db)
    assert code == 1 and f"already stored as run {rid}" in out, out
    # the same files elsewhere are the same capture (the hash covers names relative to the capture)
    moved = synthetic.capture(fmt, 400, cache, dest=tmp_path / "elsewhere")
    code, out = cli_run("ingest", moved, "--db", db)
    assert code == 1 and "already stored" in out, out
    assert row_counts(db) == first
    code, out = cli_run("ingest", capture, "--db", db, "--replace")
    assert code == 0, out
    replaced = row_counts(db)
    (new,) = run_ids(replaced)
    assert new != rid and of_run(replaced, new) == of_run(first, rid)


def test_two_ingests_of_one_capture_at_once_store_it_once(tmp_path: Path, cache: Path) -> None:
    capture = synthetic.capture("csv", 2_000, cache)
    db = tmp_path / "r.db"
    assert cli_run("db", "upgrade", "--db", db)[0] == 0  # both find the schema; they race on the run only
    cmd = [sys.executable, "-m", "rocroof", "ingest", str(capture), "--db", str(db)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 1], outs
    loser = outs[[p.returncode for p in procs].index(1)]
    assert "already stored" in loser or "stored by another ingest meanwhile" in loser, loser
    assert "Traceback" not in loser
    assert len(run_ids(row_counts(db))) == 1


def test_four_processes_ingesting_into_one_new_sqlite_file_lose_nothing(tmp_path: Path, cache: Path) -> None:
    """Four writers at once into a file that does not exist yet (WAL, busy timeout, retries): every run
    is stored whole, as four ingests one after the other store them."""
    captures = [
        synthetic.capture("csv", 1_500, cache),
        synthetic.capture("rocpd", 1_200, cache),
        synthetic.capture("nvidia", 900, cache),
        synthetic.capture("csv", 700, cache),
    ]
    db = tmp_path / "shared.db"
    outputs = ingest_at_once(str(db), captures, tmp_path / "sync")
    assert sorted(int(o.split()[1]) for o in outputs) == [1, 2, 3, 4], outputs
    together = row_counts(db)
    sequential = tmp_path / "one-by-one.db"
    for i, capture in enumerate(captures):
        code, out = cli_run("ingest", capture, "--db", sequential, "--label", f"worker={i}")
        assert code == 0, out
    one_by_one = row_counts(sequential)
    # the same rows for the same capture, whatever run id the race gave it
    by_capture = {
        str(capture): of_run(together, int(o.split()[1])) for capture, o in zip(captures, outputs, strict=True)
    }
    for i, capture in enumerate(captures):
        assert by_capture[str(capture)] == of_run(one_by_one, i + 1), capture
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


# ---- YAML and JSON are parsed safely ----------------------------------------------------------------


#: PyYAML entry points that can build arbitrary Python objects (or take a loader that can).
UNSAFE_YAML = {
    "load",
    "load_all",
    "full_load",
    "full_load_all",
    "unsafe_load",
    "unsafe_load_all",
    "Loader",
    "FullLoader",
    "UnsafeLoader",
    "Constructor",
    "FullConstructor",
    "UnsafeConstructor",
}


def test_yaml_is_only_read_with_the_safe_loader() -> None:
    unsafe = []
    for path in sorted((REPO / "plugin" / "rocroof").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            name = node.value.id if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) else None
            if name == "yaml" and isinstance(node, ast.Attribute) and node.attr in UNSAFE_YAML:
                unsafe.append(f"{path.relative_to(REPO)}:{node.lineno}: yaml.{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module == "yaml":
                unsafe += [
                    f"{path.relative_to(REPO)}:{node.lineno}: from yaml import {a.name}"
                    for a in node.names
                    if a.name in UNSAFE_YAML
                ]
    assert not unsafe, unsafe


def test_yaml_tags_that_build_python_objects_are_refused(tmp_path: Path) -> None:
    table = tmp_path / "peaks.yaml"
    table.write_text("gpus: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        peaks.load_peaks(table)


def test_a_peaks_table_over_4_mib_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "peaks.yaml"
    table.write_text("gpus: []\n" + "#" * (4 << 20))
    with pytest.raises(ConfigError, match="larger than 4 MiB"):
        peaks.load_peaks(table)


def test_metadata_json_over_the_size_limit_is_refused_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta = tmp_path / "meta.json"
    meta.write_text('{"rows": [' + ",".join(['{"invocation": 1, "ggml_op": "ADD"}'] * 200) + "]}")
    monkeypatch.setattr(ggml_meta, "MAX_JSON_BYTES", 1024)
    with pytest.raises(ParseError, match="larger than 1024 bytes") as err:
        ggml_meta.read_metadata(meta)
    assert err.value.path == str(meta)


def test_the_default_json_limit_is_what_the_docs_say() -> None:
    assert ggml_meta.MAX_JSON_BYTES == 1 << 30


def test_a_deeply_nested_metadata_json_is_a_parse_error(tmp_path: Path) -> None:
    meta = tmp_path / "meta.json"
    meta.write_text('{"rows": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    with pytest.raises(ParseError, match="meta.json"):
        ggml_meta.read_metadata(meta)


def test_a_manifest_over_16_mib_is_refused(tmp_path: Path, cache: Path) -> None:
    capture = synthetic.capture("csv", 50, cache, dest=tmp_path / "cap")
    (capture / MANIFEST).write_text('{"command": "' + "x" * (16 << 20) + '"}')
    with pytest.raises(ParseError, match="larger than"):
        read_capture(capture)


def test_a_deeply_nested_manifest_is_a_parse_error(tmp_path: Path, cache: Path) -> None:
    capture = synthetic.capture("csv", 50, cache, dest=tmp_path / "cap")
    (capture / MANIFEST).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ParseError, match=MANIFEST):
        read_capture(capture)


def test_perfmon_text_over_4_mib_is_refused(tmp_path: Path) -> None:
    (tmp_path / "perfmon").mkdir()
    (tmp_path / "perfmon" / "pmc_perf_0.txt").write_text("pmc: A\n" + "#" * (4 << 20))
    with pytest.raises(ParseError, match="larger than"):
        rc._requested(tmp_path, "pmc_perf_0")


def test_ctrl_c_stops_a_long_query(tmp_path: Path) -> None:
    """SQLite runs a statement in C; rocroof query still stops at Ctrl-C (SIGINT), promptly."""
    db = tmp_path / "q.db"
    assert cli_run("db", "upgrade", "--db", db)[0] == 0
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocroof", "query", endless, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's foreground job
    )
    time.sleep(4)  # imports done (about 1 s here), the statement running
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)  # it would run for ever without the progress handler
    assert proc.returncode == 130 and out.strip().splitlines()[-1].startswith("Aborted: interrupted"), out


def test_sigterm_stops_collect_and_its_profiler(tmp_path: Path) -> None:
    """kill / scancel / a batch time limit send SIGTERM: the profiler run stops with rocroof."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pid_file = tmp_path / "profiler.pid"
    fake = bin_dir / "rocprofv3"
    fake.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "rocprofv3 1.0.0"; exit 0; fi\n'
        f"echo $$ > {pid_file}\nsleep 120 &\necho $! >> {pid_file}\nwait\n"
    )
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    cmd = [sys.executable, "-m", "rocroof", "collect", "--arch", "gfx942", "--out", str(tmp_path / "out"), "--", "true"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)
    deadline = time.monotonic() + 60
    while not pid_file.exists() or len(pid_file.read_text().split()) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.05)
    pids = [int(x) for x in pid_file.read_text().split()]  # the profiler and the application it started
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130 and out.strip().splitlines()[-1].startswith("Aborted: interrupted"), out
    for pid in pids:
        stat = Path(f"/proc/{pid}/stat")
        alive = stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        assert not alive, f"process {pid} outlived rocroof"
