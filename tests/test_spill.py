"""Spilled columns (rocroof.spill): columns kept in temporary files instead of memory.

The readers write large columns (counter values, the dispatch columns that are only stored) to
spill files as they read them; the pipeline and the store read them back a chunk at a time. A
spilled column must hold exactly what the in-memory one would, every step must accept it, and
its pages must leave the process when released. The end-to-end checks ingest recorded captures
(../shared/fixtures), the examples and synthetic captures twice, every column spilled
(``SPILL_MIN_BYTES = 0``) and none, and compare every stored row.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rocroof.spill as spill
from rocroof.capture.readers import read_capture
from rocroof.ingest.pipeline import RANGE_REBUILD_COLUMNS, build_run, with_range_messages
from rocroof.records import (
    ChunkStacker,
    SpilledFrameWriter,
    SpilledTexts,
    TextWriter,
    code_dtype,
    conform,
    per_distinct,
    stack_frames,
    stack_spilled,
    take_rows,
    text_values,
)
from rocroof.store import Store

from . import synthetic
from .conftest import fixture_path
from .rocprof_csv import T0, Kernel, api, mark, rng, write_pass
from .store_rows import table_rows

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def spill_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every column goes to a file, however small."""
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)


# ---- the files -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.float64, np.bool_])
def test_a_column_written_in_chunks_reads_back_whole(spill_all: None, dtype: type) -> None:
    rng = np.random.default_rng(7)
    parts = [rng.integers(-100, 100, size=n).astype(dtype) for n in (0, 1, 5, 1000, 3)]
    writer = spill.ColumnWriter(dtype)
    for part in parts:
        writer.append(part)
    column = writer.finish()
    assert column.dtype == np.dtype(dtype) and len(column) == 1009
    np.testing.assert_array_equal(column, np.concatenate(parts))
    assert (
        spill.is_spilled(column)
        and spill.is_spilled(column[3:9])
        and spill.is_spilled(pd.Series(column).array) is False
    )
    with pytest.raises(ValueError, match="read-only"):
        column[0] = 1  # a write would be lost when the pages are dropped: refused


def test_a_small_column_stays_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 1 << 20)
    writer = spill.ColumnWriter(np.int64)
    writer.append(np.arange(10))
    column = writer.finish()
    assert not spill.is_spilled(column)
    np.testing.assert_array_equal(column, np.arange(10))


def test_an_empty_column_and_an_abandoned_one(spill_all: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCROOF_SPILL_DIR", str(tmp_path))
    assert len(spill.ColumnWriter(np.float64).finish()) == 0
    writer = spill.ColumnWriter(np.float64)
    writer.append(np.ones(100))
    writer.close()  # an error while reading: the file goes, no column is made
    kept = spill.ColumnWriter(np.float64)
    kept.append(np.ones(100))
    column = kept.finish()
    assert list(tmp_path.iterdir()) == []  # unlinked when made: nothing left behind, killed or not
    assert float(column.sum()) == 100.0


def test_the_threshold_from_the_environment() -> None:
    assert spill._min_bytes("0") == 0 and spill._min_bytes("4096") == 4096
    assert spill._min_bytes(None) == spill._min_bytes("") == spill._min_bytes("lots") == 1 << 20
    assert spill._min_bytes("-5") == 0


def test_spilled_texts_by_code(spill_all: None) -> None:
    """Texts by code from spill files: None for -1, repeats, multi-byte and lone-surrogate text, more than a block."""
    texts = ["ggml-fused: MUL_MAT+ADD #7", "", "é ∑ 🚀", "lone \ud800 surrogate", *(f"t{i}" for i in range(70_000))]
    table = SpilledTexts(pd.Index(texts, dtype=object))
    assert len(table) == len(texts)
    assert spill.is_spilled(table._data) and spill.is_spilled(table._starts)  # noqa: SLF001
    codes = np.array([2, -1, 0, 2, 3, 1, 70_003, -1, 69_999], dtype=np.int64)
    got = table[codes]
    assert got.dtype == object
    assert got.tolist() == [texts[2], None, texts[0], texts[2], texts[3], "", "t69999", None, "t69995"]
    assert table[np.zeros(0, dtype=np.int64)].tolist() == []
    assert table[np.array([-1, -1])].tolist() == [None, None]


def test_spilled_texts_hold_text_only() -> None:
    with pytest.raises(TypeError, match="str only"):
        SpilledTexts(pd.Index(["a", 3], dtype=object))


def test_zeros_and_take(spill_all: None) -> None:
    z = spill.zeros(1000, np.int64)
    assert spill.is_spilled(z) and not z.any() and z.dtype == np.int64
    with spill.ColumnWriter(np.int64) as writer:
        writer.append(np.arange(10, 20))
        writer.append(np.arange(20, 30))
        values = writer.finish()
    order = np.array([19, 0, 5, 5, 11])
    np.testing.assert_array_equal(spill.take(values, order), [29, 10, 15, 15, 21])
    lookup = np.arange(100)[::-1].copy()
    np.testing.assert_array_equal(spill.take(values, order, lookup), 99 - np.array([29, 10, 15, 15, 21]))


@pytest.mark.parametrize("rows", [0, 1, 5, 3 * 7 + 2])
def test_arange_and_full_give_numpy_s_values(spill_all: None, monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    """Written 7 rows at a time (``TAKE_ROWS``): ``np.arange``/``np.full``'s values as int64, read-only in a file."""
    monkeypatch.setattr(spill, "TAKE_ROWS", 7)
    counted = spill.arange(100, 100 + rows)
    np.testing.assert_array_equal(counted, np.arange(100, 100 + rows))
    for value in (0, 3, -2):
        same = spill.full(rows, value)
        np.testing.assert_array_equal(same, np.full(rows, value))
        assert same.dtype == np.int64
        assert not rows or not same.flags.writeable
    assert counted.dtype == np.int64
    if rows:
        assert spill.is_spilled(counted) and spill.is_spilled(spill.full(rows, 3)) and not counted.flags.writeable


def test_threads_spilling_and_releasing_at_once(spill_all: None) -> None:
    """The ingests of a local sweep run in threads: columns made, dropped and released in each at once.

    Found by the suite with every column spilled: two threads removing the same dead mapping from
    the list of mappings raised ValueError.
    """
    import threading

    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work() -> None:
        try:
            start.wait()
            for i in range(20):
                columns = [spill.arange(0, 64 + i) for _ in range(40)]
                assert all(int(c[-1]) == 63 + i for c in columns)
                del columns  # their mappings die: each thread's release drops the dead ones
                spill.release_pages()
        except BaseException as exc:  # noqa: BLE001 (reported by the main thread)
            errors.append(exc)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often: the race shows within a few rounds
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(switch)
    assert not errors, errors


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the resident size from /proc (Linux)")
def test_released_pages_leave_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def resident_mb() -> float:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * 4096 / 1e6

    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    writer = spill.ColumnWriter(np.float64)
    for _ in range(8):
        writer.append(np.ones(1 << 20))  # 64 MB in all
    column = writer.finish()
    before = resident_mb()
    assert float(column.sum()) == 8 * (1 << 20)  # every page touched: resident now
    touched = resident_mb()
    assert touched - before > 60  # the 64 MB are counted while resident
    assert spill.release_pages() >= 1
    assert resident_mb() - before < 4  # and gone once released; the data stays in the file
    assert float(column[-5:].sum()) == 5.0


# ---- frames --------------------------------------------------------------------------------------


def _chunks(seed: int) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    out = []
    for n in (4, 0, 9, 1, 6):
        ints = rng.integers(0, 5, size=n)
        out.append(
            pd.DataFrame(
                {
                    "name": rng.choice(["a", "b", None], size=n).astype(object),
                    "grid_x": pd.array(np.where(ints == 0, None, ints), dtype="Int64"),
                    "kernel_id": pd.array(ints, dtype="Int64"),
                    "value": rng.random(n),
                }
            )
        )
    return out


@pytest.mark.parametrize("spill_everything", [True, False])
def test_chunk_stacker_stacks_as_stack_frames(spill_everything: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0 if spill_everything else 1 << 20)
    expected = stack_frames(_chunks(3))
    stacker = ChunkStacker(spill=("grid_x", "kernel_id", "value", "absent"))
    for chunk in _chunks(3):
        stacker.add(chunk)
    got = stacker.finish()
    pd.testing.assert_frame_equal(got, expected)
    assert list(got.columns) == ["name", "grid_x", "kernel_id", "value"]  # the first chunk's order
    assert spill.is_spilled(got["grid_x"].array) == spill_everything
    assert not spill.is_spilled(got["name"].array)


def test_take_rows_is_iloc(spill_all: None) -> None:
    stacker = ChunkStacker(spill=("grid_x", "kernel_id", "value"))
    for chunk in _chunks(5):
        stacker.add(chunk)
    frame = stacker.finish()
    rows = np.array([0, 3, 3, 19, 7])
    expected = frame.iloc[rows].reset_index(drop=True)
    pd.testing.assert_frame_equal(take_rows(frame, rows), expected)
    renumber = np.arange(100) * 10
    got = take_rows(frame, rows, {"kernel_id": renumber})
    assert got["kernel_id"].tolist() == [10 * v for v in expected["kernel_id"].tolist()]
    # consumed: the same rows, and the source frame gives up each column once taken
    pd.testing.assert_frame_equal(take_rows(frame, rows, consume=True), expected)
    assert list(frame.columns) == []


# ---- whole ingests: spilled and in memory store the same rows ----------------------------------


#: Recorded captures (../shared/fixtures) of each reader that reads counters or large traces.
RECORDED = (
    "rocprofv3-docs",
    "rocprof-compute/vcopy/MI100",
    "rocprof-compute/vcopy/MI300X_A1",
    "rocprof-compute/vcopy/MI300X_A1_rocpd",
    "rocprof-compute/vcopy/MI350",
    "rocprof-v1/mi250x-laplacian-kernel2",
)


def _ingest(capture: Path, db: Path) -> dict[str, pd.DataFrame]:
    store = Store(db)
    store.write_run(build_run(read_capture(capture), source_path="capture", release=True), release=True)
    store.close()
    return table_rows(str(db))


def _same(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        frame_a = a[name].drop(columns=["source_path", "rocroof_version"], errors="ignore")
        frame_b = b[name].drop(columns=["source_path", "rocroof_version"], errors="ignore")
        pd.testing.assert_frame_equal(frame_a, frame_b, obj=name)


#: Examples (H200: Nsight Systems + Nsight Compute, two passes; MoE, op metadata and a counter
#: sample; a measured ceiling; a sweep point).
EXAMPLES = (
    "h200-sampled/moe24-decode-sample",
    "h200-probe/dense-prefill",
    "h200-sweep/dense-tiny-prefill-fusion-r1",
)


@pytest.mark.parametrize("example", EXAMPLES)
def test_examples_store_the_same_rows_spilled(example: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    capture = REPO / "examples" / example
    expected = _ingest(capture, tmp_path / "memory.db")
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    _same(_ingest(capture, tmp_path / "spilled.db"), expected)


@pytest.mark.parametrize("recorded", RECORDED)
def test_recorded_captures_store_the_same_rows_spilled(
    recorded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = fixture_path(*recorded.split("/"))
    expected = _ingest(capture, tmp_path / "memory.db")
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    _same(_ingest(capture, tmp_path / "spilled.db"), expected)


@pytest.mark.parametrize("fmt", synthetic.FORMATS)
def test_synthetic_captures_store_the_same_rows_spilled(
    fmt: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = synthetic.capture(fmt, 500, tmp_path_factory.mktemp("captures"))
    expected = _ingest(capture, tmp_path / "memory.db")
    assert len(expected["counter_reading"]) == 500  # 8 counters a dispatch, one reading row each
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    _same(_ingest(capture, tmp_path / "spilled.db"), expected)


# ---- ggml range messages let go during the attribution, rebuilt as they are written -------------


def test_range_messages_let_go_are_stored_as_recorded(tmp_path: Path) -> None:
    """``build_run(release=True)`` (the ingest) lets go of the ggml range messages that op, node name
    and invocation give back, and stores every message as the capture recorded it."""
    t = T0
    messages = [
        "ggml:MUL_MAT:Qcur-0:5",  # rebuilt
        "ggml:ROPE:Qcur-0 (view): rope:6",  # colons and spaces in the node name: rebuilt
        "ggml:ADD:l_out-0:007",  # leading zeros: not what the rebuild writes, kept as recorded
        "ggml:CPY::8",  # an empty node name: rebuilt
        "llama_decode",  # not a ggml range: kept
    ]
    markers = [rng(m, 9 + 3 * i, t + 100 * i, t + 100 * i + 50) for i, m in enumerate(messages)]
    markers.append(mark("ggml-fused:5:MUL_MAT+ADD:Qcur-0|l_out-0", 30, t + 60))
    # --kernel-rename kernels name their range: found among the ranges by the rebuilt message too
    kernels = [
        Kernel(1, "ggml:MUL_MAT:Qcur-0:5", 10, t + 1000, t + 1200),
        Kernel(2, "ggml:ROPE:Qcur-0 (view): rope:6", 13, t + 1300, t + 1350),
        Kernel(3, "void memset_kernel<float>(float*, float, long)", 15, t + 1350, t + 1360),
    ]
    capture = write_pass(tmp_path / "cap", 1234, kernels=kernels, markers=markers)
    plain = build_run(read_capture(capture))
    released = build_run(read_capture(capture), release=True)
    ranges = released.tables["marker_range"]
    let_go = ranges["message"].isna().to_numpy()
    assert sorted(ranges[RANGE_REBUILD_COLUMNS[0]][let_go].tolist()) == ["CPY", "MUL_MAT", "ROPE"]
    # the reader lets go of the same messages already (compact_ranges), with or without release
    assert plain.tables["marker_range"]["message"].isna().tolist() == let_go.tolist()
    pd.testing.assert_frame_equal(with_range_messages(ranges), with_range_messages(plain.tables["marker_range"]))
    stored = {}
    for name, frames in (("plain", plain), ("released", released)):
        store = Store(tmp_path / f"{name}.db")
        store.write_run(frames)
        stored[name] = table_rows(str(tmp_path / f"{name}.db"))
        store.close()
    _same(stored["released"], stored["plain"])
    kept = stored["released"]["marker_range"]
    assert sorted(kept["message"].tolist()) == sorted([*messages, "ggml-fused:5:MUL_MAT+ADD:Qcur-0|l_out-0"])
    # the renamed kernels point at their ranges, found by their rebuilt messages
    message_of = dict(zip(kept["range_index"], kept["message"], strict=True))
    dispatch = stored["released"]["dispatch_record"].sort_values("dispatch_index")
    assert [message_of[i] for i in dispatch["range_index"][:2]] == messages[:2]


def test_a_pass_cut_at_its_reset_keeps_its_messages(tmp_path: Path) -> None:
    """A pass with a 'ggml reset' mark is attributed again once cut: its messages are all there to store."""
    t = T0
    markers = [
        rng("ggml:MUL_MAT:Qcur-0:1", 9, t + 100, t + 200),
        mark("ggml reset", 20, t + 300),
        rng("ggml:MUL_MAT:Qcur-0:2", 21, t + 400, t + 500),
    ]
    apis = [api("hipLaunchKernel", 10, t + 150, t + 160), api("hipLaunchKernel", 22, t + 450, t + 460)]
    kernels = [Kernel(1, MMQ, 10, t + 1000, t + 1200), Kernel(2, MMQ, 22, t + 1300, t + 1500)]
    capture = write_pass(tmp_path / "cap", 1234, kernels=kernels, markers=markers, apis=apis)
    released = build_run(read_capture(capture), release=True)
    ranges = with_range_messages(released.tables["marker_range"])
    assert ranges["message"].tolist() == ["ggml reset", "ggml:MUL_MAT:Qcur-0:2"]  # the warm-up's range dropped
    assert len(released.tables["dispatch"]) == 1  # the warm-up's dispatch dropped


MMQ = "void mul_mat_q<(ggml_type)8, 64, false>(char const*, int const*, float*, float*, int, int, int, int, int)"


def test_a_spill_directory_that_cannot_take_the_files_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from rocroof.cli import cli
    from rocroof.errors import OutputError

    missing = tmp_path / "no-such-dir"
    monkeypatch.setenv("ROCROOF_SPILL_DIR", str(missing))
    small = spill.ColumnWriter(np.int64)  # a column under BUFFER_BYTES needs no file: it works
    small.append(np.arange(10))
    assert small.finish().tolist() == list(range(10))
    with pytest.raises(OutputError, match="no-such-dir: cannot write the ingest's temporary column files"):
        spill.ColumnWriter(np.int64).append(np.arange(spill.BUFFER_BYTES // 8 + 1))  # one row past the buffer
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    capture = write_pass(
        tmp_path / "cap", 1234, kernels=[Kernel(1, MMQ, 10, T0 + 1000, T0 + 1200)], markers=[], apis=[]
    )
    result = CliRunner().invoke(cli, ["ingest", str(capture), "--db", str(tmp_path / "r.db")])
    assert result.exit_code != 0
    assert "ROCROOF_SPILL_DIR" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    if (tmp_path / "r.db").exists():  # nothing stored
        assert Store(tmp_path / "r.db", read_only=True).query("SELECT COUNT(*) AS n FROM run")["n"].iloc[0] == 0


def test_a_small_column_is_held_until_it_outgrows_the_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks are copies in memory up to BUFFER_BYTES (no file); past it, or when a mapping is asked for, a file."""
    opened: list[object] = []
    real = spill.tempfile.TemporaryFile

    def counting(*args: object, **kwargs: object) -> object:
        opened.append(args)
        return real(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(spill.tempfile, "TemporaryFile", counting)
    source = np.arange(100, dtype=np.int64)
    writer = spill.ColumnWriter(np.int64)
    writer.append(source[:40])
    source[:40] = -1  # the caller reuses its array: the column keeps what was appended
    writer.append(source[40:])
    got = writer.finish()
    assert not opened
    assert got.tolist() == [*range(40), *range(40, 100)] and got.flags.writeable
    # asked for a mapping: the file is opened at finish, with the held chunks
    writer = spill.ColumnWriter(np.float64)
    writer.append(np.array([0.5, 1.5]))
    mapped = writer.finish(mapped=True)
    assert len(opened) == 1 and spill.is_spilled(mapped) and mapped.tolist() == [0.5, 1.5]
    # one chunk past the buffer: held chunks first, then the rest, in order
    n = spill.BUFFER_BYTES // 8
    writer = spill.ColumnWriter(np.int64)
    writer.append(np.arange(10))
    writer.append(np.arange(10, n + 10))
    assert len(opened) == 2
    assert np.array_equal(writer.finish(), np.arange(n + 10))
    # every column to a file (the tests' ROCROOF_SPILL_MIN_BYTES=0): no buffer at all
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    writer = spill.ColumnWriter(np.int64)
    writer.append(np.arange(3))
    assert len(opened) == 3
    assert spill.is_spilled(out := writer.finish()) and out.tolist() == [0, 1, 2]


def test_an_abandoned_column_on_a_full_disk_closes_quietly(spill_all: None) -> None:
    """Closing a column given up after an error flushes nothing that matters: ENOSPC there is not raised."""

    class FullDisk:
        def close(self) -> None:
            raise OSError(28, "No space left on device")

    writer = spill.ColumnWriter(np.int64)
    writer.append(np.arange(3))  # every column to a file here (spill_all): the file is open now
    real = writer._file
    writer._file = FullDisk()  # type: ignore[assignment]
    writer.close()  # no error: the file is dropped either way
    assert real is not None
    real.close()
    z = spill.zeros(1 << 20, np.int64)  # no file at all: a full spill directory cannot fault it
    assert spill.is_spilled(z) and not z.any()


# ---- text columns as codes, frames written a chunk at a time ---------------------------------------


@pytest.mark.parametrize("spill_everything", [True, False])
def test_a_text_column_is_coded_as_written(spill_everything: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0 if spill_everything else 1 << 20)
    parts = [
        np.array(["b", None, "a", "b"], dtype=object),
        pd.Categorical(["c", "a", None]),  # a chunk's categorical: its categories are the texts
        np.array([], dtype=object),
        np.array([float("nan"), "", "c"], dtype=object),  # NaN is missing; "" is a text
    ]
    writer = TextWriter()
    for part in parts:
        writer.append(part)
    column = writer.finish()
    expected = ["b", None, "a", "b", "c", "a", None, None, "", "c"]  # by hand
    if spill_everything:  # a categorical whose codes are the spill file itself (pandas did not copy them)
        assert isinstance(column, pd.Categorical) and spill.is_spilled(column.codes)
        assert list(column.categories) == ["b", "a", "c", ""]  # in order of first appearance
        assert text_values(pd.Series(column)).tolist() == expected
    else:  # a small column is the object array the readers gave before
        assert isinstance(column, np.ndarray) and column.dtype == object
        assert column.tolist() == expected


def test_codes_widen_when_the_texts_outgrow_them(spill_all: None) -> None:
    writer = TextWriter(categories=("first",))
    writer.append(np.array(["first"], dtype=object))
    texts = [f"t{i}" for i in range(40_000)]  # past int8 (126 texts) and int16 (32,766 texts)
    for lo in range(0, len(texts), 7_000):
        writer.append(np.array(texts[lo : lo + 7_000], dtype=object))
    column = writer.finish()
    assert column.codes.dtype == np.int32 and spill.is_spilled(column.codes)
    assert text_values(pd.Series(column)).tolist() == ["first", *texts]
    assert code_dtype(126) == np.int8 and code_dtype(127) == np.int16  # what pandas keeps uncopied
    kept = pd.Categorical.from_codes(np.zeros(3, dtype=code_dtype(127)), categories=[f"c{i}" for i in range(127)])
    assert kept.codes.dtype == code_dtype(127)


@pytest.mark.parametrize("distinct", [3, 200, 40_000])
def test_text_codes_hold_each_text_once_and_give_the_values_back(spill_all: None, distinct: int) -> None:
    rng = np.random.default_rng(distinct)
    pool = np.array([f"t{i:05d}" for i in rng.permutation(distinct)], dtype=object)
    chunks = [pool[rng.integers(0, distinct, size=n)] for n in (10, 0, 5000, 30_000, 20_000)]
    for chunk in chunks[2:]:
        chunk[rng.random(len(chunk)) < 0.01] = None
    writer = TextWriter()
    for chunk in chunks:
        writer.append(chunk)
    column = writer.finish()
    assert isinstance(column, pd.Categorical) and spill.is_spilled(np.asarray(column.codes))
    expected = np.concatenate(chunks)
    assert list(column.categories) == list(pd.unique(expected[pd.notna(expected)]))  # in order of first appearance
    assert column.codes.dtype == code_dtype(len(column.categories))  # the type pandas keeps: no copy
    assert text_values(pd.Series(column)).tolist() == expected.tolist()


def test_fixed_categories_and_small_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 1 << 20)
    writer = TextWriter()
    writer.append(np.array(["b", None, "a"], dtype=object))
    writer.append(pd.Categorical(["a", "c"]))
    got = writer.finish()
    assert isinstance(got, np.ndarray) and got.dtype == object and got.tolist() == ["b", None, "a", "a", "c"]
    kinds = TextWriter(("range", "mark"), fixed=True, categorical=True)
    kinds.append(np.array(["mark", "range"], dtype=object))
    fixed = kinds.finish()
    assert isinstance(fixed, pd.Categorical) and list(fixed.categories) == ["range", "mark"]
    assert fixed.codes.tolist() == [1, 0]
    with pytest.raises(ValueError, match="not one of"), TextWriter(("range", "mark"), fixed=True) as other:
        other.append(np.array(["other"], dtype=object))
    with (
        pytest.raises(ValueError, match="not one of"),
        SpilledFrameWriter({"kind": "object"}, categories={"kind": ("range", "mark")}, fixed=True) as frame,
    ):
        frame.add(pd.DataFrame({"kind": ["range", "other"]}))


@pytest.mark.parametrize("spill_everything", [True, False])
def test_a_frame_written_a_chunk_at_a_time_is_the_chunks_stacked(
    spill_everything: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0 if spill_everything else 1 << 20)
    rng = np.random.default_rng(11)
    columns = {"id": "Int64", "flag": "boolean", "value": "float64", "row": "int64", "name": "object"}
    chunks = []
    for n in (4, 0, 9, 1, 6):
        ints = rng.integers(0, 5, size=n)
        chunk = pd.DataFrame(
            {
                "id": pd.array(np.where(ints == 0, None, ints), dtype="Int64"),
                "value": rng.random(n),
                "row": ints,
                "name": pd.Series(rng.choice(np.array(["x", "y", None], dtype=object), size=n), dtype=object),
            }
        )
        if n != 9:  # a chunk without a nullable column: missing values there
            chunk["flag"] = pd.array(np.where(ints == 1, None, ints > 2), dtype="boolean")
        chunks.append(chunk)
    with SpilledFrameWriter(columns) as writer:
        for chunk in chunks:
            writer.add(chunk)
        got = writer.finish()
    expected = pd.concat([c.reindex(columns=list(columns)) for c in chunks], ignore_index=True)
    expected = expected.astype({"id": "Int64", "flag": "boolean", "value": "float64", "row": "int64"})
    expected["name"] = expected["name"].astype(object).where(expected["name"].notna(), None)
    # a frame past SPILL_MIN_BYTES is in files whole, its masks and codes too
    assert spill.is_spilled(got["id"].array) == spill_everything
    assert spill.is_spilled(got["id"].array._mask) == spill_everything  # noqa: SLF001
    assert spill.is_spilled(got["flag"].array._mask) == spill_everything  # noqa: SLF001
    got["name"] = pd.Series(text_values(got["name"]), dtype=object)
    pd.testing.assert_frame_equal(got, expected)


@pytest.mark.parametrize("spill_everything", [True, False])
def test_take_rows_consumed_is_iloc(spill_everything: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)  # the frame's columns in files
    frame = pd.DataFrame(
        {
            "id": pd.arrays.IntegerArray(spill.spilled_copy(np.arange(6)), spill.spilled_copy(np.arange(6) == 2)),
            "flag": pd.array([True, None, False, True, False, None], dtype="boolean"),
            "name": pd.Categorical.from_codes(
                spill.spilled_copy(np.array([0, 1, -1, 1, 0, 0], dtype=np.int8)), ["a", "b"]
            ),
            "text": pd.Series(["p", "q", None, "r", "s", "t"], dtype=object),
            "value": spill.spilled_copy(np.linspace(0, 1, 6)),
        },
        copy=False,  # (the arrays themselves, as SpilledFrameWriter gives them)
    )
    order = np.array([5, 0, 2, 2, 4])
    expected = frame.iloc[order].reset_index(drop=True)
    if not spill_everything:  # a small result: taken in memory
        monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 1 << 20)
        frame = pd.DataFrame({name: frame[name].copy(deep=True) for name in frame.columns})
    got = take_rows(frame, order, consume=True)
    pd.testing.assert_frame_equal(got, expected)
    assert spill.is_spilled(got["id"].array._mask) == spill_everything  # noqa: SLF001 (a large result: its mask too)
    assert spill.is_spilled(got["value"].to_numpy()) == spill_everything and list(frame.columns) == []
    assert spill.is_spilled(np.asarray(got["name"].array.codes)) == spill_everything


def _frame_chunks() -> list[pd.DataFrame]:
    return [
        pd.DataFrame(
            {
                "id": pd.array([1, None, 3], dtype="Int64"),
                "name": pd.Series(["x", None, "y"], dtype=object),
                "flag": pd.array([True, None, False], dtype="boolean"),
                "value": [0.5, 1.5, 2.5],
            }
        ),
        pd.DataFrame({"id": pd.array([4], dtype="Int64"), "name": pd.Categorical(["y"]), "value": [3.5]}),  # no flag
    ]


@pytest.mark.parametrize("spill_everything", [True, False])
def test_a_spilled_frame_holds_what_conform_gives(spill_everything: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0 if spill_everything else 1 << 20)
    columns = {"id": "Int64", "name": "object", "flag": "boolean", "value": "float64", "absent": "Int64"}
    with SpilledFrameWriter(columns) as writer:
        for chunk in _frame_chunks():
            writer.add(chunk)
        got = writer.finish()
    expected = conform(pd.concat([conform(c, columns) for c in _frame_chunks()], ignore_index=True), columns)
    materialised = got.copy()
    materialised["name"] = pd.Series(text_values(got["name"]), dtype=object)
    pd.testing.assert_frame_equal(materialised, expected)
    for name in columns:
        array = got[name].array
        data = array.codes if isinstance(array, pd.Categorical) else getattr(array, "_data", array)
        assert spill.is_spilled(data) == spill_everything, name
    assert isinstance(got["name"].dtype, pd.CategoricalDtype) == spill_everything
    # stacked twice (several files of one pass): spilled again, the same values one after the other
    twice = stack_spilled([got, got])
    pd.testing.assert_frame_equal(twice.iloc[4:].reset_index(drop=True), got)
    assert len(twice) == 8


def test_a_mapped_frame_maps_its_byte_wide_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame large enough to map maps its masks and booleans too (1 byte a row: each under the threshold alone).

    4 rows: the 8-byte columns hold 32 bytes, the masks and booleans 4. With the threshold at 32
    bytes, a per-column test kept the byte-wide columns in memory (at 10^6 rows, 1 MB each under
    the 1 MiB default: 36 MB held for a rocprofv3 CSV pass).
    """
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 32)
    columns = {"id": "Int64", "flag": "boolean", "value": "float64"}
    with SpilledFrameWriter(columns) as writer:
        for chunk in _frame_chunks():
            writer.add(chunk)
        got = writer.finish()
    assert len(got) == 4
    for name in ("id", "flag"):
        assert spill.is_spilled(got[name].array._data), name
        assert spill.is_spilled(got[name].array._mask), name
    assert spill.is_spilled(got["value"].to_numpy())
    expected = conform(pd.concat([conform(c, columns) for c in _frame_chunks()], ignore_index=True), columns)
    pd.testing.assert_frame_equal(got, expected)
    # one row fewer than the threshold's 8 bytes a row: the frame stays in memory, every column
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 40)
    with SpilledFrameWriter(columns) as writer:
        for chunk in _frame_chunks():
            writer.add(chunk)
        small = writer.finish()
    assert not any(spill.is_spilled(small[n].array._mask) for n in ("id", "flag"))
    assert not spill.is_spilled(small["value"].to_numpy())


def test_take_rows_keeps_coded_text_and_flags_spilled(spill_all: None) -> None:
    columns = {"id": "Int64", "name": "object", "flag": "boolean", "value": "float64"}
    with SpilledFrameWriter(columns) as writer:
        for chunk in _frame_chunks():
            writer.add(chunk)
        frame = writer.finish()
    rows = np.array([3, 0, 0, 2])
    got = take_rows(frame, rows)
    assert spill.is_spilled(got["name"].array.codes) and spill.is_spilled(got["flag"].array._data)
    assert text_values(got["name"]).tolist() == ["y", "x", "x", "y"]
    assert got["flag"].tolist() == [pd.NA, True, True, False]
    assert got["id"].tolist() == [4, 1, 1, 3]


# ---- the rocprofv3 CSV reader holds its rows on disk -----------------------------------------------


def _rocprofv3_capture(directory: Path) -> Path:
    """Two processes, kernel traces in completion order, counters, ranges, marks and launch calls."""
    for pid in (31, 47):
        kernels = [
            Kernel(i, "ggml:MUL:x-0:1" if i == 2 else f"k{i % 3}", 100 + i, T0 + 100 * i, T0 + 100 * i + 40)
            for i in (3, 1, 2, 5, 4)  # completion order, not enqueue order
        ]
        markers = [rng("ggml:MUL:x-0:1", 90, T0, T0 + 600), mark("ggml-fused:1:MUL+ADD:x-0|y-0", 91, T0 + 5)]
        apis = [api("hipLaunchKernel", 100 + i, T0 + i, T0 + i + 1, pid=pid) for i in range(1, 6)]
        counters = {k.dispatch_id: {"SQ_WAVES": float(k.dispatch_id), "GRBM_COUNT": 2.0} for k in kernels}
        write_pass(directory, pid, kernels=kernels, markers=markers, apis=apis, counters=counters)
    return directory


def test_every_row_of_a_read_pass_is_in_spill_files(spill_all: None, tmp_path: Path) -> None:
    """Each per-row column of the pass: a spill mapping, or codes in one (text: a categorical)."""
    (p,) = read_capture(_rocprofv3_capture(tmp_path / "cap")).passes
    for name in ("dispatches", "counters", "markers", "launches"):
        frame = getattr(p, name)
        assert len(frame), name
        for column in frame.columns:
            array = frame[column].array
            if isinstance(array, pd.Categorical):
                parts = [array.codes]
            elif isinstance(array, pd.arrays.IntegerArray | pd.arrays.BooleanArray):
                parts = [array._data, array._mask]
            else:
                parts = [array]
            assert all(spill.is_spilled(part) for part in parts), (name, column, type(array))
    # the values themselves (by hand): enqueue order per process, names through their codes
    d = p.dispatches
    assert d["process_id"].tolist() == [31] * 5 + [47] * 5
    assert d["dispatch_id"].tolist() == [1, 2, 3, 4, 5] * 2
    assert text_values(d["kernel_name"]).tolist() == ["k1", "ggml:MUL:x-0:1", "k0", "k1", "k2"] * 2
    assert text_values(d["region"]).tolist() == [None, "ggml:MUL:x-0:1", None, None, None] * 2
    assert d["timestamps_exact"].tolist() == [True] * 10
    assert sorted(zip(p.counters["row"].tolist(), text_values(p.counters["counter_name"]), strict=True))[:2] == [
        (0, "GRBM_COUNT"),
        (0, "SQ_WAVES"),
    ]
    assert text_values(p.markers["kind"]).tolist() == ["range", "mark"] * 2
    assert text_values(p.launches["api_name"]).tolist() == ["hipLaunchKernel"] * 10


def test_a_pass_read_with_every_column_spilled_equals_the_one_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = _rocprofv3_capture(tmp_path / "cap")
    (memory,) = read_capture(capture).passes
    monkeypatch.setattr(spill, "SPILL_MIN_BYTES", 0)
    (spilled,) = read_capture(capture).passes
    for name in ("dispatches", "counters", "markers", "launches"):
        got = getattr(spilled, name).copy()
        for column in got.columns:  # text as codes: its values (None where missing) to compare
            if isinstance(got[column].dtype, pd.CategoricalDtype) and getattr(memory, name)[column].dtype == object:
                got[column] = pd.Series(text_values(got[column]), dtype=object)
        pd.testing.assert_frame_equal(got, getattr(memory, name), obj=name)


def test_per_distinct_calls_once_per_distinct_value() -> None:
    calls: list[object] = []

    def fused(text: object) -> bool:
        calls.append(text)
        return isinstance(text, str) and "+" in text

    values = ["ADD", "RMS_NORM+MUL", None, "ADD", float("nan"), "RMS_NORM+MUL", "ADD"]
    got = per_distinct(pd.Series(values, dtype=object), fused, bool)
    assert got.dtype == bool
    assert got.tolist() == [False, True, False, False, False, True, False]
    assert calls[:2] == ["ADD", "RMS_NORM+MUL"] and len(calls) == 3  # None and NaN: one missing value
    # sequences stay one entry per value
    pairs = per_distinct(np.array(["a-1", "b-2", "a-1"], dtype=object), lambda t: tuple(t.split("-")))
    assert pairs.dtype == object and pairs.tolist() == [("a", "1"), ("b", "2"), ("a", "1")]
    assert per_distinct(np.array([], dtype=object), len, np.int64).tolist() == []
