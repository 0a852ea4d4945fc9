"""Counters on a sample of graph evaluations (rocroof.ingest.sample, collect's counter windows).

The recorded H200 decode capture (``examples/h200/dense500m-decode``: ``llama-bench -p 0 -n 4``
on a 10-layer model, every kernel profiled by ncu) stands in for the GPU: a fake ``ncu`` given
``--launch-skip S --launch-count C`` writes the rows of launches S..S+C-1 of the recorded raw
CSV, renumbered from 0 as Nsight Compute numbers the kernels it profiles. Expected values are
read from the recorded files with sqlite3/csv here, not from rocroof.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import shlex
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from rocroof.capture.collect import Sample, TooManyKernels, execute, make_plan
from rocroof.capture.profilers.nsight import NsightPair
from rocroof.capture.readers import read_capture
from rocroof.errors import InputError
from rocroof.ingest.pipeline import build_run
from rocroof.ingest.sample import describe_evaluations, parse_sample, plan_sample, sampler_for
from rocroof.store import Store

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "h200" / "dense500m-decode"
APP = ["llama-bench", "-m", "dense-500m.gguf", "-p", "0", "-n", "4"]
EVALUATIONS = 4  # -p 0 -n 4: four decoded tokens after llama-bench's warm-up


def _nsys(tmp_path: Path) -> Path:
    db = tmp_path / "nsys.sqlite"
    db.write_bytes(gzip.decompress((EXAMPLE / "trace" / "nsys.sqlite.gz").read_bytes()))
    return db


def _recorded_launches(db: Path) -> tuple[int, int]:
    """(kernel launches, launches before the 'ggml reset' mark), from the export with SQL."""
    con = sqlite3.connect(db)
    try:
        total = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        (reset,) = con.execute(
            "SELECT e.start FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
            "WHERE COALESCE(e.text, s.value) = 'ggml reset'"
        ).fetchone()
        before = con.execute(
            "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
            "ON r.correlationId = k.correlationId WHERE r.start < ?",
            (reset,),
        ).fetchone()[0]
    finally:
        con.close()
    return int(total), int(before)


def test_parse_sample() -> None:
    assert parse_sample("prefill=1,decode=2").counts == {"prefill": 1, "decode": 2}
    assert parse_sample(" decode=3 ").counts == {"prefill": 0, "decode": 3}
    assert parse_sample("ALL").everything
    auto = parse_sample("auto")
    assert auto.auto and not auto.everything and str(auto) == "auto"
    for bad, says in (
        ("decode", "expected auto, all, or phase=count"),
        ("tokens=2", "expected auto, all, or phase=count"),
        ("decode=-1", "expected auto, all, or phase=count"),
        ("decode=1,decode=2", "decode is given twice"),
        ("prefill=0,decode=0", "selects no evaluation"),
    ):
        with pytest.raises(InputError, match=says):
            parse_sample(bad)


def test_the_auto_sample_keeps_the_first_ubatch_and_token_within_the_kernel_budget() -> None:
    from rocroof.ingest.sample import DEFAULT_KERNEL_BUDGET, Evaluation, _auto

    def ev(i: int, phase: str | None, kernels: int) -> Evaluation:
        return Evaluation(i, phase, None, 1000 * i, 1000 * i + kernels - 1, kernels, 0)

    notes: list[str] = []
    # the H200 run's 28-layer model: a 171-token ubatch of 866 kernels, tokens of 538
    h200 = [ev(0, "prefill", 866), *(ev(i, "decode", 538) for i in range(1, 16))]
    assert 866 + 538 > DEFAULT_KERNEL_BUDGET >= 538
    assert _auto(h200, notes) == (1,)
    assert notes == [
        "the default sample (--sample auto) keeps the counter pass within 800 kernels: prefill 0 (866 kernels) left "
        "out, decode 1 (538) measured; --sample prefill=1,decode=1 measures both"
    ]
    small = [ev(0, "prefill", 122), ev(1, "decode", 100), ev(2, "decode", 100)]
    assert _auto(small, []) == (0, 1)
    assert _auto([ev(0, "prefill", 900), ev(1, "prefill", 900)], []) == (0,)  # no decode: the first ubatch
    assert _auto([ev(0, None, 500), ev(1, None, 500), ev(2, None, 500)], []) == (0,)  # phases unknown: the first


def test_describe_evaluations() -> None:
    assert describe_evaluations([(0, "prefill"), (1, "decode"), (2, "decode")], 17) == (
        "3 of 17 graph evaluations: prefill 0; decode 1–2"
    )
    assert describe_evaluations([(0, None), (2, None), (3, None)], 5) == "3 of 5 graph evaluations: evaluation 0, 2–3"
    assert describe_evaluations([(0, "prefill")], 1) == "1 of 1 graph evaluation: prefill 0"


def test_plan_from_the_recorded_decode_trace(tmp_path: Path) -> None:
    total, warm = _recorded_launches(_nsys(tmp_path))
    per_eval = (total - warm) // EVALUATIONS
    assert per_eval * EVALUATIONS == total - warm  # every decoded token runs the same graph
    sp = plan_sample(EXAMPLE / "trace", parse_sample("decode=2"))
    assert sp.launches == total
    assert len(sp.evaluations) == EVALUATIONS
    assert {(e.phase, e.tokens, e.kernels) for e in sp.evaluations} == {("decode", 1, per_eval)}
    assert [e.first_launch for e in sp.evaluations] == [warm + k * per_eval for k in range(EVALUATIONS)]
    assert sp.selected == (0, 1)
    assert sp.windows == ((warm, 2 * per_eval),)
    assert sp.describe() == "2 of 4 graph evaluations: decode 0–1"
    # the default asks for a prefill the run does not have: the first decode only
    default = plan_sample(EXAMPLE / "trace", parse_sample("prefill=1,decode=1"))
    assert default.windows == ((warm, per_eval),)
    with pytest.raises(InputError, match=r"--sample prefill=2,decode=0: selects none .*\(4 decode\)"):
        plan_sample(EXAMPLE / "trace", parse_sample("prefill=2"))
    # two evaluations apart: two windows
    assert plan_sample(EXAMPLE / "trace", parse_sample("decode=4")).windows == ((warm, 4 * per_eval),)


class FakeWindowedNsight:
    """nsys and ncu standing in for the H200 run of the recorded decode capture (see module doc)."""

    def __init__(self, ncu: str, nsys: str) -> None:
        self.ncu, self.nsys = ncu, nsys
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], env: dict[str, str], log: Path) -> int:
        argv = tuple(argv)
        self.calls.append(argv)
        log.parent.mkdir(parents=True, exist_ok=True)
        if argv[0] == self.nsys and argv[1] == "profile":
            report = Path(argv[argv.index("-o") + 1])
            report.with_name(report.name + ".nsys-rep").write_bytes(b"report")
            meta = env.get("GGML_CUDA_OP_META")
            if meta:
                Path(meta).write_bytes(gzip.decompress((EXAMPLE / "trace" / "ggml-op-meta.json.gz").read_bytes()))
        elif argv[0] == self.nsys and argv[1] == "export":
            Path(argv[argv.index("-o") + 1]).write_bytes(
                gzip.decompress((EXAMPLE / "trace" / "nsys.sqlite.gz").read_bytes())
            )
        elif argv[0] == self.ncu:
            skip = int(argv[argv.index("--launch-skip") + 1]) if "--launch-skip" in argv else 0
            count = int(argv[argv.index("--launch-count") + 1]) if "--launch-count" in argv else 10**9
            report = Path(argv[argv.index("-o") + 1])
            rows = _recorded_ncu_rows()
            kept = [r for r in rows[2:] if skip <= int(r[0]) < skip + count]
            for i, r in enumerate(kept):
                r[0] = str(i)  # ncu numbers the kernels it profiled from 0
            buf = io.StringIO()
            csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([rows[0], rows[1], *kept])
            report.with_name(report.name + ".ncu-rep").write_text(buf.getvalue())
            with open(log, "w") as fh:  # what ncu prints as it profiles each kernel
                for r in kept:
                    fh.write(f'==PROF== Profiling "{r[4][:20]}" - {r[0]}: 0%....50%....100% - 1 pass\n')
            return 0
        elif argv[:2] == ("sh", "-c"):
            words = shlex.split(argv[2])
            Path(words[7]).write_text(Path(words[2]).read_text())
        else:
            return 127
        log.write_text("ok\n")
        return 0


def _recorded_ncu_rows() -> list[list[str]]:
    text = gzip.decompress((EXAMPLE / "ncu" / "ncu_raw.csv.gz").read_bytes()).decode()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][0] == "ID" and rows[1][0] == ""  # the header, the units row
    return rows


def _pair(tmp_path: Path) -> NsightPair:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("ncu", "nsys"):
        tool = bindir / name
        tool.write_text("#!/bin/sh\necho 'NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0'\n")
        tool.chmod(0o755)
    return NsightPair(ncu=str(bindir / "ncu"), nsys=str(bindir / "nsys"), bandwidth_probe=False)


def test_collect_counts_the_sampled_window_and_reports_it(tmp_path: Path) -> None:
    pair = _pair(tmp_path)
    out = tmp_path / "cap"
    plan = make_plan(APP, out, counters="dram", arch="sm_90", profiler=pair)
    fake = FakeWindowedNsight(pair.ncu, str(pair.nsys))
    seen: list[tuple[Sample, float | None]] = []
    progress: list[tuple[str, int, int | None]] = []
    execute(
        plan,
        APP,
        runner=fake,
        sampler=sampler_for(parse_sample("decode=2")),
        on_sample=lambda s, est: seen.append((s, est)),
        on_progress=lambda run, done, planned: progress.append((run.label, done, planned)),
    )
    total, warm = _recorded_launches(out / "trace" / "nsys.sqlite")
    per_eval = (total - warm) // EVALUATIONS
    (ncu_argv,) = [a for a in fake.calls if a[0] == pair.ncu]
    assert ncu_argv[ncu_argv.index("--launch-skip") + 1 : ncu_argv.index("--launch-skip") + 4] == (
        str(warm),
        "--launch-count",
        str(2 * per_eval),
    )
    ((sample, estimate),) = seen
    assert (sample.kernels, sample.launches) == (2 * per_eval, total)
    assert estimate == pytest.approx(2 * per_eval * 0.045 + 22.0)  # dram: ~45 ms per kernel, ~22 s to start
    assert progress[-1] == ("ncu", 2 * per_eval, 2 * per_eval)
    manifest = json.loads((out / "rocroof-collect.json").read_text())
    assert manifest["sample"]["windows"] == [[warm, 2 * per_eval]]
    assert manifest["sample"]["description"] == "2 of 4 graph evaluations: decode 0–1"

    db = tmp_path / "r.db"
    store = Store(db)
    run_id = store.write_run(build_run(read_capture(out)))
    ro = Store(db, read_only=True)
    notes = ro.query(f"SELECT severity, code, message FROM run_note WHERE run_id = {run_id}")
    assert "pass-mismatch" not in set(notes["code"])
    (message,) = notes.loc[notes["code"] == "counter-sample", "message"]
    assert message == (
        "DRAM bytes measured on 2 of 4 graph evaluations: decode 0–1; times cover every evaluation "
        "(rocroof collect --sample prefill=0,decode=2)"
    )
    measured = ro.query(
        f"SELECT COUNT(*) AS n, SUM(dram_read_bytes) AS rd FROM dispatch_dram WHERE run_id = {run_id} "
        "AND dram_read_bytes IS NOT NULL"
    ).iloc[0]
    assert measured["n"] == 2 * per_eval
    # the bytes of launches warm .. warm + 2 * per_eval - 1 in the recorded CSV (Mbyte, Kbyte or byte)
    rows = _recorded_ncu_rows()
    col = rows[0].index("dram__bytes_read.sum")
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}[rows[1][col]]
    expected = sum(
        round(float(r[col].replace(",", "")) * scale) for r in rows[2:] if warm <= int(r[0]) < warm + 2 * per_eval
    )
    assert measured["rd"] == pytest.approx(expected, rel=1e-12)
    timed = ro.query(f"SELECT COUNT(*) AS n FROM dispatch_dram WHERE run_id = {run_id}").iloc[0]["n"]
    assert timed == total - warm  # times cover every evaluation


def test_max_kernels_refuses_before_the_counter_run(tmp_path: Path) -> None:
    pair = _pair(tmp_path)
    out = tmp_path / "cap"
    plan = make_plan(APP, out, counters="roofline", arch="sm_90", profiler=pair)
    fake = FakeWindowedNsight(pair.ncu, str(pair.nsys))
    with pytest.raises(
        TooManyKernels, match=r"would count 392 kernels \(of 980 launched\), more than --max-kernels 300"
    ):
        execute(plan, APP, runner=fake, sampler=sampler_for(parse_sample("decode=2")), max_kernels=300)
    assert not [a for a in fake.calls if a[0] == pair.ncu]
    assert (out / "trace" / "nsys.sqlite").is_file()  # the trace pass is kept


def test_sample_windows_become_one_ncu_run_each(tmp_path: Path) -> None:
    pair = _pair(tmp_path)
    plan = make_plan(APP, tmp_path / "cap", counters="dram", arch="sm_90", profiler=pair)
    runs = pair.sample_runs(plan.runs, [(10, 5), (500, 7)])
    counter = [r for r in runs if r.kind == "counter"]
    assert [(r.label, r.window) for r in counter] == [("ncu", (10, 5)), ("ncu.2", (500, 7))]
    second = counter[1].argv
    assert second[second.index("--launch-skip") + 1] == "500" and second[second.index("--launch-count") + 1] == "7"
    assert second[second.index("-o") + 1] == str(tmp_path / "cap" / "ncu.2" / "ncu")
    exports = [r for r in runs if r.kind == "export" and r.label.startswith("ncu")]
    assert [r.label for r in exports] == ["ncu", "ncu.2"]
    assert str(tmp_path / "cap" / "ncu.2" / "ncu_raw.csv") in exports[1].argv[2]


def test_two_windows_read_back_as_one_counter_pass(tmp_path: Path) -> None:
    pair = _pair(tmp_path)
    out = tmp_path / "cap"
    plan = make_plan(APP, out, counters="dram", arch="sm_90", profiler=pair)
    fake = FakeWindowedNsight(pair.ncu, str(pair.nsys))
    total, warm = 980, 196
    per_eval = 196

    def two_windows(trace_dir: Path) -> Sample:  # decode 0 and decode 2: far apart
        sp = plan_sample(trace_dir, parse_sample("decode=4"))
        wins = ((warm, per_eval), (warm + 2 * per_eval, per_eval))
        manifest = {**sp.manifest(), "windows": [list(w) for w in wins], "spec": "custom"}
        return Sample(windows=wins, kernels=2 * per_eval, launches=total, manifest=manifest)

    execute(plan, APP, runner=fake, sampler=two_windows)
    assert (out / "ncu.2" / "ncu_raw.csv").is_file()
    capture = read_capture(out)
    assert [p.label for p in capture.passes] == ["trace", "ncu"]
    assert len(capture.passes[1].dispatches) == 2 * per_eval
    db = tmp_path / "r.db"
    run_id = Store(db).write_run(build_run(capture))
    notes = Store(db, read_only=True).query(f"SELECT code, message FROM run_note WHERE run_id = {run_id}")
    (message,) = notes.loc[notes["code"] == "counter-sample", "message"]
    assert message.startswith("DRAM bytes measured on 2 of 4 graph evaluations: decode 0, 2;")


@pytest.mark.parametrize("python", [sys.executable])
def test_collect_help_teaches_the_sample(python: str) -> None:
    import subprocess

    out = subprocess.run([python, "-m", "rocroof", "collect", "--help"], capture_output=True, text=True, check=True)
    text = " ".join(out.stdout.split())
    assert "--sample SPEC" in text and "prefill=N,decode=M" in text
    assert "--max-kernels N" in text
    assert "llama-cli with --single-turn" in text


def _sampled_db(tmp_path: Path) -> tuple[Path, int]:
    pair = _pair(tmp_path)
    out = tmp_path / "cap"
    plan = make_plan(APP, out, counters="dram", arch="sm_90", profiler=pair)
    execute(
        plan, APP, runner=FakeWindowedNsight(pair.ncu, str(pair.nsys)), sampler=sampler_for(parse_sample("decode=2"))
    )
    db = tmp_path / "r.db"
    return db, Store(db).write_run(build_run(read_capture(out)))


def test_a_sampled_report_takes_bandwidth_from_the_measured_evaluations(tmp_path: Path) -> None:
    from rocroof.report.tables import build_report, render

    db, run_id = _sampled_db(tmp_path)
    ro = Store(db, read_only=True)
    rep = build_report(ro, run_id, by="op")
    mm = rep.rows.set_index("op").loc["MUL_MAT"]
    assert mm["bytes_basis"] == "sampled"
    # the measured invocations' own bytes and time, summed per invocation by SQL on the stored dispatches
    sums = ro.query(
        f"SELECT COUNT(*) AS n, SUM(t) AS t, SUM(b) AS b FROM (SELECT op_index, SUM(duration_ns) AS t, "
        f"SUM(dram_read_bytes + dram_write_bytes) AS b, COUNT(dram_read_bytes) AS k, COUNT(*) AS d "
        f"FROM dispatch_dram WHERE run_id = {run_id} AND op = 'MUL_MAT' GROUP BY op_index) WHERE k = d"
    ).iloc[0]
    assert mm["measured_invocations"] == sums["n"] == mm["invocations"] / 2  # 2 of 4 identical decode graphs
    assert mm["achieved_gbps"] == pytest.approx(sums["b"] / sums["t"], rel=1e-12)
    peak = rep.run["dram_peak_gbps"]
    assert mm["pct_of_dram_peak"] == pytest.approx(100 * sums["b"] / sums["t"] / peak, rel=1e-12)
    whole = ro.query(f"SELECT SUM(duration_ns) AS t FROM dispatch_dram WHERE run_id={run_id} AND op='MUL_MAT'")
    assert mm["duration_ns"] == whole["t"].iloc[0]  # time covers every evaluation
    # µs at peak: the measured bytes at the ceiling, scaled to the whole time
    assert mm["dram_time_at_peak_ns"] == pytest.approx(sums["b"] / peak * whole["t"].iloc[0] / sums["t"], rel=1e-12)
    text = render(rep, "table", width=220)
    assert "DRAM bytes measured on 2 of 4 graph evaluations: decode 0–1" in text
    assert "?" not in text.split("━")[-1].splitlines()[1]  # the MUL_MAT row shows numbers, not unknowns
    kernels = build_report(ro, run_id, by="kernel")
    assert set(kernels.rows["bytes_basis"].dropna()) == {"sampled"}


def test_a_run_without_counters_gets_a_modelled_roofline_marked_as_such(tmp_path: Path) -> None:
    import shutil

    from rocroof.report.tables import build_report, render

    cap = tmp_path / "cap"
    shutil.copytree(EXAMPLE.parent / "dense-prefill", cap)
    shutil.rmtree(cap / "ncu")
    manifest = json.loads((cap / "rocroof-collect.json").read_text())
    manifest["passes"] = [p for p in manifest["passes"] if p["kind"] != "counter"]
    (cap / "rocroof-collect.json").write_text(json.dumps(manifest))
    db = tmp_path / "r.db"
    run_id = Store(db).write_run(build_run(read_capture(cap)))
    ro = Store(db, read_only=True)
    rep = build_report(ro, run_id, by="op")
    mm = rep.rows.set_index("op").loc["MUL_MAT"]
    assert mm["bytes_basis"] == "modelled"
    assert pd_isna(mm["achieved_gbps"]) and pd_isna(mm["pct_of_ceiling"]) and pd_isna(mm["bound"])
    model = ro.query(
        f"SELECT SUM(m.model_read_bytes + m.model_write_bytes) AS b FROM op_model m JOIN op_invocation o "
        f"ON o.run_id = m.run_id AND o.op_index = m.op_index WHERE m.run_id = {run_id} AND o.op = 'MUL_MAT'"
    )["b"].iloc[0]
    t = ro.query(f"SELECT SUM(duration_ns) AS t FROM dispatch_dram WHERE run_id = {run_id} AND op = 'MUL_MAT'")["t"]
    assert mm["model_gbps"] == pytest.approx(model / t.iloc[0], rel=1e-12)
    assert mm["model_bound"] in ("memory", "compute", "latency")
    text = render(rep, "table", width=220)
    assert "no DRAM counters in this run: values marked ~ come from the byte model" in text
    assert f"~{model / t.iloc[0]:,.1f}" in text
    assert "Nsight Compute replay" not in text  # no counter pass: no word about how it counted
    doc = json.loads(render(rep, "json"))
    assert {r["op"]: r["bytes_basis"] for r in doc["rows"]}["MUL_MAT"] == "modelled"


def pd_isna(v: object) -> bool:
    import pandas as pd

    return bool(pd.isna(v))


FAKE_TOOL = r'''#!{python}
"""A stand-in for nsys and ncu that replays examples/h200/dense500m-decode (see tests/test_sample.py)."""
import csv, gzip, io, os, shutil, sys
from pathlib import Path

EXAMPLE = Path({example!r})
argv = sys.argv[1:]
tool = Path(sys.argv[0]).name
if tool == "nsys" and argv[0] == "profile":
    out = Path(argv[argv.index("-o") + 1])
    Path(str(out) + ".nsys-rep").write_bytes(b"report")
    meta = os.environ.get("GGML_CUDA_OP_META")
    if meta:
        Path(meta).write_bytes(gzip.decompress((EXAMPLE / "trace" / "ggml-op-meta.json.gz").read_bytes()))
elif tool == "nsys" and argv[0] == "export":
    Path(argv[argv.index("-o") + 1]).write_bytes(gzip.decompress((EXAMPLE / "trace" / "nsys.sqlite.gz").read_bytes()))
elif tool == "ncu" and argv[0] == "--version":
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0")
elif tool == "ncu" and argv[0] == "--import":
    sys.stdout.write(Path(argv[1]).read_text())
elif tool == "ncu":
    skip = int(argv[argv.index("--launch-skip") + 1]) if "--launch-skip" in argv else 0
    count = int(argv[argv.index("--launch-count") + 1]) if "--launch-count" in argv else 10**9
    rows = list(csv.reader(io.StringIO(gzip.decompress((EXAMPLE / "ncu" / "ncu_raw.csv.gz").read_bytes()).decode())))
    kept = [r for r in rows[2:] if skip <= int(r[0]) < skip + count]
    for i, r in enumerate(kept):
        r[0] = str(i)
        print(f'==PROF== Profiling "k" - {{i}}: 0%....50%....100% - 1 pass', flush=True)
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([rows[0], rows[1], *kept])
    Path(argv[argv.index("-o") + 1] + ".ncu-rep").write_text(buf.getvalue())
else:
    sys.exit(f"unexpected {{tool}} {{argv}}")
'''


def _fake_tools_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-ins for nsys and ncu (:data:`FAKE_TOOL`) first on PATH, in ``tmp_path/bin``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("nsys", "ncu"):
        tool = bindir / name
        tool.write_text(FAKE_TOOL.format(python=sys.executable, example=str(EXAMPLE)))
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")


def test_the_collect_command_samples_estimates_and_ingests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`rocroof collect` as a user runs it, with stand-ins for nsys and ncu on PATH."""
    from click.testing import CliRunner

    from rocroof.cli import cli

    _fake_tools_on_path(tmp_path, monkeypatch)
    db, out = tmp_path / "r.db", tmp_path / "cap"
    result = CliRunner().invoke(
        cli,
        ["collect", "--arch", "sm_90", "--no-bandwidth-probe", "--counters", "dram", "--out", str(out), "--db", str(db)]
        + ["--", *APP],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    total, warm = _recorded_launches(out / "trace" / "nsys.sqlite")
    per_eval = (total - warm) // EVALUATIONS
    # the default sample (auto) of a decode-only run: its first decoded token
    assert "counter sample: auto" in result.output
    assert (
        f"counter pass: {per_eval:,} of {total:,} kernel launches (1 of 4 graph evaluations: decode 0)" in result.output
    )
    assert "DRAM bytes measured on 1 of 4 graph evaluations: decode 0" in result.output
    assert "Stored run 1" in result.output
    refused = CliRunner().invoke(
        cli,
        ["collect", "--arch", "sm_90", "--no-bandwidth-probe", "--max-kernels", "10", "--out", str(tmp_path / "c2")]
        + ["--db", str(db), "--", *APP],
    )
    assert refused.exit_code == 1
    assert f"would count {per_eval:,} kernels (of {total:,} launched), more than --max-kernels 10" in refused.output


def test_a_sample_on_amd_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from rocroof.cli import cli

    args = ["collect", "--dry-run", "--arch", "gfx942", "--out", str(tmp_path / "o")]
    refused = CliRunner().invoke(cli, [*args, "--sample", "decode=1", "--", "llama-bench", "-m", "x"])
    assert refused.exit_code == 1
    assert refused.output.startswith("Error: --sample prefill=0,decode=1: rocprofv3 cannot count a window")
    planned = CliRunner().invoke(cli, [*args, "--", "llama-bench", "-m", "x"])  # the default on AMD: all
    assert planned.exit_code == 0, planned.output
    assert "counter sample" not in planned.output


def test_collect_progress_lines_escape_the_text_they_quote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan, the run and sample lines on stderr quote the command and the output folder: no raw controls."""
    from click.testing import CliRunner

    from rocroof.cli import cli

    _fake_tools_on_path(tmp_path, monkeypatch)
    out = tmp_path / "cap\x1b]0;OUT\x07"
    app = [*APP, "-r", "1\x1b[2J\nFAKE"]  # an argument the fake tools ignore: an OSC, a clear screen, a newline
    result = CliRunner().invoke(
        cli,
        ["collect", "--arch", "sm_90", "--no-bandwidth-probe", "--counters", "dram", "--out", str(out)]
        + ["--db", str(tmp_path / "r.db"), "--", *app],
    )
    assert result.exit_code == 0, result.output
    err = result.stderr
    assert "\x1b" not in err and "\x07" not in err, err  # written as escapes, acted on by no terminal
    assert "\\x1b]0;OUT\\x07" in err and "1\\x1b[2J\\x0aFAKE" in err
    assert not [line for line in err.splitlines() if line.startswith("FAKE")]  # the newline added no line
