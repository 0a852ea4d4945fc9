"""Shared test helpers.

Recorded profiler outputs live in ``../shared/fixtures`` (beside the checkout; CI always has
it). Tests read them in place and never copy them into the repository; on a clone without
them those tests skip with the reason.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]

# Reports fit the terminal's width: the tests see one width, 160 columns (what a file or pipe gets),
# whichever terminal or pytest-xdist worker runs them; a test of another width passes it or sets COLUMNS.
os.environ["COLUMNS"] = "160"
SHARED = Path(os.environ.get("ROCROOF_SHARED", REPO.parent / "shared"))
FIXTURES = SHARED / "fixtures"

#: The vcopy kernel copies 1,048,576 doubles: 8 MiB read and 8 MiB written per dispatch
#: (projects/rocprofiler-compute/sample/vcopy.cpp; see fixtures/PROVENANCE.md).
VCOPY_BYTES = 1_048_576 * 8


def fixture_path(*parts: str) -> Path:
    """A path under the shared fixtures, or skip the test when they are absent."""
    path = FIXTURES.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"recorded fixtures not found at {FIXTURES} (set ROCROOF_SHARED to the shared/ folder)")
    return path


def writable_copy(source: Path, target: Path) -> Path:
    """A copy of the capture ``source`` at ``target`` that the test may change (read-only sources: the
    shared fixtures, a checkout's files); returns ``target``."""
    shutil.copytree(source, target)
    for f in target.rglob("*"):
        f.chmod(0o755 if f.is_dir() else 0o644)
    return target


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh SQLite database path."""
    return tmp_path / "results.db"


#: The tables of an Nsight Systems export that hold the capture's environment, host and application
#: output (nsys export --type sqlite, 2025.3; DDL as nsys writes it). The committed examples were
#: scrubbed of them: tests that plant secrets put them back.
NSYS_IDENTITY_TABLES = (
    "CREATE TABLE IF NOT EXISTS META_DATA_CAPTURE (name TEXT NOT NULL, value TEXT)",
    "CREATE TABLE IF NOT EXISTS META_DATA_EXPORT (name TEXT NOT NULL, value TEXT)",
    "CREATE TABLE IF NOT EXISTS TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT NOT NULL, "
    "name TEXT NOT NULL, nameEnum INTEGER NOT NULL, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS ProcessStreams (globalPid INTEGER NOT NULL, filenameId INTEGER NOT NULL, "
    "contentId INTEGER NOT NULL)",
)


def add_nsys_identity_tables(con: object) -> None:
    """Give an Nsight Systems export (an open sqlite3 connection) its identity tables back."""
    for ddl in NSYS_IDENTITY_TABLES:
        con.execute(ddl)  # type: ignore[attr-defined]


#: Set by .ci/run: tests that need the pinned llama.cpp source or hipcc fail instead of skipping.
REQUIRE = "ROCROOF_REQUIRE_HIPCC"


def llama_pins() -> tuple[str, str]:
    """(llama-cpp-python sdist version, llama.cpp commit) pinned in tools/llama.cpp/fetch.sh."""
    import re

    text = (REPO / "tools" / "llama.cpp" / "fetch.sh").read_text()
    version = re.search(r"^SDIST_VERSION=(\S+)", text, re.M)
    commit = re.search(r"^LLAMA_COMMIT=([0-9a-f]{40})", text, re.M)
    assert version and commit
    return version.group(1), commit.group(1)


def require_or_skip(why: str) -> NoReturn:
    """Skip with ``why``; under ``ROCROOF_REQUIRE_HIPCC`` (CI) fail instead."""
    if os.environ.get(REQUIRE):
        pytest.fail(f"{why}; {REQUIRE} is set: CI must run these tests (.ci/run installs what they need)")
    pytest.skip(why)


@pytest.fixture(scope="session")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned llama-cpp-python sdist (vendor/llama.cpp): the rocroof cache's, else downloaded with pip."""
    import subprocess
    import sys

    version, _ = llama_pins()
    cache = Path(os.environ.get("ROCROOF_CACHE", Path.home() / ".cache" / "rocroof"))
    name = f"llama_cpp_python-{version}.tar.gz"
    if (cache / name).is_file():
        return cache / name
    dest = tmp_path_factory.mktemp("sdist")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        + [f"llama-cpp-python=={version}", "-d", str(dest)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        require_or_skip(f"llama-cpp-python=={version} sdist not cached in {cache} and pip could not download it")
    return dest / name


def overlapping_capture(source: Path, dest: Path) -> Path:
    """A copy of an NVIDIA capture whose every third kernel starts with the one before it.

    The Nsight Systems export's kernel starts are rewritten (two streams' worth of concurrency on
    one stream) and everything else is kept: for checks that overlapping kernels count once.
    """
    import gzip
    import shutil
    import sqlite3

    shutil.copytree(source, dest)
    con = sqlite3.connect(":memory:")
    con.deserialize(gzip.decompress((dest / "trace" / "nsys.sqlite.gz").read_bytes()))
    rows = con.execute("SELECT rowid, start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start").fetchall()
    for (_, prev_start), (rowid, _) in list(zip(rows[:-1], rows[1:], strict=True))[::3]:
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = ? WHERE rowid = ?", (prev_start, rowid))
    con.commit()
    (dest / "trace" / "nsys.sqlite.gz").write_bytes(gzip.compress(con.serialize()))
    return dest
