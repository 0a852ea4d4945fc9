"""``rocroof --help`` starts fast: the command line imports no heavy library until a command runs.

pandas, SQLAlchemy, numpy, matplotlib and rich (its progress bars and console) cost 150-300 ms to
import, several times what ``rocroof --help`` may add to a bare interpreter (60 ms). The command
modules import them inside the command functions; these tests run each ``--help`` in a fresh
interpreter, exactly as ``python -m rocroof`` does, and fail when one of them is imported anyway
(a module-level import in rocroof.cli, or in a rocroof module it imports at start-up). The time
itself is measured by benchmarks/startup.py, not here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import click
import pytest
from click.testing import CliRunner

from rocroof.cli import cli
from rocroof.cli.app import RocroofGroup

#: Top-level packages that ``--help`` must not import (any of their submodules counts).
HEAVY = ("pandas", "sqlalchemy", "numpy", "matplotlib", "rich")

#: Runs ``python -m rocroof ARGS`` in this interpreter, then prints the heavy modules it imported.
PROBE = """
import json, runpy, sys
args = sys.argv[1:]
sys.argv = ["rocroof", *args]
try:
    runpy.run_module("rocroof", run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as exc:
    code = exc.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
print("\\n" + json.dumps({"code": code, "heavy": heavy}))
""".replace("HEAVY", repr(HEAVY))


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``group``: ``("report",)``, ``("db", "status")``, ..."""
    paths = []
    for name, command in sorted(group.commands.items()):
        paths.append((*prefix, name))
        if isinstance(command, click.Group):
            paths += _commands(command, (*prefix, name))
    return paths


def _help(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    *shown, last = proc.stdout.rstrip("\n").split("\n")
    result: dict[str, Any] = json.loads(last)
    result["text"] = "\n".join(shown)
    return result


@pytest.mark.parametrize("path", [(), *_commands(cli)], ids=lambda p: " ".join(("rocroof", *p)))
def test_help_imports_no_heavy_library(path: tuple[str, ...]) -> None:
    result = _help(*path)
    assert result["code"] in (0, None), result
    assert "Usage: rocroof" in result["text"]
    assert not result["heavy"], (
        f"'rocroof {' '.join(path)} --help' imported {', '.join(result['heavy'])}: import it inside the command "
        "function that needs it (see tests/test_cli_startup.py)"
    )


def test_the_listed_commands_are_covered() -> None:
    """The brief's commands are among those checked (a rename must not drop them silently)."""
    names = {p[0] for p in _commands(cli)}
    assert {"report", "ingest", "collect", "query", "sweep", "runs", "merge", "db"} <= names


def test_other_exceptions_pass_the_error_handler_unchanged() -> None:
    """The database-refused handler imports SQLAlchemy lazily; any other exception goes on as it was."""
    boom = ValueError("a bug")

    @click.group(cls=RocroofGroup)
    def group() -> None:
        pass

    @group.command()
    def fail() -> None:
        raise boom

    result = CliRunner().invoke(group, ["fail"])
    assert result.exception is boom
    assert result.exit_code == 1


def test_version_names_the_release_and_the_schema_and_imports_nothing_heavy() -> None:
    import rocroof
    from rocroof.store.migrations import MIGRATIONS

    proc = subprocess.run([sys.executable, "-c", PROBE, "--version"], capture_output=True, text=True, timeout=60)
    *shown, last = proc.stdout.rstrip("\n").split("\n")
    assert json.loads(last) == {"code": 0, "heavy": []}
    assert [line for line in shown if line] == [
        f"rocroof {rocroof.__version__} (results database schema {len(MIGRATIONS)})"
    ]
    assert len(MIGRATIONS) == rocroof.SCHEMA_VERSION
