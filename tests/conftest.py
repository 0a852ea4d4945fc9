"""Shared test helpers.

Recorded profiler outputs live in ``../shared/fixtures`` (beside the checkout; CI always has
it). Tests read them in place and never copy them into the repository; on a clone without
them those tests skip with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
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
