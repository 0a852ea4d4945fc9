"""Documentation stays true: every CLI command is documented and teaches by example."""

from __future__ import annotations

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
