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
