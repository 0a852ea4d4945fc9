"""Several processes ingesting into one database at the same moment (SQLite file or PostgreSQL URL).

Each worker reads and attributes its capture first, then all of them wait for one signal and
call ``Store.write_run`` together (as ``rocroof ingest`` does: with the run's stored report), so
that schema creation, the content-hash check and the
inserts really overlap (parsing times differ by seconds otherwise).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

_WORKER = r"""
import pathlib, sys, time
from rocroof.errors import DuplicateRunError
from rocroof.ingest.pipeline import build_run
from rocroof.capture.readers import read_capture
from rocroof.report.tables import stored_reports
from rocroof.store import Store

db, capture, sync, name = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]), sys.argv[4]
frames = build_run(read_capture(capture), source_path=str(capture))
(sync / f"ready-{name}").touch()
while not (sync / "go").exists():
    time.sleep(0.002)
store = Store(db)
try:
    print("stored", store.write_run(frames, labels={"worker": name}, reports=stored_reports))
except DuplicateRunError as exc:
    print("duplicate", exc)
finally:
    store.close()
"""


def ingest_at_once(db: str, captures: list[Path], sync: Path, timeout: float = 240) -> list[str]:
    """Ingest ``captures`` into ``db`` from one process each, all writing at once.

    Returns:
        Each worker's output line, in the order of ``captures``: ``stored <run id>`` or
        ``duplicate <message>``.

    Raises:
        AssertionError: a worker failed (its stderr is in the message) or did not get ready.
    """
    sync.mkdir(parents=True, exist_ok=True)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, db, str(capture), str(sync), str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, capture in enumerate(captures)
    ]
    try:
        deadline = time.monotonic() + timeout
        while len(list(sync.glob("ready-*"))) < len(procs):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            assert not failed, failed[0].communicate()[1]
            assert time.monotonic() < deadline, "workers did not get ready"
            time.sleep(0.01)
        (sync / "go").touch()
        outputs = []
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, err
            outputs.append(out.strip())
        return outputs
    finally:
        for proc in procs:  # also on a failure: no child left running, no pipe left to the GC
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
