"""The fork's JSON without markers: a marker-free Nsight Compute pass attributed by kernel sequence.

From the recorded H200 capture examples/h200/dense500m-decode: fork-format rows (GGML_ROOFLINE_OUT:
the op metadata rows plus each invocation's kernels in launch order, names and GPU times) are built
from the capture's sidecar and its Nsight Systems pass; the capture's Nsight Compute pass — a
separate run of the command — has its NVTX column emptied. Ingesting that pass with the fork's JSON
attached must give back the invocation the NVTX stack named for at least 99.9% of its kernels, also
with kernels dropped and others inserted, and refuse a shuffled pass.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import re
import sqlite3
from pathlib import Path

import pytest

from rocroof.capture.readers import read_capture
from rocroof.errors import InputError
from rocroof.ingest.align import align, kernel_family
from rocroof.ingest.pipeline import build_run
from rocroof.store import Store

CAPTURE = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense500m-decode"
STACK = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"


@pytest.fixture(scope="module")
def fork_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fork-format rows: the sidecar's rows, each with its kernels (timing pass order) and no 'source'."""
    tmp = tmp_path_factory.mktemp("fork")
    db = tmp / "marked.db"
    run_id = Store(db).write_run(build_run(read_capture(CAPTURE)))
    con = sqlite3.connect(db)
    kernels: dict[int, list[dict[str, object]]] = {}
    for inv, name, ns in con.execute(
        "SELECT i.invocation, k.kernel_name, d.duration_ns FROM dispatch_record d "
        "JOIN pass p ON p.run_id = d.run_id AND p.pass_index = d.pass_index AND p.is_timing_pass "
        "JOIN op_invocation i ON i.run_id = d.run_id AND i.op_index = d.op_index "
        "JOIN kernel_symbol k ON k.run_id = d.run_id AND k.kernel_index = d.kernel_index "
        "WHERE d.run_id = ? ORDER BY d.start_ns",
        (run_id,),
    ):
        kernels.setdefault(int(inv), []).append({"name": name, "gpu_time_us": ns / 1e3})
    meta = json.loads(gzip.decompress((CAPTURE / "trace" / "ggml-op-meta.json.gz").read_bytes()))
    meta.pop("source")
    for row in meta["rows"]:
        row["kernels"] = kernels.get(int(row["invocation"]), [])
    path = tmp / "roofline.json"
    path.write_text(json.dumps(meta))
    return path


def _ncu_rows() -> tuple[list[str], list[str], list[list[str]]]:
    rows = list(csv.reader(io.StringIO(gzip.decompress((CAPTURE / "ncu" / "ncu_raw.csv.gz").read_bytes()).decode())))
    return rows[0], rows[1], rows[2:]


def _truth(row: list[str], head: list[str], listed: set[int]) -> int | None:
    """The invocation the NVTX stack names, if the fork's rows list it (the warm-up's are not)."""
    inv = int(re.findall(r'"<default domain>:ggml:[A-Z_]+:[^"]*?:(\d+):', row[head.index(STACK)])[-1])
    return inv if inv in listed else None


def _listed(fork: Path) -> set[int]:
    return {int(r["invocation"]) for r in json.loads(fork.read_text())["rows"] if r["kernels"]}


def _marker_free_capture(tmp: Path, rows: list[list[str]], head: list[str], units: list[str]) -> Path:
    cap = tmp / "cap"
    (cap / "ncu").mkdir(parents=True)
    col = head.index(STACK)
    stripped = [[("" if j == col else v) for j, v in enumerate(r)] for r in rows]
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([head, units, *stripped])
    (cap / "ncu" / "ncu_raw.csv").write_text(buf.getvalue())
    return cap


def _ingest(cap: Path, fork: Path, tmp: Path) -> tuple[Path, int]:
    db = tmp / "aligned.db"
    return db, Store(db).write_run(build_run(read_capture(cap, attachments=[fork])))


def _recovered(db: Path, run_id: int, truth: list[int | None]) -> float:
    """Share of the counter pass's kernels attributed to the invocation the NVTX stack named."""
    con = sqlite3.connect(db)
    got = [
        inv
        for (inv,) in con.execute(
            "SELECT i.invocation FROM dispatch_record d JOIN pass p ON p.run_id = d.run_id "
            "AND p.pass_index = d.pass_index AND p.kind = 'counter' "
            "LEFT JOIN op_invocation i ON i.run_id = d.run_id AND i.op_index = d.op_index "
            "WHERE d.run_id = ? ORDER BY d.ordinal",
            (run_id,),
        )
    ]
    assert len(got) == len(truth)
    return sum(g == t for g, t in zip(got, truth, strict=True)) / len(truth)


def test_a_marker_free_ncu_pass_gets_its_invocations_back(fork_json: Path, tmp_path: Path) -> None:
    head, units, rows = _ncu_rows()
    cap = _marker_free_capture(tmp_path, rows, head, units)
    db, run_id = _ingest(cap, fork_json, tmp_path)
    listed = _listed(fork_json)
    truth = [_truth(r, head, listed) for r in rows]
    # the Nsight Compute run profiled llama-completion's warm-up evaluation too: 196 kernels before
    # the 'ggml reset' mark, whose invocations the fork's rows (like the sidecar) do not list
    assert sum(t is None for t in truth) == 196
    assert _recovered(db, run_id, truth) >= 0.999
    con = sqlite3.connect(db)
    notes = [m for (m,) in con.execute("SELECT message FROM run_note WHERE code = 'aligned-to-fork'")]
    assert len(notes) == 1 and "784 of its 980 kernels match the fork's 784" in notes[0]
    # the counters reach the fork's timing pass: DRAM bytes per op invocation as in the marked run
    measured = con.execute("SELECT COUNT(*) FROM dispatch_dram WHERE dram_bytes IS NOT NULL").fetchone()[0]
    assert measured == len(rows) - 196  # the warm-up's counters have no kernel of the fork to join


def test_dropped_and_inserted_kernels_are_tolerated(fork_json: Path, tmp_path: Path) -> None:
    head, units, rows = _ncu_rows()
    rnd = random.Random(7)
    listed = _listed(fork_json)
    kept = [r for r in rows if rnd.random() > 0.01]  # ~1% of the kernels lost by the profiler
    name = head.index("Kernel Name")
    mixed: list[list[str]] = []
    truth: list[int | None] = []
    ident = head.index("ID")
    for r in kept:
        if rnd.random() < 0.01:  # a memset-like kernel the fork does not list, with a fresh ID
            extra = list(r)
            extra[name] = "void fill_kernel<float>(float *, float, unsigned long)"
            extra[ident] = str(100_000 + len(mixed))
            extra[head.index(STACK)] = r[head.index(STACK)]
            mixed.append(extra)
            truth.append(None)
        mixed.append(r)
        truth.append(_truth(r, head, listed))
    assert len(kept) < len(rows) and len(mixed) > len(kept)
    cap = _marker_free_capture(tmp_path, mixed, head, units)
    db, run_id = _ingest(cap, fork_json, tmp_path)
    assert _recovered(db, run_id, truth) >= 0.999


def test_a_shuffled_pass_is_refused(fork_json: Path, tmp_path: Path) -> None:
    head, units, rows = _ncu_rows()
    shuffled = list(rows)
    random.Random(3).shuffle(shuffled)
    cap = _marker_free_capture(tmp_path, shuffled, head, units)
    with pytest.raises(InputError, match="kernel sequence") as err:
        build_run(read_capture(cap, attachments=[fork_json]))
    assert str(err.value).startswith(f"--attach {fork_json}: ncu: ") and "another run" in str(err.value)


def test_the_fork_s_json_beside_a_pass_it_does_not_align_with_is_left_out(fork_json: Path, tmp_path: Path) -> None:
    # as op metadata without kernels: named with --attach it is refused (above), found beside the
    # capture the run is stored without it, with a warning
    head, units, rows = _ncu_rows()
    shuffled = list(rows)
    random.Random(3).shuffle(shuffled)
    cap = _marker_free_capture(tmp_path, shuffled, head, units)
    beside = cap / "roofline.json"
    beside.write_text(fork_json.read_text())
    db = tmp_path / "left-out.db"
    run_id = Store(db).write_run(build_run(read_capture(cap)))
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM op_invocation WHERE run_id = ?", (run_id,)).fetchone()[0] == 0
    passes = con.execute("SELECT label, dispatch_count FROM pass WHERE run_id = ?", (run_id,)).fetchall()
    assert passes == [("ncu", len(rows))]  # the capture's own pass only, not the fork's kernels
    notes = con.execute("SELECT code, message FROM run_note WHERE run_id = ? AND severity = 'warning'", (run_id,))
    (code, message), *more = notes.fetchall()
    assert code == "metadata-unmatched" and not more
    assert message.startswith(f"{beside} left out") and "kernel sequence" in message


def test_a_window_of_repeated_evaluations_is_refused_not_guessed() -> None:
    token = ["rms_norm_f32", "quantize_q8_1", "mul_mat_vec_q", "add_f32"]
    fork = token * 16
    assert align(fork, token * 16).acceptable
    window = align(fork, token)  # one token of sixteen: it would fit any of them
    assert not window.acceptable and window.share_of_reference < 0.1
    # a warm-up evaluation before the fork's rows stays the unmatched one, not the last
    warm = align(fork, token + fork)
    assert warm.acceptable and (warm.partner[: len(token)] == -1).all()
    assert warm.partner[len(token) :].tolist() == list(range(len(fork)))


def test_kernel_family_ignores_how_profilers_print_templates() -> None:
    nsys = "void rms_norm_f32<(int)1024, (bool)1, (bool)0>(const float *, float *, int)"
    ncu = "void rms_norm_f32<1024, 1, 0>(const float *, float *, int)"
    assert kernel_family(nsys) == kernel_family(ncu) == "rms_norm_f32"
    assert kernel_family("k_copy") == "k_copy" and kernel_family(None) == ""
