"""The per-op roofline sums from invocations grouped by shape in SQL (views.op_shape_sums) against the
per-invocation reference (analysis.roofline.per_op_sums + per_op_compute_peaks over op_roofline rows).

The report of a run whose DRAM bytes are not all known, or that has a byte/FLOP model, needs sums
over every op invocation; reading ~8x10^5 invocation rows took 13.6 s and 640 MB at 10^6 dispatches
(benchmarks/RESULTS.md, 2026-12-05), so they are summed per (op, quant, m, n_experts) in SQL. These
tests hold the grouped path to the row-by-row one on recorded H200 runs (a sampled MoE run with
mixed compute peaks and partly known bytes, a fully measured dense run), with model notes and
unknown model values added to exercise the first-note and strict-sum rules.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from rocroof.analysis.roofline import compute_peaks, per_op_compute_peaks, per_op_from_shapes, per_op_sums
from rocroof.capture.readers import read_capture
from rocroof.ingest.pipeline import build_run
from rocroof.report.tables import _first_notes
from rocroof.store import Store, schema, views

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CEILINGS = {"fp16_matrix_tflops": 989.0, "fp32_vector_tflops": 67.0}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, list[int]]:
    db = tmp_path_factory.mktemp("shapes") / "r.db"
    store = Store(db)
    ids = [
        store.write_run(build_run(read_capture(EXAMPLES / "h200-sampled" / "moe24-decode-sample"))),
        store.write_run(build_run(read_capture(EXAMPLES / "h200-counters" / "dense28-prefill-ops"))),
    ]
    with store.engine.begin() as conn:
        # notes on a few invocations (the first one in op_index order must be taken), and model
        # values made unknown on others (a strict sum over them is NaN)
        conn.execute(
            sa.text("UPDATE op_model SET model_note = 'note ' || op_index WHERE op_index % 97 = 5 AND run_id = :r"),
            {"r": ids[0]},
        )
        conn.execute(
            sa.text("UPDATE op_model SET flops = NULL WHERE op_index % 211 = 3 AND run_id = :r"), {"r": ids[1]}
        )
        conn.execute(
            sa.text("UPDATE op_model SET model_read_bytes = NULL WHERE op_index % 53 = 7 AND run_id = :r"),
            {"r": ids[1]},
        )
    return store, ids


def _reference(store: Store, run_id: int, sampled: bool) -> pd.DataFrame:
    """per_op_sums + per_op_compute_peaks over the run's op_roofline rows, one invocation at a time."""
    inv = store.frame(sa.text("SELECT * FROM op_roofline WHERE run_id = :r ORDER BY op_index"), {"r": run_id})
    c = schema.op_invocation.c
    shapes = store.frame(sa.select(c.op_index, c.quant, c.m, c.n_experts).where(c.run_id == run_id))
    with_shapes = inv.merge(shapes, on="op_index", how="left")
    with_shapes = with_shapes.join(compute_peaks(with_shapes, "sm_90", CEILINGS))
    return per_op_sums(inv, sampled=sampled).merge(per_op_compute_peaks(with_shapes), on="op", how="left")


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        x, y = float(a), float(b)  # type: ignore[arg-type]
        return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-12)
    return a == b


@pytest.mark.parametrize("sampled", [False, True])
@pytest.mark.parametrize("which", [0, 1])
def test_grouped_sums_equal_the_invocation_by_invocation_ones(
    runs: tuple[Store, list[int]], which: int, sampled: bool
) -> None:
    store, ids = runs
    run_id = ids[which]
    expected = _reference(store, run_id, sampled).set_index("op").sort_index()
    groups = store.frame(views.op_shape_sums(run_id))
    got = per_op_from_shapes(groups, _first_notes(store, run_id, groups), "sm_90", CEILINGS, sampled=sampled)
    got = got.set_index("op").sort_index()
    assert list(got.index) == list(expected.index)
    assert list(got.columns) == list(expected.columns)
    assert len(groups) < len(store.frame(sa.text("SELECT op_index FROM op_roofline WHERE run_id = :r"), {"r": run_id}))
    differ = [
        (op, column, expected.at[op, column], got.at[op, column])
        for op in expected.index
        for column in expected.columns
        if not _same(expected.at[op, column], got.at[op, column])
    ]
    assert not differ


def test_the_cases_the_comparison_must_cover_are_there(runs: tuple[Store, list[int]]) -> None:
    """The runs above hold what the grouped rules differ on: mixed peaks, partly measured ops, notes, NaN sums."""
    store, ids = runs
    moe = _reference(store, ids[0], sampled=True).set_index("op")
    assert moe["compute_peak"].str.startswith("mixed: ").any()
    assert set(moe["bytes_basis"].dropna()) >= {"sampled"}
    assert moe["model_note"].str.startswith("note ").any()
    dense = _reference(store, ids[1], sampled=False).set_index("op")
    assert dense["flops"].isna().any() and dense["flops"].notna().any()
    assert dense["model_read_bytes"].isna().any()
