"""Capture detection and reading: a path in, a :class:`~rocroof.records.Capture` out.

A *capture* is what one profiled execution of one command left on disk: a directory (or a
single file) holding one or more passes plus attachments. Detection looks at the files present:

* rocprofv3 CSV (``[<pid>_|out_]kernel_trace.csv``, ``counter_collection.csv``,
  ``marker_api_trace.csv``, ``hip_api_trace.csv``, ``agent_info.csv``); each directory holding
  them is one pass (``pmc_N/``, ``pass_N/`` sub-directories for multi-pass runs);
* rocprofv3 rocpd databases (``*_results.db``; one per process, grouped by directory);
* a rocprofiler-compute workload (``sysinfo.csv`` + ``pmc_perf*.csv``; every rocprof backend);
* legacy rocprof output (rocprof v1 ``results.csv``/``<input>.csv``, ``results.db``,
  ``roctx_trace.txt``, ``results.sysinfo.txt``; rocprofv2 ``results_<pid>.csv``);
* a rocmProfileData (RPD) trace (``*.rpd``, or an SQLite file with its ``rocpd_op`` tables);
* ggml op metadata JSON (``GGML_ROOFLINE_OUT`` schema or rocroof's sidecar);
* ``*.log`` files with ``ggml-fused:`` lines;
* ``rocroof-collect.json``, the manifest ``rocroof collect`` writes.

Any file may be gzip-compressed (``.gz``). A folder may hold several captures:
:func:`find_captures` tells them apart (the rule is in its docstring).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...analysis.bandwidth import BANDWIDTH_FILE, MIN_PROBE_BYTES, read_bandwidth
from ...errors import InputError, ParseError
from ...fileio import logical_name, open_binary, read_text, sqlite_writer_files, unreadable
from ...memory import release_free_memory
from ...records import (
    AGENT_COLUMNS,
    DISPATCH_COLUMNS,
    SPILLED_AFTER_READ,
    Capture,
    Note,
    PassData,
    conform,
    empty_frame,
    merge_passes,
    spill_columns,
)
from ...text import printable
from ..markers import file_has_fused_lines, read_fused_log
from . import ggml_meta, nvidia, rocpd, rocprof_compute, rocprof_legacy, rocprofv3_csv, rpd

MANIFEST = "rocroof-collect.json"


def _natural(path: Path) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def _files_below(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted((p for p in root.rglob("*") if p.is_file()), key=_natural)


#: Names of the SQLite files that profilers write (rocpd, RPD, Nsight Systems exports, rocprof v1).
_SQLITE_NAMES = (".db", ".rpd", ".sqlite", ".sqlite3")


def _being_written(files: Sequence[Path]) -> dict[Path, str]:
    """``{database: its -wal or -journal file}`` for the SQLite files of ``files`` that a program is writing.

    A non-empty ``-wal`` holds commits not yet copied into the database (its writer is still
    running, or stopped without closing it); a non-empty ``-journal`` is a write in progress (or
    one cut short). Empty ones are left by readers (a read-only reader of a WAL database leaves
    an empty ``-wal`` and its ``-shm``) and say nothing. Checked before reading: a reader must
    not be the one that changes them.
    """
    out: dict[Path, str] = {}
    for f in files:
        if not logical_name(f).endswith(_SQLITE_NAMES) or logical_name(f) != f.name:  # .gz: a finished copy
            continue
        writers = sqlite_writer_files(f)
        if writers:
            out[f] = writers[0].name
    return out


def _not_files_below(root: Path) -> list[tuple[Path, str]]:
    """Entries under ``root`` that no reader can open, with what each is: a link to nothing, a FIFO...

    :func:`_files_below` leaves them out; a capture file that is one of them would be missing
    from the run without a word (found by a trial user: a dangling ``kernel_trace.csv`` link).
    """
    if not root.is_dir():
        return []
    odd = []
    for p in sorted(root.rglob("*"), key=_natural):
        if p.is_file() or p.is_dir():
            continue
        if p.is_symlink():
            what = "a symbolic link to no file"  # its target is missing, or links round in a loop
        elif p.is_fifo():
            what = "a FIFO"
        elif p.is_socket():
            what = "a socket"
        else:
            what = "not a regular file"
        odd.append((p, what))
    return odd


#: Bytes read per step of :func:`_hash_files`. It runs in a thread beside the read, and each step
#: takes the GIL back from the reader (up to the 5 ms switch interval): in 1 MB steps the hash of a
#: 2.9 GB capture (2.3 s of SHA-256 on this CPU) took ~10 s and held the build back ~1.9 s.
HASH_BLOCK_BYTES = 8 << 20


#: How much lower the hash thread's priority is than the process's (Linux nice levels): the hash
#: overlaps the attribution and the write, which use both cores of a 2-core machine from their
#: start; at a lower priority it takes what they leave, and is still done before the commit needs
#: it. The rocprofv3 CSV of 10^6 dispatches ingested ~1 s sooner so (19.1-19.5 s against
#: 19.7-20.6 s, three interleaved runs each; benchmarks/RESULTS.md).
HASH_NICE_STEP = 10


def _yield_to_the_build() -> None:
    """Lower the calling thread's priority by :data:`HASH_NICE_STEP` (Linux, where a nice level is per thread).

    Elsewhere ``setpriority`` would lower the whole process: nothing is done. A refusal is ignored.
    """
    if sys.platform != "linux":
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + HASH_NICE_STEP))
    except OSError:
        pass


def _hash_beside(paths: list[Path], root: Path) -> str:
    """:func:`_hash_files` in the hash thread, at its lower priority (:func:`_yield_to_the_build`)."""
    _yield_to_the_build()
    return _hash_files(paths, root)


def _hash_files(paths: list[Path], root: Path) -> str:
    """SHA-256 of the files a capture was read from: each one's path (``.gz`` left out) and content.

    A gzip file is hashed decompressed, so that the same capture gives the same hash gzipped or
    not (``gunzip`` then ingest again is refused as a duplicate, as is ``.rpd`` vs ``.rpd.gz``).
    """
    digest = hashlib.sha256()
    named = []
    for path in paths:
        try:
            rel = path.relative_to(root) if root.is_dir() else Path(path.name)
        except ValueError:
            rel = Path(path.name)
        named.append((str(rel.parent / logical_name(rel)), path))
    buf = bytearray(HASH_BLOCK_BYTES)
    view = memoryview(buf)
    for rel_name, path in sorted(named):
        digest.update(os.fsencode(rel_name) + b"\0")
        with open_binary(path) as fh:
            while got := fh.readinto(view):
                digest.update(view[:got])  # hashlib lets go of the GIL while it hashes
        digest.update(b"\0")
    return digest.hexdigest()


#: File name of the op-metadata sidecar that ``rocroof collect`` asks the llama.cpp hook for.
SIDECAR_NAME = "ggml-op-meta.json"


def _read_manifest(path: Path) -> dict[str, object]:
    try:
        data = json.loads(read_text(path, limit_bytes=16 << 20))
    except json.JSONDecodeError as exc:
        raise ParseError(path, f"invalid JSON: {exc.msg}", exc.lineno) from exc
    except RecursionError as exc:  # json.loads recurses once per nesting level
        raise ParseError(path, "invalid JSON: nested too deeply (expected the rocroof collect manifest)") from exc
    if not isinstance(data, dict):
        raise ParseError(path, "expected a JSON object (the rocroof collect manifest)")
    return data


#: Why a ``.db`` file was not read: the SQLite families rocroof knows, and what each must hold.
_NOT_A_KNOWN_DB = (
    "is not a database rocroof reads, or it is damaged: not rocprofv3's rocpd (no rocpd_kernel_dispatch table), "
    "not rocprof v1's results.db (no KERN or rocTX table), not an RPD trace (no rocpd_op / rocpd_api tables)"
)


_FAMILY_ORDER = ("nvidia", "rocpd", "rocprofv3-csv", rocprof_legacy.FORMAT, rpd.FORMAT)


def _family(f: Path) -> str | None:
    """The profiler family a file is output of (``nvidia``, ``rocpd``...), or None for any other file."""
    name = logical_name(f)
    if nvidia.is_nsys_sqlite(f) or nvidia.is_ncu_csv(f) or name.endswith(".ncu-rep"):
        return "nvidia"
    if name.endswith(".db") and rocpd.is_rocpd(f):
        return "rocpd"
    if rocprofv3_csv.classify(f):
        return "rocprofv3-csv"
    if rocprof_legacy.csv_generation(f) or rocprof_legacy.is_results_db(f):
        return rocprof_legacy.FORMAT
    if rpd.resembles_rpd(f):
        return rpd.FORMAT
    return None


def _families(files: list[Path]) -> dict[str, list[Path]]:
    """The profiler families whose files a folder holds, each with its files, in detection order.

    rocprofv3 writes both a rocpd database and CSV when asked for both: those count as one (the
    rocpd databases are read, with a note).
    """
    found: dict[str, list[Path]] = {}
    for f in files:
        fam = _family(f)
        if fam is not None:
            found.setdefault(fam, []).append(f)
    if "rocpd" in found:
        found.pop("rocprofv3-csv", None)
    return {fam: found[fam] for fam in _FAMILY_ORDER if fam in found}


#: Sub-folders that hold counter passes of the capture in the folder above them, not captures of
#: their own. rocprofv3 runs the application once per ``pmc:`` line of a text input file and once
#: per job of a YAML or JSON one, each run writing into ``<output directory>/pmc_<n>/`` or
#: ``pass_<n>/`` (n = 1, 2...; then ``<hostname>/<pid>_...``): rocprofiler-sdk
#: ``source/bin/rocprofv3.py`` (``parse_text``/``parse_yaml``/``parse_json`` set ``sub_directory``,
#: ``run`` joins it and the pass number to ``ROCPROF_OUTPUT_PATH``; ROCm/rocprofiler-sdk ``8ab1ed7``,
#: the same in ROCm 7.0's), documented under "Kernel counter collection output" in
#: ``source/docs/how-to/using-rocprofv3.rst``; the rocprofiler-compute fixture's ``log.txt``
#: (``MI300X_A1_rocpd``) shows ``out/pmc_1/<hostname>/<pid>_results.db``. rocprofv2 wrote
#: ``pmc_<n>/`` too. ``ncu/`` and ``ncu.<n>/`` are ``rocroof collect``'s Nsight Compute passes
#: (beside its ``trace/``, which is the trace pass and joins them).
COUNTER_PASS_DIR = re.compile(r"(?:pmc|pass)_[0-9]+|ncu(?:\.[0-9]+)?")

#: Names of files that may be a capture a reader failed to recognise (a damaged or unknown database,
#: an Nsight Systems report): in a folder of captures they are named, not passed over.
_CAPTURE_LIKE = re.compile(r".*\.(?:db|sqlite3?|rpd|ncu-rep|nsys-rep)|pmc_perf(?:_[0-9]+)?\.csv")


@dataclass(frozen=True)
class Found:
    """A capture :func:`find_captures` found: the path to read, its own files, and what to call it.

    Attributes:
        path: the capture: a file, or a folder (read whole unless ``files`` is given).
        files: where ``path`` is a folder that holds other captures too, the files of this one.
        name: how messages and the stored run name it (``source_path``).
    """

    path: Path
    files: tuple[Path, ...] | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", str(self.path))


def find_captures(path: Path) -> list[Found]:
    """The captures at or below ``path``, each to be stored as a run of its own.

    The rule, applied from ``path`` down:

    * a file is one capture;
    * a folder is one capture, read whole, when it holds ``rocroof-collect.json`` (the manifest of
      ``rocroof collect``), is a rocprofiler-compute workload (``sysinfo.csv`` + ``pmc_perf*.csv``),
      or has counter-pass sub-folders (:data:`COUNTER_PASS_DIR`: rocprofv3's ``pmc_<n>/`` and
      ``pass_<n>/``, rocroof's ``ncu/``): the passes of one multi-pass run;
    * otherwise each sub-folder holding profiler output is a capture of its own (or a folder of them:
      the rule applies to it), and the folder's own files are one capture per profiler family (one
      per RPD trace file; rocprofv3's CSV and rocpd files are one family). Files of one family in one
      folder are one capture: rocprofv3 writes one file per process there.

    A folder that holds one capture by this rule is that capture, read whole as before (its other
    files and folders with it). Where a folder holds several, an op metadata JSON, ``ggml-fused:``
    log or ``bandwidth.json`` that lies in it beside them belongs to the one capture of its own
    files, if it has exactly one, and is refused otherwise (which run it belongs to cannot be told);
    a sub-folder holding no capture but files that look like one (``*.db``, ``*.rpd``...) is kept
    as a capture whose read says what is wrong with it.

    Returns:
        The captures, in name order; ``[Found(path)]`` when ``path`` is one (or holds none: reading
        it then says why).

    Raises:
        InputError: a file that belongs to one of several captures, and which one cannot be told.
    """
    if not path.is_dir():
        return [Found(path)]
    stray: list[Path] = []
    found = _captures_in(path, stray, set())
    if len(found) <= 1:
        return [Found(path)]
    if stray:
        shown = ", ".join(printable(str(s.relative_to(path))) for s in stray[:5]) + (" ..." if len(stray) > 5 else "")
        names = ", ".join(printable(f.name.removeprefix(f"{path}{os.sep}")) for f in found[:5])
        raise InputError(
            f"{path}: {shown} lie{'s' if len(stray) == 1 else ''} beside {len(found)} captures "
            f"({names}{' ...' if len(found) > 5 else ''}) and belong{'s' if len(stray) == 1 else ''} to one of them "
            "(ggml op metadata, a ggml-fused log, a bandwidth probe result), but which cannot be told: move it into "
            "its capture's folder, or ingest that capture alone with --attach FILE"
        )
    return found


def _is_attachment(f: Path) -> bool:
    """A file a capture reads beside its profiler output: op metadata JSON, a ggml-fused log, a probe result."""
    name = logical_name(f)
    if name == BANDWIDTH_FILE:
        return True
    if name.endswith(".json"):
        return name != MANIFEST and (name == SIDECAR_NAME or ggml_meta.looks_like_metadata(f))
    return name.endswith(".log") and file_has_fused_lines(f)


def _captures_in(folder: Path, stray: list[Path], seen: set[Path]) -> list[Found]:
    """The captures in ``folder`` by :func:`find_captures`'s rule; attachments no capture claims go to ``stray``.

    A link to a folder is followed (a folder of links to captures is a folder of captures), once:
    ``seen`` holds the folders looked at, so a link to a folder above ends there.
    """
    real = folder.resolve()
    if real in seen:
        return []
    seen.add(real)
    if (folder / MANIFEST).is_file() or rocprof_compute.is_workload(folder):
        return [Found(folder)]
    entries = sorted(folder.iterdir(), key=_natural)
    subdirs = [e for e in entries if e.is_dir()]
    if any(COUNTER_PASS_DIR.fullmatch(d.name) for d in subdirs):
        return [Found(folder)]
    files = [e for e in entries if e.is_file()]
    by_family: dict[str, list[Path]] = {}
    for f in files:
        fam = _family(f)
        if fam is not None:
            by_family.setdefault(fam, []).append(f)
    if "rocpd" in by_family and "rocprofv3-csv" in by_family:  # one run's two formats: read as one capture
        by_family["rocpd"] += by_family.pop("rocprofv3-csv")
    groups = [
        (fam, group)
        for fam in _FAMILY_ORDER
        if fam in by_family
        for group in ([[f] for f in by_family[fam]] if fam == rpd.FORMAT else [by_family[fam]])
    ]
    inner: list[Found] = []
    idle: list[Path] = []  # sub-folders without a capture
    for d in subdirs:
        below = _captures_in(d, stray, seen)
        if below:
            inner += below
        else:
            idle.append(d)
    if len(groups) + len(inner) <= 1:
        return [Found(folder)] if groups or inner else []
    # a folder of several captures: its own files make one capture per family, beside those below
    claimed = {f for _, group in groups for f in group}
    rest = [f for f in files if f not in claimed]
    attachments = [f for f in rest if _is_attachment(f)]
    companions = [f for f in rest if f not in attachments]  # rocprof's sysinfo, stats, logs: the readers pick
    if len(groups) == 1:
        companions += attachments  # beside the one capture of the folder's own files: that capture's
    else:
        stray += attachments
    own: list[Found] = []
    for fam, group in groups:
        name = str(group[0]) if len(group) == 1 else f"{folder} ({fam} files)"
        own.append(Found(folder, tuple(sorted([*group, *companions], key=_natural)), name))
    unknown = [f for f in companions if _CAPTURE_LIKE.fullmatch(logical_name(f))]
    if unknown and not groups:  # files that look like a capture but are none: their read says why
        own.append(Found(folder, tuple(unknown), f"{folder} ({', '.join(f.name for f in unknown[:3])})"))
    for d in idle:
        if any(_CAPTURE_LIKE.fullmatch(logical_name(f)) or _is_attachment(f) for f in _files_below(d)) or (
            _not_files_below(d)
        ):
            inner.append(Found(d))  # looks like a capture but is none that a reader knows: reading it says why
    return own + sorted(inner, key=lambda f: _natural(f.path))


def detect(path: Path, only: Sequence[Path] | None = None) -> str:
    """Name the capture format found at ``path``.

    Args:
        path: a capture directory or file.
        only: the capture's own files, where ``path`` is a folder that holds other captures too
            (:attr:`Found.files`); default: every file below ``path``.

    Returns:
        One of ``rocprof-compute``, ``rocpd``, ``rocprofv3-csv``, ``ggml-roofline-json``.

    Raises:
        InputError: the path does not exist, is empty, or holds nothing rocroof can read.
    """
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_dir():
        files = list(only) if only is not None else _files_below(path)
        if not files:
            raise InputError(
                f"{path}: directory is empty (expected rocprofv3, rocpd, rocprofiler-compute or Nsight output)"
            )
        if rocprof_compute.is_workload(path):
            return "rocprof-compute"
        workloads = sorted(
            {f.parent for f in files if logical_name(f) == "sysinfo.csv" and rocprof_compute.is_workload(f.parent)}
        )
        if workloads:
            shown = ", ".join(str(w.relative_to(path)) for w in workloads[:5]) + (", ..." if len(workloads) > 5 else "")
            raise InputError(
                f"{path}: holds {len(workloads)} rocprofiler-compute workload(s) ({shown}); "
                "one run is one capture: ingest each workload directory"
            )
        manifests = [f for f in files if f.name == MANIFEST]
        if len(manifests) > 1:
            raise InputError(
                f"{path}: holds {len(manifests)} rocroof collect captures; ingest each capture directory "
                f"({', '.join(str(m.parent.relative_to(path)) for m in manifests[:5])})"
            )
        families = _families(files)
        if len(families) > 1:
            shown = "; ".join(f"{fam}: {examples[0].relative_to(path)}" for fam, examples in families.items())
            passes = sorted(d.name for d in path.iterdir() if d.is_dir() and COUNTER_PASS_DIR.fullmatch(d.name))
            if passes:  # find_captures reads such a folder whole: the passes of one run
                advice = (
                    f"its {', '.join(passes[:3])}{' ...' if len(passes) > 3 else ''} sub-folder(s) make it one "
                    "multi-pass capture, and one capture is one profiled run of one tool: move the other tool's "
                    "output out of it"
                )
            else:
                advice = (
                    "one capture is one profiled run of one tool: read each capture alone ('rocroof ingest' stores "
                    "each capture of a folder as a run of its own)"
                )
            raise InputError(f"{path}: holds the output of {len(families)} profilers ({shown}); {advice}")
        if families:
            return next(iter(families))
        if (path / MANIFEST).is_file() and str(_read_manifest(path / MANIFEST).get("profiler", "")).startswith("ncu"):
            return "nvidia"  # its exports are all unreadable: the NVIDIA reader names the broken file
        dbs = [f for f in files if logical_name(f).endswith(".db")]
        if any(logical_name(f).endswith(".json") and ggml_meta.looks_like_metadata(f) for f in files):
            return "ggml-roofline-json"
        if dbs:
            raise InputError(f"{path}: {dbs[0].name} {_NOT_A_KNOWN_DB}")
        pmc = sorted(f for f in files if re.fullmatch(r"pmc_perf(_\d+)?\.csv", logical_name(f)))
        if pmc:  # a rocprofiler-compute workload without the file that names its GPU
            raise InputError(
                f"{path}: holds {pmc[0].relative_to(path)} of a rocprofiler-compute workload but no sysinfo.csv beside "
                "it (it names the GPU and its clocks); copy the workload directory whole"
            )
        shown = ", ".join(sorted({logical_name(f) for f in files})[:5])
        raise InputError(
            f"{path}: no profiler output found (saw {shown}{'...' if len(files) > 5 else ''}); expected rocprofv3 "
            "CSV (*_kernel_trace.csv, *_counter_collection.csv), a rocpd *_results.db, a rocprofiler-compute "
            "workload (sysinfo.csv + pmc_perf.csv), legacy rocprof output (results.csv, results.db), an RPD "
            "trace (.rpd), an Nsight Systems SQLite or Nsight Compute raw CSV export, or ggml op metadata JSON"
        )
    name = logical_name(path)
    if name.endswith(".rpd"):
        return rpd.FORMAT
    if nvidia.is_nsys_sqlite(path) or nvidia.is_ncu_csv(path):
        return "nvidia"
    if name.endswith(".db"):
        if rocpd.is_rocpd(path):
            return "rocpd"
        if rocprof_legacy.is_results_db(path):
            return rocprof_legacy.FORMAT
        if rpd.resembles_rpd(path):
            return rpd.FORMAT
        raise InputError(f"{path}: {_NOT_A_KNOWN_DB}")
    if rocprofv3_csv.classify(path):
        return "rocprofv3-csv"
    if rocprof_legacy.csv_generation(path):
        return rocprof_legacy.FORMAT
    if name in ("pmc_perf.csv", "sysinfo.csv") and rocprof_compute.is_workload(path.parent):
        return "rocprof-compute"
    if name.endswith(".json"):
        return "ggml-roofline-json"  # the reader names what is wrong with a JSON file that is not one
    if name.endswith(".log") and file_has_fused_lines(path):
        raise InputError(
            f"{path}: a log of ggml-fused lines names fused groups but holds no profile; put it in the capture "
            "directory or pass it with --attach"
        )
    damage = unreadable(path)  # an empty file or a cut gzip is named as such, not as an unknown format
    if damage is not None:
        raise damage
    raise InputError(
        f"{path}: unknown file format (expected a rocprofv3 CSV or rocpd .db, a rocprofiler-compute pmc_perf.csv, "
        "a legacy rocprof results.csv or results.db, an RPD trace (.rpd), an Nsight Compute raw CSV or Nsight "
        "Systems SQLite export, or ggml op metadata JSON)"
    )


def read_capture(
    path: Path,
    *,
    attachments: list[Path] | None = None,
    keep_instances: bool = True,
    only: Sequence[Path] | None = None,
) -> Capture:
    """Detect and read one capture.

    Args:
        path: a capture directory or a single profiler file.
        attachments: extra files that belong to this run (op metadata JSON, fused-group logs).
        keep_instances: keep per-instance counter values where the source has them.
        only: the capture's own files, where ``path`` is a folder that holds other captures too
            (:attr:`Found.files` of :func:`find_captures`); default: every file below ``path``.

    Returns:
        The :class:`~rocroof.records.Capture`; passes are in run order (the trace pass first).

    Raises:
        InputError: unknown or empty input.
        ParseError: malformed input (file and row named).
    """
    own = only is not None and path.is_dir()  # some of the folder's files: those of this capture
    fmt = detect(path, only if own else None)
    root = path if path.is_dir() else path.parent
    files = list(only) if own and only is not None else _files_below(path) if path.is_dir() else [path]
    used: list[Path] = []
    notes: list[Note] = []
    writing = _being_written(files)  # before any reader opens them
    manifest: dict[str, object] = {}
    manifest_path = root / MANIFEST
    if path.is_dir() and manifest_path.is_file():
        manifest = _read_manifest(manifest_path)
        used.append(manifest_path)
    odd = [(p, what) for p, what in _not_files_below(path) if not own or p.parent == path]
    if odd:
        shown = "; ".join(f"{printable(str(p.relative_to(path)))} ({what})" for p, what in odd[:5])
        notes.append(
            Note(
                "warning",
                "entries-not-read",
                f"{len(odd)} entr{'y' if len(odd) == 1 else 'ies'} of the capture folder could not be read and "
                f"{'is' if len(odd) == 1 else 'are'} left out: {shown}{' ...' if len(odd) > 5 else ''}",
            )
        )

    capture: Capture
    if fmt == "rocprof-compute":
        workload = path if path.is_dir() else path.parent
        passes, sysinfo, agents, wnotes, roof_bw = rocprof_compute.read_workload(workload)
        notes += wnotes
        used += [p for p in _files_below(workload) if p.suffix in (".csv", ".txt", ".gz", ".yaml")]
        capture = Capture(
            source_format=fmt,
            source_paths=[str(workload)],
            profiler="rocprof-compute",
            profiler_version=sysinfo.get("version"),
            command=sysinfo.get("command"),
            host=sysinfo.get("hostname"),
            passes=passes,
            agents=agents,
            sysinfo=sysinfo,
        )
        if roof_bw:
            capture.dram_peak_gbps, capture.dram_peak_source = (
                roof_bw,
                "roofline.csv HBMBw (measured by rocprofiler-compute)",
            )
            capture.dram_peak_rule = "roofline_csv"
            # the file's compute peaks and cache bandwidths too: measured on this GPU, they come
            # before the peaks table's datasheet values (rocroof.analysis.tables.ceiling_rows)
            capture.measured_ceilings = rocprof_compute.read_roofline_ceilings(workload)
        elif sysinfo.get("hbm_bw"):
            try:
                hbm_bw = float(sysinfo["hbm_bw"])
            except ValueError:
                hbm_bw = math.nan
            if math.isfinite(hbm_bw) and hbm_bw > 0:
                capture.dram_peak_gbps = hbm_bw
                capture.dram_peak_source = "sysinfo.csv hbm_bw (rocprofiler-compute's peak for the GPU it detected)"
                capture.dram_peak_rule = "capture"
            else:  # a ceiling must be a positive bandwidth; configs/peaks.yaml applies instead
                notes.append(
                    Note(
                        "warning",
                        "bad-sysinfo",
                        f"sysinfo.csv hbm_bw is {sysinfo['hbm_bw']!r}, not a positive bandwidth; left out",
                    )
                )
    elif fmt == "rocpd":
        dbs = [f for f in files if logical_name(f).endswith(".db") and rocpd.is_rocpd(f)]
        by_dir: dict[Path, list[Path]] = {}
        for db in dbs:
            by_dir.setdefault(db.parent, []).append(db)
        passes = []
        agent_frames = []
        meta: dict[str, str] = {}
        for i, (directory, group) in enumerate(sorted(by_dir.items(), key=lambda kv: _natural(kv[0]))):
            label = _pass_label(root, directory, i)
            parts = [rocpd.read_pass(db, label, keep_instances) for db in group]
            passes.append(merge_passes(parts, label, str(directory)))
            for db in group:
                agent_frames.append(rocpd.read_agents(db))
                meta = {**rocpd.read_metadata(db), **meta}
        used += dbs
        if any(rocprofv3_csv.classify(f) for f in files):
            notes.append(
                Note(
                    "info",
                    "csv-ignored",
                    "rocprofv3 CSV files next to the rocpd databases were not read (rocpd preferred)",
                )
            )
        agents = (
            pd.concat(agent_frames, ignore_index=True).drop_duplicates("agent_label")
            if agent_frames
            else empty_frame(AGENT_COLUMNS)
        )
        capture = Capture(
            source_format=fmt,
            source_paths=[str(path)],
            profiler="rocprofv3",
            command=meta.get("command"),
            host=meta.get("host"),
            passes=passes,
            agents=conform(agents, AGENT_COLUMNS),
            sysinfo={k: v for k, v in meta.items() if k.startswith("rocpd_")},
        )
    elif fmt == "rocprofv3-csv":
        if path.is_file():
            prefix = rocprofv3_csv.classify(path)
            assert prefix is not None
            files = [
                f
                for f in _files_below(path.parent)
                if f.parent == path.parent and (rocprofv3_csv.classify(f) or ("", None))[1] == prefix[1]
            ]
        grouped = rocprofv3_csv.group_pass_files(files)
        passes = []
        agent_paths: list[Path] = []
        for i, (directory, pfiles) in enumerate(sorted(grouped.items(), key=lambda kv: _natural(kv[0]))):
            if not (pfiles.files.get("kernel_trace") or pfiles.files.get("counter_collection")):
                agent_paths += [p for _, p in pfiles.files.get("agent_info", [])]
                used += pfiles.all_paths()
                continue
            passes.append(rocprofv3_csv.read_pass(pfiles, _pass_label(root, directory, i)))
            agent_paths += [p for _, p in pfiles.files.get("agent_info", [])]
            used += pfiles.all_paths()
        if not passes:
            raise InputError(
                f"{path}: rocprofv3 output without kernel_trace.csv or counter_collection.csv; nothing to ingest"
            )
        capture = Capture(
            source_format=fmt,
            source_paths=[str(path)],
            profiler="rocprofv3",
            passes=passes,
            agents=rocprofv3_csv.read_agents(agent_paths),
        )
    elif fmt == rocprof_legacy.FORMAT:
        if path.is_file():  # the file and its companions: <name>.db, <name>.sysinfo.txt
            stem = rocprof_legacy.stem(path)
            files = [path] + [
                f
                for f in _files_below(path.parent)
                if f.parent == path.parent and f != path and rocprof_legacy.stem(f) == stem
            ]
        legacy = rocprof_legacy.read_legacy(root, files)
        notes += legacy.notes
        used += legacy.files_read
        capture = Capture(
            source_format=fmt,
            source_paths=[str(path)],
            profiler=legacy.profiler,
            command=legacy.command,
            passes=legacy.passes,
            agents=legacy.agents,
        )
    elif fmt == rpd.FORMAT:
        traces = [f for f in files if rpd.resembles_rpd(f)]
        if len(traces) > 1:
            shown = ", ".join(str(t) for t in traces[:5])
            raise InputError(f"{path}: holds {len(traces)} RPD traces ({shown}); one trace is one run: ingest each")
        trace_pass, facts = rpd.read_pass(traces[0], logical_name(traces[0]))
        used.append(traces[0])
        capture = Capture(
            source_format=fmt,
            source_paths=[str(path)],
            profiler="rpd_tracer",
            passes=[trace_pass],
            agents=rpd.agents(trace_pass),
            sysinfo=facts,
        )
    elif fmt == "nvidia":
        capture = _read_nvidia(path, root, files, used, notes)
    else:
        capture = Capture(source_format=fmt, source_paths=[str(path)], profiler="ggml-roofline", passes=[])

    # attachments: op metadata JSON and ggml-fused logs (inside the capture dir or given explicitly)
    # the sidecar collect asked for is op metadata whatever its content: damaged, it must fail, not vanish
    expected = {SIDECAR_NAME}
    passes_listed = manifest.get("passes") if isinstance(manifest, dict) else None
    for entry in passes_listed if isinstance(passes_listed, list) else []:
        env = entry.get("env") if isinstance(entry, dict) else None
        if isinstance(env, dict) and isinstance(env.get("GGML_CUDA_OP_META"), str):
            expected.add(Path(env["GGML_CUDA_OP_META"]).name)
    meta_files = [
        f
        for f in files
        if logical_name(f).endswith(".json")
        and f.name != MANIFEST
        and (logical_name(f) in expected or ggml_meta.looks_like_metadata(f))
    ]
    if fmt == "ggml-roofline-json" and path.is_file():
        meta_files = [path]
    log_files = [f for f in files if logical_name(f).endswith(".log") and file_has_fused_lines(f)]
    for extra in attachments or []:
        if extra.is_dir():
            raise InputError(f"{extra}: --attach takes a file (op metadata JSON or a ggml-fused log), not a directory")
        if not extra.is_file():
            raise InputError(f"{extra}: attachment not found")
        if any(extra.resolve() == m.resolve() for m in meta_files + log_files):
            continue  # the capture holds it already
        if logical_name(extra).endswith(".json"):
            if not ggml_meta.looks_like_metadata(extra):
                if ggml_meta.starts_like_json(extra):
                    ggml_meta.check_json(extra)  # broken JSON: where, and what the parser expected there
                raise InputError(
                    f"{extra}: --attach expects ggml op metadata JSON (rows with invocation and ggml_op, from "
                    "GGML_CUDA_OP_META or GGML_ROOFLINE_OUT); this file "
                    + ("is JSON of something else" if ggml_meta.starts_like_json(extra) else "is not a JSON object")
                )
            meta_files.append(extra)
        elif file_has_fused_lines(extra):
            log_files.append(extra)
        else:
            raise InputError(
                f"{extra}: --attach expects op metadata JSON or a log with 'ggml-fused:' lines; this file has neither"
            )
    if len(meta_files) > 1:
        shown = ", ".join(str(m) for m in meta_files)
        raise InputError(f"{path}: more than one ggml op metadata JSON ({shown}); keep one per capture")
    if meta_files:
        meta_obj, mnotes = ggml_meta.read_metadata(meta_files[0])
        capture.op_metadata = meta_obj
        capture.op_metadata_file = str(meta_files[0])
        capture.op_metadata_attached = (fmt == "ggml-roofline-json" and path.is_file()) or any(
            extra.resolve() == meta_files[0].resolve() for extra in attachments or []
        )
        notes += mnotes
        used.append(meta_files[0])
        if fmt == "ggml-roofline-json":
            capture.profiler = meta_obj.source
            capture.passes = [_pass_from_metadata_kernels(meta_obj, str(meta_files[0]))]
            if meta_obj.device:
                capture.agents = conform(
                    pd.DataFrame([{"agent_label": "0", "agent_type": "GPU", "gfx_arch": meta_obj.device}]),
                    AGENT_COLUMNS,
                )
    first_log: dict[int, Path] = {}  # the log that gave each invocation its group
    for log in log_files:
        for k, g in read_fused_log(log).items():
            fused_group = (g.op_list, list(g.node_names))
            earlier = capture.fused_groups.get(k)
            if earlier is not None and earlier != fused_group:
                # two runs' logs (another model, another build): which one is this capture's cannot be told
                raise InputError(
                    f"{first_log[k]} and {log} give ggml invocation {k} different fused groups "
                    f"({earlier[0][:60]!r} vs {g.op_list[:60]!r}): they are logs of different runs; keep only the "
                    "capture's own log in its folder (move the other away) or among --attach"
                )
            capture.fused_groups[k] = fused_group
            first_log.setdefault(k, log)
        used.append(log)
    meta_kernels = capture.op_metadata.kernels if capture.op_metadata is not None else None
    fork_kernels = fmt != "ggml-roofline-json" and meta_kernels is not None and len(meta_kernels) > 0
    if fork_kernels and capture.passes and not any(has_op_attribution(p) for p in capture.passes):
        # AMD's fork's rows carry each invocation's kernels and times, the capture's passes no ops:
        # the fork's kernels become the timing pass, and ingest aligns the passes to them
        capture.passes.insert(0, _pass_from_metadata_kernels(capture.op_metadata, str(meta_files[0])))
        notes.append(
            Note(
                "info",
                "fork-timing-pass",
                f"{meta_files[0].name}: its kernels (names, GPU times) are the timing pass; the capture's "
                "passes have no op markers and are aligned to them by kernel sequence",
            )
        )

    if manifest:
        _apply_manifest(capture, manifest, root)
    if not keep_instances:
        for p in capture.passes:
            p.instances = p.instances.iloc[0:0]
    if not any(len(p.dispatches) for p in capture.passes):
        if fmt == "ggml-roofline-json":
            raise InputError(
                f"{path}: op metadata without kernel timings (rocroof's llama.cpp sidecar); ingest the profiler "
                "capture and attach it: rocroof ingest CAPTURE --attach FILE"
            )
        raise InputError(f"{path}: no kernel dispatches recorded (did the application launch any GPU kernel?)")
    used = list(dict.fromkeys(used))
    for db in (u for u in used if u in writing):
        notes.append(
            Note(
                "warning",
                "database-being-written",
                f"{db.name}: {writing[db]} beside it is not empty: the profiler (or another program) may still be "
                "writing this database, or stopped before closing it; the run may be incomplete (ingest it again "
                "with --replace once the profiler has finished)",
            )
        )
    capture.notes = notes + capture.notes
    # the hash reads every input file again: on a second thread (hashlib releases the GIL), while
    # the caller attributes the capture; Capture.content_sha256 waits for it
    for p in capture.passes:
        # the times and ids the attribution reads once, and the store writes, wait in spill files
        p.dispatches = spill_columns(p.dispatches, SPILLED_AFTER_READ)
        p.markers = spill_columns(p.markers, SPILLED_AFTER_READ)
        p.launches = spill_columns(p.launches, SPILLED_AFTER_READ)
    release_free_memory()  # what reading freed (chunks of text) goes back before the next stage
    hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocroof-hash")
    capture._hash_job = hasher.submit(_hash_beside, used, root)
    hasher.shutdown(wait=False)
    capture.files_read = [str(u) for u in used]
    return capture


def _read_nvidia_passes(
    nsys: list[tuple[Path, str]], ncu: list[tuple[Path, str]]
) -> tuple[list[tuple[PassData, pd.DataFrame, dict[str, str]]], list[tuple[PassData, dict[str, str]]]]:
    """Read the Nsight Systems export and the Nsight Compute CSVs, the export in a second thread.

    The two are independent and most of each read runs outside the GIL (SQLite stepping into
    Arrow, the CSV parser): reading them at once takes ~40% less time. Both reads keep their rows
    in spill files, so reading them at once costs little memory (10^6 kernels: 2.6 s less, a few
    MB more; 3x10^6: 7 s less, 32 MB more; until both read to disk, large inputs were read one
    after the other). Errors come as a sequential read gives them: the export's first.

    Returns:
        ``read_nsys_sqlite`` of each export and ``read_ncu_csv`` of each CSV, in order.
    """
    if not nsys or not ncu:
        return [nvidia.read_nsys_sqlite(f, label) for f, label in nsys], [
            nvidia.read_ncu_csv(f, label) for f, label in ncu
        ]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocroof-nsys") as pool:
        jobs = [pool.submit(nvidia.read_nsys_sqlite, f, label) for f, label in nsys]
        try:
            ncu_read = [nvidia.read_ncu_csv(f, label) for f, label in ncu]
        except BaseException:
            for job in jobs:  # the export's error comes first, as when read first
                if not job.cancel() and job.exception() is not None:
                    raise job.exception() from None  # type: ignore[misc]
            raise
        return [job.result() for job in jobs], ncu_read


def _read_nvidia(path: Path, root: Path, files: list[Path], used: list[Path], notes: list[Note]) -> Capture:
    """An NVIDIA capture: an Nsight Systems export (the trace pass) and Nsight Compute raw CSVs."""
    nsys = [f for f in files if nvidia.is_nsys_sqlite(f)]
    ncu = [f for f in files if nvidia.is_ncu_csv(f)]
    reps = [f for f in files if logical_name(f).endswith(".ncu-rep")]
    # an export that is there but unreadable must stop the ingest, not leave a pass out silently
    for f in files:
        name = logical_name(f)
        if name.endswith(".sqlite") and f not in nsys:
            raise ParseError(
                f,
                "not an Nsight Systems export: expected an SQLite database with CUPTI_ACTIVITY_KIND_KERNEL "
                "(nsys export --type sqlite); the file is empty, damaged, cut short or another database",
            )
        if name.endswith(".csv") and (name.startswith("ncu") or f.parent.name == "ncu") and f not in ncu:
            raise ParseError(
                f,
                "not an Nsight Compute raw export: expected the CSV of 'ncu --import REPORT --csv --page raw' "
                '(header with "Kernel Name" and metric columns); the file is empty, damaged or another CSV',
            )
    if reps and not ncu:
        raise InputError(
            f"{reps[0]}: Nsight Compute reports are binary; export them first: "
            f"ncu --import {reps[0].name} --csv --page raw > {reps[0].stem}.csv"
        )
    if len(nsys) > 1:
        raise InputError(
            f"{path}: more than one Nsight Systems export ({', '.join(f.name for f in nsys)}); one per capture"
        )
    passes: list[PassData] = []
    part_labels: dict[str, str] = {}  # the directory of each window of a sampled counter pass -> its pass
    agents = empty_frame(AGENT_COLUMNS)
    facts: dict[str, str] = {}
    ncu_files = sorted(ncu, key=_natural)
    ncu_labels = [
        _pass_label(root, f.parent, i) if f.parent != root else logical_name(f) for i, f in enumerate(ncu_files)
    ]
    nsys_read, ncu_read = _read_nvidia_passes(
        [(f, _pass_label(root, f.parent, 0) if f.parent != root else "nsys") for f in nsys],
        list(zip(ncu_files, ncu_labels, strict=True)),
    )
    for f, read in zip(nsys, nsys_read, strict=True):
        p, agents, more = read
        if not len(p.dispatches) and ncu:
            raise ParseError(
                f,
                "holds no kernel activity (CUPTI_ACTIVITY_KIND_KERNEL is empty) while Nsight Compute profiled "
                "kernels: was nsys run with -t cuda, and did the export finish?",
            )
        passes.append(p)
        facts.update(more)
        used.append(f)
    windows: dict[str, list[PassData]] = {}  # a sampled counter pass: one ncu run per launch window
    for f, label, (p, more) in zip(ncu_files, ncu_labels, ncu_read, strict=True):
        if not len(p.dispatches):
            raise ParseError(f, "holds no kernel rows (did ncu profile any kernel? see its log)")
        base = _WINDOW_LABEL.fullmatch(label)
        if base and f.parent != root:
            windows.setdefault(base.group(1), []).append(p)
        else:
            passes.append(p)
        facts = {**more, **facts}
        used.append(f)
    for base_label, parts in windows.items():
        passes.append(merge_passes(parts, base_label, str(root / base_label)) if len(parts) > 1 else parts[0])
        part_labels.update({q.label: base_label for q in parts})
    if not len(agents):
        agents = conform(
            pd.DataFrame(
                [
                    {
                        "agent_label": "0",
                        "agent_type": "GPU",
                        "gfx_arch": facts.get("gfx_arch"),
                        "product_name": facts.get("gpu_name"),
                    }
                ]
            ),
            AGENT_COLUMNS,
        )
    manifest_path = root / MANIFEST
    manifest = _read_manifest(manifest_path) if manifest_path.is_file() else {}
    if manifest:
        listed = manifest.get("passes")
        have = {p.label for p in passes} | set(part_labels)
        for entry in listed if isinstance(listed, list) else []:
            label = str(entry.get("dir", "")) if isinstance(entry, dict) else ""
            if label and label not in have:
                expected = "nsys.sqlite (nsys export)" if entry.get("kind") == "trace" else "ncu_raw.csv (ncu --import)"
                raise InputError(
                    f"{root / label}: the capture's manifest lists this pass but it holds no {expected}; "
                    "the run failed or the file was removed"
                )
    settings = manifest.get("settings")
    cache_control = str(settings.get("ncu_cache_control", "")) if isinstance(settings, dict) else ""
    passes_per_kernel = max((_ncu_replay_passes(folder) for folder in {f.parent for f in ncu}), default=0)
    if passes_per_kernel > 1:
        facts["nvidia_ncu_replay_passes"] = str(passes_per_kernel)
        if cache_control.lower() == "none":
            notes.append(
                Note(
                    "warning",
                    "warm-replay",
                    f"Nsight Compute replayed each kernel in up to {passes_per_kernel} passes without flushing the "
                    "caches (--cache-control none): a pass after the first finds the L2 the earlier ones warmed, so "
                    "DRAM bytes can be far below an unprofiled run's (an H200 decode with the ops preset, 9 passes: "
                    "MUL_MAT 0.36x its weights); count DRAM bytes with --counters dram (one pass) or "
                    "--cache-control all",
                )
            )
    peak_gbps, peak_source = _probe_ceiling(root, files, manifest, used, notes, facts.get("gpu_name"))
    peak_rule = "probe" if peak_gbps is not None else None
    stated = facts.get("nsys_gpu_memory_bandwidth_gbps")
    if peak_gbps is None and stated:
        # the driver's global memory bandwidth (CUPTI globalMemoryBandwidth, kB/s; nsys stores B/s)
        peak_gbps, peak_rule = float(stated), "capture"
        peak_source = "Nsight Systems TARGET_INFO_GPU.memoryBandwidth (the driver's memory clock x bus width)"
    profiler = "+".join(n for n, have in (("ncu", ncu), ("nsys", nsys)) if have)
    if ncu and not nsys:
        notes.append(
            Note(
                "info",
                "no-trace-pass",
                "no Nsight Systems export: durations come from Nsight Compute's serialised replay",
            )
        )
    return Capture(
        source_format="nvidia",
        source_paths=[str(path)],
        profiler=profiler,
        passes=passes,
        agents=agents,
        host=facts.get("host"),
        sysinfo={k: v for k, v in facts.items() if k.startswith(("nsys_", "nvidia_"))},
        dram_peak_gbps=peak_gbps,
        dram_peak_source=peak_source,
        dram_peak_rule=peak_rule,
    )


#: Nsight Compute's progress line per profiled kernel ends with its replay passes: ``... - 9 passes``.
_REPLAY_PASSES = re.compile(rb"==PROF== Profiling .* - (\d+) pass(?:es)?\s*$", re.M)


def _ncu_replay_passes(directory: Path) -> int:
    """The most replay passes Nsight Compute reported for a kernel in ``directory``'s ``ncu.log`` (0: none)."""
    for name in ("ncu.log", "ncu.log.gz"):
        try:
            with open_binary(directory / name) as fh:
                text = fh.read(64 << 20)
        except (OSError, ParseError):
            continue
        return max((int(m) for m in _REPLAY_PASSES.findall(text)), default=0)
    return 0


def _probe_ceiling(
    root: Path,
    files: list[Path],
    manifest: dict[str, object],
    used: list[Path],
    notes: list[Note],
    gpu_name: object = None,
) -> tuple[float | None, str | None]:
    """The measured DRAM ceiling of an NVIDIA capture: ``bandwidth.json`` of ``rocroof.analysis.bandwidth``.

    ``rocroof collect --profiler ncu`` writes it (``probe/bandwidth.json``; ``rocroof scrub --gzip``
    makes it ``bandwidth.json.gz``); its best copy bandwidth becomes the run's ceiling, ahead of
    ``configs/peaks.yaml``. A probe that the manifest records as failed gives a warning note and no
    ceiling (the datasheet one applies); so does a probe the manifest lists whose result is missing,
    and a result measured on another GPU than the capture's (``gpu_name``).

    Returns:
        ``(GB/s, source)``, or ``(None, None)`` without a probe result.

    Raises:
        InputError: more than one probe result in the capture.
        ParseError: a probe result that is not one (:func:`rocroof.analysis.bandwidth.read_bandwidth`).
    """
    found = [f for f in files if logical_name(f) == BANDWIDTH_FILE]
    if len(found) > 1:
        raise InputError(f"{root}: more than one {BANDWIDTH_FILE} ({', '.join(map(str, found))}); one per capture")
    if not found:
        probes = manifest.get("probes")
        for entry in probes if isinstance(probes, list) else []:
            if isinstance(entry, dict) and entry.get("error"):
                lines = str(entry["error"]).strip().splitlines()
                notes.append(
                    Note(
                        "warning",
                        "probe-failed",
                        f"the copy-bandwidth probe failed ({lines[-1] if lines else 'no reason recorded'}); "
                        "the DRAM ceiling is the peaks table's",
                    )
                )
            elif isinstance(entry, dict) and entry.get("output"):
                notes.append(
                    Note(
                        "warning",
                        "probe-missing",
                        f"the manifest lists a copy-bandwidth probe but {entry['output']} is not in the capture; "
                        "the DRAM ceiling is the peaks table's",
                    )
                )
        return None, None
    probe = read_bandwidth(found[0])
    used.append(found[0])
    if probe.bytes_per_copy < MIN_PROBE_BYTES:
        notes.append(
            Note(
                "warning",
                "probe-too-small",
                f"{found[0]}: the probe copied {probe.bytes_per_copy:,} bytes, under {MIN_PROBE_BYTES:,} (a copy that "
                "small times caches, not DRAM); its result is not used (the DRAM ceiling is the peaks table's)",
            )
        )
        return None, None
    if gpu_name and str(gpu_name).strip() and probe.device.strip() != str(gpu_name).strip():
        notes.append(
            Note(
                "warning",
                "probe-other-gpu",
                f"{found[0]}: the probe measured {probe.device!r} but the capture ran on {gpu_name!r}; "
                "its result is not used (the DRAM ceiling is the peaks table's)",
            )
        )
        return None, None
    source = (
        f"measured: {probe.device} device-to-device copy, best of {probe.repeats} x "
        f"{probe.bytes_per_copy / 2**30:g} GiB (median {probe.gbps_median:,.0f} GB/s; rocroof bandwidth probe)"
    )
    return probe.gbps_best, source


#: ``ncu`` and ``ncu.2``, ``ncu.3``...: the directories of one counter pass sampled in launch windows
#: (``rocroof collect``: :meth:`rocroof.capture.profilers.nsight.NsightPair.sample_runs`).
_WINDOW_LABEL = re.compile(r"(.+?)(?:\.([0-9]+))?")


def _pass_label(root: Path, directory: Path, index: int) -> str:
    try:
        rel = directory.relative_to(root)
    except ValueError:
        rel = Path(directory.name)
    text = str(rel)
    return f"pass {index + 1}" if text in ("", ".") else text


def has_op_attribution(p: PassData) -> bool:
    """Whether a pass says itself which ggml op launched a kernel: invocations, ggml ranges or NVTX stacks."""
    if bool(p.dispatches["invocation"].notna().any()):
        return True
    regions = p.dispatches["region"].dropna().astype(str)
    if bool(regions.str.contains("ggml").any()):
        return True
    if "region_op" in p.dispatches.columns and bool(p.dispatches["region_op"].notna().any()):  # regions let go
        return True
    if not len(p.markers):
        return False
    ranges = p.markers[p.markers["kind"].astype(str) == "range"]
    if "range_op" in ranges.columns and bool(ranges["range_op"].notna().any()):  # messages let go (compact_ranges)
        return True
    return bool(ranges["message"].dropna().astype(str).str.startswith("ggml").any())


def _pass_from_metadata_kernels(meta: object, source: str) -> PassData:
    from ...records import OpMetadata

    assert isinstance(meta, OpMetadata)
    k = meta.kernels
    if len(k) == 0:
        return PassData(kind="trace", label="ggml-roofline", source=source, dispatches=empty_frame(DISPATCH_COLUMNS))
    k = k.sort_values(["invocation", "kernel_index"], kind="stable").reset_index(drop=True)
    disp = pd.DataFrame(
        {
            "kernel_name": k["kernel_name"],
            "invocation": k["invocation"].astype("Int64"),
            "duration_ns": k["gpu_time_ns"].round().astype("Int64"),
            "agent_label": "0",
        }
    )
    return PassData(kind="trace", label="ggml-roofline", source=source, dispatches=conform(disp, DISPATCH_COLUMNS))


def _apply_manifest(capture: Capture, manifest: dict[str, object], root: Path) -> None:
    command = manifest.get("command")
    if isinstance(command, list):
        capture.command = " ".join(str(c) for c in command)
    elif isinstance(command, str):
        capture.command = command
    for key in ("profiler", "profiler_version", "host"):
        value = manifest.get(key)
        if isinstance(value, str):
            setattr(capture, key, value)
    passes = manifest.get("passes")
    if isinstance(passes, list):
        by_label = {p.label: p for p in capture.passes}
        for entry in passes:
            if not isinstance(entry, dict):
                continue
            p = by_label.get(str(entry.get("dir", "")))
            if p is None:
                continue
            counters = entry.get("counters")
            if isinstance(counters, list):
                p.requested_counters = tuple(str(c) for c in counters)
                have = set(p.counters["counter_name"])
                missing = [c for c in p.requested_counters if c not in have]
                if missing and len(p.dispatches):
                    capture.notes.append(
                        Note(
                            "warning",
                            "missing-counter",
                            f"{p.label}: requested counter(s) absent from the output: {', '.join(missing)}",
                        )
                    )
    extra = manifest.get("settings")
    if isinstance(extra, dict):
        capture.sysinfo.update({str(k): str(v) for k, v in extra.items()})
    sample = manifest.get("sample")
    if isinstance(sample, dict):
        capture.counter_sample = sample
