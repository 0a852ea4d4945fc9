"""How rocroof opens a SQLite results file read-only: the ``sqlite3`` URI, shared by the store and the fast report.

SQLite URIs (https://www.sqlite.org/uri.html) take the path percent-encoded, so a file name with
``?``, ``#`` or ``%`` in it is the file it names and not a query or fragment. A WAL database in a
folder nobody may write in (a shared read-only mount) cannot get the ``-shm`` index SQLite makes
beside it: it is opened ``immutable=1`` and read as it stands, unless a ``-wal`` file with content
lies beside it (then what the WAL holds would be missed, and the plain read-only open says why).
"""

from __future__ import annotations

import os
from pathlib import Path


def read_only_uri(path: Path) -> str:
    """The ``file:`` URI that opens ``path`` read-only with ``sqlite3.connect(uri, uri=True)``."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    wal = Path(f"{path}-wal")
    if not os.access(path.parent, os.W_OK) and not (wal.is_file() and wal.stat().st_size):
        uri += "&immutable=1"
    return uri


#: How SQLite words a damaged file: SQLITE_CORRUPT and SQLITE_NOTADB (https://www.sqlite.org/rescode.html).
#: Python's sqlite3 raises both as ``sqlite3.DatabaseError``; SQLAlchemy wraps them as its ``DatabaseError``.
DAMAGED_WORDS = ("database disk image is malformed", "file is not a database")


def damaged(reason: str) -> bool:
    """True when ``reason`` (a driver's message) says the SQLite file is damaged (:data:`DAMAGED_WORDS`)."""
    text = reason.lower()
    return any(words in text for words in DAMAGED_WORDS)


def damaged_message(shown: str, reason: str, *, writes: bool = True) -> str:
    """The one-line message for the damaged database ``shown`` (a name safe to print), ``reason`` the driver's.

    ``writes``: the command may have been writing, and the message says that nothing of it was kept.
    """
    tail = "; no run is left half-written" if writes else ""
    return (
        f"{shown}: the database file is damaged ({reason}); restore it from a copy, or save what can be "
        f"read with the sqlite3 shell's .recover{tail}"
    )
