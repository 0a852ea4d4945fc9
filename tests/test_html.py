"""The HTML report in a real browser: Debian's headless Chromium opens it, sorts it, screenshots it.

`rocroof report --format html` writes one self-contained page (run, roofline, ops, kernels and
notes sections; sortable tables; no network). Chromium's ``--dump-dom`` gives the DOM after the
page's script ran, so a sort asked for in the address (``#sort=<table>:<column>[:desc]``, the same
function a click on a header calls) is checked in the browser's own DOM; ``--screenshot`` renders it
at 1280 px. .ci/run installs Chromium (``apt-get install chromium``).
"""

from __future__ import annotations

import html
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.cli import cli

from .conftest import REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND"]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("html")
    db = root / "r.db"
    runner = CliRunner()
    assert (
        runner.invoke(cli, ["ingest", str(REPO / "examples" / "h200" / "dense-prefill"), "--db", str(db)]).exit_code
        == 0
    )
    result = runner.invoke(cli, ["report", "--db", str(db), "--format", "html"])
    assert result.exit_code == 0, result.output
    out = root / "report.html"
    out.write_text(result.output, encoding="utf-8")
    return out


def _dom(page: Path, fragment: str = "") -> str:
    assert CHROMIUM is not None
    proc = subprocess.run(
        [CHROMIUM, *BROWSER_FLAGS, "--dump-dom", f"{page.as_uri()}{fragment}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "<html" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def _column(dom: str, table_id: str, col: int) -> list[str]:
    table = re.search(rf"<table[^>]*id=\"?{table_id}\"?[^>]*>(.*?)</table>", dom, flags=re.S)
    assert table is not None, table_id
    body = table.group(1).split("<tbody>", 1)[1]
    rows = re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", re.findall(r"<td[^>]*>(.*?)</td>", r, flags=re.S)[col])) for r in rows]


def _number(text: str) -> float:
    return float(re.sub(r"[,~*\u2020%]", "", text))


def test_the_page_has_its_sections_and_loads_nothing_from_the_network(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)  # no external resource at all
    dom = _dom(page)
    for section in ("run", "roofline", "table", "kernels-section", "notes"):
        assert f'id="{section}"' in dom, section
    assert "<svg" in dom and "MUL_MAT" in dom and "mul_mat_q" in dom


def test_a_column_sorts_in_the_browser(page: Path) -> None:
    """The page's sort, run by Chromium: by op name (text) and by GB/s (numbers, both directions)."""
    headers = re.findall(
        r"<th[^>]*>(.*?)</th>", page.read_text(encoding="utf-8").split("id=rows", 1)[1].split("</thead>", 1)[0]
    )
    gbps = headers.index("GB/s")
    by_name = _column(_dom(page, "#sort=rows:0"), "rows", 0)
    assert by_name == sorted(by_name) and len(by_name) >= 5
    up = [_number(v) for v in _column(_dom(page, f"#sort=rows:{gbps}"), "rows", gbps)]
    down = [_number(v) for v in _column(_dom(page, f"#sort=rows:{gbps}:desc"), "rows", gbps)]
    assert up == sorted(up) and down == sorted(up, reverse=True) and up != down
    kernels = [_number(v) for v in _column(_dom(page, "#sort=kernels:2:desc"), "kernels", 2)]  # time µs
    assert kernels == sorted(kernels, reverse=True)


def test_a_1280_px_screenshot(page: Path, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    shot = tmp_path / "report.png"
    proc = subprocess.run(
        [CHROMIUM, *BROWSER_FLAGS, "--window-size=1280,2400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 2400)
    assert len(data) > 50_000  # a rendered page (tables and the plot), not a blank one
