"""The committed sampled capture of a 28-layer model (examples/h200-sampled): what a counter sample measured.

`rocroof collect --sample decode=1` of `llama-completion -n 16` on a Qwen3-0.6B-shaped model with the
Q4_K_M type mix (tools/models preset dense-qwen3-0.6b) on the H200: every kernel timed by nsys, the
kernels of one decoded token counted by ncu. Expected values come from the recorded files themselves
(sqlite3 on the nsys export, csv on the ncu export, json on the op-metadata sidecar) and from ggml's
block sizes (gguf.constants.GGML_QUANT_SIZES), not from rocroof.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import sqlite3
from pathlib import Path

import pytest

from rocroof.capture.readers import read_capture
from rocroof.ingest.pipeline import build_run
from rocroof.report.tables import build_report, render
from rocroof.store import Store

gguf = pytest.importorskip("gguf")

CAPTURE = Path(__file__).resolve().parent.parent / "examples" / "h200-sampled" / "dense28-decode-sample"
LAYERS = 28
GENERATED = 16  # -n 16: the prompt's ubatch, then 15 decoded tokens after the first


def _ncu_rows() -> tuple[list[str], list[str], list[list[str]]]:
    text = gzip.decompress((CAPTURE / "ncu" / "ncu_raw.csv.gz").read_bytes()).decode()
    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], rows[1], rows[2:]


def _innermost_ggml(stack: str) -> tuple[str, int] | None:
    found = re.findall(r'"<default domain>:ggml:([A-Z_]+):[^"]*?:(\d+):', stack)
    return (found[-1][0], int(found[-1][1])) if found else None


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, int]:
    db = tmp_path_factory.mktemp("sampled") / "r.db"
    run_id = Store(db).write_run(build_run(read_capture(CAPTURE)))
    return Store(db, read_only=True), run_id


def test_every_kernel_after_warm_up_is_timed_and_attributed(stored: tuple[Store, int]) -> None:
    ro, run_id = stored
    con = sqlite3.connect(":memory:")
    con.deserialize(gzip.decompress((CAPTURE / "trace" / "nsys.sqlite.gz").read_bytes()))
    (reset,) = con.execute(
        "SELECT MAX(n.start) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
        "WHERE COALESCE(n.text, s.value) = 'ggml reset'"
    ).fetchone()
    (after,) = con.execute(
        "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId WHERE r.start > ?",
        (reset,),
    ).fetchone()
    row = ro.query(
        "SELECT COUNT(*) AS n, SUM(duration_ns) AS t, SUM(CASE WHEN op IS NOT NULL THEN duration_ns END) AS ta, "
        f"COUNT(dram_read_bytes) AS measured FROM dispatch_dram WHERE run_id = {run_id}"
    ).iloc[0]
    assert row["n"] == after
    assert row["ta"] / row["t"] >= 0.999
    _, _, ncu = _ncu_rows()
    assert row["measured"] == len(ncu)  # every kernel ncu counted is joined to its timed dispatch
    # the counted kernels are one decoded token's: 15 such tokens follow the prompt's ubatch
    assert (row["n"] - len(ncu) * (GENERATED - 1)) > 0


def test_decode_matmuls_read_their_weights_once(stored: tuple[Store, int]) -> None:
    header, units, rows = _ncu_rows()
    stack = next(i for i, h in enumerate(header) if h.startswith("thread Domain:Push/Pop_Range"))
    col = header.index("dram__bytes_read.sum")
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}[units[col]]
    measured, invocations = 0.0, set()
    for r in rows:
        op = _innermost_ggml(r[stack])
        if op and op[0] == "MUL_MAT":
            measured += float(r[col].replace(",", "")) * scale
            invocations.add(op[1])
    meta = json.loads(gzip.decompress((CAPTURE / "trace" / "ggml-op-meta.json.gz").read_bytes()))
    sizes = {t.name.lower(): s for t, s in gguf.constants.GGML_QUANT_SIZES.items()}
    weights = 0
    for op in meta["rows"]:
        if op["invocation"] in invocations:
            for name, qtype, ne in zip(op["in_names"], op["in_types"], op["in_ne"], strict=True):
                if name.endswith(".weight"):
                    block, nbytes = sizes[qtype.lower()]
                    weights += ne[0] * ne[1] * ne[2] * ne[3] // block * nbytes
    # one token: 7 matrices a layer (q, k, v, o, gate + up fused, down) and the tied output matrix
    assert len(invocations) == 6 * LAYERS + 1
    assert measured / weights == pytest.approx(1.0, abs=0.05)
    ro, run_id = stored
    rep = build_report(ro, run_id, by="op")
    mm = rep.rows.set_index("op").loc["MUL_MAT"]
    assert mm["bytes_basis"] == "sampled"
    assert mm["measured_read_bytes"] == pytest.approx(measured, rel=1e-9)
    assert mm["measured_over_model"] == pytest.approx(1.0, abs=0.05)
    assert "DRAM bytes measured on 1 of 16 graph evaluations: decode 1" in render(rep, "table", width=200)


# ---- the 24-layer MoE (examples/h200-sampled/moe24-decode-sample) ------------------------------------

MOE = CAPTURE.parent / "moe24-decode-sample"
MOE_LAYERS = 24


def test_moe_expert_matmuls_read_the_experts_they_used(tmp_path: Path) -> None:
    """Each counted MUL_MAT_ID reads experts_used experts of each of its weights, once.

    ``rocroof collect`` (default settings) of the MoE preset (32 experts, top-8, Q4_K gate/up, Q6_K down):
    the sample is one decoded token. Per invocation, the DRAM bytes ncu read are summed from its CSV,
    the experts used and the weights' types and shapes come from the op-metadata sidecar, and an
    expert's bytes from ggml's block sizes: ne0 x ne1 / block x block bytes.
    """
    text = gzip.decompress((MOE / "ncu" / "ncu_raw.csv.gz").read_bytes()).decode()
    header, units, *rows = list(csv.reader(io.StringIO(text)))
    stack = next(i for i, h in enumerate(header) if h.startswith("thread Domain:Push/Pop_Range"))
    col = header.index("dram__bytes_read.sum")
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}[units[col]]
    measured: dict[int, float] = {}
    for r in rows:
        op = _innermost_ggml(r[stack])
        if op and op[0] == "MUL_MAT_ID":
            measured[op[1]] = measured.get(op[1], 0.0) + float(r[col].replace(",", "")) * scale
    meta = {
        r["invocation"]: r
        for r in json.loads(gzip.decompress((MOE / "trace" / "ggml-op-meta.json.gz").read_bytes()))["rows"]
    }
    sizes = {t.name.lower(): s for t, s in gguf.constants.GGML_QUANT_SIZES.items()}
    # one token, each layer: the fused gate+up (two weights) and down
    assert len(measured) == 2 * MOE_LAYERS
    for invocation, read in measured.items():
        op = meta[invocation]
        used = sum(1 for n in op["tokens_per_expert"] if n)
        assert op["experts_used"] == used == 8  # one token routes to top-k = 8 distinct experts
        expert = 0
        for name, qtype, ne in zip(op["in_names"], op["in_types"], op["in_ne"], strict=True):
            if name.endswith(".weight"):
                block, nbytes = sizes[qtype.lower()]
                expert += ne[0] * ne[1] // block * nbytes
        assert read / (used * expert) == pytest.approx(1.0, abs=0.05), op["name"]
    db = tmp_path / "moe.db"
    store = Store(db)
    run_id = store.write_run(build_run(read_capture(MOE)))
    rep = build_report(Store(db, read_only=True), run_id, by="op")
    row = rep.rows.set_index("op").loc["MUL_MAT_ID"]
    assert row["bytes_basis"] == "sampled"
    assert row["measured_read_bytes"] == pytest.approx(sum(measured.values()), rel=1e-9)
