"""tools/h200/overhead.py: the marker-hook overhead summary of llama-bench round-robin runs.

The expected medians are worked out by hand from the tokens/s written by the test.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "h200" / "overhead.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("overhead", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_rounds(path: Path, pp: list[float], tg: list[float]) -> None:
    """llama-bench -o jsonl lines: per round a pp512 row, then a tg128 row."""
    lines = []
    for a, b in zip(pp, tg, strict=True):
        lines.append(json.dumps({"n_prompt": 512, "n_gen": 0, "avg_ts": a}))
        lines.append(json.dumps({"n_prompt": 0, "n_gen": 128, "avg_ts": b}))
    path.write_text("\n".join(lines) + "\n")


def test_ratios_are_paired_by_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the base drifts by 2x between rounds; paired ratios stay 0.98 / 0.97 / 0.99 in decode
    write_rounds(tmp_path / "dense-500m-hook-off.jsonl", [100.0, 200.0, 50.0], [1000.0, 2000.0, 500.0])
    write_rounds(tmp_path / "dense-500m-hook-on.jsonl", [100.0, 202.0, 50.0], [980.0, 1940.0, 495.0])
    assert load_script().main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {tuple(c.strip() for c in line.split("|")[1:4]): line for line in out.splitlines()[2:]}
    decode = rows[("dense-500m", "tg", "hook-on")].split("|")
    assert decode[4].strip() == "3"
    assert decode[5].strip() == "0.980"  # median of 0.98, 0.97, 0.99
    assert decode[7].strip() == "0/3"
    prefill = rows[("dense-500m", "pp", "hook-on")].split("|")
    assert prefill[5].strip() == "1.000" and prefill[7].strip() == "1/3"  # 1.0, 1.01, 1.0


def test_a_line_that_is_not_llama_bench_json_is_named(tmp_path: Path) -> None:
    (tmp_path / "m-hook-off.jsonl").write_text('{"n_prompt": 0, "avg_ts": 1}\nnot json\n')
    with pytest.raises(SystemExit, match=r"m-hook-off.jsonl:2: not JSON"):
        load_script().main([str(tmp_path)])


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"m-hook-off.jsonl": b'{"n_prompt": 0, "avg_ts": 0}\n'}, "avg_ts is 0; expected tokens/s above 0"),
        ({"m-hook-off.jsonl": b"\xff\xfe"}, "cannot read it as llama-bench JSONL text"),
        ({"m-hook-off.jsonl": b'{"n_prompt": 0, "avg_ts": true}\n'}, "avg_ts is True; expected tokens/s above 0"),
        ({"m-hook-off.jsonl": b'{"n_prompt": "0", "avg_ts": 5}\n'}, "n_prompt is '0'; expected a token count"),
        ({"m-hook-off.jsonl": b"[1]\n"}, "expected a llama-bench JSON object, not list"),
        ({"m-hook-on.jsonl": b'{"n_prompt": 0, "avg_ts": 5}\n'}, "no model with both 'hook-off' runs"),
        ({"m-hook-off.jsonl": b'{"n_prompt": 0, "avg_ts": 5}\n'}, "no model with both 'hook-off' runs"),
    ],
)
def test_unusable_rounds_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, bytes], message: str
) -> None:
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    try:
        rc = load_script().main([str(tmp_path)])
    except SystemExit as exc:
        assert message in str(exc)
        return
    assert rc == 1 and message in capsys.readouterr().err
