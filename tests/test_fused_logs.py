"""``ggml-fused:`` logs of another run: refused when two logs disagree, not applied when a log names other ops.

The recorded H200 trial (``fixtures/h200-trial``, PROVENANCE.md) holds the dense model's Nsight
Systems export and the stderr logs of two runs, the dense model's and a MoE model's. Invocation
numbers restart in every run, so the MoE log names fused groups at invocations where the dense
run has other ops. Expected values are read here from the files themselves (the NVTX texts in the
SQLite export, the log lines), not from rocroof.
"""

from __future__ import annotations

import gzip
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from rocroof.capture.readers import read_capture
from rocroof.errors import InputError
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

from .conftest import fixture_path

_RANGE = re.compile(r"ggml:([A-Za-z0-9_]+):.*:([0-9]+)")
_FUSED = re.compile(r"ggml-fused:([0-9]+):([A-Za-z0-9_+]+):")


def _log_groups(name: str) -> dict[int, str]:
    with gzip.open(fixture_path("h200-trial", name), "rt", encoding="utf-8", errors="replace") as fh:
        return {int(m.group(1)): m.group(2) for line in fh if (m := _FUSED.search(line))}


def _nvtx(db: Path) -> tuple[dict[int, str], dict[int, str]]:
    """(invocation -> op of its range, invocation -> op list of its fused mark) from the export's NVTX texts."""
    with sqlite3.connect(db) as conn:
        texts = [t for (t,) in conn.execute("SELECT text FROM NVTX_EVENTS WHERE text IS NOT NULL")]
    ranges = {int(m.group(2)): m.group(1) for t in texts if (m := _RANGE.fullmatch(t))}
    marks = {int(m.group(1)): m.group(2) for t in texts if (m := _FUSED.match(t))}
    return ranges, marks


def test_two_runs_logs_in_one_folder_are_refused(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    for name in ("dense_nsys.sqlite.gz", "dense_stderr_fused.log.gz", "moe_stderr_fused.log.gz"):
        shutil.copy(fixture_path("h200-trial", name), cap / name)
    dense, moe = _log_groups("dense_stderr_fused.log.gz"), _log_groups("moe_stderr_fused.log.gz")
    assert any(dense[k] != moe[k] for k in dense.keys() & moe.keys())  # the two logs disagree somewhere
    with pytest.raises(InputError) as err:
        read_capture(cap)
    text = str(err.value)
    assert "\n" not in text
    assert "dense_stderr_fused.log.gz" in text and "moe_stderr_fused.log.gz" in text
    assert "logs of different runs" in text


def test_the_runs_own_log_beside_another_that_agrees_is_read(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    shutil.copy(fixture_path("h200-trial", "dense_nsys.sqlite.gz"), cap / "nsys.sqlite.gz")
    shutil.copy(fixture_path("h200-trial", "dense_stderr_fused.log.gz"), cap / "a.log.gz")
    shutil.copy(fixture_path("h200-trial", "dense_stderr_fused.log.gz"), cap / "b.log.gz")  # a copy: no conflict
    capture = read_capture(cap)
    assert {k: v[0] for k, v in capture.fused_groups.items()} == _log_groups("dense_stderr_fused.log.gz")


def test_a_log_of_another_model_is_not_applied_at_all(tmp_path: Path) -> None:
    """Some of the MoE log's groups name other ops than the dense run's ranges: none of the log applies.

    The groups that happen to agree are as unfounded as the others; the capture's own NVTX marks
    (which win over a log's groups) still apply.
    """
    cap = tmp_path / "cap"
    cap.mkdir()
    shutil.copy(fixture_path("h200-trial", "dense_nsys.sqlite.gz"), cap / "nsys.sqlite.gz")
    shutil.copy(fixture_path("h200-trial", "moe_stderr_fused.log.gz"), cap / "stderr.log.gz")
    plain = tmp_path / "nsys.sqlite"
    with gzip.open(cap / "nsys.sqlite.gz", "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    range_op, marks = _nvtx(plain)
    moe = _log_groups("moe_stderr_fused.log.gz")
    fused = {**moe, **marks}  # the capture's own NVTX marks win over a log
    from_log = set(moe) - set(marks)

    writer = Store(tmp_path / "r.db")
    run_id = writer.write_run(build_run(read_capture(cap), source_path=str(cap)))
    writer.close()
    store = Store(tmp_path / "r.db", read_only=True)
    ops = store.query(f"SELECT invocation, op, op_list FROM op_invocation WHERE run_id = {run_id}")
    in_run = set(ops["invocation"].astype(int))
    wrong = {k for k, op_list in fused.items() if k in in_run and op_list.split("+")[0] != range_op[k]}
    assert wrong and wrong <= from_log  # the MoE log's groups, at the dense run's ops
    agreeing = {k for k in from_log & in_run if k not in wrong}
    assert agreeing  # some MoE groups happen to name the dense run's op: not applied either
    notes = store.query(f"SELECT code, message FROM run_note WHERE run_id = {run_id}")
    message = notes.loc[notes["code"] == "fused-mismatch", "message"].tolist()
    assert len(message) == 1 and message[0].startswith(f"{len(wrong)} of {len(fused)} ggml-fused group(s)")
    assert f"none of their {len(from_log)} group(s) is applied" in message[0]
    by_inv = dict(zip(ops["invocation"].astype(int), ops["op_list"], strict=True))
    assert all(by_inv[k] == range_op[k] for k in from_log & in_run)  # every log group left out
    assert all(by_inv[k] == marks[k] for k in set(marks) & in_run)  # the capture's own marks applied
    store.close()
