"""rocroof: per-ggml-op DRAM roofline profiling for llama.cpp, into a queryable database.

The library never prints or exits. Entry points:

* :func:`rocroof.capture.readers.read_capture` - a profiler output path to a :class:`~rocroof.records.Capture`;
* :func:`rocroof.ingest.pipeline.build_run` - a capture to the rows of one run;
* :class:`rocroof.store.Store` - the results database (SQLite file or any SQLAlchemy URL).
"""

__version__ = "0.2.0"
#: The results database's schema version this rocroof writes (the number of its migrations,
#: rocroof.store.migrations; kept here so that ``rocroof --version`` needs no database code).
SCHEMA_VERSION = 7
