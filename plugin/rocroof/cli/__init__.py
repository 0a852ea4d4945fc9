"""The ``rocroof`` command line: a thin click layer over the library, one module per command group.

Every :class:`~rocroof.errors.RocroofError` becomes a one-line ``Error: ...`` message and exit
status 1 (:class:`~rocroof.cli.app.RocroofGroup`); anything else is a bug and keeps its traceback.

* :mod:`.app` - the ``rocroof`` group, error handling and the helpers the commands share;
* :mod:`.capture` - ``ingest``, ``collect``, ``scrub``;
* :mod:`.results` - ``runs``, ``report``, ``plot``, ``query``, ``graph``, ``diff``;
* :mod:`.sweep` - ``sweep`` (run, status);
* :mod:`.db` - ``merge``, ``db status``, ``db upgrade``.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import capture, db, results, sweep  # noqa: F401  (each registers its commands on the group)
from .app import cli

__all__ = ["cli", "main"]


def _terminated(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (kill, scancel, a batch system's time limit): stop as on Ctrl-C


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point.

    SIGTERM is handled as Ctrl-C: a profiler run stops with rocroof, a transaction in progress
    rolls back, a sweep marks its running points interrupted.
    """
    import signal

    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)
    cli.main(args=list(argv) if argv is not None else None, prog_name="rocroof")


if __name__ == "__main__":  # pragma: no cover
    main()
