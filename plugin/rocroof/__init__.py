"""rocroof: per-ggml-op DRAM roofline profiling for llama.cpp, into a queryable database.

The library never prints or exits. Entry points:

* :func:`rocroof.capture.readers.read_capture` - a profiler output path to a :class:`~rocroof.records.Capture`;
* :func:`rocroof.ingest.pipeline.build_run` - a capture to the rows of one run;
* :class:`rocroof.store.Store` - the results database (SQLite file or any SQLAlchemy URL);
* :func:`rocroof.open` - a results database as pandas DataFrames, for notebooks (:mod:`rocroof.api`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

# polars' allocator (jemalloc, which reads its options from _RJEM_MALLOC_CONF when polars loads)
# keeps freed pages for seconds before it returns them: 65-200 MB of a 10^6-dispatch ingest's peak
# resident memory (benchmarks/RESULTS.md, 2026-12-05). Returned at once instead (no difference in
# time beyond the benchmark machine's noise); a value the user set is kept.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")

if TYPE_CHECKING:
    from .api import Results

__version__ = "0.2.0"
#: The results database's schema version this rocroof writes (the number of its migrations,
#: rocroof.store.migrations; kept here so that ``rocroof --version`` needs no database code).
SCHEMA_VERSION = 9


def open(db: str | Path) -> Results:  # noqa: A001 - the package's entry point, as rocroof.open(db)
    """A results database (SQLite file or PostgreSQL URL), read-only, as pandas DataFrames.

    See :class:`rocroof.api.Results`. Imported on first call: ``import rocroof`` stays light.

    Raises:
        InputError: no such file; SchemaError: a database of another schema version.
    """
    from .api import Results

    return Results(db)
