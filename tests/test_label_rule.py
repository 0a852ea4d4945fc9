"""One rule for every label a run is stored with: the run selector must be able to pick it again.

A user's trial stored ``suite=vcopy,x`` from a sweep file; ``rocroof report --run 'suite=vcopy,x'``
then failed ("expected key=value[,key=value...]"), while ``--label 'k=v,x=y'`` on the command line
was refused. The sweep file, ``--label`` and the Python API (:meth:`Store.write_run`) now share
:func:`rocroof.labels.label_problem`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.capture.readers import read_capture
from rocroof.cli import cli
from rocroof.errors import InputError
from rocroof.ingest.pipeline import build_run
from rocroof.labels import label_problem, parse_selector
from rocroof.store import Store
from rocroof.sweep.expand import expand
from rocroof.sweep.spec import SweepFileError, load_sweep

from .conftest import fixture_path

#: (key, value) pairs no selector can pick: each must be refused everywhere.
UNSELECTABLE = [
    ("suite", "vcopy,x"),
    ("m", "v,w=z"),
    ("a,b", "x"),
    ("a=b", "x"),
    ("latest:k", "x"),
    ("k", " padded"),
    ("", "x"),
]
#: Labels that are not one plain line: refused too (they would reach every terminal listing runs).
NOT_PLAIN = [("k", "line\nbreak"), ("k", "esc\x1b[31m"), ("k", "c1\x85")]


@pytest.mark.parametrize(("key", "value"), NOT_PLAIN)
def test_labels_are_one_plain_line(key: str, value: str) -> None:
    assert "control character" in label_problem(key, value)


@pytest.mark.parametrize(("key", "value"), UNSELECTABLE)
def test_what_the_rule_refuses_no_selector_can_pick(key: str, value: str) -> None:
    assert label_problem(key, value)
    # the selector, given the label as written, reads something else or refuses it
    try:
        newest, selector = False, parse_selector(f"{key}={value}")
        if key.lower().startswith("latest:"):
            newest = True
    except InputError:
        return
    assert newest or selector != {key: value}


@pytest.mark.parametrize("value", ["*", "q*x.gguf", "*_k"])
def test_a_value_holding_the_selector_wildcard_is_refused(value: str) -> None:
    # a selector reads its '*' as "any text": --run model=q*x.gguf picks qAx.gguf too, model=* every run
    assert "the wildcard of label selectors" in label_problem("model", value)


@pytest.mark.parametrize(("key", "value"), [("suite", "vcopy"), ("env", "A=1+B=2"), ("model", "q4.gguf"), ("k", "")])
def test_what_the_rule_keeps_a_selector_picks(key: str, value: str) -> None:
    assert label_problem(key, value) == ""
    assert parse_selector(f"{key}={value}") == {key: value}


# ---- the sweep file: refused before anything runs, naming file, line and key ------------------------------

HEAD = "version: 1\ncommand: app -m {model}\nmatrix:\n  model: [a.gguf]\nprofiler: ncu\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (HEAD + 'labels: {suite: "vcopy,x"}\n', "{f}:6: labels.suite: "),
        (
            'version: 1\ncommand: app -m {model}\nmatrix:\n  model: [a, "a,b"]\nprofiler: ncu\n',
            "{f}:4: matrix.model[1]: ",
        ),
        (
            'version: 1\ncommand: app -m {model}\nmatrix:\n  model: [a, "v,w=z"]\nprofiler: ncu\n',
            "{f}:4: matrix.model[1]: ",
        ),
        (
            'version: 1\ncommand: app -p {prompt}\nmatrix:\n  phase:\n    "pre,fill": {prompt: 512}\nprofiler: ncu\n',
            "{f}:5: matrix.phase.pre,fill: ",
        ),
        (
            'version: 1\ncommand: app -p {prompt}\nmatrix:\n  phase:\n    prefill: {prompt: "1,2"}\nprofiler: ncu\n',
            "{f}:5: matrix.phase.prefill.prompt: ",
        ),
        (
            'version: 1\ncommand: app\nmatrix:\n  env:\n    "a,b": {A: 1}\nprofiler: ncu\n',
            "{f}:5: matrix.env.a,b: ",
        ),
        (
            'version: 1\ncommand: app\nmatrix:\n  env:\n    - {HIP_VISIBLE_DEVICES: "0,1"}\nprofiler: ncu\n',
            "{f}:5: matrix.env[0]: ",
        ),
        (HEAD + 'labels: {suite: " x"}\n', "{f}:6: labels.suite: "),
    ],
)
def test_a_sweep_label_no_selector_can_pick_is_refused(tmp_path: Path, text: str, where: str) -> None:
    path = write(tmp_path / "s.yaml", text)
    with pytest.raises(SweepFileError) as err:
        load_sweep(path)
    assert str(err.value).startswith(where.format(f=path)), str(err.value)
    # the CLI: one line, before anything runs (a dry run too)
    result = CliRunner().invoke(cli, ["sweep", str(path), "--dry-run"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert result.output.startswith(f"Error: {where.format(f=path)}")
    assert len(result.output.strip().splitlines()) == 1


def test_the_trials_sweep_label_message(tmp_path: Path) -> None:
    path = write(tmp_path / "s.yaml", HEAD + 'labels: {suite: "vcopy,x"}\n')
    with pytest.raises(SweepFileError) as err:
        load_sweep(path)
    assert str(err.value) == (
        f"{path}:6: labels.suite: a label cannot hold ',' (labels are listed and selected as key=value,key=value), "
        "and its value 'vcopy,x' does; runs are labelled suite=<value>, and --run could not select this one"
    )


def test_a_list_env_set_of_several_variables_is_labelled_so_that_it_can_be_selected(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.yaml",
        "version: 1\ncommand: app\nmatrix:\n  env:\n    - {}\n    - {B: 2, A: 1}\nprofiler: ncu\n",
    )
    labels = [p.labels["env"] for p in expand(load_sweep(path))]
    assert labels == ["none", "A=1+B=2"]  # sorted by name, joined by '+' (was "A=1,B=2")
    assert all(parse_selector(f"env={v}") == {"env": v} for v in labels)


def test_two_list_env_sets_with_one_label_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / "s.yaml",
        "version: 1\ncommand: app\nmatrix:\n  env:\n    - {A: 1, B: 2}\n    - {A: 1+B=2}\nprofiler: ncu\n",
    )
    with pytest.raises(SweepFileError) as err:
        load_sweep(path)
    assert str(err.value) == f"{path}:6: matrix.env[1]: labelled env=A=1+B=2, as matrix.env[0] is; name the sets"


# ---- --label on the command line and the Python API: the same rule --------------------------------------


@pytest.mark.parametrize(
    ("key", "value"), [kv for kv in UNSELECTABLE + NOT_PLAIN if kv[0].strip() and "=" not in kv[0]]
)
def test_ingest_label_and_store_write_run_refuse_the_same_labels(tmp_path: Path, key: str, value: str) -> None:
    cap = fixture_path("rocprofv3-docs")
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, ["ingest", str(cap), "--db", str(db), "--label", f"{key}={value}"])
    if value != value.strip():  # --label strips what it is given: stored as the selector reads it
        assert result.exit_code == 0, result.output
        assert Store(db, read_only=True).runs_with_labels({key: value.strip()}) == [1]
    else:
        assert result.exit_code == 1 and result.output.startswith("Error: --label ")
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    frames = build_run(read_capture(cap))
    with pytest.raises(InputError, match="nothing was stored"):
        Store(tmp_path / "api.db").write_run(frames, labels={key: value})
    assert not (tmp_path / "api.db").exists() or Store(tmp_path / "api.db", read_only=True).runs_with_labels({}) == []


def test_a_stored_sweep_style_label_is_selected_by_report(tmp_path: Path) -> None:
    cap = fixture_path("rocprofv3-docs")
    db = tmp_path / "r.db"
    Store(db).write_run(build_run(read_capture(cap)), labels={"env": "A=1+B=2", "suite": "vcopy"})
    result = CliRunner().invoke(
        cli, ["report", "--db", str(db), "--run", "env=A=1+B=2,suite=vcopy", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
