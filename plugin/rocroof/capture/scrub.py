"""Make a capture safe to share: a copy without environment variables, host names or paths.

Profiler output records far more than the measurements: Nsight Systems stores the whole
environment of the profiled process (``META_DATA_CAPTURE`` rows ``PROCESS_n:ENVIRONMENT_VARIABLE``
and ``TARGET_INFO_SYSTEM_ENV`` ``DeviceEnvironment``), the host name, the working directory and
the application's stdout/stderr (``ProcessStreams``); Nsight Compute's raw CSV has ``Host Name``
and ``Process Name`` columns; rocprofv3 writes its own ``*_agent_info.csv`` and logs; rocroof's
manifest keeps each command line. :func:`scrub_capture` copies a capture directory and, on the
way,

* drops binary reports that cannot be edited (``.ncu-rep``, ``.nsys-rep``, ``.qdstrm``,
  ``.rpd``): their exports (raw CSV, SQLite) hold what rocroof reads;
* removes environment variables except the ``GGML_*`` ones that shaped the run, the user name,
  host names and GPU UUIDs / bus locations;
* shortens every absolute path to its last component (``/tmp/x/models/m.gguf`` -> ``m.gguf``),
  in SQLite text columns, CSV cells, JSON strings and log lines;
* replaces each host name it learns (the machine's own, ``Host Name`` cells, the manifest's
  ``host``, nsys' ``Hostname``) with ``host``;
* compresses ``.sqlite``/``.db``/``.csv`` files with gzip when asked (rocroof reads ``.gz``).

Measurements are left as they are: ``rocroof ingest`` of the copy stores the same numbers.
"""

from __future__ import annotations

import csv
import getpass
import gzip
import io
import json
import re
import shutil
import socket
import sqlite3
import tempfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError, ParseError
from ..fileio import is_gzip, logical_name, open_binary, sqlite_file
from .readers import MANIFEST

#: Binary reports that are dropped (their exports are kept).
BINARY_REPORTS = (".ncu-rep", ".nsys-rep", ".qdstrm", ".rpd")
#: Environment variables kept (they shape the measured run).
KEEP_ENV = re.compile(r"^(GGML_|LLAMA_ARG_|CUDA_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES)")
_ABS_PATH = re.compile(r"(?<![\w.~-])/(?:[^\s/\"'`:;,|()<>=]+/)+(?=[^\s/\"'`:;,|()<>=])")
_ENV_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_TEXT_SUFFIXES = (".log", ".txt", ".out", ".err", ".yaml", ".yml", ".md")
_COMPRESSIBLE = (".sqlite", ".db", ".csv", ".json")


def shorten_paths(text: str) -> str:
    """Every absolute path reduced to its last component.

    >>> shorten_paths("run /tmp/rr/bin/llama-bench -m /data/m.gguf (cwd /work/main)")
    'run llama-bench -m m.gguf (cwd /work/main)'
    """
    return _ABS_PATH.sub("", text)


#: Host names shorter than this are replaced in host fields only, not in free text.
SHORT_HOST = 4


@dataclass
class ScrubReport:
    """What :func:`scrub_capture` did.

    Attributes:
        written: files written under the destination (relative paths).
        dropped: source files left out (binary reports), relative paths.
        hosts: host names that were replaced with ``host``.
        removed: counts of removed items by kind (``environment variable``, ``host name``...).
    """

    written: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    removed: dict[str, int] = field(default_factory=dict)

    def count(self, kind: str, n: int = 1) -> None:
        """Add ``n`` removed items of ``kind``."""
        if n:
            self.removed[kind] = self.removed.get(kind, 0) + n


class _Cleaner:
    """Text cleaning shared by every file type: host names, then paths."""

    def __init__(self, hosts: Iterable[str], users: Iterable[str] = ()) -> None:
        names = sorted({h for h in hosts if h and h not in ("host", "localhost")}, key=len, reverse=True)
        self.hosts = names
        # short names ("vm") are replaced in host fields only: in free text they would hit words
        long = [h for h in names if len(h) >= SHORT_HOST]
        self._host_re = re.compile("|".join(rf"(?<![\w.-]){re.escape(h)}(?![\w-])" for h in long)) if long else None

        names = sorted({u for u in users if len(u) >= 3 and u not in ("user", "host")}, key=len, reverse=True)
        self._user_re = re.compile("|".join(rf"(?<![\w.-]){re.escape(u)}(?![\w-])" for u in names)) if names else None

    def __call__(self, text: str) -> str:
        if self._host_re is not None:
            text = self._host_re.sub("host", text)
        if self._user_re is not None:
            text = self._user_re.sub("user", text)
        return shorten_paths(text)


def scrub_capture(src: Path, dst: Path, *, compress: bool = False, extra_hosts: Iterable[str] = ()) -> ScrubReport:
    """Copy the capture directory ``src`` to ``dst`` without environment, host names and paths.

    Args:
        src: a capture directory (rocroof collect output, rocprofv3 / Nsight output).
        dst: the destination; must not exist or be empty.
        compress: gzip ``.sqlite``, ``.db``, ``.csv`` and ``.json`` files (``name.ext.gz``), all
            but the ``rocroof-collect.json`` manifest.
        extra_hosts: more host names to replace.

    Returns:
        A :class:`ScrubReport`.

    Raises:
        InputError: ``src`` is not a directory, ``dst`` is not empty or lies inside ``src``,
            or a file cannot be read as its type.
    """
    if not src.is_dir():
        raise InputError(f"{src}: not a directory (scrub copies a capture directory)")
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise InputError(f"{dst}: destination exists and is not an empty directory")
    if dst.resolve().is_relative_to(src.resolve()):
        raise InputError(f"{dst}: destination lies inside the capture {src}")
    files = sorted(p for p in src.rglob("*") if p.is_file())
    report = ScrubReport()
    clean = _Cleaner([socket.gethostname(), *extra_hosts, *_learn_hosts(files)], users=_learn_users(files))
    report.hosts = clean.hosts
    try:  # write into a temporary sibling, then rename: a failed scrub leaves nothing behind
        dst.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    except OSError as exc:
        raise InputError(f"{dst}: cannot create the destination ({exc.strerror})") from exc
    try:
        for path in files:
            rel = path.relative_to(src)
            if logical_name(path).endswith(BINARY_REPORTS):
                report.dropped.append(str(rel))
                continue
            out = work / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            try:
                out = _scrub_file(path, out, clean, report)
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a gzip file cut short or damaged
                raise InputError(f"{path}: compressed data is damaged or truncated ({exc})") from exc
            except OSError as exc:  # reading the source: name it, not the destination
                raise InputError(f"{exc.filename or path}: cannot read ({exc.strerror or exc})") from exc
            if compress and not out.name.endswith(".gz") and out.suffix in _COMPRESSIBLE and out.name != MANIFEST:
                packed = out.with_name(out.name + ".gz")
                with open(out, "rb") as fh, gzip.GzipFile(packed, "wb", mtime=0) as gz:
                    shutil.copyfileobj(fh, gz)
                out.unlink()
                out = packed
            report.written.append(str(out.relative_to(work)))
        if dst.exists():
            dst.rmdir()  # checked empty above
        work.rename(dst)
    except OSError as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise InputError(f"{exc.filename or dst}: cannot read or write ({exc.strerror or exc})") from exc
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return report


#: What reading a file to learn names from may raise; the file's own scrub step reports it.
_UNREADABLE = (
    OSError,
    EOFError,
    zlib.error,
    UnicodeDecodeError,
    json.JSONDecodeError,
    sqlite3.DatabaseError,
    ParseError,
)


def _learn_users(files: list[Path]) -> set[str]:
    """User names: the local one and those nsys recorded (``META_DATA_CAPTURE`` ``*USER_NAME``)."""
    users = {getpass.getuser()} if _safe_user() else set()
    for f in files:
        if logical_name(f).endswith((".sqlite", ".db")):
            try:
                with sqlite_file(f) as plain, sqlite3.connect(f"file:{plain}?mode=ro", uri=True) as con:
                    if _has_table(con, "META_DATA_CAPTURE"):
                        users.update(
                            str(r[0])
                            for r in con.execute("SELECT value FROM META_DATA_CAPTURE WHERE name LIKE '%USER_NAME'")
                            if r[0]
                        )
            except _UNREADABLE:
                continue
    return users


def _safe_user() -> bool:
    try:
        return bool(getpass.getuser())
    except (KeyError, OSError):
        return False


def _learn_hosts(files: list[Path]) -> set[str]:
    """Host names recorded in the capture (ncu ``Host Name``, manifest ``host``, nsys ``Hostname``)."""
    hosts: set[str] = set()
    for f in files:
        name = logical_name(f)
        try:
            if name.endswith(".csv"):
                with open_binary(f) as fh:
                    reader = csv.reader(io.TextIOWrapper(fh, encoding="utf-8", errors="replace"))
                    header = next(reader, [])
                    if "Host Name" in header:
                        col = header.index("Host Name")
                        hosts.update(row[col] for row in reader if len(row) > col and row[col])
            elif name == "rocroof-collect.json":
                data = json.loads(f.read_text(encoding="utf-8"))
                if isinstance(data, dict) and isinstance(data.get("host"), str):
                    hosts.add(data["host"])
            elif name.endswith((".sqlite", ".db")):
                with sqlite_file(f) as plain, sqlite3.connect(f"file:{plain}?mode=ro", uri=True) as con:
                    if _has_table(con, "TARGET_INFO_SYSTEM_ENV"):
                        hosts.update(
                            r[0] for r in con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name='Hostname'")
                        )
        except _UNREADABLE:
            continue  # the file's own scrub step reports what it cannot read
    return {h.strip() for h in hosts if h and h.strip()}


def _scrub_file(path: Path, out: Path, clean: _Cleaner, report: ScrubReport) -> Path:
    name = logical_name(path)
    if name.endswith((".sqlite", ".db")):
        return _scrub_sqlite(path, out, clean, report)
    if name.endswith(".csv"):
        return _rewrite_text(path, out, lambda text: _scrub_csv(text, clean, report))
    if name.endswith(".json"):
        return _rewrite_text(path, out, lambda text: _scrub_json(path, text, clean, report))
    if name.endswith(_TEXT_SUFFIXES):
        return _rewrite_text(path, out, clean)
    shutil.copyfile(path, out)
    return out


def _rewrite_text(path: Path, out: Path, fn: Callable[[str], str]) -> Path:
    with open_binary(path) as fh:
        text = fh.read().decode("utf-8", errors="surrogateescape")
    data = fn(text).encode("utf-8", errors="surrogateescape")
    if is_gzip(path):
        with gzip.GzipFile(out, "wb", mtime=0) as gz:
            gz.write(data)
    else:
        out.write_bytes(data)
    return out


def _scrub_csv(text: str, clean: _Cleaner, report: ScrubReport) -> str:
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows:
        return text
    hosts = [i for i, h in enumerate(rows[0]) if h == "Host Name"]
    for row in rows[1:]:
        for i in hosts:
            if i < len(row) and row[i] and row[i] != "host":
                row[i] = "host"
                report.count("host name")
    cleaned = [[clean(cell) for cell in row] for row in rows]
    if cleaned == rows and not hosts:
        return text
    buf = io.StringIO()
    if text.startswith('"'):  # keep the source's quoting (ncu quotes every cell)
        csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(cleaned)
    else:
        csv.writer(buf, quoting=csv.QUOTE_MINIMAL, lineterminator="\n").writerows(cleaned)
    return buf.getvalue()


def _scrub_json(path: Path, text: str, clean: _Cleaner, report: ScrubReport) -> str:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg}); cannot scrub it") from exc

    def walk(obj: Any, key: str = "") -> Any:
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if key == "env" and not KEEP_ENV.match(str(k)):
                    report.count("environment variable")
                    continue
                out[k] = walk(v, str(k))
            return out
        if isinstance(obj, list):
            return [walk(v, key) for v in obj]
        if isinstance(obj, str):
            return "host" if key == "host" else clean(obj)
        return obj

    scrubbed = walk(data)
    if scrubbed == data:
        return text
    return json.dumps(scrubbed, indent=None if "\n" not in text.strip() else 2) + "\n"


def _has_table(con: sqlite3.Connection, name: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def _scrub_sqlite(path: Path, out: Path, clean: _Cleaner, report: ScrubReport) -> Path:
    if is_gzip(path):
        plain = out.with_name(logical_name(path))
        with open_binary(path) as src, open(plain, "wb") as fh:
            shutil.copyfileobj(src, fh)
    else:
        plain = out
        shutil.copyfile(path, plain)
    try:
        con = sqlite3.connect(plain)
        try:

            def clean_value(value: str | bytes | int | float | None) -> str | bytes | int | float | None:
                if not isinstance(value, str):
                    return value
                if "\x00" in value and _ENV_ENTRY.match(value):  # a process environment block
                    entries = value.split("\x00")
                    kept = [e for e in entries if KEEP_ENV.match(e)]
                    report.count("environment variable", sum(1 for e in entries if e) - len(kept))
                    value = "\x00".join(kept)
                return clean(value)

            con.create_function("rr_clean", 1, clean_value)
            _scrub_nsys_tables(con, report)
            for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
                cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")') if "TEXT" in (r[2] or "").upper()]
                for col in cols:
                    con.execute(f'UPDATE "{table}" SET "{col}" = rr_clean("{col}") WHERE typeof("{col}") = \'text\'')
            con.commit()
            con.execute("VACUUM")  # deleted rows must not survive in free pages
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: not a readable SQLite database ({exc}); cannot scrub it") from exc
    if plain != out:  # the source was gzip: keep it compressed
        with open(plain, "rb") as raw, gzip.GzipFile(out, "wb", mtime=0) as gz:
            shutil.copyfileobj(raw, gz)
        plain.unlink()
    return out


def _scrub_nsys_tables(con: sqlite3.Connection, report: ScrubReport) -> None:
    """Nsight Systems export: environment, user, host, GPU identity."""
    if _has_table(con, "META_DATA_CAPTURE"):
        rows = con.execute(
            "SELECT rowid, value FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT_VARIABLE%' OR name = ''"
        ).fetchall()
        drop = [rid for rid, value in rows if not KEEP_ENV.match(str(value or ""))]
        con.executemany("DELETE FROM META_DATA_CAPTURE WHERE rowid = ?", [(r,) for r in drop])
        report.count("environment variable", len(drop))
        n = con.execute(
            "UPDATE META_DATA_CAPTURE SET value = 'host' WHERE (name IN ('DEVICE_DISPLAY_NAME', 'HOST_NAME') "
            "OR name LIKE '%USER_NAME') AND value != 'host' AND value != ''"
        ).rowcount
        report.count("host or user name", n)
    if _has_table(con, "TARGET_INFO_SYSTEM_ENV"):
        n = con.execute(
            "DELETE FROM TARGET_INFO_SYSTEM_ENV WHERE name IN ('DeviceEnvironment', 'Hostname', 'UserName')"
        ).rowcount
        report.count("host environment record", n)
    if _has_table(con, "TARGET_INFO_GPU"):
        cols = {r[1] for r in con.execute('PRAGMA table_info("TARGET_INFO_GPU")')}
        ids = [c for c in ("uuid", "busLocation", "luid") if c in cols]
        if ids:
            sets = ", ".join(f"{c} = NULL" for c in ids)
            where = " OR ".join(f"{c} IS NOT NULL" for c in ids)
            report.count("GPU identifier", con.execute(f"UPDATE TARGET_INFO_GPU SET {sets} WHERE {where}").rowcount)
    if _has_table(con, "PROCESSES") and _has_table(con, "CUPTI_ACTIVITY_KIND_RUNTIME"):
        # the recording host's process list: keep the processes that called CUDA
        n = con.execute(
            "DELETE FROM PROCESSES WHERE globalPid NOT IN "
            "(SELECT DISTINCT globalTid - (globalTid % 16777216) FROM CUPTI_ACTIVITY_KIND_RUNTIME)"
        ).rowcount
        report.count("host process record", n)
