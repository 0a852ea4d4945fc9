"""Launch overhead per graph evaluation and MoE routing load: planted inputs, values worked by hand."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from rocroof.analysis.moe import expert_loads, layer_expert_tokens, layer_skew, token_counts
from rocroof.analysis.timeline import busy_in_window, evaluation_timeline, host_gaps, merge_intervals


def test_merge_intervals_joins_overlapping_and_touching_ones() -> None:
    s, e = merge_intervals(np.array([20, 0, 5, 10, 40]), np.array([30, 10, 8, 12, 41]))
    # [0,10) swallows [5,8); [10,12) touches it; [20,30) and [40,41) stand alone
    assert s.tolist() == [0, 20, 40]
    assert e.tolist() == [12, 30, 41]
    assert busy_in_window(s, e, 5, 25) == (12 - 5) + (25 - 20)
    assert busy_in_window(s, e, 12, 20) == 0
    assert busy_in_window(s, e, 100, 50) == 0


def _planted() -> pd.DataFrame:
    # evaluation 0: A and B overlap on two streams, then an unattributed kernel U, then C;
    # evaluation 1: D and E with a gap. Launch times are host ns of each kernel's launch call.
    rows = [
        # start, end, launch, op, evaluation
        (100, 200, 90, 0, 0),  # A
        (150, 260, 95, 0, 0),  # B (overlaps A by 50)
        (300, 330, 99, None, None),  # U: no op, but the GPU is busy
        (400, 500, 120, 1, 0),  # C
        (1000, 1100, 990, 2, 1),  # D
        (1300, 1400, 1010, 3, 1),  # E
    ]
    df = pd.DataFrame(rows, columns=["start_ns", "end_ns", "launch_ns", "op_index", "evaluation"])
    return df.astype({"op_index": "Int64", "evaluation": "Int64"})


def test_idle_share_counts_overlap_once_and_unattributed_kernels_as_busy() -> None:
    ev = evaluation_timeline(_planted()).set_index("evaluation")
    # evaluation 0: window [100, 500) = 400 ns; busy = [100,260) 160 + [300,330) 30 + [400,500) 100 = 290
    assert ev.loc[0, "wall_ns"] == 400
    assert ev.loc[0, "busy_ns"] == 290
    assert ev.loc[0, "idle_ns"] == 110
    assert ev.loc[0, "idle_share"] == pytest.approx(110 / 400)
    assert ev.loc[0, "kernel_sum_ns"] == 100 + 110 + 100  # its own kernels, the overlap twice
    assert ev.loc[0, "ops"] == 2 and ev.loc[0, "dispatches"] == 3
    # host: op 0 first launched at 90, op 1 at 120
    assert ev.loc[0, "host_span_ns"] == 30 and ev.loc[0, "host_ns_per_op"] == 30
    # evaluation 1: [1000, 1400) = 400, busy 200
    assert ev.loc[1, "busy_ns"] == 200 and ev.loc[1, "idle_share"] == pytest.approx(0.5)
    assert ev.loc[1, "host_ns_per_op"] == 20


def test_host_gaps_are_per_evaluation() -> None:
    gaps = host_gaps(_planted())
    assert gaps[["op_index", "host_gap_ns"]].to_numpy().tolist() == [[0, 30], [2, 20]]


def test_no_kernels_no_rows() -> None:
    empty = _planted().iloc[0:0]
    assert len(evaluation_timeline(empty)) == 0
    assert len(host_gaps(empty)) == 0


def test_planted_skew_gives_the_expected_factor() -> None:
    # 6 tokens, top-2, over 4 experts: 12 routed; the most even routing gives 3 each; one expert took 6
    ops = pd.DataFrame(
        {
            "op_index": [0, 1, 2],
            "layer": [0, 0, 1],
            "evaluation": [0, 0, 0],
            "top_k": [2, 2, 2],
            "tokens_per_expert": [json.dumps([6, 4, 2, 0]), json.dumps([6, 4, 2, 0]), json.dumps([3, 3, 3, 3])],
            "dram_bytes": [1200.0, None, 600.0],
        }
    )
    loads = expert_loads(ops).set_index("op_index")
    assert loads.loc[0, "routed"] == 12 and loads.loc[0, "experts_used"] == 3
    assert loads.loc[0, "max_tokens"] == 6 and loads.loc[0, "mean_tokens"] == 3
    assert loads.loc[0, "imbalance"] == pytest.approx(2.0)
    assert loads.loc[0, "bytes_per_routed_token"] == pytest.approx(100.0)
    assert np.isnan(loads.loc[1, "bytes_per_routed_token"])
    assert loads.loc[2, "imbalance"] == pytest.approx(1.0)
    per_layer = layer_skew(expert_loads(ops)).set_index("layer")
    assert per_layer.loc[0, "max_imbalance"] == pytest.approx(2.0) and per_layer.loc[0, "invocations"] == 2
    assert per_layer.loc[1, "mean_imbalance"] == pytest.approx(1.0)
    # the heat map takes each layer's routing once per evaluation (gate/up/down share it)
    heat = layer_expert_tokens(ops)
    assert heat.loc[0].tolist() == [6, 4, 2, 0] and heat.loc[1].tolist() == [3, 3, 3, 3]


def test_one_decoded_token_is_balanced() -> None:
    # top-8 of 32 experts, one token: 8 experts get 1 token; no routing could do better
    counts = [1] * 8 + [0] * 24
    loads = expert_loads(pd.DataFrame({"op_index": [0], "top_k": [8], "tokens_per_expert": [json.dumps(counts)]}))
    assert loads.loc[0, "imbalance"] == pytest.approx(1.0)
    assert loads.loc[0, "experts_used"] == 8


@pytest.mark.parametrize("text", [None, "", "{}", "[]", "[1, -2]", "[1.5]", "[true]", "not json", float("nan")])
def test_unreadable_counts_are_left_out(text: object) -> None:
    assert token_counts(text) is None
