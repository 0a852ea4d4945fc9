"""rocroof sweep --executor slurm: the batch script, submission errors, and job arrays on a real cluster.

The first part needs no cluster: it checks the script rocroof writes (and runs it with bash as a
task would run, with a stand-in Python), the ``slurm:`` section of the sweep file, the one-line
errors when sbatch is missing or refuses the job, and ``sweep status`` against a stand-in
``squeue``. The second part submits replay sweeps of the recorded H200 captures (examples/h200)
to a real single-node Slurm cluster: ``.ci/run`` starts one with ``.ci/slurm`` and sets
``ROCROOF_TEST_SLURM=1`` and ``SLURM_CONF``. Without them these tests skip, except with
``ROCROOF_REQUIRE_SLURM`` set (CI), where they fail.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.cli import cli
from rocroof.errors import ConfigError
from rocroof.store import Store
from rocroof.sweep import SweepEvent, SweepFileError, expand, load_sweep, run_sweep
from rocroof.sweep.slurm import SlurmExecutor, batch_script, last_submission, sweep_status

from .conftest import REPO

EXAMPLES = REPO / "examples" / "h200"
CASES = ("dense-prefill", "moe-prefill", "dense500m-decode")
NOW = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ROCROOF_DB", "ROCROOF_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def replay_file(tmp_path: Path, cases: tuple[str, ...], *, on_error: str = "skip", extra: str = "") -> Path:
    """A replay sweep of ``cases`` (examples/h200/<case>), out and db relative to ``tmp_path``."""
    return write(
        tmp_path / "replay.yaml",
        f"version: 1\nmatrix:\n  case: [{', '.join(cases)}]\n"
        f"profiler: {{name: replay, capture: '{EXAMPLES}/{{case}}'}}\n"
        f"out: out\ndb: results.db\non_error: {on_error}\n{extra}",
    )


PROFILING = """version: 1
command: llama-bench -m {model} -p 512
matrix:
  model: [a.gguf, b.gguf, c.gguf]
profiler: ncu
out: sweeps/out
db: team.db
on_error: skip
slurm:
  partition: gpu
  account: proj42
  time: 1:30:00          # YAML alone would read this as the number 5400
  extra: [--constraint=h200, --mem=32G]
"""


# ---- the batch script -----------------------------------------------------------------------------


def test_the_script_of_a_profiling_sweep(tmp_path: Path) -> None:
    sweep = load_sweep(write(tmp_path / "tiny.yaml", PROFILING))
    points = expand(sweep)
    text = batch_script(
        sweep,
        points,
        db="team.db",
        stem="tiny-20261130-120000",
        directory=tmp_path / "sweeps" / "out" / "slurm",
        cwd=tmp_path,
        python="/opt/venv/bin/python",
        jobs=2,
        sbatch_args=["--nice=10"],
        now=NOW,
    )
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert [line for line in lines if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=rocroof-tiny",
        "#SBATCH --array=0-2%2",
        f"#SBATCH --output={tmp_path}/sweeps/out/slurm/tiny-%A_%a.log",
        f"#SBATCH --chdir={tmp_path}",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=proj42",
        "#SBATCH --time=1:30:00",
        "#SBATCH --constraint=h200",
        "#SBATCH --mem=32G",
        "#SBATCH --nice=10",
    ]
    start = lines.index("points=(")
    assert lines[start + 1 : start + 5] == [
        f"  {points[0].id}  # model=a.gguf repeat=1",
        f"  {points[1].id}  # model=b.gguf repeat=1",
        f"  {points[2].id}  # model=c.gguf repeat=1",
        ")",
    ]
    # on_error: skip: the task is rocroof itself, with the running interpreter, absolute paths
    assert lines[-1] == (
        f'exec /opt/venv/bin/python -m rocroof sweep {tmp_path}/tiny.yaml --point "$point" --db {tmp_path}/team.db'
    )
    assert "2026-11-30 12:00:00 UTC" in lines[2]
    assert "stop=" not in text


def test_a_replay_script_asks_for_no_gpu_and_keeps_on_error_stop(tmp_path: Path) -> None:
    sweep = load_sweep(replay_file(tmp_path, CASES, on_error="stop"))
    text = batch_script(
        sweep,
        expand(sweep),
        db="results.db",
        stem="replay-x",
        directory=tmp_path / "out" / "slurm",
        cwd=tmp_path,
        python=sys.executable,
        now=NOW,
    )
    assert "--gres" not in text
    assert "#SBATCH --array=0-2\n" in text
    assert f"stop={tmp_path}/out/slurm/replay-x.stop  #" in text
    run = shlex.join([sys.executable, "-m", "rocroof", "sweep", str(tmp_path / "replay.yaml"), "--point"])
    assert f'\n{run} "$point" --db {tmp_path}/results.db\nstatus=$?\n' in text


def test_the_script_runs_one_point_per_task_and_stops_after_a_failure(tmp_path: Path) -> None:
    """The script as a task runs it (bash, SLURM_ARRAY_TASK_ID), with a stand-in Python that fails task 0's point."""
    sweep = load_sweep(replay_file(tmp_path, CASES, on_error="stop"))
    points = expand(sweep)
    fake = write(
        tmp_path / "python",
        f'#!/bin/bash\necho "$@" >> {tmp_path}/calls\n[ "$6" = {points[0].id} ] && exit 1\nexit 0\n',
    )
    fake.chmod(0o755)
    (tmp_path / "out" / "slurm").mkdir(parents=True)
    script = write(
        tmp_path / "job.sbatch",
        batch_script(
            sweep,
            points,
            db="results.db",
            stem="s",
            directory=tmp_path / "out" / "slurm",
            cwd=tmp_path,
            python=str(fake),
        ),
    )

    def task(i: int) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(i), "SLURM_ARRAY_JOB_ID": "77"}
        return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=False)

    first = task(0)
    assert first.returncode == 1
    assert (
        first.stdout.splitlines()[0]
        == f"rocroof: point {points[0].id} is task 0 of Slurm job 77 on {socket.gethostname()}"
    )
    assert (tmp_path / "out" / "slurm" / "s.stop").read_text() == f"{points[0].id}\n"
    second = task(1)
    assert second.returncode == 0
    assert second.stdout.splitlines()[-1] == f"rocroof: not run: point {points[0].id} failed first (on_error: stop)"
    assert (tmp_path / "calls").read_text().splitlines() == [
        f"-m rocroof sweep {tmp_path}/replay.yaml --point {points[0].id} --db {tmp_path}/results.db"
    ]
    plain = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False, env={"PATH": "/bin"})
    assert plain.returncode != 0 and "submit this script with sbatch: it is a job array" in plain.stderr


def test_a_database_url_with_a_password_stays_out_of_the_script(tmp_path: Path) -> None:
    sweep = load_sweep(replay_file(tmp_path, CASES[:1]))
    text = batch_script(
        sweep,
        expand(sweep),
        db="postgresql://alice:s3cret@dbhost/rocroof",
        stem="s",
        directory=tmp_path,
        cwd=tmp_path,
        python="python3",
    )
    assert "s3cret" not in text
    assert '--db "$ROCROOF_DB"' in text
    assert (
        "# database: postgresql://alice:***@dbhost/rocroof (the URL, with its password, comes from ROCROOF_DB)" in text
    )
    plain = batch_script(
        sweep,
        expand(sweep),
        db="postgresql://rocroof@/rocroof?host=/tmp/pg",
        stem="s",
        directory=tmp_path,
        cwd=tmp_path,
        python="python3",
    )
    assert "--db 'postgresql://rocroof@/rocroof?host=/tmp/pg'" in plain


# ---- the slurm: section ------------------------------------------------------------------------------

HEAD = "version: 1\ncommand: app -m {model}\nmatrix:\n  model: [a.gguf]\nprofiler: ncu\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            HEAD + "slurm: gpu\n",
            "{f}:6: slurm: expected a mapping of sbatch settings (partition, account, qos, time, gres, extra), got a "
            "string ('gpu')",
        ),
        (
            HEAD + "slurm:\n  partiton: gpu\n",
            "{f}:7: slurm.partiton: unknown slurm setting (did you mean 'partition'?); expected one of: partition, "
            "account, qos, time, gres, extra",
        ),
        (
            HEAD + "slurm:\n  time: 2 hours\n",
            "{f}:7: slurm.time: expected a Slurm time limit (minutes, H:MM:SS or D-HH:MM:SS, e.g. 30 or 2:00:00), got "
            "a string ('2 hours')",
        ),
        (
            HEAD + "slurm:\n  partition: 'gpu; rm -rf'\n",
            "{f}:7: slurm.partition: expected a partition name (letters, digits, '_', '.', '-'), got a string ('gpu; "
            "rm -rf')",
        ),
        (
            HEAD + "slurm:\n  extra: [--array=0-3]\n",
            "{f}:7: slurm.extra[0]: --array is set by rocroof (the array, its logs, directory and job name); leave it "
            "out",
        ),
        (
            HEAD + "slurm:\n  extra: -o/tmp/x.log\n",
            "{f}:7: slurm.extra: --output is set by rocroof (the array, its logs, directory and job name); leave it "
            "out",
        ),
        (
            HEAD + "slurm:\n  extra: [--gres=gpu:2]\n",
            "{f}:7: slurm.extra[0]: --gres is set from slurm.gres (default gpu:1 when the sweep profiles); give it "
            "there",
        ),
        (
            HEAD + "slurm:\n  extra: ['--comment=a b']\n",
            "{f}:7: slurm.extra[0]: expected one sbatch option without spaces (it becomes an #SBATCH line), such as "
            "--constraint=mi300x, got a string ('--comment=a b')",
        ),
        (
            "version: 1\nmatrix: {case: [a]}\nprofiler: {name: replay, capture: 'x/{case}'}\nslurm: {gres: 'gpu:1'}\n",
            "{f}:4: slurm.gres: replay points ingest recorded captures and use no GPU; remove slurm.gres",
        ),
    ],
)
def test_a_bad_slurm_section_is_one_exact_message(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "bad.yaml", text)
    with pytest.raises(SweepFileError) as err:
        load_sweep(path)
    assert str(err.value) == message.format(f=path)


def test_the_slurm_section_is_read_with_its_values(tmp_path: Path) -> None:
    spec = load_sweep(write(tmp_path / "s.yaml", PROFILING + "  gres: gpu:h200:1\n  qos: high\n")).slurm
    assert (spec.partition, spec.account, spec.qos, spec.time, spec.gres) == (
        "gpu",
        "proj42",
        "high",
        "1:30:00",
        "gpu:h200:1",
    )
    assert spec.extra == ("--constraint=h200", "--mem=32G")
    assert load_sweep(write(tmp_path / "t.yaml", HEAD + "slurm: {time: 45}\n")).slurm.time == "45"
    assert load_sweep(write(tmp_path / "u.yaml", HEAD)).slurm.partition is None


# ---- the command line without a cluster -----------------------------------------------------------------


def no_slurm_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **tools: str) -> None:
    """PATH holding only stand-ins for the named Slurm tools (and bash's own directory)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for name, body in tools.items():
        tool = write(bindir / name, "#!/bin/bash\n" + body)
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin/env-only-not-here")


def test_dry_run_prints_the_script_and_needs_no_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    no_slurm_path(monkeypatch, tmp_path)
    path = replay_file(tmp_path, CASES)
    result = CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm", "--jobs", "2", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "Slurm: 3 pending point(s) of 3 would be one job array: this script, written to " in result.stdout
    assert "#SBATCH --array=0-2%2\n" in result.stdout and "#SBATCH --chdir=" in result.stdout
    for p in expand(load_sweep(path)):
        assert f"\n  {p.id}  # case={p.params['case']} repeat=1\n" in result.stdout
    assert not (tmp_path / "out").exists() and not (tmp_path / "results.db").exists()
    alias = CliRunner().invoke(cli, ["sweep", "run", "replay.yaml", "--executor", "slurm", "--jobs", "2", "--dry-run"])
    assert alias.exit_code == 0 and alias.stdout.split("\nSlurm: ")[0] == result.stdout.split("\nSlurm: ")[0]


def test_without_sbatch_the_error_is_one_line_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    no_slurm_path(monkeypatch, tmp_path)
    replay_file(tmp_path, CASES)
    result = CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm"])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        "Error: sbatch: not found on PATH; --executor slurm submits from a machine with Slurm's client commands (a "
        "login node), or run the sweep here with --executor local"
    )
    assert not (tmp_path / "out").exists() and not (tmp_path / "results.db").exists()


def test_sbatch_refusing_the_job_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    no_slurm_path(
        monkeypatch,
        tmp_path,
        sbatch='echo "sbatch: error: invalid partition specified: nope" >&2\n'
        'echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2\nexit 1\n',
    )
    replay_file(tmp_path, CASES)
    result = CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm", "--sbatch-arg=--partition=nope"])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        "Error: sbatch refused the job array (exit status 1): Batch job submission failed: Invalid partition name "
        "specified; nothing was submitted, and the batch script is removed (--dry-run prints it)"
    )
    # nothing submitted: the script, out/slurm, out and the new database it made are gone
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "replay.yaml"]
    assert last_submission(load_sweep(tmp_path / "replay.yaml")) is None  # nothing recorded as submitted


def test_a_refused_submission_keeps_what_was_there_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An existing database and out directory stay (with their files); only the new script goes."""
    monkeypatch.chdir(tmp_path)
    no_slurm_path(monkeypatch, tmp_path, sbatch='echo "sbatch: error: Invalid account" >&2\nexit 1\n')
    replay_file(tmp_path, CASES)
    (tmp_path / "out" / "slurm").mkdir(parents=True)
    (tmp_path / "out" / "notes.txt").write_text("mine\n")
    Store(str(tmp_path / "results.db")).upgrade()
    result = CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm"])
    assert result.exit_code == 1 and "Invalid account; nothing was submitted" in result.output
    assert (tmp_path / "results.db").is_file() and (tmp_path / "out" / "notes.txt").read_text() == "mine\n"
    assert list((tmp_path / "out" / "slurm").iterdir()) == []


def test_an_sbatch_that_cannot_start_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profiling sweep: run_sweep made out/ and the database; both go when sbatch cannot even start."""
    monkeypatch.chdir(tmp_path)
    no_slurm_path(monkeypatch, tmp_path)
    sbatch = write(tmp_path / "bin" / "sbatch", "#!/no/such/interpreter\n")
    sbatch.chmod(0o755)
    write(tmp_path / "prof.yaml", PROFILING.replace("sweeps/out", "out"))
    result = CliRunner().invoke(cli, ["sweep", "prof.yaml", "--executor", "slurm"])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        "Error: sbatch could not be started (No such file or directory); nothing was submitted, and the batch "
        "script is removed (--dry-run prints it)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "prof.yaml"]


def test_a_submission_without_a_job_id_keeps_its_script_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sbatch exited 0: the array may be queued, so its script stays and the message says where."""
    monkeypatch.chdir(tmp_path)
    no_slurm_path(monkeypatch, tmp_path, sbatch='echo "Submitted batch job"\n')
    replay_file(tmp_path, CASES)
    result = CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm"])
    assert result.exit_code == 1
    (script,) = (tmp_path / "out" / "slurm").glob("replay-*.sbatch")
    assert result.output.splitlines()[-1] == (
        "Error: sbatch answered no job id ('Submitted batch job'); the job array may be queued all the same "
        f"(squeue --me shows it); the batch script is kept: {script}"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--sbatch-arg", "--array=0-1"],
            "Error: --sbatch-arg '--array=0-1': --array is set by rocroof (the array, its logs, directory and job "
            "name); leave it out\n",
        ),
        (
            ["--sbatch-arg", "constraint=x"],
            "Error: --sbatch-arg 'constraint=x': expected one sbatch option without spaces (it becomes an #SBATCH "
            "line), e.g. --sbatch-arg=--constraint=mi300x\n",
        ),
    ],
)
def test_sbatch_args_are_checked_before_anything_runs(tmp_path: Path, args: list[str], message: str) -> None:
    path = replay_file(tmp_path, CASES)
    result = CliRunner().invoke(cli, ["sweep", str(path), "--executor", "slurm", *args])
    assert result.exit_code == 1
    assert result.output == message


def test_points_queued_in_the_last_array_are_not_submitted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in sbatch and squeue: job 41 holds the three points, task 0 running and 1, 2 pending."""
    monkeypatch.chdir(tmp_path)
    no_slurm_path(
        monkeypatch,
        tmp_path,
        sbatch='echo "$@" >> sbatch.calls; echo "41;cluster"\n',
        squeue='[ "$6" = 41 ] || exit 1\n'
        'printf "41|0|RUNNING|None|node7|1:02\\n41|1|PENDING|Priority||0:00\\n41|2|PENDING|Resources||0:00\\n"\n',
    )
    path = replay_file(tmp_path, CASES)
    points = expand(load_sweep(path))
    first = CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm"])
    assert first.exit_code == 0, first.output
    assert "submitted Slurm job 41: 3 array task(s); script " in first.stderr
    assert first.stdout.splitlines()[-1].startswith(
        "0 done, 0 skipped (0 already stored), 0 failed, 3 submitted (queued or running as batch jobs) in "
    )
    sub = last_submission(load_sweep(path))
    assert sub is not None and sub.job == "41" and sub.points == tuple(p.id for p in points)
    assert sub.db == str(tmp_path / "results.db")

    again = CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm"])
    assert again.exit_code == 0, again.output
    assert len((tmp_path / "sbatch.calls").read_text().splitlines()) == 1  # submitted once
    for i, p in enumerate(points):
        assert f"skipped {p.id} case={p.params['case']} repeat=1: queued or running already as Slurm job 41_{i}" in (
            again.stderr
        )

    status = CliRunner().invoke(cli, ["sweep", "status", "replay.yaml", "--format", "json"])
    assert status.exit_code == 0, status.output
    rows = json.loads(status.stdout)
    assert [(r["point"], r["state"], r["job"], r["detail"]) for r in rows] == [
        (points[0].id, "running", "41_0", "running on node7 for 1:02"),
        (points[1].id, "pending", "41_1", "waiting in Slurm's queue (Priority)"),
        (points[2].id, "pending", "41_2", "waiting in Slurm's queue (Resources)"),
    ]


def test_status_gives_no_job_for_a_point_outside_the_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a point that is in no submitted array has no Slurm job: null in JSON (as its unknown run), blank in
    # CSV and tables; it was the empty string, which a script reads as a job named ""
    monkeypatch.chdir(tmp_path)
    no_slurm_path(
        monkeypatch,
        tmp_path,
        sbatch='echo "41;cluster"\n',
        squeue='[ "$6" = 41 ] || exit 1\nprintf "41|0|PENDING|Priority||0:00\\n"\n',
    )
    path = replay_file(tmp_path, CASES)
    points = expand(load_sweep(path))
    sent = CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm", "--point", points[0].id])
    assert sent.exit_code == 0, sent.output
    status = CliRunner().invoke(cli, ["sweep", "status", "replay.yaml", "--format", "json"])
    assert status.exit_code == 0, status.output
    assert [(r["point"], r["state"], r["run"], r["job"]) for r in json.loads(status.stdout)] == [
        (points[0].id, "pending", None, "41_0"),
        (points[1].id, "not submitted", None, None),
        (points[2].id, "not submitted", None, None),
    ]
    csv_rows = CliRunner().invoke(cli, ["sweep", "status", "replay.yaml", "--format", "csv"]).stdout.splitlines()
    assert [row.split(",")[:4] for row in csv_rows] == [
        ["point", "state", "run", "job"],
        [points[0].id, "pending", "", "41_0"],
        [points[1].id, "not submitted", "", ""],
        [points[2].id, "not submitted", "", ""],
    ]
    table = CliRunner().invoke(cli, ["sweep", "status", "replay.yaml"]).stdout.splitlines()
    for point, cells in zip(points, (["pending", "41_0"], ["not", "submitted"], ["not", "submitted"]), strict=True):
        (line,) = [ln for ln in table if ln.startswith(point.id)]
        # run and job are blank where unknown: the values follow at once
        assert line.split()[:4] == [point.id, *cells, f"case={point.params['case']}"], line
        assert "None" not in line and '""' not in line


def test_status_asks_sacct_for_tasks_squeue_has_forgotten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    no_slurm_path(monkeypatch, tmp_path, sbatch="echo 63\n")
    path = replay_file(tmp_path, CASES)
    points = expand(load_sweep(path))
    assert CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm"]).exit_code == 0
    log = tmp_path / "out" / "slurm" / "replay-63_1.log"
    write(log, "rocroof: point x is task 1 of Slurm job 63 on n1\nError: database error: disk I/O error\n")
    no_slurm_path(
        monkeypatch,
        tmp_path,
        squeue='echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1\n',
        sacct='printf "63_0|COMPLETED|0:0|n1|00:00:04\n63_1|FAILED|1:0|n1|00:00:02\n63_2|TIMEOUT|0:15|n2|01:00:00\n"\n',
    )
    rows = json.loads(CliRunner().invoke(cli, ["sweep", "status", "replay.yaml", "--format", "json"]).stdout)
    ended = "the job ended without storing the point"
    assert [(r["point"], r["state"], r["detail"]) for r in rows] == [
        (points[0].id, "failed", f"{ended} (Slurm state COMPLETED); log {tmp_path}/out/slurm/replay-63_0.log"),
        (points[1].id, "failed", f"{ended} (Slurm state FAILED); database error: disk I/O error; log {log}"),
        (points[2].id, "failed", f"{ended} (Slurm state TIMEOUT); log {tmp_path}/out/slurm/replay-63_2.log"),
    ]


def test_wait_stops_waiting_when_cancelled_and_the_jobs_go_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    no_slurm_path(
        monkeypatch,
        tmp_path,
        sbatch="echo 52\n",
        squeue='printf "52|0|PENDING|Priority||0:00\n52|1|RUNNING|None|n1|0:03\n"\n',
    )
    sweep = load_sweep(replay_file(tmp_path, CASES[:2]))
    points = expand(sweep)
    events: list[SweepEvent] = []
    cancel = threading.Event()

    def on_event(event: SweepEvent) -> None:
        events.append(event)
        if event.kind == "stage":
            cancel.set()  # what Ctrl-C does

    executor = SlurmExecutor(wait=True, poll_s=0.05)
    outcome = run_sweep(sweep, db="results.db", executor=executor, on_event=on_event, cancel=cancel)
    assert outcome.interrupted
    assert [(r.status, r.detail) for r in outcome.results] == [
        ("submitted", "Slurm job 52_0"),
        ("submitted", "Slurm job 52_1"),
    ]
    assert [(e.kind, e.point.id if e.point else None) for e in events] == [
        ("info", None),
        ("info", None),
        ("start", points[1].id),
        ("stage", points[1].id),
        ("stopping", None),
    ]
    assert events[0].detail.startswith("submitted Slurm job 52: 2 array task(s); script ")
    assert events[1].detail.startswith("the database is a SQLite file: its writers must share one host (WAL)")
    assert events[3].detail == "running on n1 for 0:03 (job 52_1)"
    assert events[4].detail == (
        f"stopped waiting: Slurm job 52 goes on (scancel 52 stops it); 'rocroof sweep status {tmp_path}/replay.yaml' "
        "shows where each point stands"
    )


def test_status_without_a_submission_reads_the_database(tmp_path: Path) -> None:
    path = replay_file(tmp_path, CASES)
    sweep = load_sweep(path)
    db = tmp_path / "results.db"
    assert CliRunner().invoke(cli, ["sweep", str(path), "--point", expand(sweep)[1].id, "--db", str(db)]).exit_code == 0
    status = sweep_status(sweep, expand(sweep), db=str(db), default_db="unused.db")
    assert [(s.state, s.run_id) for s in status.states] == [
        ("not run", None),  # nothing was submitted: a local sweep that has not run them yet
        ("done", 1),
        ("not run", None),
    ]
    assert status.heading().startswith(f"Sweep replay: no Slurm submission recorded under {Path('out') / 'slurm'}")
    assert status.summary() == "1 done, 2 not run"
    assert status.heading().endswith(f"  database {db}")
    elsewhere = sweep_status(sweep, expand(sweep), db=str(tmp_path / "other.db"), default_db="unused.db")
    assert elsewhere.summary() == "3 not run"  # says where it looked, and that nothing is there
    assert elsewhere.heading().endswith("other.db (does not exist: nothing stored there yet; another --db?)")


def test_slurm_executor_options() -> None:
    with pytest.raises(ConfigError, match=r"^--jobs 0: expected at least 1$"):
        SlurmExecutor(jobs=0)
    assert SlurmExecutor().python == sys.executable
    assert not SlurmExecutor.runs_here


# ---- on a real cluster ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def cluster() -> str:
    """The node name of a running Slurm cluster (SLURM_CONF), or skip / fail saying how to start one."""
    why = ""
    if not os.environ.get("ROCROOF_TEST_SLURM"):
        why = "ROCROOF_TEST_SLURM is not set"
    elif not shutil.which("sbatch") or not shutil.which("sinfo"):
        why = "sbatch/sinfo are not on PATH"
    else:
        done = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=30, check=False
        )
        nodes = [line.split() for line in done.stdout.splitlines() if line.strip()]
        up = [n for n, state in nodes if state.rstrip("*") in ("idle", "mixed", "allocated", "completing")]
        if done.returncode != 0 or not up:
            why = f"no Slurm node is up (sinfo: {(done.stderr or done.stdout).strip() or 'no nodes'})"
    if why:
        if os.environ.get("ROCROOF_REQUIRE_SLURM"):
            pytest.fail(f"{why}: CI must run the Slurm tests (.ci/run starts a cluster with .ci/slurm)")
        pytest.skip(
            f"{why}: start a throw-away cluster with: export SLURM_CONF=$(.ci/slurm start /tmp/rocroof-slurm) "
            "ROCROOF_TEST_SLURM=1"
        )
    return up[0]


def task_states(job: str, timeout_s: float = 30.0) -> dict[int, str]:
    """Slurm's final state of each task of ``job`` (a point is stored a moment before its task exits)."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = subprocess.run(
            ["squeue", "-h", "-r", "-t", "all", "-j", job, "-o", "%K|%T"], capture_output=True, text=True, check=True
        ).stdout
        states = {int(k): state for k, state in (line.split("|") for line in out.splitlines())}
        if all(s in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") for s in states.values()) or (
            time.monotonic() > deadline
        ):
            return states
        time.sleep(0.2)


def dispatch_counts(db: Path) -> dict[str, tuple[int, int, int]]:
    """Per stored capture (content hash): dispatches, distinct kernels, summed GPU time (ns)."""
    ro = Store(db, read_only=True)
    df = ro.query(
        "SELECT r.content_sha256 AS h, COUNT(*) AS n, COUNT(DISTINCT d.kernel_name) AS k, SUM(d.duration_ns) AS ns "
        "FROM dispatch d JOIN run r ON r.run_id = d.run_id GROUP BY r.content_sha256"
    )
    ro.close()
    return {h: (int(n), int(k), int(ns)) for h, n, k, ns in zip(df["h"], df["n"], df["k"], df["ns"], strict=True)}


def test_a_replay_sweep_runs_as_a_job_array_under_slurmd(
    cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = replay_file(tmp_path, CASES)
    sweep = load_sweep(path)
    points = expand(sweep)
    result = CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm", "--wait"])
    assert result.exit_code == 0, result.output
    sub = last_submission(sweep)
    assert sub is not None and sub.points == tuple(p.id for p in points)
    assert f"submitted Slurm job {sub.job}: 3 array task(s); script {sub.script}" in result.stderr
    assert result.stdout.splitlines()[-1].startswith("3 done, 0 skipped (0 already stored), 0 failed in ")

    # slurmd ran each task: its log says so, in Slurm's own variables, and Slurm lists it completed
    for i, p in enumerate(points):
        log = (tmp_path / "out" / "slurm" / f"replay-{sub.job}_{i}.log").read_text()
        assert (
            log.splitlines()[0] == f"rocroof: point {p.id} is task {i} of Slurm job {sub.job} on {socket.gethostname()}"
        )
    assert task_states(sub.job) == {0: "COMPLETED", 1: "COMPLETED", 2: "COMPLETED"}

    # exactly the expected runs, with their labels; the same numbers as a direct ingest of each capture
    db = tmp_path / "results.db"  # the sweep's relative db, resolved against the submit directory
    ro = Store(db, read_only=True)
    labels = ro.query("SELECT run_id, key, value FROM run_label ORDER BY run_id, key")
    runs = ro.query("SELECT run_id, source_path FROM run ORDER BY run_id")
    ro.close()
    assert len(runs) == len(CASES)
    by_run: dict[int, dict[str, str]] = {}
    for rid, k, v in zip(labels["run_id"], labels["key"], labels["value"], strict=True):
        by_run.setdefault(int(rid), {})[k] = v
    assert sorted(by_run.values(), key=lambda d: d["sweep_point"]) == sorted(
        (p.labels for p in points), key=lambda d: d["sweep_point"]
    )
    assert {p.labels["sweep_point"] for p in points} == {p.id for p in points}
    assert sorted(runs["source_path"]) == sorted(str(EXAMPLES / c) for c in CASES)
    direct = tmp_path / "direct.db"
    for case in CASES:
        assert CliRunner().invoke(cli, ["ingest", str(EXAMPLES / case), "--db", str(direct)]).exit_code == 0
    swept = dispatch_counts(db)
    assert swept == dispatch_counts(direct)
    assert len(swept) == 3 and all(n > 0 for n, _, _ in swept.values())

    # a rerun submits nothing: every point is stored
    again = CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm", "--wait"])
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[-1].startswith("0 done, 3 skipped (3 already stored), 0 failed in ")
    assert "submitted Slurm job" not in again.stderr
    assert len(list((tmp_path / "out" / "slurm").glob("*.sbatch"))) == 1

    status = CliRunner().invoke(cli, ["sweep", "status", "replay.yaml", "--format", "json"])
    assert status.exit_code == 0, status.output
    run_of = {d["sweep_point"]: rid for rid, d in by_run.items()}
    assert [(r["point"], r["state"], r["run"], r["job"]) for r in json.loads(status.stdout)] == [
        (p.id, "done", run_of[p.id], f"{sub.job}_{i}") for i, p in enumerate(points)
    ]
    table = CliRunner().invoke(cli, ["sweep", "status", "replay.yaml"])
    assert table.stdout.splitlines()[0].startswith(f"Sweep replay: Slurm job {sub.job}, 3 array task(s) submitted ")
    assert table.stdout.splitlines()[-1] == "3 done"


def test_a_failing_point_shows_failed_with_its_reason(
    cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Submitted without --wait: sweep status follows the array until it ends."""
    monkeypatch.chdir(tmp_path)
    path = replay_file(tmp_path, ("moe-prefill", "missing"), on_error="skip")
    points = expand(load_sweep(path))
    result = CliRunner().invoke(cli, ["sweep", "replay.yaml", "--executor", "slurm"])
    assert result.exit_code == 0, result.output
    assert "2 submitted (queued or running as batch jobs)" in result.stdout
    sub = last_submission(load_sweep(path))
    assert sub is not None

    seen: set[str] = set()
    deadline = time.monotonic() + 60
    while True:
        status = CliRunner().invoke(cli, ["sweep", "status", "replay.yaml", "--format", "json"])
        assert status.exit_code == 0, status.output
        rows = json.loads(status.stdout)
        seen.update(r["state"] for r in rows)
        if all(r["state"] not in ("pending", "running") for r in rows) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert seen <= {"pending", "running", "done", "failed"}
    assert [(r["point"], r["state"], r["run"], r["job"], r["detail"]) for r in rows] == [
        (points[0].id, "done", 1, f"{sub.job}_0", ""),
        (points[1].id, "failed", None, f"{sub.job}_1", f"{EXAMPLES}/missing: no such file or directory"),
    ]
    assert task_states(sub.job) == {0: "COMPLETED", 1: "FAILED"}  # the failed point's task exits 1
    table = CliRunner().invoke(cli, ["sweep", "status", "replay.yaml"])
    assert table.stdout.splitlines()[-1] == "1 done, 1 failed"


def test_status_of_a_local_sweep_reads_the_point_status_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = replay_file(tmp_path, CASES)
    sweep = load_sweep(path)
    points = expand(sweep)
    sweep.out.mkdir(parents=True)
    (sweep.out / f"{points[0].id}.json").write_text(json.dumps({"state": "interrupted", "attempt": 1}))
    (sweep.out / f"{points[1].id}.json").write_text(
        json.dumps({"state": "profiling", "attempt": 1, "updated": "2026-11-30T14:48:27+00:00"})
    )
    status = sweep_status(sweep, points, db=str(tmp_path / "none.db"), default_db="unused.db")
    assert [(s.state, s.detail) for s in status.states] == [
        ("not run", "interrupted; a rerun resumes it"),
        ("unknown", "profiling since 2026-11-30T14:48:27+00:00 and not stored (still running?)"),
        ("not run", ""),
    ]
