"""``rocroof fleet`` and ``fleet diff`` on the recorded H200 sweep (examples/h200-sweep, replayed).

Expected values: GPU times from the Nsight Systems exports (tests.test_examples_sweep.nsys_graph,
sqlite3 on the raw files), op times and roof shares from the stored rows with SQL, the ops fusion
removes from the fused groups' op lists of the fusion-on runs.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.cli import cli
from rocroof.errors import InputError
from rocroof.report.fleet import fleet_diff, fleet_view, select_runs
from rocroof.store import Store
from rocroof.sweep.run import run_sweep
from rocroof.sweep.spec import load_sweep

from .test_examples_sweep import DECODE_TOKENS, ROOT, SWEEP, nsys_graph


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fleet") / "s.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)  # the sweep file's capture paths are relative to the repository root
        outcome = run_sweep(load_sweep(SWEEP), db=str(path))
    assert all(r.status == "done" for r in outcome.results)
    return path


def test_fleet_view_sums_the_stored_op_times(db: Path) -> None:
    store = Store(db, read_only=True)
    runs = select_runs(store, "replay-h200-sweep")
    assert len(runs) == 15
    view = fleet_view(store, runs).set_index("op_list")
    con = sqlite3.connect(db)
    total = con.execute(
        "SELECT SUM(d.duration_ns) FROM dispatch_record d JOIN pass p ON p.run_id = d.run_id "
        "AND p.pass_index = d.pass_index WHERE p.is_timing_pass AND d.op_index IS NOT NULL"
    ).fetchone()[0]
    rows = con.execute(
        "SELECT i.op_list, COUNT(DISTINCT d.run_id), SUM(d.duration_ns) FROM dispatch_record d "
        "JOIN pass p ON p.run_id = d.run_id AND p.pass_index = d.pass_index "
        "JOIN op_invocation i ON i.run_id = d.run_id AND i.op_index = d.op_index WHERE p.is_timing_pass "
        "GROUP BY i.op_list"
    ).fetchall()
    assert len(rows) == len(view)
    for op_list, n_runs, ns in rows:
        assert view.loc[op_list, "runs"] == n_runs
        assert view.loc[op_list, "duration_ns"] == pytest.approx(ns)
        assert view.loc[op_list, "share_of_fleet_pct"] == pytest.approx(100 * ns / total)
    roof = con.execute(
        "SELECT op_list, SUM(time_at_roof_ns), SUM(duration_ns) FROM op_verdict WHERE time_at_roof_ns IS NOT NULL "
        "GROUP BY op_list"
    ).fetchall()
    for op_list, at_roof, measured in roof:
        assert view.loc[op_list, "pct_of_roof"] == pytest.approx(100 * at_roof / measured)
    # most of this fleet's time is in the matmuls
    assert view.index[0] == "MUL_MAT"


def test_fusion_off_regresses_decode_by_the_known_figures(db: Path) -> None:
    store = Store(db, read_only=True)
    d = fleet_diff(store, select_runs(store, "env=fusion"), select_runs(store, "env=no-fusion"))
    assert {"model", "phase", "take"} <= set(d.keys) and "env" not in d.keys
    pairs = d.pairs.set_index("pair")
    for model, expect in (("dense-tiny", 19), ("moe-tiny", 41)):
        on, off = f"{model}-decode-fusion-r1", f"{model}-decode-no-fusion-r1"
        (_, ns_on), (_, ns_off) = nsys_graph(on), nsys_graph(off)
        got = pairs.loc[f"model={model} phase=decode take=1"]
        assert got["us_per_eval_a"] == pytest.approx(ns_on / DECODE_TOKENS / 1e3, rel=1e-6)
        assert got["delta_pct"] == pytest.approx(100 * (ns_off / ns_on - 1), abs=1e-6)
        assert round(got["delta_pct"]) == expect  # dense +19%, MoE +41% (examples/h200-sweep)
    # the point the recording stopped in has no partner
    assert d.unpaired_a == ["env=fusion model=moe-tiny phase=decode take=2"] and d.unpaired_b == []
    # the ops at the top are those fusion folds into groups: the non-head ops of the fusion runs' groups
    con = sqlite3.connect(db)
    fusion_runs = ",".join(map(str, select_runs(store, "env=fusion")))
    folded = {
        op
        for (op_list,) in con.execute(f"SELECT DISTINCT op_list FROM op_invocation WHERE run_id IN ({fusion_runs})")
        for op in op_list.split("+")[1:]
    }
    top = d.ops.head(10)
    assert set(top["op"]) <= folded and (top["delta_us"] > 0).all()
    assert (top["only_b"] > 0).all()  # they run as nodes of their own without fusion


def test_repeats_show_no_regression_and_ci_exit_codes(db: Path) -> None:
    store = Store(db, read_only=True)
    d = fleet_diff(store, select_runs(store, "take=1"), select_runs(store, "take=2"))
    assert len(d.pairs) == 7 and (d.pairs["delta_pct"].abs() < 5).all()
    assert not (d.ops["verdict"] == "slower").any()
    runner = CliRunner()
    ok = runner.invoke(cli, ["fleet", "diff", "take=1", "take=2", "--db", str(db), "--fail-on-regression", "5"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(
        cli, ["fleet", "diff", "env=fusion", "env=no-fusion", "--db", str(db), "--fail-on-regression", "5"]
    )
    assert bad.exit_code == 1 and "+41.0" in bad.output
    # the CI log says why: each pair above the threshold, and the runs left uncompared
    assert (
        "regression: model=moe-tiny phase=decode take=1 (runs" in bad.output
        and "above --fail-on-regression 5%" in bad.output
    )
    assert "warning: 1 run(s) only in A were not compared" in bad.output
    md = runner.invoke(cli, ["fleet", "diff", "env=fusion", "env=no-fusion", "--db", str(db), "--format", "markdown"])
    blocks = [b for b in md.output.split("\n\n") if b.startswith("|")]
    assert len(blocks) == 3 and all(all(line.startswith("|") for line in b.strip().splitlines()) for b in blocks)
    doc = json.loads(
        runner.invoke(cli, ["fleet", "diff", "take=1", "take=2", "--db", str(db), "--format", "json"]).output
    )
    assert len(doc["pairs"]) == 7 and doc["unpaired_a"] == ["env=no-fusion model=moe-tiny phase=decode take=1"]
    view = runner.invoke(cli, ["fleet", "--db", str(db), "--sweep", "replay-h200-sweep", "--format", "markdown"])
    assert view.exit_code == 0 and "| MUL_MAT |" in view.output


def test_fleet_mistakes_are_one_line(db: Path) -> None:
    runner = CliRunner()
    twice = runner.invoke(cli, ["fleet", "--db", str(db), "--label", "env=fusion", "--label", "env=no-fusion"])
    assert twice.exit_code != 0 and "env is already 'fusion'" in twice.output
    none = runner.invoke(cli, ["fleet", "diff", "env=nothing", "env=fusion", "--db", str(db)])
    assert none.exit_code != 0 and "no stored run has the labels env=nothing" in none.output
    same = runner.invoke(cli, ["fleet", "diff", "model=dense-tiny", "phase=decode", "--db", str(db)])
    assert same.exit_code != 0 and "on both sides" in same.output and "Traceback" not in same.output


def test_fleet_heat_map_holds_each_runs_op_shares(db: Path, tmp_path: Path) -> None:
    from rocroof.report.fleet import fleet_matrix, labels_of, run_names

    store = Store(db, read_only=True)
    runs = select_runs(store, "replay-h200-sweep")
    wide = fleet_matrix(store, runs)
    names = run_names(labels_of(store, runs))
    con = sqlite3.connect(db)
    for rid in runs[:4]:
        total = con.execute("SELECT SUM(duration_ns) FROM op_verdict WHERE run_id = ?", (rid,)).fetchone()[0]
        for op_list, ns in con.execute(
            "SELECT op_list, SUM(duration_ns) FROM op_verdict WHERE run_id = ? GROUP BY op_list", (rid,)
        ):
            if op_list in wide.index:
                assert wide.loc[op_list, names[rid]] == pytest.approx(100 * ns / total)
    assert len(wide) == 20 and wide.index[0] == "MUL_MAT"
    result = CliRunner().invoke(
        cli,
        ["fleet", "--db", str(db), "--sweep", "replay-h200-sweep", "--plot", str(tmp_path / "f"), "--format", "csv"],
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "f.png").stat().st_size > 0 and (tmp_path / "f.svg").read_text().startswith("<?xml")


@pytest.mark.parametrize(("plot", "written"), [("f.v1", ["f.v1.png", "f.v1.svg"]), ("f.svg", ["f.png", "f.svg"])])
def test_fleet_plot_name_with_a_dot_keeps_it(db: Path, tmp_path: Path, plot: str, written: list[str]) -> None:
    # --plot f.v1 wrote f.png and f.svg (Path.with_suffix replaced ".v1")
    args = ["fleet", "--db", str(db), "--sweep", "replay-h200-sweep", "--plot", str(tmp_path / plot), "--format", "csv"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == written
    assert f"Wrote {tmp_path / written[0]}, {tmp_path / written[1]}" in result.output


@pytest.mark.parametrize("pct", ["nan", "NaN", "inf", "+inf", "1e999", "-inf", "-1"])
def test_a_threshold_that_would_pass_every_pair_is_a_usage_error(db: Path, pct: str) -> None:
    # fusion off slows the decode pairs by 41%: nan and inf passed as thresholds and the gate said exit 0
    result = CliRunner().invoke(
        cli, ["fleet", "diff", "env=fusion", "env=no-fusion", "--db", str(db), "--fail-on-regression", pct]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "Error: Invalid value for '--fail-on-regression': " in result.output
    assert result.output.rstrip().splitlines()[-1].startswith("Error: ")


@pytest.mark.parametrize("pct", [float("nan"), float("inf"), -1.0])
def test_regressions_refuses_a_threshold_that_is_not_a_finite_percentage(db: Path, pct: float) -> None:
    from rocroof.errors import InputError
    from rocroof.report.fleet import regressions

    store = Store(db, read_only=True)
    d = fleet_diff(store, select_runs(store, "env=fusion"), select_runs(store, "env=no-fusion"))
    with pytest.raises(InputError, match="expected a finite percentage >= 0"):
        regressions(d, pct)


def test_runs_without_op_rows_are_left_out_of_the_fleet_and_said_so(db: Path, tmp_path: Path) -> None:
    """A plain kernel capture (no ggml markers) in the sweep: not a run of the per-op figures."""
    import shutil

    from .rocprof_csv import T0, Kernel, write_pass

    mixed = tmp_path / "mixed.db"
    shutil.copyfile(db, mixed)
    plain = write_pass(tmp_path / "plain", 4242, kernels=[Kernel(1, "copy", 1, T0, T0 + 5000)])
    stored = CliRunner().invoke(cli, ["ingest", str(plain), "--db", str(mixed), "--label", "sweep=replay-h200-sweep"])
    assert stored.exit_code == 0, stored.output
    store, alone = Store(mixed, read_only=True), Store(db, read_only=True)
    from rocroof.report.fleet import fleet_matrix, split_by_ops

    runs = select_runs(store, "replay-h200-sweep")
    assert len(runs) == 16 and split_by_ops(store, runs) == (list(range(1, 16)), [16])
    # the per-op figures (shares, % of roof, the runs named by the labels that tell them apart) are the
    # sweep's alone: the plain run neither dilutes them nor makes every label look like one that varies
    assert fleet_view(store, runs).equals(fleet_view(alone, select_runs(alone, "replay-h200-sweep")))
    assert list(fleet_matrix(store, runs).columns) == list(
        fleet_matrix(alone, select_runs(alone, "replay-h200-sweep")).columns
    )
    con = sqlite3.connect(db)
    ops = con.execute("SELECT COUNT(DISTINCT op_list) FROM op_invocation").fetchone()[0]
    con.close()
    left = (
        "1 run(s) left out: no ggml op rows (captured without ggml markers or op metadata; rocroof report --by "
        "kernel shows them): run(s) 16"
    )
    table = CliRunner().invoke(cli, ["fleet", "--db", str(mixed), "--sweep", "replay-h200-sweep", "--format", "table"])
    assert table.exit_code == 0, table.output
    assert table.stdout.splitlines()[:2] == [f"15 run(s); {ops} op(s), most GPU time first", left]
    md = CliRunner().invoke(cli, ["fleet", "--db", str(mixed), "--sweep", "replay-h200-sweep", "--format", "markdown"])
    assert md.stdout.splitlines()[:2] == [f"15 run(s); {ops} op(s), most GPU time first  ", left]
    as_json = CliRunner().invoke(cli, ["fleet", "--db", str(mixed), "--sweep", "replay-h200-sweep", "--format", "json"])
    assert as_json.stderr == f"warning: {left}\n" and len(json.loads(as_json.stdout)) == ops
    none = CliRunner().invoke(
        cli, ["fleet", "--db", str(mixed), "--label", "sweep=replay-h200-sweep", "--label", "x=1"]
    )
    assert none.exit_code == 1  # no run has x=1: the selection's own error
    only_plain = tmp_path / "plain.db"
    assert CliRunner().invoke(cli, ["ingest", str(plain), "--db", str(only_plain), "--label", "s=p"]).exit_code == 0
    refused = CliRunner().invoke(cli, ["fleet", "--db", str(only_plain), "--label", "s=p"])
    assert refused.exit_code == 1 and refused.output.startswith("Error: none of the 1 selected run(s) has ggml op rows")


def _with_plain_run(db: Path, tmp_path: Path, labels: dict[str, str]) -> Path:
    """A copy of the sweep's store plus one plain kernel capture (no ggml markers) with ``labels``."""
    import shutil

    from .rocprof_csv import T0, Kernel, write_pass

    mixed = tmp_path / "mixed.db"
    shutil.copyfile(db, mixed)
    plain = write_pass(tmp_path / "plain", 4242, kernels=[Kernel(1, "copy", 1, T0, T0 + 5000)])
    args = ["ingest", str(plain), "--db", str(mixed)]
    for k, v in labels.items():
        args += ["--label", f"{k}={v}"]
    stored = CliRunner().invoke(cli, args)
    assert stored.exit_code == 0, stored.output
    return mixed


def test_a_pair_with_a_run_without_op_rows_is_skipped_and_listed(db: Path, tmp_path: Path) -> None:
    """The fusion run left without partner gets one: a plain kernel capture. That pair is skipped, not the diff."""
    from rocroof.report.fleet import labels_of

    alone = Store(db, read_only=True)
    # the run the recording stopped after: no no-fusion partner (test_fusion_off_regresses_decode_by_the_known_figures)
    (moe2,) = select_runs(alone, "env=fusion,model=moe-tiny,phase=decode,take=2")
    # its labels, as the missing no-fusion point of the sweep would have them
    partner = dict(labels_of(alone, [moe2])[moe2], env="no-fusion", case="moe-tiny-decode-no-fusion-r2")
    partner.pop("sweep_point", None)  # the sweep's own label (rocroof.report.fleet._OWN_KEYS)
    mixed = _with_plain_run(db, tmp_path, partner)
    store = Store(mixed, read_only=True)
    plain = max(select_runs(store, "env=no-fusion"))
    assert plain == 16  # the sweep stored runs 1..15
    d = fleet_diff(store, select_runs(store, "env=fusion"), select_runs(store, "env=no-fusion"))
    why = (
        f"model=moe-tiny phase=decode take=2 (runs {moe2} → 16): run 16 has no ggml op rows (captured without "
        "ggml markers or op metadata; rocroof report --by kernel shows them)"
    )
    assert d.skipped == [why]
    assert d.unpaired_a == [] and d.unpaired_b == []  # paired, then skipped: not "without a partner"
    # the other pairs are compared as without the plain run
    before = fleet_diff(alone, select_runs(alone, "env=fusion"), select_runs(alone, "env=no-fusion"))
    assert d.pairs.equals(before.pairs) and d.ops.equals(before.ops)
    runner = CliRunner()
    text = runner.invoke(
        cli, ["fleet", "diff", "env=fusion", "env=no-fusion", "--db", str(mixed), "--fail-on-regression", "50"]
    )
    assert text.exit_code == 0, text.output
    assert f"not compared: {why}" in text.stdout.splitlines()
    assert f"warning: pair not compared: {why}" in text.stderr.splitlines()
    doc = json.loads(
        runner.invoke(
            cli, ["fleet", "diff", "env=fusion", "env=no-fusion", "--db", str(mixed), "--format", "json"]
        ).stdout
    )
    assert doc["skipped"] == [why] and len(doc["pairs"]) == len(before.pairs)


def test_fleet_diff_fails_when_every_pair_has_a_run_without_op_rows(db: Path, tmp_path: Path) -> None:
    mixed = _with_plain_run(db, tmp_path, {"side": "plain", "model": "moe-tiny"})
    store = Store(mixed, read_only=True)
    (moe,) = select_runs(store, "env=fusion,model=moe-tiny,phase=decode,take=1")
    with pytest.raises(InputError) as err:
        fleet_diff(store, [moe], [16])
    assert str(err.value) == (
        f"no pair could be compared: every one has a run without ggml op rows: run {moe} vs run 16 "
        f"(runs {moe} → 16): run 16 has no ggml op rows (captured without ggml markers or op metadata; "
        "rocroof report --by kernel shows them)"
    )
    out = CliRunner().invoke(
        cli, ["fleet", "diff", "env=fusion,model=moe-tiny,phase=decode,take=1", "side=plain", "--db", str(mixed)]
    )
    assert (
        out.exit_code == 1
        and out.output.startswith("Error: no pair could be compared")
        and "Traceback" not in out.output
    )
