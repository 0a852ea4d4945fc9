"""rocroof sweep: the sweep file, expansion and ids, dry run, replay, resume, stop/skip, GPU pinning, parallel writers.

Where a profiler would run, the fakes of tests/test_collect.py stand in (a rocprofv3 that
writes CSV output for the planned command); the replay sweep ingests the committed H200
captures of examples/h200. No GPU, no network.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rocroof.capture.profilers.nsight import NsightPair
from rocroof.cli import cli
from rocroof.errors import ConfigError
from rocroof.store import Store
from rocroof.sweep import (
    LocalExecutor,
    Point,
    SweepEvent,
    SweepFileError,
    cancellable_runner,
    expand,
    load_sweep,
    point_id,
    read_status,
    run_sweep,
    stored_points,
)
from rocroof.sweep import run as sweep_run
from rocroof.sweep.run import PointInterrupted, PointRunner

from .conftest import REPO
from .test_collect import FakeRocprofv3, fake_runner

EXAMPLES = REPO / "examples" / "h200"
REPLAY = REPO / "configs" / "sweeps" / "replay-examples.yaml"
CASES = ("dense-prefill", "moe-prefill", "dense500m-decode")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ROCROOF_DB", "ROCROOF_TRACEBACK", "GGML_CUDA_MARKERS", "GGML_CUDA_OP_META"):
        monkeypatch.delenv(name, raising=False)
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def labels_of(db: Path) -> dict[int, dict[str, str]]:
    ro = Store(db, read_only=True)
    df = ro.query("SELECT run_id, key, value FROM run_label ORDER BY run_id, key")
    ro.close()
    out: dict[int, dict[str, str]] = {}
    for rid, k, v in zip(df["run_id"], df["key"], df["value"], strict=True):
        out.setdefault(int(rid), {})[k] = v
    return out


# ---- the sweep file -----------------------------------------------------------------------------

HEAD = "version: 1\ncommand: app -m {model}\nmatrix:\n  model: [a.gguf]\nprofiler: ncu\n"

BAD_FILES = [
    ("command: app\nprofiler: ncu\n", "{f}: version: missing; start the file with 'version: 1'"),
    (
        "version: 2\ncommand: app\nprofiler: ncu\n",
        "{f}:1: version: expected 1, got 2 (this rocroof reads sweep files of version 1)",
    ),
    (
        "version: '1'\ncommand: app\nprofiler: ncu\n",
        "{f}:1: version: expected the number 1, got a string ('1')",
    ),
    (
        HEAD + "repeat: 2\n",
        "{f}:6: repeat: unknown key (did you mean 'repeats'?); expected one of: version, name, command, matrix, "
        "profiler, repeats, labels, out, db, on_error, slurm",
    ),
    (
        "version: 1\ncommand: app {model}\nmatrix:\n  model: m.gguf\nprofiler: ncu\n",
        "{f}:4: matrix.model: expected a list of values or a mapping of named groups ({{name: {{key: value}}}}), "
        "got a string ('m.gguf')",
    ),
    (
        "version: 1\ncommand: app {fusion}\nmatrix:\n  fusion: [1, off]\nprofiler: ncu\n",
        "{f}:4: matrix.fusion[1]: expected a string or a number, got off (YAML reads yes/no/on/off/true/false as a "
        "boolean; quote it: 'off')",
    ),
    (
        "version: 1\ncommand: app -m {model}\nmatrix:\n  model: [a, b, a]\nprofiler: ncu\n",
        "{f}:4: matrix.model[2]: 'a' is listed twice",
    ),
    (
        "version: 1\ncommand: app -m {model} -p {promt}\nmatrix:\n  model: [a]\n  prompt: [1]\nprofiler: ncu\n",
        "{f}:2: command: unknown placeholder {{promt}} (did you mean {{prompt}}?); the matrix defines: {{model}}, "
        "{{prompt}}, {{repeat}}",
    ),
    (
        "version: 1\ncommand: [app, '{x']\nmatrix: {x: [1]}\nprofiler: ncu\n",
        "{f}:2: command[1]: unmatched '{{' in '{{x'; write {{{{ or }}}} for a literal brace",
    ),
    (
        "version: 1\ncommand: app {prompt} {gen}\nmatrix:\n  phase:\n    prefill: {prompt: 512, gen: 0}\n"
        "    decode: {prompt: 0}\nprofiler: ncu\n",
        "{f}:6: matrix.phase.decode: sets prompt; the first group (prefill) sets gen, prompt (every group of an "
        "axis sets the same keys)",
    ),
    (
        "version: 1\ncommand: app {p}\nmatrix:\n  p: [1]\n  phase:\n    a: {p: 2}\nprofiler: ncu\n",
        "{f}:6: matrix.phase.a.p: 'p' is also set by matrix.p; each placeholder comes from one matrix key",
    ),
    (
        "version: 1\ncommand: app\nmatrix:\n  env:\n    - {GGML_CUDA_DISABLE_FUSION: }\nprofiler: ncu\n",
        "{f}:5: matrix.env[0].GGML_CUDA_DISABLE_FUSION: expected a string or a number, got nothing (null)",
    ),
    (
        "version: 1\ncommand: app\nmatrix:\n  repeat: [1, 2]\nprofiler: ncu\n",
        "{f}:4: matrix.repeat: 'repeat' is set by the sweep itself (sweep, sweep_point, sweep_gpu, repeat); "
        "choose another name",
    ),
    (
        "version: 1\ncommand: app\n",
        "{f}: profiler: missing; expected one of rocprofv3, ncu, replay (or a mapping with name: and options)",
    ),
    (
        "version: 1\ncommand: app\nprofiler: nsight\n",
        "{f}:3: profiler: expected one of rocprofv3, ncu, replay, got a string ('nsight')",
    ),
    (
        "version: 1\ncommand: app\nprofiler:\n  name: ncu\n  cache_contrl: none\n",
        "{f}:5: profiler.cache_contrl: unknown option for ncu (did you mean 'cache_control'?); expected one of: "
        "counters, cache_control, nvtx_include, nsys, arch, sidecar, bandwidth_probe",
    ),
    (
        "version: 1\ncommand: app\nprofiler: {name: rocprofv3, cache_control: none}\n",
        "{f}:3: profiler.cache_control: an option of ncu, not of rocprofv3; rocprofv3 takes: counters, output_format, "
        "arch, sidecar",
    ),
    (
        "version: 1\nmatrix: {case: [a]}\nprofiler: replay\n",
        "{f}:3: profiler.capture: missing; replay needs the recorded capture of each point, e.g. capture: "
        "examples/h200/{{case}}",
    ),
    (
        "version: 1\nmatrix: {case: [a]}\nprofiler: {name: replay, capture: 'x/{cas}'}\n",
        "{f}:3: profiler.capture: unknown placeholder {{cas}} (did you mean {{case}}?); the matrix defines: "
        "{{case}}, {{repeat}}",
    ),
    (
        "version: 1\nmatrix: {case: [a]}\nprofiler: {name: replay, capture: 'x/{case}'}\nrepeats: 2\n",
        "{f}:4: repeats: a recorded capture is stored once; replay takes repeats: 1",
    ),
    (
        "version: 1\ncommand: app\nprofiler: ncu\nrepeats: 0\n",
        "{f}:4: repeats: expected a whole number of at least 1, got a number (0)",
    ),
    (
        "version: 1\nprofiler: ncu\n",
        "{f}: command: missing; expected the application command, e.g. llama-bench -m {{model}} -p {{prompt}}",
    ),
    (
        HEAD + "labels: {sweep_point: x}\n",
        "{f}:6: labels.sweep_point: 'sweep_point' is set by the sweep itself (sweep, sweep_point, sweep_gpu, "
        "repeat); choose another key",
    ),
    (
        HEAD + "labels:\n  model: b\n",
        "{f}:7: labels.model: 'model' is also a matrix key (each point is labelled with its value)",
    ),
    (HEAD + "on_error: continue\n", "{f}:6: on_error: expected stop or skip, got a string ('continue')"),
    (
        HEAD + 'labels: {gpu: "a\\e]0;title\\a"}\n',
        "{f}:6: labels.gpu: control character '\\x1b' in 'a\\x1b]0;title\\x07'; labels and values are one plain line",
    ),
    (
        HEAD + 'labels: {"a,b": x}\n',
        "{f}:6: labels.a,b: a label key cannot hold ',' or '=' (labels are listed as key=value,...), got 'a,b'",
    ),
    (
        'version: 1\ncommand: app {model}\nmatrix:\n  model: [a.gguf, "b\\r.gguf"]\nprofiler: ncu\n',
        "{f}:4: matrix.model[1]: control character '\\r' in 'b\\r.gguf'; labels and values are one plain line",
    ),
    (
        'version: 1\ncommand: app\nmatrix:\n  env:\n    "x\\ty": {A: 1}\nprofiler: ncu\n',
        "{f}:5: matrix.env.x\ty: control character '\\t' in 'x\\ty'; labels and values are one plain line",
    ),
    (
        "version: 1\nmatrix: " + "[" * 5000 + "]" * 5000 + "\n",
        "{f}: nested too deeply (a sweep file is a few levels deep)",
    ),
    (HEAD + "repeats: 1\nrepeats: 2\n", "{f}:7: repeats: given twice (lines 6 and 7); keep one"),
    (
        "version: 1\ncommand: [app\nprofiler: ncu\n",
        "{f}:3: not valid YAML: while parsing a flow sequence expected ',' or ']', but got ':'",
    ),
    (  # the trial: the README's flow style with a placeholder, unquoted
        "version: 1\ncommand: app {model}\nmatrix:\n  model: [a, b]\nprofiler: {name: replay, capture: x/{model}}\n",
        "{f}:5: not valid YAML: while parsing a flow mapping expected ',' or '}}', but got '{{'; a value holding "
        "{{placeholders}} inside {{ }} must be quoted (e.g. capture: 'x/{{model}}')",
    ),
    ("", "{f}: the file is empty; a sweep needs at least version, command, matrix and profiler"),
    (
        "- a\n",
        "{f}: expected a mapping of sweep keys (version, name, command, matrix, profiler, repeats, labels, out, db, "
        "on_error, slurm), got a list",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_FILES)
def test_a_bad_sweep_file_is_one_exact_message(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "bad.yaml", text)
    with pytest.raises(SweepFileError) as err:
        load_sweep(path)
    assert str(err.value) == message.format(f=path)


@pytest.mark.parametrize(("name", "arch"), [("ncu", "hopper"), ("rocprofv3", "gfx999"), ("rocprofv3", "gfx924")])
def test_a_sweep_s_arch_is_refused_as_collect_refuses_it(tmp_path: Path, name: str, arch: str) -> None:
    # a trial user's mistyped --arch gfx9999 / gfx924 was stored as a run of that GPU: the sweep's arch
    # is the same check, with the same reason as collect --arch gives
    path = write(tmp_path / "bad.yaml", f"version: 1\ncommand: app\nprofiler:\n  name: {name}\n  arch: {arch}\n")
    with pytest.raises(SweepFileError) as err:
        load_sweep(path)
    result = CliRunner().invoke(cli, ["collect", "--arch", arch, "--dry-run", "--", "app"])
    assert result.exit_code == 1
    prefix = f"Error: --arch {arch!r}: "
    assert result.output.startswith(prefix)
    reason = result.output.strip()[len(prefix) :]
    assert str(err.value) == f"{path}:5: profiler.arch: {arch!r}: {reason}"
    assert reason.startswith("not a GPU architecture rocroof knows")
    assert "gfx942" in reason and "sm_90" in reason  # names the known ones


def test_a_sweep_s_arch_with_target_features_is_kept(tmp_path: Path) -> None:
    text = "version: 1\ncommand: app\nprofiler:\n  name: rocprofv3\n  arch: gfx942:sramecc+\n"
    path = write(tmp_path / "ok.yaml", text)
    assert load_sweep(path).profiler.options["arch"] == "gfx942:sramecc+"


def test_a_bad_sweep_file_is_one_line_on_the_command_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", HEAD + "on_error: continue\n")
    result = CliRunner().invoke(cli, ["sweep", str(path), "--dry-run"])
    assert result.exit_code == 1
    assert result.output == f"Error: {path}:6: on_error: expected stop or skip, got a string ('continue')\n"
    missing = CliRunner().invoke(cli, ["sweep", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 1
    assert missing.output == f"Error: {tmp_path / 'nope.yaml'}: no such sweep file\n"


def test_the_sample_sweeps_load() -> None:
    tiny = load_sweep(REPO / "configs" / "sweeps" / "h200-tiny.yaml")
    assert tiny.profiler.name == "ncu"
    assert tiny.profiler.options == {"counters": "roofline", "cache_control": "all"}
    points = expand(tiny)
    assert len(points) == 2 * 2 * 2 * tiny.repeats
    assert {p.params["phase"] for p in points} == {"prefill", "decode"}
    assert {p.labels["env"] for p in points} == {"fusion", "no-fusion"}
    assert {tuple(sorted(p.env.items())) for p in points} == {(), (("GGML_CUDA_DISABLE_FUSION", "1"),)}
    replay = expand(load_sweep(REPLAY))
    assert [p.params["case"] for p in replay] == list(CASES)
    assert [p.capture_dir for p in replay] == [Path("examples/h200") / c for c in CASES]


# ---- expansion and ids ----------------------------------------------------------------------------

SWEEP = """version: 1
command: llama-bench -m {model} -p {prompt} -n {gen} --tag '{model} x' --brace '{{x}}'
matrix:
  model: [a.gguf, b.gguf]
  phase:
    prefill: {prompt: 512, gen: 0}
    decode: {prompt: 0, gen: 16}
  env:
    - {}
    - {GGML_CUDA_DISABLE_FUSION: "1"}
profiler: {name: ncu, counters: dram, cache_control: none}
repeats: 2
labels: {device: H200, campaign: t}
out: OUT
"""

# the same sweep with every mapping written in another order
SWEEP_REORDERED = """version: 1
out: OUT
labels: {campaign: t, device: H200}
repeats: 2
profiler: {cache_control: none, counters: dram, name: ncu}
matrix:
  model: [a.gguf, b.gguf]
  phase:
    prefill: {gen: 0, prompt: 512}
    decode: {gen: 16, prompt: 0}
  env:
    - {}
    - {GGML_CUDA_DISABLE_FUSION: "1"}
command: llama-bench -m {model} -p {prompt} -n {gen} --tag '{model} x' --brace '{{x}}'
"""


def test_expansion_every_combination_times_each_repeat(tmp_path: Path) -> None:
    sweep = load_sweep(write(tmp_path / "s.yaml", SWEEP))
    points = expand(sweep)
    assert len(points) == 2 * 2 * 2 * 2
    assert [p.index for p in points] == list(range(1, 17))
    assert [p.repeat for p in points] == [1] * 8 + [2] * 8  # repeats outermost
    first = points[0]
    assert first.params == {
        "model": "a.gguf",
        "phase": "prefill",
        "prompt": "512",
        "gen": "0",
        "env": "none",
        "repeat": "1",
    }
    assert first.command == (
        "llama-bench", "-m", "a.gguf", "-p", "512", "-n", "0", "--tag", "a.gguf x", "--brace", "{x}",
    )  # fmt: skip
    assert first.env == {}
    assert points[1].env == {"GGML_CUDA_DISABLE_FUSION": "1"}
    assert points[1].labels["env"] == "GGML_CUDA_DISABLE_FUSION=1"
    assert first.labels == {
        "model": "a.gguf",
        "phase": "prefill",
        "prompt": "512",
        "gen": "0",
        "env": "none",
        "repeat": "1",
        "device": "H200",
        "campaign": "t",
        "sweep": "s",
        "sweep_point": first.id,
    }
    assert first.capture_dir == Path("OUT") / first.id
    assert len({p.id for p in points}) == 16
    assert all(len(p.id) == 12 and int(p.id, 16) >= 0 for p in points)


def test_point_ids_are_stable_and_independent_of_mapping_order(tmp_path: Path) -> None:
    a = expand(load_sweep(write(tmp_path / "a.yaml", SWEEP)))
    b = expand(load_sweep(write(tmp_path / "b.yaml", SWEEP_REORDERED)))
    assert {p.id: p.command for p in a} == {p.id: p.command for p in b}
    # pinned: an id must not change between rocroof versions, or reruns would redo stored points
    identity = {
        "command": list(a[0].command),
        "env": {},
        "params": a[0].params,
        "profiler": "ncu",
        "options": {"counters": "dram", "cache_control": "none"},
        "capture": None,
        "labels": {"device": "H200", "campaign": "t"},
    }
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert a[0].id == point_id(identity) == hashlib.sha256(canonical).hexdigest()[:12] == "cbca1c78ae96"
    # what does not change the measurement does not change the id: the sweep's name, out, db, on_error, arch
    c = expand(
        load_sweep(
            write(
                tmp_path / "c.yaml",
                SWEEP.replace("out: OUT", "out: elsewhere\ndb: x.db\non_error: skip\nname: other").replace(
                    "cache_control: none}", "cache_control: none, arch: sm_90}"
                ),
            )
        )
    )
    assert [p.id for p in c] == [p.id for p in a]
    # what changes the measurement changes every id: labels, profiler options, the command's arguments
    for old, new in (("campaign: t", "campaign: u"), ("counters: dram", "counters: roofline"), ("-n {gen}", "-t 1")):
        d = expand(load_sweep(write(tmp_path / "d.yaml", SWEEP.replace(old, new))))
        assert not {p.id for p in d} & {p.id for p in a}
    # the command's spelling does not: the same arguments, the same ids
    e = expand(load_sweep(write(tmp_path / "e.yaml", SWEEP.replace("-n {gen}", "-n   {gen}"))))
    assert [p.id for p in e] == [p.id for p in a]


def test_replay_points_must_map_to_their_own_capture(tmp_path: Path) -> None:
    text = "version: 1\nmatrix: {case: [a, b], n: [1, 2]}\nprofiler: {name: replay, capture: 'x/{case}'}\n"
    with pytest.raises(ConfigError, match=r"points 1 \(case=a n=1 repeat=1\) and 2 \(case=a n=2 repeat=1\) both "):
        expand(load_sweep(write(tmp_path / "r.yaml", text)))


# ---- dry run -----------------------------------------------------------------------------------------


def test_dry_run_prints_each_point_and_does_nothing_else(tmp_path: Path) -> None:
    text = """version: 1
command: llama-bench -m {model} -n {gen}
matrix:
  model: [a.gguf, 'my model.gguf']
  gen: [4]
  env:
    fusion: {}
    no-fusion: {GGML_CUDA_DISABLE_FUSION: 1}
profiler: rocprofv3
labels: {device: MI300X}
out: OUT
db: DB.db
"""
    path = write(tmp_path / "s.yaml", text)
    points = expand(load_sweep(path))
    result = CliRunner().invoke(cli, ["sweep", str(path), "--dry-run", "--gpus", "2,3"])
    assert result.exit_code == 0, result.output
    ids = [p.id for p in points]
    assert result.stdout == (
        f"Sweep s ({path}): 4 point(s); profiler rocprofv3; on_error stop\n"
        "  database DB.db; runs labelled sweep=s sweep_point=<point> device=MI300X\n"
        "  captures under OUT/<point>\n"
        "  GPUs 2,3: 2 point(s) at a time, each pinned with CUDA_VISIBLE_DEVICES=0 HIP_VISIBLE_DEVICES=0 "
        "ROCR_VISIBLE_DEVICES=<gpu>\n"
        "\n"
        f"[1/4] {ids[0]}  model=a.gguf gen=4 env=fusion repeat=1\n"
        "      llama-bench -m a.gguf -n 4\n"
        f"[2/4] {ids[1]}  model=a.gguf gen=4 env=no-fusion repeat=1\n"
        "      llama-bench -m a.gguf -n 4\n"
        "      env GGML_CUDA_DISABLE_FUSION=1\n"
        f"[3/4] {ids[2]}  model=my model.gguf gen=4 env=fusion repeat=1\n"
        "      llama-bench -m 'my model.gguf' -n 4\n"
        f"[4/4] {ids[3]}  model=my model.gguf gen=4 env=no-fusion repeat=1\n"
        "      llama-bench -m 'my model.gguf' -n 4\n"
        "      env GGML_CUDA_DISABLE_FUSION=1\n"
    )
    assert not (tmp_path / "OUT").exists() and not Path("OUT").exists()
    assert not Path("DB.db").exists()
    # --point selects by id or unique prefix
    one = CliRunner().invoke(cli, ["sweep", str(path), "--dry-run", "--point", ids[2][:8]])
    assert one.exit_code == 0 and ids[2] in one.stdout and ids[0] not in one.stdout
    bad = CliRunner().invoke(cli, ["sweep", str(path), "--dry-run", "--point", "zzzz"])
    assert bad.exit_code == 1
    assert bad.output == f"Error: --point 'zzzz': no such point in {path} (rocroof sweep --dry-run lists them)\n"


def test_dry_run_of_the_replay_sweep_names_each_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(cli, ["sweep", "configs/sweeps/replay-examples.yaml", "--dry-run"])
    assert result.exit_code == 0, result.output
    for case in CASES:
        assert f"capture examples/h200/{case}\n" in result.stdout
    assert "recorded: llama-bench -m dense-500m.gguf -p 0 -n 4 -r 1\n" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--executor", "slurm", "--gpus", "0"],
            "Error: --gpus: with --executor slurm each array task gets its GPU from Slurm (--gres=gpu:1, or slurm.gres "
            "in the sweep file); leave out --gpus\n",
        ),
        (
            ["--wait"],
            "Error: --wait: only for --executor slurm (the local executor runs the points and waits anyway)\n",
        ),
        (
            ["--sbatch-arg=--constraint=x"],
            "Error: --sbatch-arg: only for --executor slurm (options for sbatch; the local executor submits nothing)\n",
        ),
        (
            ["--gpus", "-1,a"],
            "Error: --gpus '-1,a': '-1' is not a GPU id; expected indices as nvidia-smi / rocm-smi list them (0,1,...) "
            "or UUIDs (GPU-..., MIG-...)\n",
        ),
        (
            ["--jobs", "2"],
            "Error: --jobs 2 without --gpus would profile 2 points on the same GPU at once; give the GPUs to use "
            "(--gpus 0,1,...)\n",
        ),
        (
            ["--gpus", "0,1", "--jobs", "3"],
            "Error: --jobs 3 with 2 GPU(s) (0,1): one point runs per GPU at a time; give at most --jobs 2 or more "
            "--gpus\n",
        ),
        (["--gpus", "0,,1"], "Error: --gpus '0,,1': expected GPU ids separated by commas, e.g. --gpus 0,1\n"),
        (["--gpus", "0,1,0"], "Error: --gpus '0,1,0': GPU 0 is given twice (one point runs per GPU at a time)\n"),
    ],
)
def test_executor_options_are_checked_before_anything_runs(tmp_path: Path, args: list[str], message: str) -> None:
    path = write(tmp_path / "s.yaml", HEAD + f"out: {tmp_path / 'out'}\n")
    result = CliRunner().invoke(cli, ["sweep", str(path), "--db", str(tmp_path / "r.db"), *args])
    assert result.exit_code == 1
    assert result.output == message
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "out").exists()


# ---- replay end to end ------------------------------------------------------------------------------


def test_replay_sweep_stores_the_three_examples_and_a_rerun_skips_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    db = tmp_path / "replay.db"
    result = CliRunner().invoke(cli, ["sweep", "configs/sweeps/replay-examples.yaml", "--db", str(db)])
    assert result.exit_code == 0, result.output
    points = expand(load_sweep(REPLAY))
    stored = labels_of(db)
    assert len(stored) == 3
    by_case = {labels["case"]: (rid, labels) for rid, labels in stored.items()}
    assert set(by_case) == set(CASES)
    for p in points:
        rid, labels = by_case[p.params["case"]]
        assert labels == {**p.labels, "sweep": "replay-examples", "sweep_point": p.id}
        assert labels["device"] == "H200" and labels["repeat"] == "1"
        assert f"done    {p.id} " in result.stderr and f": run {rid} (" in result.stderr
    ro = Store(db, read_only=True)
    runs = ro.query("SELECT run_id, source_path, profiler FROM run ORDER BY run_id")
    assert sorted(runs["source_path"]) == sorted(f"examples/h200/{c}" for c in CASES)
    assert set(runs["profiler"]) == {"ncu+nsys"}
    assert result.stdout.splitlines()[-1].startswith("3 done, 0 skipped (0 already stored), 0 failed in ")
    assert not Path("rocroof-out/sweeps/replay-examples").exists()  # replay writes nothing under out

    again = CliRunner().invoke(cli, ["sweep", "configs/sweeps/replay-examples.yaml", "--db", str(db)])
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[-1].startswith("0 done, 3 skipped (3 already stored), 0 failed in ")
    assert len(labels_of(db)) == 3


def test_a_replayed_capture_stored_before_without_labels_is_skipped_not_failed(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert CliRunner().invoke(cli, ["ingest", str(EXAMPLES / "moe-prefill"), "--db", str(db)]).exit_code == 0
    text = (
        "version: 1\nmatrix: {case: [dense-prefill, moe-prefill]}\n"
        f"profiler: {{name: replay, capture: '{EXAMPLES}/{{case}}'}}\n"
    )
    sweep = load_sweep(write(tmp_path / "s.yaml", text))
    outcome = run_sweep(sweep, db=str(db))
    assert [r.status for r in outcome.results] == ["done", "skipped"]
    assert outcome.results[1].run_id == 1
    assert outcome.results[1].detail == "the same capture is already stored as run 1 (other labels)"


def test_sweep_status_gives_the_reason_a_replay_point_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a replay sweep creates no out folder while it succeeds; a failure is recorded there all the same
    monkeypatch.chdir(tmp_path)
    text = (
        "version: 1\nmatrix: {case: [moe-prefill, nonexistent]}\n"
        f"profiler: {{name: replay, capture: '{EXAMPLES}/{{case}}'}}\ndb: {tmp_path / 'r.db'}\non_error: skip\n"
    )
    spec = write(tmp_path / "s.yaml", text)
    ran = CliRunner().invoke(cli, ["sweep", str(spec)])
    assert ran.exit_code != 0 or "1 failed" in ran.output
    status = CliRunner().invoke(cli, ["sweep", "status", str(spec)])
    assert status.exit_code == 0, status.output
    failed = [line for line in status.output.splitlines() if "failed" in line and "nonexistent" in line]
    assert failed, status.output
    assert "no such file or directory" in failed[0].lower()
    # JSON gives the stored point's run as a number, the failed one's as null
    rows = json.loads(CliRunner().invoke(cli, ["sweep", "status", str(spec), "--format", "json"]).stdout)
    assert sorted((r["state"], r["run"]) for r in rows) == [("done", 1), ("failed", None)]


# ---- profiling sweeps with a fake rocprofv3 ---------------------------------------------------------

Call = tuple[str, tuple[str, ...], dict[str, str]]


class Recorder:
    """A fake rocprofv3 runner (tests/test_collect.py) that records each call's point and environment.

    ``fail``/``interrupt`` pick calls (by the point's model) that exit 1 or raise KeyboardInterrupt;
    ``delay`` makes each call take that long, so that points overlap.
    """

    def __init__(
        self,
        fail: Callable[[str], bool] = lambda _m: False,
        interrupt: Callable[[str], bool] = lambda _m: False,
        delay: float = 0.0,
    ) -> None:
        self.inner = fake_runner()
        self.calls: list[Call] = []
        self.fail, self.interrupt, self.delay = fail, interrupt, delay
        self.lock = threading.Lock()

    def __call__(self, argv: Sequence[str], env: dict[str, str], log: Path) -> int:
        model = argv[argv.index("-m") + 1]
        with self.lock:
            self.calls.append((model, tuple(argv), dict(env)))
        if self.delay:
            time.sleep(self.delay)
        if self.interrupt(model):
            raise KeyboardInterrupt
        if self.fail(model):
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("starting\nE rocprofv3: the application crashed\n")
            return 1
        return self.inner(argv, env, log)  # type: ignore[operator, no-any-return]

    def models(self) -> list[str]:
        return [m for m, _, _ in self.calls]


def amd_sweep(tmp_path: Path, models: Sequence[str] = ("a", "b", "c"), on_error: str = "stop", extra: str = "") -> Path:
    return write(
        tmp_path / "amd.yaml",
        f"version: 1\ncommand: llama-bench -m {{model}}.gguf -n 4\nmatrix:\n  model: [{', '.join(models)}]\n"
        f"profiler: {{name: rocprofv3, output_format: csv}}\nout: {tmp_path / 'out'}\non_error: {on_error}\n{extra}",
    )


def fake_profiler(_spec: Any) -> FakeRocprofv3:
    return FakeRocprofv3(output_format="csv")


def run(path: Path, db: Path, recorder: Recorder, **kwargs: Any) -> Any:
    return run_sweep(load_sweep(path), db=str(db), runner=recorder, make_profiler=fake_profiler, **kwargs)


def test_a_profiled_point_is_collected_then_stored_with_its_labels(tmp_path: Path) -> None:
    path = amd_sweep(tmp_path, models=("a",), extra="labels: {device: MI300X}\n")
    rec = Recorder()
    outcome = run(path, tmp_path / "r.db", rec)
    (result,) = outcome.results
    assert result.status == "done" and result.run_id == 1
    point = result.point
    capture = tmp_path / "out" / point.id
    manifest = json.loads((capture / "rocroof-collect.json").read_text())
    assert manifest["command"] == ["llama-bench", "-m", "a.gguf", "-n", "4"]
    assert [p["dir"] for p in manifest["passes"]] == ["trace", "pass_1", "pass_2"]
    assert labels_of(tmp_path / "r.db")[1] == {
        "model": "a",
        "repeat": "1",
        "device": "MI300X",
        "sweep": "amd",
        "sweep_point": point.id,
    }
    status = read_status(load_sweep(path), point)
    assert status["state"] == "done" and status["run_id"] == 1 and status["attempt"] == 1
    ro = Store(tmp_path / "r.db", read_only=True)
    assert ro.query("SELECT source_path FROM run")["source_path"].iloc[0] == str(capture)


def test_stop_ends_the_sweep_at_the_first_failure_and_a_rerun_retries_it(tmp_path: Path) -> None:
    path = amd_sweep(tmp_path, on_error="stop")
    db = tmp_path / "r.db"
    broken = Recorder(fail=lambda m: m == "b.gguf")
    outcome = run(path, db, broken)
    assert [r.status for r in outcome.results] == ["done", "failed", "not-run"]
    failed = outcome.results[1]
    assert failed.detail == "rocprofv3-fake exited with status 1: E rocprofv3: the application crashed"
    assert outcome.stopped
    assert set(broken.models()) == {"a.gguf", "b.gguf"}
    assert read_status(outcome.sweep, failed.point)["state"] == "failed"
    assert read_status(outcome.sweep, failed.point)["error"] == failed.detail
    with pytest.raises(sweep_run.SweepFailed) as err:
        sweep_run.raise_for_failures(outcome)
    assert str(err.value) == (
        f"point {failed.point.id} (model=b repeat=1) failed: {failed.detail}; stopped there (on_error: stop) with 1 "
        "point(s) not run; fix it and rerun the same command to resume"
    )

    fixed = Recorder()
    again = run(path, db, fixed)
    assert [r.status for r in again.results] == ["skipped", "done", "done"]
    assert again.results[0].detail == "already stored as run 1"
    assert set(fixed.models()) == {"b.gguf", "c.gguf"}  # a is not profiled twice
    # the failed attempt's output was set aside, with its log
    aside = tmp_path / "out" / "attempts" / f"{failed.point.id}.1"
    assert (aside / "trace" / "rocprofv3.log").read_text().endswith("the application crashed\n")
    assert read_status(again.sweep, failed.point)["attempt"] == 2
    stored = labels_of(db)
    assert sorted(lab["model"] for lab in stored.values()) == ["a", "b", "c"]
    assert len({lab["sweep_point"] for lab in stored.values()}) == 3


def test_skip_records_the_failure_and_goes_on(tmp_path: Path) -> None:
    path = amd_sweep(tmp_path, on_error="skip")
    outcome = run(path, tmp_path / "r.db", Recorder(fail=lambda m: m == "b.gguf"))
    assert [r.status for r in outcome.results] == ["done", "failed", "done"]
    assert not outcome.stopped
    with pytest.raises(sweep_run.SweepFailed) as err:
        sweep_run.raise_for_failures(outcome)
    assert str(err.value) == (
        f"1 of 3 point(s) failed ({outcome.results[1].point.id}; reasons above); rerun the same command to retry them"
    )
    assert sorted(lab["model"] for lab in labels_of(tmp_path / "r.db").values()) == ["a", "c"]


@pytest.mark.parametrize("on_error", ["stop", "skip"])
def test_stop_and_skip_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_error: str) -> None:
    rec = Recorder(fail=lambda m: m == "b.gguf")
    monkeypatch.setattr(sweep_run, "default_profiler", fake_profiler)
    monkeypatch.setattr(sweep_run, "cancellable_runner", lambda _cancel: rec)
    path = amd_sweep(tmp_path, on_error=on_error)
    points = expand(load_sweep(path))
    result = CliRunner().invoke(cli, ["sweep", str(path), "--db", str(tmp_path / "r.db")])
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    detail = "rocprofv3-fake exited with status 1: E rocprofv3: the application crashed"
    if on_error == "stop":
        assert last == (
            f"Error: point {points[1].id} (model=b repeat=1) failed: {detail}; stopped there (on_error: stop) with 1 "
            "point(s) not run; fix it and rerun the same command to resume"
        )
        assert result.stdout.splitlines()[-1].startswith("1 done, 0 skipped (0 already stored), 1 failed, 1 not run")
    else:
        assert (
            last
            == f"Error: 1 of 3 point(s) failed ({points[1].id}; reasons above); rerun the same command to retry them"
        )
        assert result.stdout.splitlines()[-1].startswith("2 done, 0 skipped (0 already stored), 1 failed in ")
    assert f"FAILED  {points[1].id} model=b repeat=1: {detail}" in result.stderr
    summary = result.stdout
    assert points[1].id in summary and "FAILED" in summary and "crashed" in summary


def test_a_point_interrupted_during_the_profiler_is_not_stored_and_resumes(tmp_path: Path) -> None:
    path = amd_sweep(tmp_path)
    db = tmp_path / "r.db"
    events: list[SweepEvent] = []
    first = Recorder(interrupt=lambda m: m == "b.gguf")
    outcome = run(path, db, first, on_event=events.append)
    assert outcome.interrupted
    assert [r.status for r in outcome.results] == ["done", "interrupted", "not-run"]
    b = outcome.results[1].point
    assert read_status(outcome.sweep, b)["state"] == "interrupted"
    assert not (tmp_path / "out" / b.id / "rocroof-collect.json").exists()  # the capture is incomplete
    assert stored_points(str(db)) == {outcome.results[0].point.id: 1}
    assert [e.result.status for e in events if e.kind == "end" and e.result] == ["done", "interrupted"]

    second = Recorder()
    again = run(path, db, second)
    assert not again.interrupted
    assert [r.status for r in again.results] == ["skipped", "done", "done"]
    assert second.models().count("a.gguf") == 0  # nothing run twice
    assert second.models().count("b.gguf") == 3  # b starts afresh: trace + 2 counter passes
    assert (tmp_path / "out" / "attempts" / f"{b.id}.1").is_dir()  # the partial attempt, kept aside
    stored = labels_of(db)
    assert len(stored) == 3 and len({lab["sweep_point"] for lab in stored.values()}) == 3


def test_a_point_interrupted_before_its_ingest_resumes_without_profiling_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = amd_sweep(tmp_path, models=("a", "b"))
    db = tmp_path / "r.db"
    real_ingest = PointRunner._ingest

    def ingest_then_ctrl_c(self: PointRunner, point: Point, capture: Path, slot: Any) -> int:
        if point.params["model"] == "a":
            raise KeyboardInterrupt  # Ctrl-C between the profiler and the commit
        return real_ingest(self, point, capture, slot)

    monkeypatch.setattr(PointRunner, "_ingest", ingest_then_ctrl_c)
    first = Recorder()
    outcome = run(path, db, first)
    assert [r.status for r in outcome.results] == ["interrupted", "not-run"]
    a = outcome.results[0].point
    assert (tmp_path / "out" / a.id / "rocroof-collect.json").is_file()
    assert stored_points(str(db)) == {}

    monkeypatch.setattr(PointRunner, "_ingest", real_ingest)
    second = Recorder()
    again = run(path, db, second)
    assert [r.status for r in again.results] == ["done", "done"]
    assert second.models() == ["b.gguf"] * 3  # a's finished capture was only ingested
    assert again.results[0].detail == (
        f"ingested the capture already in {tmp_path / 'out' / a.id} (not profiled again; remove it to re-profile)"
    )
    assert again.results[1].detail == ""
    assert read_status(again.sweep, a)["state"] == "done"
    assert not (tmp_path / "out" / "attempts").exists()


def test_ctrl_c_in_the_scheduler_stops_running_points_and_nothing_is_half_stored(tmp_path: Path) -> None:
    """A KeyboardInterrupt in the scheduler's thread (a real Ctrl-C) sets cancel; the running point stops."""
    path = amd_sweep(tmp_path, models=("a", "b"))
    db = tmp_path / "r.db"
    cancel = threading.Event()
    started = threading.Event()

    class SlowRecorder(Recorder):
        def __call__(self, argv: Sequence[str], env: dict[str, str], log: Path) -> int:
            started.set()
            # the runner sees cancel as the real one does (it stops the process group); the wait is long
            # because a loaded machine delays the interrupt's delivery to the main thread (seen at 5 s)
            if cancel.wait(60):
                raise PointInterrupted()
            return super().__call__(argv, env, log)

    class CtrlCExecutor(LocalExecutor):
        def run(self, *args: Any, **kwargs: Any) -> Any:
            timer = threading.Timer(0.0, lambda: started.wait(60) and _interrupt_main())
            timer.start()
            try:
                return super().run(*args, **kwargs)
            finally:
                timer.join()

    outcome = run(path, db, SlowRecorder(), executor=CtrlCExecutor(), cancel=cancel)
    assert outcome.interrupted
    assert [r.status for r in outcome.results] == ["interrupted", "not-run"]
    assert stored_points(str(db)) == {}
    assert read_status(outcome.sweep, outcome.results[0].point)["state"] == "interrupted"


def _interrupt_main() -> None:
    import _thread

    _thread.interrupt_main()


class BuggyRecorder(Recorder):
    """A runner that hits a bug (not a RocroofError) on model a."""

    def __call__(self, argv: Sequence[str], env: dict[str, str], log: Path) -> int:
        if argv[argv.index("-m") + 1] == "a.gguf":
            raise ZeroDivisionError("planted bug")
        return super().__call__(argv, env, log)


def test_a_bug_on_one_point_fails_that_point_under_skip_and_stops_the_sweep_under_stop(tmp_path: Path) -> None:
    path = amd_sweep(tmp_path, models=("a", "b"), on_error="skip")
    outcome = run(path, tmp_path / "r.db", BuggyRecorder())
    assert [r.status for r in outcome.results] == ["failed", "done"]  # b still ran
    first = outcome.results[0]
    assert first.detail.startswith("internal error: ZeroDivisionError('planted bug') (a rocroof bug")
    assert f"--point {first.point.id}" in first.detail
    (tmp_path / "s").mkdir()
    stop = amd_sweep(tmp_path / "s", models=("a", "b"), on_error="stop")
    with pytest.raises(ZeroDivisionError):  # a bug under stop: the caller sees it
        run(stop, tmp_path / "s.db", BuggyRecorder())


def test_a_point_held_by_another_process_is_skipped(tmp_path: Path) -> None:
    path = amd_sweep(tmp_path, models=("a", "b"), on_error="skip")
    sweep = load_sweep(path)
    a = expand(sweep)[0]
    lock = tmp_path / "out" / ".locks" / a.id
    lock.parent.mkdir(parents=True)
    with open(lock, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        rec = Recorder()
        outcome = run(path, tmp_path / "r.db", rec)
    assert [r.status for r in outcome.results] == ["skipped", "done"]
    assert outcome.results[0].detail == "being run by another rocroof process now"
    assert rec.models() == ["b.gguf"] * 3


# ---- GPU pinning and parallel points ---------------------------------------------------------------


def test_local_executor_pins_one_point_per_gpu_amd(tmp_path: Path) -> None:
    path = amd_sweep(tmp_path, models=("a", "b", "c", "d"), extra="repeats: 2\n")
    rec = Recorder(delay=0.05)
    active: dict[str, str] = {}
    overlap: list[int] = []
    lock = threading.Lock()

    def on_event(event: SweepEvent) -> None:
        with lock:
            if event.kind == "start":
                assert event.gpu is not None and event.gpu not in active, "two points on one GPU"
                active[event.gpu] = event.point.id  # type: ignore[union-attr]
                overlap.append(len(active))
            elif event.kind == "end" and event.gpu is not None:
                del active[event.gpu]

    outcome = run(path, tmp_path / "r.db", rec, executor=LocalExecutor(["0", "1"], 2), on_event=on_event)
    assert [r.status for r in outcome.results] == ["done"] * 8
    assert max(overlap) == 2  # two points at once
    by_point: dict[str, set[tuple[str, str, str]]] = {}
    for _model, argv, env in rec.calls:
        point = Path(argv[argv.index("-d") + 1]).parent.name
        pins = (env["ROCR_VISIBLE_DEVICES"], env["HIP_VISIBLE_DEVICES"], env["CUDA_VISIBLE_DEVICES"])
        by_point.setdefault(point, set()).add(pins)
    assert len(by_point) == 8
    for pins in by_point.values():
        assert len(pins) == 1  # every run of a point on the same GPU
        ((rocr, hip, cuda),) = pins
        assert rocr in ("0", "1") and hip == cuda == "0"  # HIP indexes within what ROCR left
    gpus = {r.point.id: r.gpu for r in outcome.results}
    assert {next(iter(p))[0] for p in by_point.values()} == {"0", "1"}
    stored = labels_of(tmp_path / "r.db")
    assert {lab["sweep_point"]: lab["sweep_gpu"] for lab in stored.values()} == gpus
    # the manifest records the environment each pass ran with
    some = outcome.results[0]
    manifest = json.loads((some.point.capture_dir / "rocroof-collect.json").read_text())
    assert manifest["passes"][0]["env"]["ROCR_VISIBLE_DEVICES"] == some.gpu
    assert manifest["passes"][0]["env"]["GGML_CUDA_MARKERS"] == "1"


NCU_VERSION = 'echo "Version 2025.3.1.0 (build 1) (public-release)"'


class FakeNcu:
    """Stands in for ncu: the report, then the raw CSV export copied from examples/h200/dense-prefill."""

    def __init__(self) -> None:
        self.envs: list[dict[str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, argv: Sequence[str], env: dict[str, str], log: Path) -> int:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("ok\n")
        if argv[:2] == ("sh", "-c"):
            target = Path(shlex.split(argv[2])[-1])
            with gzip.open(EXAMPLES / "dense-prefill" / "ncu" / "ncu_raw.csv.gz") as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
        else:
            with self.lock:
                self.envs.append(dict(env))
            report = Path(argv[list(argv).index("-o") + 1])
            report.with_name(report.name + ".ncu-rep").write_bytes(b"fake")
        return 0


def test_local_executor_pins_nvidia_points_with_cuda_visible_devices(tmp_path: Path) -> None:
    ncu = tmp_path / "bin" / "ncu"
    ncu.parent.mkdir()
    ncu.write_text(f"#!/bin/sh\n{NCU_VERSION}\n")
    ncu.chmod(0o755)
    path = write(
        tmp_path / "nv.yaml",
        "version: 1\ncommand: llama-bench -m {model} -p 512 -n 0\nmatrix: {model: [x.gguf, y.gguf]}\n"
        f"profiler: {{name: ncu, nsys: none, arch: sm_90, counters: dram}}\nout: {tmp_path / 'out'}\n",
    )
    fake = FakeNcu()
    outcome = run_sweep(
        load_sweep(path),
        db=str(tmp_path / "r.db"),
        runner=fake,
        make_profiler=lambda _s: NsightPair(ncu=str(ncu), nsys="none", bandwidth_probe=False),
        executor=LocalExecutor(["3", "5"]),
    )
    assert [r.status for r in outcome.results] == ["done", "done"], outcome.results
    pins = sorted((e["CUDA_VISIBLE_DEVICES"], e["HIP_VISIBLE_DEVICES"], e["ROCR_VISIBLE_DEVICES"]) for e in fake.envs)
    assert pins == [("3", "3", "3"), ("5", "5", "5")]
    ro = Store(tmp_path / "r.db", read_only=True)
    runs = ro.query("SELECT run_id, profiler, gpu_arch FROM run ORDER BY run_id")
    assert list(runs["profiler"]) == ["ncu", "ncu"] and set(runs["gpu_arch"]) == {"sm_90"}
    assert sorted(lab["sweep_gpu"] for lab in labels_of(tmp_path / "r.db").values()) == ["3", "5"]


def test_parallel_points_ingest_into_one_sqlite_file_from_threads(tmp_path: Path) -> None:
    """Replay points need no GPU, so --jobs runs them side by side: three ingests at once."""
    text = (
        f"version: 1\nmatrix: {{case: [{', '.join(CASES)}]}}\n"
        f"profiler: {{name: replay, capture: '{EXAMPLES}/{{case}}'}}\n"
    )
    db = tmp_path / "r.db"
    events: list[str] = []
    outcome = run_sweep(
        load_sweep(write(tmp_path / "t.yaml", text)),
        db=str(db),
        executor=LocalExecutor(jobs=3),
        on_event=lambda e: events.append(e.kind),
    )
    assert [r.status for r in outcome.results] == ["done"] * 3
    assert [k for k in events if k != "stage"][:3] == ["start"] * 3  # all three started before any ended
    assert sorted(lab["case"] for lab in labels_of(db).values()) == sorted(CASES)


def test_parallel_processes_write_one_sqlite_file(tmp_path: Path) -> None:
    """Three 'rocroof sweep --point' processes at once (what a batch executor runs), one SQLite file."""
    db = tmp_path / "shared.db"
    Store(db).upgrade()  # the sweep creates the schema before it starts points
    points = expand(load_sweep(REPLAY))
    env = {**os.environ, "PYTHONPATH": str(REPO / "plugin")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "rocroof", "sweep", str(REPLAY), "--db", str(db), "--point", p.id],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for p in points
    ]
    outputs = [proc.communicate(timeout=300)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], outputs
    stored = labels_of(db)
    assert sorted(lab["sweep_point"] for lab in stored.values()) == sorted(p.id for p in points)
    ro = Store(db, read_only=True)
    counts = ro.query("SELECT run_id, COUNT(*) AS n FROM dispatch GROUP BY run_id ORDER BY run_id")
    assert len(counts) == 3 and (counts["n"] > 0).all()


def test_a_point_waiting_for_another_writer_says_so_and_stops_when_the_sweep_is_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the file's write lock: the point's stage says it waits, and Ctrl-C (which
    reaches the scheduler's thread, not the point's) stops the wait at once, not after 600 s."""
    monkeypatch.chdir(tmp_path)  # a point's status goes under the sweep's out folder
    db = tmp_path / "r.db"
    Store(db).upgrade()
    text = (
        f"version: 1\nmatrix: {{case: [dense-prefill]}}\nprofiler: {{name: replay, capture: '{EXAMPLES}/{{case}}'}}\n"
    )
    cancel = threading.Event()
    stages: list[str] = []

    def on_event(event: Any) -> None:
        if event.kind == "stage":
            stages.append(event.detail)
            if event.detail.startswith("waiting for"):
                cancel.set()  # what Ctrl-C in the scheduler does

    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process in the middle of its ingest
    fallback = threading.Timer(30, lambda: other.execute("ROLLBACK"))  # a wait nothing stops: the test fails
    fallback.start()
    try:
        outcome = run_sweep(load_sweep(write(tmp_path / "s.yaml", text)), db=str(db), on_event=on_event, cancel=cancel)
    finally:
        fallback.cancel()
        fallback.join()
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()
    assert [r.status for r in outcome.results] == ["interrupted"] and outcome.interrupted, outcome.results
    assert stages[-1] == f"waiting for {db}: another process is writing to it (up to 600 s)", stages
    assert not labels_of(db)  # nothing stored


# ---- the cancellable runner ---------------------------------------------------------------------------


def test_cancellable_runner_runs_a_command_into_its_log(tmp_path: Path) -> None:
    run_cmd = cancellable_runner(threading.Event())
    log = tmp_path / "logs" / "x.log"
    assert run_cmd(["sh", "-c", 'echo "$ROCROOF_T"; exit 3'], {"ROCROOF_T": "hello"}, log) == 3
    assert log.read_text() == "hello\n"


def test_cancellable_runner_stops_the_process_group_when_cancelled(tmp_path: Path) -> None:
    cancel = threading.Event()
    run_cmd = cancellable_runner(cancel, grace_s=0.5, poll_s=0.05)
    pid_file = tmp_path / "child.pid"
    threading.Timer(0.3, cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(PointInterrupted):
        run_cmd(["sh", "-c", f"sleep 30 & echo $! > {pid_file}; wait"], {}, tmp_path / "x.log")
    assert time.monotonic() - t0 < 5
    child = Path(f"/proc/{pid_file.read_text().strip()}/stat")
    # the background job ignored SIGINT; SIGTERM ended it (gone, or a zombie until init reaps it)
    assert not child.exists() or child.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_kill_running_commands_ends_what_the_runners_run(tmp_path: Path) -> None:
    run_cmd = cancellable_runner(threading.Event(), poll_s=0.05)
    status: list[int] = []
    worker = threading.Thread(target=lambda: status.append(run_cmd(["sleep", "30"], {}, tmp_path / "x.log")))
    worker.start()
    deadline = time.monotonic() + 5
    while not sweep_run._LIVE_GROUPS and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sweep_run.kill_running_commands() == 1
    worker.join(5)
    assert status == [-9]
    assert not sweep_run._LIVE_GROUPS


def test_a_second_ctrl_c_leaves_at_once_without_orphaned_profilers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed: list[bool] = []
    monkeypatch.setattr(sweep_run, "kill_running_commands", lambda: killed.append(True) or 0)

    class SecondCtrlC(LocalExecutor):
        def run(self, *args: Any, **kwargs: Any) -> Any:
            raise KeyboardInterrupt  # what LocalExecutor.run lets through on a second Ctrl-C

    cancel = threading.Event()
    with pytest.raises(KeyboardInterrupt):
        run(amd_sweep(tmp_path), tmp_path / "r.db", Recorder(), executor=SecondCtrlC(), cancel=cancel)
    assert killed == [True] and cancel.is_set()


def test_sweep_files_that_would_expand_beyond_reason_are_refused_before_expanding(tmp_path: Path) -> None:
    matrix = "".join(f"  k{i}: [{', '.join(str(j) for j in range(10))}]\n" for i in range(6))  # 10^6 combinations
    path = write(tmp_path / "huge.yaml", "version: 1\ncommand: app\nmatrix:\n" + matrix + "profiler: {name: ncu}\n")
    with pytest.raises(SweepFileError, match=r"huge.yaml:3: matrix: expands to 1,000,000 combination\(s\) x 1"):
        load_sweep(path)
    text = "version: 1\ncommand: app\nmatrix: {x: [1]}\nprofiler: {name: ncu}\nrepeats: 200001\n"
    path = write(tmp_path / "rep.yaml", text)
    with pytest.raises(SweepFileError, match=r"rep.yaml:5: repeats: .* = 200,001 points; a sweep file may hold"):
        load_sweep(path)
    # aliases could turn a few lines into gigabytes (a "billion laughs"): refused at the first one
    bomb = "version: 1\ncommand: app\nx: &a [1, 1, 1]\ny: [*a, *a, *a]\nmatrix: {x: [1]}\nprofiler: {name: ncu}\n"
    with pytest.raises(SweepFileError, match=r"bomb.yaml:4: not valid YAML: aliases \(\*name\) are not supported"):
        load_sweep(write(tmp_path / "bomb.yaml", bomb))


def test_a_database_password_is_never_printed(tmp_path: Path) -> None:
    path = write(
        tmp_path / "r.yaml",
        "version: 1\ncommand: app {x}\nmatrix: {x: [1]}\nprofiler: {name: replay, capture: 'c/{x}'}\n",
    )
    result = CliRunner().invoke(cli, ["sweep", str(path), "--dry-run", "--db", "postgresql://alice:s3cret@h:1/x"])
    assert result.exit_code == 0, result.output
    assert "s3cret" not in result.output and "postgresql://alice:***@h:1/x" in result.output
