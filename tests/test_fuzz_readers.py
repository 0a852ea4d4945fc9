"""Fuzzing every reader: damaged input is one RocroofError naming the file, or a correct ingest.

Each property starts from a valid synthetic capture (``tests/synthetic.py``) and damages one of
its files the ways real files get damaged: cut short, columns shuffled or missing, cells of the
wrong type, huge numbers, empty strings, bytes that are not UTF-8, repeated rows (duplicate
dispatch ids), rows and tables deleted, values deeply nested. The whole ingest (read_capture,
build_run, Store.write_run into a fresh database) must then either store exactly one complete
run, or raise one :class:`~rocroof.errors.RocroofError` whose message names the damaged file (or
the capture it belongs to) and a plausible row, leaving no run in the database. Any other
exception is a bug.

Examples per property: ``ROCROOF_FUZZ_EXAMPLES`` (default 20, kept small for CI, and the same
examples every run; setting it draws new random examples each run).
"""

from __future__ import annotations

import copy
import csv
import gzip
import io
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as _event
from hypothesis import strategies as st

from rocroof.capture.readers import read_capture
from rocroof.errors import ParseError, RocroofError
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

from . import synthetic
from .rocpd_builder import UUID_A, suffix
from .synthetic import of_run, row_counts, run_ids
from .test_ggml_meta import DENSE, FUSED, MOE

FUZZ = settings(
    max_examples=int(os.environ.get("ROCROOF_FUZZ_EXAMPLES", "20")),
    # the default run (make test, CI) replays the same examples, so a red build is reproducible;
    # asking for more examples searches afresh each time
    derandomize="ROCROOF_FUZZ_EXAMPLES" not in os.environ,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
N = 40  # dispatches per synthetic capture


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Valid captures of every format, and an empty rocroof database to copy."""
    root = tmp_path_factory.mktemp("fuzz")
    out = {fmt: synthetic.capture(fmt, N, root / "cache", dest=root / fmt) for fmt in synthetic.FORMATS}
    out["rocprof-compute"] = synthetic.rocprof_compute_workload(root / "rocprof-compute")
    rows = [copy.deepcopy(r) for r in (DENSE, MOE, FUSED)]
    for i, row in enumerate(rows):
        row["invocation"] = i + 1
    out["ggml-json"] = synthetic.ggml_metadata(root / "ggml-json", rows)
    out["rocprof-legacy"] = _legacy_capture(root / "rocprof-legacy")
    out["rpd"] = _rpd_capture(root / "rpd")
    store = Store(root / "empty.db")
    store.upgrade()
    store.close()
    out["empty.db"] = root / "empty.db"
    return out


def _legacy_capture(folder: Path) -> Path:
    """A rocprof v1 capture: --stats kernel table, a counter run's CSV, results.db with roctx ranges, rocminfo."""
    from .rocprof_legacy_files import Kernel, kernel_csv, results_db, sysinfo

    folder.mkdir()
    kernels = [
        Kernel(f"k{i % 3}", 100 + 1_000 * i, 10_000 + 1_000 * i, 10_500 + 1_000 * i, 10_600 + 1_000 * i)
        for i in range(N)
    ]
    kernel_csv(folder / "results.csv", kernels, stats=True)
    counted = [
        Kernel(k.name, None, None, None, counters={"FETCH_SIZE": 8.5 * i, "WRITE_SIZE": 4.0})
        for i, k in enumerate(kernels)
    ]
    kernel_csv(folder / "input.csv", counted, counters=["FETCH_SIZE", "WRITE_SIZE"], timestamps=False)
    ranges = [(50 + 1_000 * i, 900 + 1_000 * i, 4242, 4242, f"ggml:ADD:x-{i}:{i}") for i in range(N)]
    results_db(folder / "results.db", kernels, ranges)
    sysinfo(folder / "results.sysinfo.txt")
    return folder


def _rpd_capture(folder: Path) -> Path:
    """An RPD trace of N kernels, each launched inside its own ggml range."""
    from .rpd_files import Call, Marker, write_rpd

    folder.mkdir()
    calls = [
        Call(
            "hipLaunchKernel",
            100 + 1_000 * i,
            150 + 1_000 * i,
            ops=[(f"k{i % 3}", 90_000 + 10 * i, 90_005 + 10 * i, "KernelExecution")],
            grid=(4, 1, 1),
        )
        for i in range(N)
    ]
    markers = [Marker(f"ggml:MUL:y-{i}:{i}", 50 + 1_000 * i, 900 + 1_000 * i) for i in range(N)]
    write_rpd(folder / "trace.rpd", calls, markers)
    return folder


def event(text: str) -> None:
    """Record an outcome for ``--hypothesis-show-statistics`` (a no-op outside a property)."""
    from hypothesis.control import currently_in_test_context

    if currently_in_test_context():
        _event(text)


def check_ingest(capture: Path, damaged: Path, empty_db: Path, work: Path, lines: int | None = None) -> str:
    """Ingest ``capture`` into a fresh database; the outcome must be a whole run or one RocroofError.

    Returns ``"stored"`` or ``"refused"`` (for the statistics hypothesis prints).
    """
    db = work / "r.db"
    shutil.copyfile(empty_db, db)
    store = Store(db)
    frames = None
    try:
        frames = build_run(read_capture(capture), source_path=str(capture))
        store.write_run(frames)
    except RocroofError as exc:
        message = str(exc)
        assert "\n" not in message.strip(), message
        assert damaged.name in message or str(capture) in message, f"the message names neither file: {message}"
        if isinstance(exc, ParseError) and exc.row is not None and lines is not None:
            assert 1 <= exc.row <= lines + 1, f"row {exc.row} of a {lines}-line file: {message}"
        event(f"refused: {type(exc).__name__}")
    finally:
        store.close()
    counts = row_counts(db)
    if frames is None:
        assert not run_ids(counts), "a failed ingest left a run behind"
        assert not any(counts.values()), counts
        return "refused"
    (rid,) = run_ids(counts)
    event("stored")
    stored = of_run(counts, rid)
    for table in ("dispatch", "counter_value", "marker_range", "op_invocation", "dram_traffic"):
        assert stored[table] == len(frames.tables[table]), (table, stored[table], len(frames.tables[table]))
    return "stored"


# ---- damage to text files -------------------------------------------------------------------------

CELLS = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "abc",
            "1.5",
            "-1",
            "0",
            "1e3",
            "1e400",
            "-1e400",
            "9" * 25,
            str(2**63),
            str(-(2**63) - 1),
            str(2**63 - 1),
            "nan",
            "inf",
            "NULL",
            "1_000",
            "\u0661\u0662",
            "0x10",
            '"',
            "a,b",
            "x\ny",
            "12345678901234567.5",
            "+7",
            " 42 ",
            "ggml:MUL_MAT:Qcur-0:1",
            "ggml:MUL_MAT:Qcur-0:99999999999999999999999",
            "ggml-fused:1:RMS_NORM+MUL:a|b",
            "ggml reset",
            "Agent 99",
        ]
    ),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=12),
)
RAW_BYTES = st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82", b"\x00", b'"', b"\n", b",", b"\r", b"\xef\xbb\xbf"])

CSV_OPS = st.one_of(
    st.tuples(st.just("cell"), st.integers(0, 10_000), st.integers(0, 100), CELLS),
    st.tuples(st.just("header"), st.integers(0, 100), CELLS),
    st.tuples(st.just("drop_column"), st.integers(0, 100)),
    st.tuples(st.just("shuffle_columns"), st.randoms(use_true_random=False)),
    st.tuples(st.just("duplicate_row"), st.integers(0, 10_000)),
    st.tuples(st.just("drop_row"), st.integers(0, 10_000)),
    st.tuples(st.just("short_row"), st.integers(0, 10_000), st.integers(0, 100)),
    st.tuples(st.just("lower_header")),
)
BYTE_OPS = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("insert"), st.floats(0, 1), RAW_BYTES),
)


def damage_csv(path: Path, ops: list[tuple[Any, ...]], byte_ops: list[tuple[Any, ...]]) -> int:
    """Apply ``ops`` to the CSV rows of ``path`` and ``byte_ops`` to its bytes; return its line count."""
    text = path.read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    for op in ops:
        width = max(len(rows[0]), 1)
        data = len(rows) - 1
        if op[0] == "cell" and data:
            r = 1 + op[1] % data
            if rows[r]:
                rows[r][op[2] % len(rows[r])] = op[3]
        elif op[0] == "header":
            rows[0][op[1] % width] = op[2]
        elif op[0] == "drop_column" and width > 1:
            c = op[1] % width
            rows = [row[:c] + row[c + 1 :] for row in rows]
        elif op[0] == "shuffle_columns":
            order = list(range(width))
            op[1].shuffle(order)
            rows = [[row[i] for i in order if i < len(row)] for row in rows]
        elif op[0] == "duplicate_row" and data:
            r = 1 + op[1] % data
            rows.insert(r + 1, list(rows[r]))
        elif op[0] == "drop_row" and data:
            del rows[1 + op[1] % data]
        elif op[0] == "short_row" and data:
            r = 1 + op[1] % data
            rows[r] = rows[r][: op[2] % max(len(rows[r]), 1)]
        elif op[0] == "lower_header":
            rows[0] = [h.lower() for h in rows[0]]
    buf = io.StringIO(newline="")
    quoting = csv.QUOTE_ALL if text.startswith('"ID"') else csv.QUOTE_MINIMAL  # Nsight Compute quotes every cell
    csv.writer(buf, lineterminator="\n", quoting=quoting).writerows(rows)
    raw = buf.getvalue().encode("utf-8")
    for op in byte_ops:
        at = int(op[1] * len(raw))
        raw = raw[:at] if op[0] == "truncate" else raw[:at] + op[2] + raw[at:]
    path.write_bytes(raw)
    return raw.count(b"\n") + 1


def csv_property(fmt: str, names: list[str]) -> Callable[..., None]:
    @FUZZ
    @given(
        which=st.sampled_from(names),
        ops=st.lists(CSV_OPS, min_size=0, max_size=3),
        byte_ops=st.lists(BYTE_OPS, max_size=1),
    )
    def prop(base: dict[str, Path], which: str, ops: list[tuple[Any, ...]], byte_ops: list[tuple[Any, ...]]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            cap = work / "capture"
            shutil.copytree(base[fmt], cap)
            target = next(p for p in cap.rglob("*") if p.is_file() and p.name.endswith(which))
            lines = damage_csv(target, ops, byte_ops)
            check_ingest(cap, target, base["empty.db"], work, lines)

    return prop


test_fuzz_rocprofv3_csv = csv_property(
    "csv", ["kernel_trace.csv", "counter_collection.csv", "marker_api_trace.csv", "hip_api_trace.csv", "agent_info.csv"]
)
test_fuzz_rocprof_compute = csv_property("rocprof-compute", ["pmc_perf.csv", "sysinfo.csv"])
test_fuzz_ncu_csv = csv_property("nvidia", ["ncu_raw.csv"])
test_fuzz_rocprof_legacy_csv = csv_property("rocprof-legacy", ["results.csv", "input.csv"])


# ---- damage to SQLite databases ---------------------------------------------------------------------

SQL_VALUES = st.one_of(
    st.sampled_from(
        [
            None,
            "",
            "abc",
            b"\xff\xfe",
            1.5,
            -1,
            0,
            2**63 - 1,
            -(2**63),
            1e308,
            "9" * 30,
            "{",
            '{"message": 5}',
            '{"message": "ggml:ADD:x:1"}',
            "[" * 5000 + "]" * 5000,
            "\ud800".encode("utf-8", "surrogatepass"),
        ]
    ),
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=8),
)


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


SQL_OPS = st.one_of(
    st.tuples(st.just("update"), st.integers(0, 1000), st.integers(0, 1000), st.integers(0, 10_000), SQL_VALUES),
    st.tuples(st.just("delete"), st.integers(0, 1000), st.integers(0, 10_000)),
    st.tuples(st.just("duplicate"), st.integers(0, 1000), st.integers(0, 10_000)),
    st.tuples(st.just("drop"), st.integers(0, 1000)),
)


def damage_sqlite(path: Path, tables: list[str], ops: list[tuple[Any, ...]], byte_ops: list[tuple[Any, ...]]) -> None:
    """Apply ``ops`` (SQL changes to ``tables``) and then ``byte_ops`` to the database file."""
    con = sqlite3.connect(path)
    try:
        for op in ops:
            have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            live = [t for t in tables if t in have]
            if not live:
                break
            table = live[op[1] % len(live)]
            n = con.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
            row = {"update": 3, "delete": 2, "duplicate": 2}.get(op[0])
            pick = f'(SELECT rowid FROM "{table}" LIMIT 1 OFFSET {op[row] % max(n, 1) if row else 0})'
            try:
                if op[0] == "update":
                    cols = _columns(con, table)
                    col = cols[op[2] % len(cols)]
                    con.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = {pick}', (op[4],))
                elif op[0] == "delete":
                    con.execute(f'DELETE FROM "{table}" WHERE rowid = {pick}')
                elif op[0] == "duplicate":
                    # the same row again: a repeated dispatch (ids that are primary keys get a new one)
                    cols = [c for c in _columns(con, table) if c != "id"]
                    names = ", ".join(f'"{c}"' for c in cols)
                    con.execute(f'INSERT INTO "{table}" ({names}) SELECT {names} FROM "{table}" WHERE rowid = {pick}')
                elif op[0] == "drop":
                    con.execute(f'DROP TABLE "{table}"')
            except sqlite3.IntegrityError:
                pass  # e.g. text in an INTEGER PRIMARY KEY: SQLite itself keeps that damage out
        con.commit()
    finally:
        con.close()
    raw = path.read_bytes()
    for op in byte_ops:
        at = int(op[1] * len(raw))
        raw = raw[:at] if op[0] == "truncate" else raw[:at] + op[2] * 64 + raw[at + 64 * len(op[2]) :]
    path.write_bytes(raw)


ROCPD_TABLES = [
    t + suffix(UUID_A)
    for t in (
        "rocpd_kernel_dispatch",
        "rocpd_event",
        "rocpd_pmc_event",
        "rocpd_info_pmc",
        "rocpd_region",
        "rocpd_sample",
        "rocpd_string",
        "rocpd_info_kernel_symbol",
        "rocpd_info_agent",
        "rocpd_track",
        "rocpd_metadata",
        "rocpd_info_process",
    )
]
NSYS_TABLES = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "StringIds",
    "PROCESSES",
    "TARGET_INFO_GPU",
]


@FUZZ
@given(ops=st.lists(SQL_OPS, min_size=1, max_size=3), byte_ops=st.lists(BYTE_OPS, max_size=1))
def test_fuzz_rocpd(base: dict[str, Path], ops: list[tuple[Any, ...]], byte_ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cap = work / "capture"
        shutil.copytree(base["rocpd"], cap)
        (db,) = cap.glob("*_results.db")
        damage_sqlite(db, ROCPD_TABLES, ops, byte_ops)
        check_ingest(cap, db, base["empty.db"], work)


@FUZZ
@given(ops=st.lists(SQL_OPS, min_size=1, max_size=3), byte_ops=st.lists(BYTE_OPS, max_size=1))
def test_fuzz_rocprof_legacy_db(
    base: dict[str, Path], ops: list[tuple[Any, ...]], byte_ops: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cap = work / "capture"
        shutil.copytree(base["rocprof-legacy"], cap)
        db = cap / "results.db"
        damage_sqlite(db, ["KERN", "rocTX"], ops, byte_ops)
        check_ingest(cap, db, base["empty.db"], work)


@FUZZ
@given(ops=st.lists(SQL_OPS, min_size=1, max_size=3), byte_ops=st.lists(BYTE_OPS, max_size=1))
def test_fuzz_rpd(base: dict[str, Path], ops: list[tuple[Any, ...]], byte_ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cap = work / "capture"
        shutil.copytree(base["rpd"], cap)
        db = cap / "trace.rpd"
        tables = ["rocpd_op", "rocpd_api", "rocpd_api_ops", "rocpd_string", "rocpd_kernelapi", "rocpd_metadata"]
        damage_sqlite(db, tables, ops, byte_ops)
        check_ingest(cap, db, base["empty.db"], work)


@FUZZ
@given(ops=st.lists(SQL_OPS, min_size=1, max_size=3), byte_ops=st.lists(BYTE_OPS, max_size=1))
def test_fuzz_nsys_sqlite(base: dict[str, Path], ops: list[tuple[Any, ...]], byte_ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cap = work / "capture"
        shutil.copytree(base["nvidia"], cap)
        db = cap / "trace" / "nsys.sqlite"
        damage_sqlite(db, NSYS_TABLES, ops, byte_ops)
        check_ingest(cap, db, base["empty.db"], work)


def test_a_rocpd_view_that_repeats_every_dispatch_is_refused_or_stored_once(base: dict[str, Path]) -> None:
    """Duplicate dispatch ids in rocpd: the same (guid, id) twice, as a bad ``rocpd merge`` would give."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cap = work / "capture"
        shutil.copytree(base["rocpd"], cap)
        (db,) = cap.glob("*_results.db")
        con = sqlite3.connect(db)
        table = "rocpd_kernel_dispatch" + suffix(UUID_A)
        con.execute("DROP VIEW rocpd_kernel_dispatch")
        con.execute(f'CREATE VIEW rocpd_kernel_dispatch AS SELECT * FROM "{table}" UNION ALL SELECT * FROM "{table}"')
        con.commit()
        con.close()
        check_ingest(cap, db, base["empty.db"], work)


# ---- damage to ggml op metadata JSON ---------------------------------------------------------------

JSON_VALUES = st.one_of(
    st.sampled_from([None, True, False, -1, 0, 2**63, 2**64, 2**70, -(2**63) - 1, 1.5, "", "x", [], {}, [1, "a"]]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**66), 2**66),
    st.text(max_size=8),
    st.lists(st.integers(-5, 2**65), max_size=4),
)
ROW_KEYS = st.sampled_from(
    [
        "invocation",
        "ggml_op",
        "name",
        "dtype",
        "quant",
        "ne",
        "src_ne",
        "src_types",
        "op_params",
        "bytes",
        "dst_bytes",
        "dst_storage_id",
        "src_bytes",
        "src_tensor_ids",
        "src_storage_ids",
        "out_storage_id",
        "M",
        "N",
        "K",
        "n_experts",
        "top_k",
        "experts_used",
        "tokens_per_expert",
        "kernels",
        "fused_ops",
    ]
)
JSON_OPS = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 100), ROW_KEYS, JSON_VALUES),
    st.tuples(st.just("delete"), st.integers(0, 100), ROW_KEYS),
    st.tuples(st.just("kernel"), st.integers(0, 100), st.sampled_from(["name", "gpu_time_us"]), JSON_VALUES),
    st.tuples(st.just("fused"), st.integers(0, 100), ROW_KEYS, JSON_VALUES),
    st.tuples(st.just("duplicate_row"), st.integers(0, 100)),
    st.tuples(st.just("top"), st.sampled_from(["rows", "device", "total_gpu_time_us"]), JSON_VALUES),
    st.tuples(st.just("nest"), st.integers(0, 100), ROW_KEYS, st.sampled_from([10, 5_000, 100_000])),
)


def damage_json(path: Path, ops: list[tuple[Any, ...]], byte_ops: list[tuple[Any, ...]]) -> int:
    doc = json.loads(path.read_text(encoding="utf-8"))
    nested: dict[str, str] = {}
    for op in ops:
        rows = doc.get("rows")
        if op[0] == "top":
            doc[op[1]] = op[2]
            continue
        if not isinstance(rows, list) or not rows:
            continue
        row = rows[op[1] % len(rows)]
        if not isinstance(row, dict):
            continue
        if op[0] == "set":
            row[op[2]] = op[3]
        elif op[0] == "delete":
            row.pop(op[2], None)
        elif op[0] == "kernel" and isinstance(row.get("kernels"), list) and row["kernels"]:
            kernel = row["kernels"][0]
            if isinstance(kernel, dict):
                kernel[op[2]] = op[3]
        elif op[0] == "fused" and isinstance(row.get("fused_ops"), list) and row["fused_ops"]:
            node = row["fused_ops"][-1]
            if isinstance(node, dict):
                node[op[2]] = op[3]
        elif op[0] == "duplicate_row":
            rows.append(copy.deepcopy(row))
        elif op[0] == "nest":
            marker = f"@@nest{len(nested)}@@"
            row[op[2]] = marker
            nested[f'"{marker}"'] = "[" * op[3] + "]" * op[3]
    text = json.dumps(doc, indent=1)
    for marker, value in nested.items():
        text = text.replace(marker, value)
    raw = text.encode("utf-8")
    for op in byte_ops:
        at = int(op[1] * len(raw))
        raw = raw[:at] if op[0] == "truncate" else raw[:at] + op[2] + raw[at:]
    path.write_bytes(raw)
    return raw.count(b"\n") + 1


@FUZZ
@given(ops=st.lists(JSON_OPS, min_size=1, max_size=3), byte_ops=st.lists(BYTE_OPS, max_size=1))
def test_fuzz_ggml_metadata_json(
    base: dict[str, Path], ops: list[tuple[Any, ...]], byte_ops: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cap = work / "capture"
        shutil.copytree(base["ggml-json"], cap)
        target = cap / "roofline.json"
        lines = damage_json(target, ops, byte_ops)
        check_ingest(cap, target, base["empty.db"], work, lines)


# ---- what the fuzzer found (each was another exception type before the fix) -------------------------


def _ingest(capture: Path) -> None:
    build_run(read_capture(capture), source_path=str(capture))


def _copy(base: dict[str, Path], fmt: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(base[fmt], tmp_path / fmt))


def test_sysinfo_numbers_beyond_float_or_int64_are_left_out(base: dict[str, Path], tmp_path: Path) -> None:
    # int(float("1e400")) was an OverflowError; int(float("1e30")) could not be stored as a 64-bit count
    cap = _copy(base, "rocprof-compute", tmp_path)
    text = (cap / "sysinfo.csv").read_text().replace(",304,64,2100,", ",1e400,1e30,inf,")
    (cap / "sysinfo.csv").write_text(text)
    frames = build_run(read_capture(cap))
    agent = frames.tables["agent"].iloc[0]
    assert pd.isna(agent["cu_count"]) and pd.isna(agent["wave_size"]) and pd.isna(agent["max_clock_mhz"])


def test_an_agent_without_a_node_id_is_a_parse_error(base: dict[str, Path], tmp_path: Path) -> None:
    # its label was None, which the database refused (NOT NULL) with an sqlite3 IntegrityError
    cap = _copy(base, "csv", tmp_path)
    (path,) = cap.glob("*_agent_info.csv")
    lines = path.read_text().splitlines()
    lines[2] = "," + lines[2].split(",", 1)[1]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError, match=r"agent_info\.csv:3: column 'Node_Id' has an empty cell"):
        _ingest(cap)


def _sql(db: Path, *statements: str) -> None:
    con = sqlite3.connect(db)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()


def test_rocpd_float_beyond_int64_in_an_id_column_is_a_parse_error(base: dict[str, Path], tmp_path: Path) -> None:
    # the cast warned (RuntimeWarning, an error under pytest) before the ParseError
    cap = _copy(base, "rocpd", tmp_path)
    (db,) = cap.glob("*_results.db")
    _sql(db, f'UPDATE "rocpd_pmc_event{suffix(UUID_A)}" SET event_id = 1e308 WHERE id = 1')
    with pytest.raises(ParseError, match="event_id holds 1e[+]?308, not an integer"):
        _ingest(cap)


@pytest.mark.parametrize(
    ("table", "column", "value", "pick"),
    [
        ("rocpd_kernel_dispatch", "start", "'soon'", "SELECT MAX(id) FROM {t}"),
        ("rocpd_kernel_dispatch", "grid_size_y", "1.5", "SELECT MAX(id) FROM {t}"),
        # a launch call (not a roctx range): a HIP call whose correlation id a dispatch's event has
        (
            "rocpd_region",
            "end",
            "'soon'",
            'SELECT MAX(r.id) FROM {t} r JOIN "rocpd_string{s}" n ON n.id = r.name_id '
            "JOIN \"rocpd_event{s}\" e ON e.id = r.event_id WHERE n.string LIKE 'hip%' AND e.stack_id IN "
            '(SELECT k.stack_id FROM "rocpd_event{s}" k JOIN "rocpd_kernel_dispatch{s}" d ON d.event_id = k.id)',
        ),
    ],
)
def test_a_rocpd_value_of_the_wrong_type_names_its_record_and_rocpd_column(
    base: dict[str, Path], tmp_path: Path, table: str, column: str, value: str, pick: str
) -> None:
    """The message names the record by its rocpd id and the column as rocpd calls it."""
    cap = _copy(base, "rocpd", tmp_path)
    (db,) = cap.glob("*_results.db")
    t = f'"{table}{suffix(UUID_A)}"'
    (record,) = sqlite3.connect(db).execute(pick.format(t=t, s=suffix(UUID_A))).fetchone()
    assert record is not None
    _sql(db, f'UPDATE {t} SET "{column}" = {value} WHERE id = {record}')
    shown = value.strip("'")
    with pytest.raises(ParseError, match=rf"{table} id {record}: {column} holds '?{shown}'?, not an integer"):
        _ingest(cap)


def test_rocpd_extdata_nested_too_deeply(base: dict[str, Path], tmp_path: Path) -> None:
    cap = _copy(base, "rocpd", tmp_path)
    (db,) = cap.glob("*_results.db")
    deep = "[" * 100_000 + "]" * 100_000
    event = f'"rocpd_event{suffix(UUID_A)}"'
    _sql(
        db,
        f"UPDATE {event} SET extdata = '{deep}' WHERE category_id = "
        f"(SELECT id FROM \"rocpd_string{suffix(UUID_A)}\" WHERE string = 'MARKER_CORE_RANGE_API') AND id = "
        f'(SELECT MIN(e.id) FROM {event} e JOIN "rocpd_string{suffix(UUID_A)}" s ON s.id = e.category_id '
        "WHERE s.string = 'MARKER_CORE_RANGE_API')",
        f"UPDATE \"rocpd_info_agent{suffix(UUID_A)}\" SET extdata = '{deep}'",
    )
    with pytest.raises(ParseError, match="extdata is not valid JSON [(]nested too deeply[)]"):
        _ingest(cap)


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        (
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = '' WHERE rowid = 3",
            "CUPTI_ACTIVITY_KIND_KERNEL.start holds ''",
        ),
        ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET blockX = 1.5 WHERE rowid = 1", "blockX holds 1.5, not an integer"),
        ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridY = 'x' WHERE rowid = 1", "gridY holds 'x'"),
        ("UPDATE PROCESSES SET pid = ''", "PROCESSES.pid holds ''"),
        ("UPDATE NVTX_EVENTS SET globalTid = 'abc' WHERE rowid = 2", "NVTX_EVENTS.globalTid holds 'abc'"),
        ("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = 1e300", "CUPTI_ACTIVITY_KIND_RUNTIME.start holds 1e[+]?300"),
        ("ALTER TABLE TARGET_INFO_GPU DROP COLUMN computeMajor", "TARGET_INFO_GPU has no column 'computeMajor'"),
        ("UPDATE TARGET_INFO_GPU SET clockRate = 'fast'", "TARGET_INFO_GPU.clockRate holds 'fast', not a number"),
    ],
)
def test_nsys_values_of_the_wrong_type_name_table_and_column(
    base: dict[str, Path], tmp_path: Path, statement: str, expected: str
) -> None:
    cap = _copy(base, "nvidia", tmp_path)
    _sql(cap / "trace" / "nsys.sqlite", statement)
    with pytest.raises(ParseError, match=expected) as err:
        _ingest(cap)
    assert err.value.path == str(cap / "trace" / "nsys.sqlite")


def test_a_gzipped_nsys_export_is_named_in_errors_not_its_temporary_copy(base: dict[str, Path], tmp_path: Path) -> None:
    cap = _copy(base, "nvidia", tmp_path)
    db = cap / "trace" / "nsys.sqlite"
    _sql(db, "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = '' WHERE rowid = 3")
    with open(db, "rb") as src, gzip.open(str(db) + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    db.unlink()
    with pytest.raises(ParseError) as err:
        _ingest(cap)
    assert err.value.path == str(db) + ".gz"


def test_sqlite_out_of_memory_on_a_damaged_nsys_export_is_a_parse_error(base: dict[str, Path], tmp_path: Path) -> None:
    # the damage the fuzzer found: SQLite answers SQLITE_NOMEM, which sqlite3 raises as MemoryError
    cap = _copy(base, "nvidia", tmp_path)
    db = cap / "trace" / "nsys.sqlite"
    damage_sqlite(
        db, NSYS_TABLES, [("drop", 142), ("delete", 244, 7257), ("drop", 142)], [("insert", 0.81384, b"\xff")]
    )
    check_ingest(cap, db, base["empty.db"], tmp_path)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("9.223372036854776e+18", r"column 'ID' has 9\.22337e\+18; expected a number within"),
        ("1.5", r"column 'ID' has 1\.5; expected a whole number"),  # was rounded to 2: "kernel ID 2 appears twice"
    ],
    ids=["beyond-int64", "fraction"],
)
def test_an_ncu_kernel_id_that_is_no_id_is_a_parse_error_with_its_row(
    base: dict[str, Path], tmp_path: Path, value: str, message: str
) -> None:
    cap = _copy(base, "nvidia", tmp_path)
    path = cap / "ncu" / "ncu_raw.csv"
    lines = path.read_text().splitlines()
    lines[3] = f'"{value}"' + lines[3][len(lines[3].split(",", 1)[0]) :]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError, match=rf"ncu_raw\.csv:4: {message}"):
        _ingest(cap)


def test_ggml_kernel_time_beyond_int64_ns_is_a_parse_error(base: dict[str, Path], tmp_path: Path) -> None:
    cap = _copy(base, "ggml-json", tmp_path)
    doc = json.loads((cap / "roofline.json").read_text())
    doc["rows"][0]["kernels"][0]["gpu_time_us"] = 2**63
    (cap / "roofline.json").write_text(json.dumps(doc))
    with pytest.raises(ParseError, match=r"rows\[0\]\.kernels\[0\]\.gpu_time_us: expected a non-negative number"):
        _ingest(cap)


# ---- values no profiler writes (an adversarial trial of the CLI found them stored as numbers) ----------


@pytest.mark.parametrize("value", ["-1000000", "1e300", "inf"])
def test_a_rocprofv3_counter_value_no_counter_gives_is_refused_with_its_row(
    base: dict[str, Path], tmp_path: Path, value: str
) -> None:
    cap = _copy(base, "csv", tmp_path)
    (path,) = cap.glob("*_counter_collection.csv")
    lines = path.read_text().splitlines()
    header = next(csv.reader([lines[0]]))
    cells = next(csv.reader([lines[5]]))
    cells[header.index("Counter_Value")] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(cells)
    lines[5] = buf.getvalue()
    path.write_text("\n".join(lines) + "\n")
    expected = r"Counter_Value is .*expected a counter value|column 'Counter_Value' has 'inf'; expected a finite number"
    with pytest.raises(ParseError, match=rf"counter_collection\.csv:6: ({expected})"):
        _ingest(cap)


@pytest.mark.parametrize(("value", "shown"), [("'abc'", "'abc'"), ("NULL", "None"), ("-5", "-5.0")])
def test_a_rocpd_counter_record_that_is_no_count_is_refused_with_its_id(
    base: dict[str, Path], tmp_path: Path, value: str, shown: str
) -> None:
    # SQLite reads 'abc' + 0.0 as 0.0, and SUM(NULL) is NULL (the database then refused the run)
    cap = _copy(base, "rocpd", tmp_path)
    (db,) = cap.glob("*_results.db")
    _sql(db, f'UPDATE "rocpd_pmc_event{suffix(UUID_A)}" SET value = {value} WHERE id = 7')
    with pytest.raises(ParseError, match=rf"rocpd_pmc_event record id 7: value {shown} is not a counter value"):
        _ingest(cap)


@pytest.mark.parametrize(
    ("end", "expected"),
    [
        ("NULL", r"rocpd_region id {first}: a marker needs a start and an end"),
        # found by test_fuzz_rocpd: SQLite stores text in an integer column, and pandas then compared str with int
        ("'soon'", r"rocpd_region: end holds 'soon', not an integer"),
    ],
)
def test_a_rocpd_marker_without_an_end_or_with_a_text_end_is_refused(
    base: dict[str, Path], tmp_path: Path, end: str, expected: str
) -> None:
    cap = _copy(base, "rocpd", tmp_path)
    (db,) = cap.glob("*_results.db")
    first = sqlite3.connect(db).execute(f'SELECT MIN(id) FROM "rocpd_region{suffix(UUID_A)}"').fetchone()[0]
    _sql(db, f'UPDATE "rocpd_region{suffix(UUID_A)}" SET "end" = {end} WHERE id = {first}')
    with pytest.raises(ParseError, match=expected.format(first=first)):
        _ingest(cap)


def test_a_carriage_return_before_a_csv_header_is_refused_with_the_file(base: dict[str, Path], tmp_path: Path) -> None:
    # found by test_fuzz_rocprofv3_csv: a leading '\r' made csv.reader raise instead of a ParseError
    cap = _copy(base, "csv", tmp_path)
    victim = sorted(cap.rglob("*kernel_trace.csv"))[0]
    victim.write_bytes(b"\r" + victim.read_bytes())
    with pytest.raises(ParseError, match=r"kernel_trace.csv:1: the header row is not CSV"):
        _ingest(cap)


def test_an_nvtx_range_ending_before_it_starts_is_refused_and_one_never_ended_is_a_note(
    base: dict[str, Path], tmp_path: Path
) -> None:
    cap = _copy(base, "nvidia", tmp_path)
    (db,) = cap.rglob("*.sqlite")
    _sql(
        db,
        "UPDATE NVTX_EVENTS SET end = start - 1000 WHERE rowid = (SELECT MIN(rowid) FROM NVTX_EVENTS "
        "WHERE eventType = 59)",
    )
    with pytest.raises(ParseError, match=r"NVTX_EVENTS: range '.*' ends before it starts"):
        _ingest(cap)
    # found by a helper: a range without a start was a ValueError traceback in the attribution (nsys
    # declares the column NOT NULL: the table is copied without the constraint to damage it)
    for event, what in ((59, "range"), (34, "mark")):
        cap3 = _copy(base, "nvidia", tmp_path / f"c{event}")
        (db3,) = cap3.rglob("*.sqlite")
        first = f"(SELECT MIN(rowid) FROM NVTX_EVENTS WHERE eventType = {event})"
        _sql(
            db3,
            "CREATE TABLE loose AS SELECT * FROM NVTX_EVENTS",
            "DROP TABLE NVTX_EVENTS",
            "ALTER TABLE loose RENAME TO NVTX_EVENTS",
            f"UPDATE NVTX_EVENTS SET start = NULL WHERE rowid = {first}",
        )
        with pytest.raises(ParseError, match=rf"NVTX_EVENTS: {what} '.*' has no start time \(NULL\)"):
            _ingest(cap3)
    cap2 = _copy(base, "nvidia", tmp_path / "b")
    (db2,) = cap2.rglob("*.sqlite")
    _sql(db2, "UPDATE NVTX_EVENTS SET end = NULL WHERE eventType = 59")
    frames = build_run(read_capture(cap2))
    (note,) = [n for n in frames.notes if n.code == "open-ranges"]
    ranges = sqlite3.connect(db2).execute("SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType = 59").fetchone()[0]
    assert note.message.endswith(
        f"{ranges} of {ranges} NVTX ranges never ended (the application stopped inside them?); they are left out, "
        "and kernels they held are not attributed"
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("ne", [10**15] * 4, r"rows\[0\]\.ne: expected a shape of up to 4 integers from 0 to 2\*\*40"),
        ("ne", [-1, 512, 1, 1], r"rows\[0\]\.ne: expected a shape"),
        ("src_ne", [[5, "x"]], r"rows\[0\]\.src_ne\[0\]: expected a shape"),
        ("dst_bytes", -1, r"rows\[0\]\.dst_bytes: expected a count from 0 to 2\*\*62, got -1"),
        ("name", "\ud800", r"rows\[0\]\.name: not valid Unicode text"),
    ],
)
def test_op_metadata_shapes_counts_and_text_are_checked(
    base: dict[str, Path], tmp_path: Path, key: str, value: object, message: str
) -> None:
    cap = _copy(base, "ggml-json", tmp_path)
    doc = json.loads((cap / "roofline.json").read_text())
    doc["rows"][0][key] = value
    (cap / "roofline.json").write_text(json.dumps(doc))
    with pytest.raises(ParseError, match=message):
        _ingest(cap)


def test_an_empty_kernel_name_is_not_a_range_message() -> None:
    from rocroof.capture.markers import parse_range

    assert parse_range(float("nan")) is None  # type: ignore[arg-type]  # an empty CSV cell


@pytest.mark.parametrize("value", ["-5", "inf", "0"])
def test_a_sysinfo_hbm_bandwidth_that_is_no_bandwidth_is_left_out(
    base: dict[str, Path], tmp_path: Path, value: str
) -> None:
    cap = _copy(base, "rocprof-compute", tmp_path)
    rows = list(csv.reader(io.StringIO((cap / "sysinfo.csv").read_text())))
    if "hbm_bw" not in rows[0]:
        rows = [[*rows[0], "hbm_bw"], *([*r, value] for r in rows[1:])]
    else:
        for r in rows[1:]:
            r[rows[0].index("hbm_bw")] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    (cap / "sysinfo.csv").write_text(buf.getvalue())
    (cap / "roofline.csv").unlink(missing_ok=True)  # the measured ceiling would come first
    frames = build_run(read_capture(cap))
    run = frames.run
    assert run["dram_peak_gbps"] is None or run["dram_peak_gbps"] > 0
    assert "sysinfo" not in str(run["dram_peak_source"])


H200_PREFILL = synthetic.REPO / "examples" / "h200" / "dense-prefill"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda raw: raw[:2000], r"ggml-op-meta\.json\.gz: compressed data is damaged or truncated"),
        (lambda raw: b"", r"ggml-op-meta\.json\.gz:1: invalid JSON"),
    ],
    ids=["cut", "empty"],
)
def test_a_damaged_op_metadata_sidecar_stops_the_ingest(
    tmp_path: Path, damage: Callable[[bytes], bytes], message: str
) -> None:
    """collect's sidecar is op metadata whatever it holds: damaged, it is named, not left out."""
    cap = Path(shutil.copytree(H200_PREFILL, tmp_path / "cap"))
    sidecar = cap / "trace" / "ggml-op-meta.json.gz"
    sidecar.chmod(0o644)
    sidecar.write_bytes(damage(sidecar.read_bytes()))
    with pytest.raises(ParseError, match=message):
        _ingest(cap)
    with pytest.raises(ParseError, match=message):  # attached as well: the same file, named once
        build_run(read_capture(cap, attachments=[sidecar]))


def test_op_metadata_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    cap = Path(shutil.copytree(H200_PREFILL, tmp_path / "cap"))
    sidecar = cap / "trace" / "ggml-op-meta.json.gz"
    sidecar.chmod(0o644)
    sidecar.write_bytes(gzip.compress(b"\xef\xbb\xbf" + gzip.decompress(sidecar.read_bytes())))
    capture = read_capture(cap)
    assert capture.op_metadata is not None and len(capture.op_metadata.ops) > 0


def test_an_nsys_export_without_kernels_beside_ncu_kernels_is_refused(tmp_path: Path) -> None:
    cap = Path(shutil.copytree(H200_PREFILL, tmp_path / "cap"))
    gz = cap / "trace" / "nsys.sqlite.gz"
    gz.chmod(0o644)
    plain = tmp_path / "nsys.sqlite"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    _sql(plain, "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    with pytest.raises(ParseError, match=r"nsys\.sqlite\.gz: holds no kernel activity"):
        _ingest(cap)
