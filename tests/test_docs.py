"""Documentation stays true: every CLI command is documented and teaches by example."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from rocroof.analysis.peaks import find_peak, load_peaks
from rocroof.cli import cli

from .conftest import REPO


def _commands(group: click.Group, prefix: str = "") -> list[str]:
    out = []
    for name, cmd in group.commands.items():
        full = f"{prefix}{name}"
        out.append(full)
        if isinstance(cmd, click.Group):
            out += _commands(cmd, full + " ")
    return out


@pytest.mark.parametrize("command", _commands(cli))
def test_every_command_is_in_the_readme_and_has_help(command: str) -> None:
    readme = (REPO / "README.md").read_text()
    top = command.split()[0]
    assert f"rocroof {top}" in readme
    result = CliRunner().invoke(cli, [*command.split(), "--help"])
    assert result.exit_code == 0
    assert len(result.output.strip().splitlines()) > 3


def test_peaks_table_is_valid_and_sourced() -> None:
    gpus = load_peaks(REPO / "configs" / "peaks.yaml")
    names = {g["name"] for g in gpus}
    assert {"MI300X", "MI350X", "MI355X"} <= names
    for gpu in gpus:
        assert gpu["dram_gbps"]["source"]
    # AMD's MI300X footnote MI300-05A: 8192 bit x 5.2 Gbps / 8 = 5,324.8 GB/s, printed as 5.325 TB/s
    assert find_peak("dram_gbps", "MI300X_A1", "gfx942").value == pytest.approx(8192 * 5.2 / 8, rel=1e-3)
    # the shipped copy is the same file
    assert find_peak("dram_gbps", None, "gfx950").gpu == "MI350X"


def test_the_readme_example_block_runs_as_written(tmp_path: Path) -> None:
    """The README's block on the example captures, line by line in a shell, as a user pastes it.

    It runs in a fresh folder holding ``examples`` (a link to the repository's), so that the
    default ``./rocroof.db`` and the files the block writes land there. Every line must succeed;
    the ``| dot`` line needs Graphviz, and without it only its ``rocroof graph`` part runs.
    """
    import os
    import shutil
    import subprocess
    import sys

    readme = (REPO / "README.md").read_text()
    block = readme.split("Recorded output, here the example captures of this repository", 1)[1]
    block = block.split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip()]
    assert len(lines) >= 10 and all(line.startswith("rocroof ") for line in lines)
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (tmp_path / "configs").symlink_to(REPO / "configs")
    env = {k: v for k, v in os.environ.items() if k != "ROCROOF_DB"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for line in lines:
        command = line
        if "| dot" in line and shutil.which("dot") is None:
            command = line.split("|", 1)[0]  # the graph itself, without Graphviz
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    written_files = ("rocroof.db", "run3.html", "run3-roofline.png", "run3-roofline.svg", "metadata.json", "team.db")
    for written in (*written_files, "sweep.db", "token1.svg"):
        assert (tmp_path / written).exists(), written


def test_the_version_is_one_in_the_package_the_metadata_and_the_changelog() -> None:
    import re
    import tomllib

    import rocroof

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert released, "CHANGELOG.md has no release heading: ## [X.Y.Z] - YYYY-MM-DD"
    assert project["version"] == rocroof.__version__ == released[0][0]
