"""The one exception family rocroof raises for user-facing problems.

The library never prints or exits; ``rocroof.cli`` turns every :class:`RocroofError`
into a one-line message. Anything that is not a ``RocroofError`` is a bug and keeps its
traceback.
"""

from __future__ import annotations

from pathlib import Path


class RocroofError(Exception):
    """Base class of every error a user can cause and fix.

    ``str(err)`` is a complete one-line message: what failed, where, and what to try.
    """


class InputError(RocroofError):
    """A path given by the user is missing, unreadable or of an unknown format."""


class ParseError(RocroofError):
    """A profiler output file does not have the expected content.

    Args:
        path: the file that failed to parse.
        reason: what was expected, in words.
        row: 1-based line or row number in the file, when known (the header is row 1).
    """

    def __init__(self, path: str | Path, reason: str, row: int | None = None) -> None:
        self.path = str(path)
        self.row = row
        self.reason = reason
        where = f"{self.path}:{row}" if row is not None else self.path
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[type[ParseError], tuple[str, str, int | None]]:
        # pickled with its own arguments (a window built in another process raises it there)
        return type(self), (self.path, self.reason, self.row)


class SchemaError(RocroofError):
    """The results database has a schema this version of rocroof cannot use."""


class DuplicateRunError(RocroofError):
    """The same raw profiler output was already ingested into this database."""


class QueryError(RocroofError):
    """A SQL query given by the user failed or tried to write."""


class OutputError(RocroofError):
    """The command's output cannot be written: a full disk, a missing folder, a file in the way."""


class ConfigError(RocroofError):
    """A configuration file (peaks, counter presets) is invalid."""


class ProfilerNotFound(RocroofError):
    """The profiler executable (e.g. ``rocprofv3``) is not on ``PATH``."""


class ProfilerFailed(RocroofError):
    """A profiler run exited with an error.

    Args:
        command: the command line that ran.
        returncode: its exit status.
        stderr_tail: the last lines it wrote to stderr.
    """

    def __init__(self, command: list[str], returncode: int, stderr_tail: str) -> None:
        self.command = command
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        last = stderr_tail.strip().splitlines()[-1] if stderr_tail.strip() else "no stderr output"
        super().__init__(f"{command[0]} exited with status {returncode}: {last}")

    def __reduce__(self) -> tuple[type[ProfilerFailed], tuple[list[str], int, str]]:
        return type(self), (self.command, self.returncode, self.stderr_tail)
