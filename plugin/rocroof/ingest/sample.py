"""Counters on a sample of graph evaluations: which kernel launches the counter pass measures.

A counter pass is slow (Nsight Compute replays every profiled kernel several times, flushing the
caches before each; rocprofv3 serialises every dispatch it counts), while the trace pass times
every kernel at full speed. ``rocroof collect`` therefore runs the trace pass first, reads it,
and asks the profiler to count only the launches of the *graph evaluations* the user selects
(by default the first prompt ubatch after the ``ggml reset`` mark and the first decoded token).

A **graph evaluation** is one pass over a ggml graph: one ubatch of one ``llama_decode``
(:func:`rocroof.analysis.graph.evaluations_by_name` splits the ggml ranges by their node names).
Its **phase** is ``prefill`` when it evaluates more than one token and ``decode`` for one token;
the token count is the second dimension of its hidden-state norms' output (``RMS_NORM``/``NORM``
over ``n_embd``: ``ne = [n_embd, n_tokens]``) in the op metadata sidecar, so without the sidecar
the phase is unknown and the first evaluations are taken in order.

The application is deterministic for a fixed command line: its k-th kernel launch in the trace
pass is its k-th in the counter pass (the pass join relies on the same, per invocation). A
selection becomes **windows** of consecutive launches, ``(skip, count)``: launches counted from
the start of the process, warm-up included, in the order of the host's launch calls (the
correlation id order of the runtime API), which is how Nsight Compute's ``--launch-skip`` /
``--launch-count`` count them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.graph import evaluations_by_name
from ..capture.collect import Sample
from ..errors import InputError
from ..records import OpMetadata, PassData
from .attribution import attribute_pass, reset_cutoff

#: The default sample (``auto``): the first prompt ubatch and the first decoded token when their
#: kernels fit :data:`DEFAULT_KERNEL_BUDGET`, else the first decoded token alone (else the first
#: prompt ubatch). Sized on the H200: a 28-layer Qwen3-0.6B-shaped model's prompt ubatch is 866
#: kernel launches and a decoded token 538; Nsight Compute's ``roofline`` metrics took 162 s for
#: the 866 and 109 s for the 538 (about 22 s of application start plus 0.16 s per counted kernel),
#: and the whole collect 180 s and 127 s: both together (1,404 kernels) would be ~4.5 minutes.
DEFAULT_SAMPLE = "auto"
#: Kernels the default sample counts at most (~2 minutes of Nsight Compute with the roofline metrics).
DEFAULT_KERNEL_BUDGET = 800

#: Two windows closer than this many launches are measured as one (an application run of its own
#: costs more than profiling a few kernels in between).
MERGE_GAP_LAUNCHES = 64

_PHASES = ("prefill", "decode")
NO_RANGES = (
    "the trace pass has no ggml ranges after the last 'ggml reset' (is the llama.cpp marker hook built in and "
    "GGML_CUDA_MARKERS=1?): every kernel is counted"
)


@dataclass(frozen=True)
class SampleSpec:
    """Which graph evaluations the counter pass measures.

    Attributes:
        counts: evaluations per phase (``{"prefill": 1, "decode": 2}``), taken from the first of
            that phase on; None: every evaluation (``all``).
    """

    counts: dict[str, int] | None
    auto: bool = False

    @property
    def everything(self) -> bool:
        """True for ``all``: no sampling, the counter pass measures every launch."""
        return self.counts is None and not self.auto

    def __str__(self) -> str:
        if self.auto:
            return "auto"
        if self.counts is None:
            return "all"
        return ",".join(f"{k}={v}" for k, v in self.counts.items())


def parse_sample(text: str) -> SampleSpec:
    """``--sample``: ``auto``, ``all``, or ``prefill=N,decode=M`` (either may be left out: 0).

    >>> parse_sample("prefill=1,decode=2").counts
    {'prefill': 1, 'decode': 2}
    >>> parse_sample("all").everything
    True

    Raises:
        InputError: anything else (unknown phase, a count that is not a whole number >= 0, or
            nothing selected).
    """
    spec = text.strip().lower()
    if spec == "all":
        return SampleSpec(None)
    if spec == "auto":
        return SampleSpec(None, auto=True)
    counts: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in _PHASES or not re.fullmatch(r"[0-9]{1,6}", value.strip()):
            raise InputError(
                f"--sample {text!r}: expected auto, all, or phase=count pairs such as prefill=1,decode=2 "
                "(phases: prefill, decode)"
            )
        if name in counts:
            raise InputError(f"--sample {text!r}: {name} is given twice")
        counts[name] = int(value)
    if not counts or not any(counts.values()):
        raise InputError(f"--sample {text!r}: selects no evaluation; give a count above 0, or 'all'")
    return SampleSpec({k: counts.get(k, 0) for k in _PHASES})


@dataclass(frozen=True)
class Evaluation:
    """One graph evaluation of the trace pass (after the last ``ggml reset``).

    Attributes:
        index: 0-based, in launch order.
        phase: ``prefill`` (more than one token), ``decode`` (one token) or None (unknown).
        tokens: tokens evaluated, when the op metadata tells.
        first_launch: launch index (0-based, process-wide) of its first kernel.
        last_launch: launch index of its last kernel.
        kernels: its kernel launches.
        duration_ns: its kernels' summed GPU time in the trace pass.
    """

    index: int
    phase: str | None
    tokens: int | None
    first_launch: int
    last_launch: int
    kernels: int
    duration_ns: int


@dataclass(frozen=True)
class SamplePlan:
    """The counter pass's selection.

    Attributes:
        spec: what was asked for.
        evaluations: every evaluation of the trace pass.
        selected: indexes of the measured evaluations.
        windows: ``(skip, count)`` launch windows, in order.
        launches: kernel launches of the whole process (warm-up included).
    """

    spec: SampleSpec
    evaluations: tuple[Evaluation, ...]
    selected: tuple[int, ...]
    windows: tuple[tuple[int, int], ...]
    launches: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kernels(self) -> int:
        """Kernel launches the counter pass profiles (the windows' total)."""
        return sum(c for _, c in self.windows)

    def describe(self) -> str:
        """``3 of 17 graph evaluations: prefill 0, decode 1–2``."""
        return describe_evaluations(
            [(e.index, e.phase) for e in self.evaluations if e.index in set(self.selected)], len(self.evaluations)
        )

    def manifest(self) -> dict[str, object]:
        """The plan as the capture's manifest records it (``sample``)."""
        return {
            "spec": str(self.spec),
            "description": self.describe(),
            "evaluations": [
                {
                    "index": e.index,
                    "phase": e.phase,
                    "tokens": e.tokens,
                    "first_launch": e.first_launch,
                    "kernels": e.kernels,
                    "duration_ns": e.duration_ns,
                }
                for e in self.evaluations
            ],
            "selected": list(self.selected),
            "windows": [list(w) for w in self.windows],
            "launches": self.launches,
            "kernels": self.kernels,
            "notes": list(self.notes),
        }


def describe_evaluations(measured: Sequence[tuple[int, str | None]], total: int) -> str:
    """``3 of 17 graph evaluations: prefill 0, decode 1–2`` for the measured ``(index, phase)``."""
    by_phase: dict[str, list[int]] = {}
    for index, phase in sorted(measured):
        by_phase.setdefault(phase or "evaluation", []).append(index)
    parts = []
    for phase, indexes in by_phase.items():
        runs: list[str] = []
        start = prev = indexes[0]
        for i in [*indexes[1:], None]:
            if i is not None and i == prev + 1:
                prev = i
                continue
            runs.append(str(start) if start == prev else f"{start}–{prev}")
            if i is not None:
                start = prev = i
        parts.append(f"{phase} {', '.join(runs)}")
    word = "evaluation" if total == 1 else "evaluations"
    return f"{len(measured)} of {total} graph {word}: " + "; ".join(parts)


#: Norms: a token's hidden state is normalised before every block (``attn_norm``, ``ffn_norm``,
#: ``result_norm``); their output is ``[n_embd, n_tokens]``.
_NORM_OPS = ("RMS_NORM", "NORM")


def tokens_per_invocation(meta: OpMetadata | None) -> dict[int, int]:
    """``{invocation: tokens}`` of the norms over the hidden state, from the op metadata.

    The hidden-state norms are the norms whose ``ne[0]`` is the largest any norm has (``n_embd``);
    their ``ne[1]`` is the token count. Other norms are not: Qwen3's ``attn_q_norm`` is
    ``[head_dim, n_head, n_tokens]``, so its ``ne[1]`` counts heads. An evaluation's token count
    is the largest of its invocations' (``result_norm`` keeps only the rows of the tokens whose
    logits are wanted: 1 in a prompt's last ubatch).
    """
    if meta is None or not len(meta.ops):
        return {}
    ops = meta.ops
    rows = ops[ops["op"].isin(_NORM_OPS)]
    shapes: list[tuple[int, list[int]]] = []
    for inv, ne in zip(rows["invocation"], rows["ne"], strict=True):
        try:
            shape = json.loads(ne) if isinstance(ne, str) else None
        except json.JSONDecodeError:
            shape = None
        if isinstance(shape, list) and len(shape) > 1 and all(isinstance(v, int) for v in shape[:2]):
            shapes.append((int(inv), shape))
    if not shapes:
        return {}
    hidden = max(shape[0] for _, shape in shapes)
    return {inv: shape[1] for inv, shape in shapes if shape[0] == hidden and shape[1] > 0}


def evaluation_tokens(meta: OpMetadata | None, evaluations: dict[int, int]) -> dict[int, int]:
    """``{evaluation: tokens}``: the largest :func:`tokens_per_invocation` of each evaluation's invocations."""
    out: dict[int, int] = {}
    for inv, tokens in tokens_per_invocation(meta).items():
        k = evaluations.get(inv)
        if k is not None:
            out[k] = max(out.get(k, 0), tokens)
    return out


def phase_of(tokens: int | None) -> str | None:
    """``decode`` for one token, ``prefill`` for more, None when unknown."""
    return None if tokens is None else ("decode" if tokens == 1 else "prefill")


def launch_order(trace: PassData, launch_ns: pd.Series) -> np.ndarray:
    """Each dispatch's 0-based launch index: the order of its host launch call.

    By correlation id when every dispatch has one (the runtime API numbers its calls in call
    order), else by host launch time, else by GPU start time.

    Returns:
        An int64 array, one launch index per dispatch row of ``trace``.
    """
    d = trace.dispatches
    n = len(d)
    corr = pd.to_numeric(d["correlation_id"], errors="coerce")
    if n and bool(corr.notna().all()):
        keys: list[np.ndarray] = [corr.to_numpy(dtype=np.float64)]
    elif n and bool(launch_ns.notna().all()):
        keys = [launch_ns.to_numpy(dtype=np.float64)]
    else:
        keys = [pd.to_numeric(d["start_ns"], errors="coerce").fillna(np.inf).to_numpy(dtype=np.float64)]
    order = np.lexsort((np.arange(n), *keys))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    return rank


def plan_from_trace(trace: PassData, meta: OpMetadata | None, spec: SampleSpec) -> SamplePlan:
    """Select evaluations of a read trace pass and turn them into launch windows.

    Args:
        trace: the trace pass (every kernel, its markers and launch calls).
        meta: the op metadata sidecar of the same run, for the token count of each evaluation.
        spec: what to measure.

    Returns:
        The :class:`SamplePlan`; ``windows`` is one window over every launch for ``all``, or
        when the trace has no ggml ranges (nothing to select by), with a note saying why.

    Raises:
        InputError: the trace pass holds several processes (launch counts are per process).
    """
    d = trace.dispatches
    launches = len(d)
    everything = SamplePlan(spec, (), (), ((0, launches),) if launches else (), launches)
    if spec.everything or not launches:
        return everything
    pids = d["process_id"].dropna().unique()
    if len(pids) > 1:
        raise InputError(
            f"the trace pass holds {len(pids)} processes; a counter sample counts one process's kernel launches: "
            "use --sample all"
        )
    attr = attribute_pass(trace)
    a = attr.dispatch
    rank = launch_order(trace, a["launch_ns"])
    warm = reset_cutoff(trace, attr)
    inv = a["invocation"].astype("Int64")
    keep = np.array(inv.notna().to_numpy(dtype=bool))  # a copy: pandas may hand out a read-only view
    if warm is not None:
        keep &= ~warm
    if not keep.any():
        return SamplePlan(
            spec,
            (),
            (),
            ((0, launches),),
            launches,
            (NO_RANGES,),
        )
    kept = pd.DataFrame(
        {
            "invocation": inv[keep].astype(np.int64).to_numpy(),
            "node": a["node_name"][keep].to_numpy(dtype=object),
            "rank": rank[keep],
            "dur": pd.to_numeric(d["end_ns"], errors="coerce")[keep].to_numpy(dtype=np.float64)
            - pd.to_numeric(d["start_ns"], errors="coerce")[keep].to_numpy(dtype=np.float64),
        }
    )
    firsts = kept.sort_values("rank").drop_duplicates("invocation")
    names = [n if isinstance(n, str) else None for n in firsts["node"]]
    evals = evaluations_by_name(firsts["invocation"].tolist(), names)
    kept["evaluation"] = kept["invocation"].map(evals)
    tokens = evaluation_tokens(meta, evals)
    evaluations = []
    for k, g in kept.groupby("evaluation", sort=True):
        n_tok = tokens.get(int(k))
        phase = phase_of(n_tok)
        evaluations.append(
            Evaluation(
                index=int(k),
                phase=phase,
                tokens=n_tok,
                first_launch=int(g["rank"].min()),
                last_launch=int(g["rank"].max()),
                kernels=len(g),
                duration_ns=int(np.nansum(g["dur"].to_numpy())),
            )
        )
    notes: list[str] = []
    selected = _auto(evaluations, notes) if spec.auto else _select(evaluations, spec)
    if not selected:
        have = ", ".join(f"{n} {ph}" for ph, n in pd.Series([e.phase for e in evaluations]).value_counts().items())
        raise InputError(f"--sample {spec}: selects none of the trace pass's graph evaluations ({have})")
    windows = _windows(evaluations, selected)
    return SamplePlan(spec, tuple(evaluations), selected, windows, launches, tuple(notes))


def _auto(evaluations: list[Evaluation], notes: list[str], budget: int = DEFAULT_KERNEL_BUDGET) -> tuple[int, ...]:
    """The default sample: the first prompt ubatch and first decoded token within ``budget`` kernels.

    Without phases (no op metadata) the first two evaluations are taken the same way. Beyond the
    budget the first decoded token is kept alone (the ubatch of a long prompt is the larger), or
    the first evaluation when there is no decode; ``notes`` says what was left out.
    """
    if any(e.phase is None for e in evaluations):
        first = evaluations[:2]
    else:
        first = []
        for ph in _PHASES:
            match = next((e for e in evaluations if e.phase == ph), None)
            if match is not None:
                first.append(match)
    if sum(e.kernels for e in first) <= budget or len(first) < 2:
        return tuple(sorted(e.index for e in first))
    keep = next((e for e in first if e.phase == "decode"), first[0])
    left = [e for e in first if e is not keep]
    notes.append(
        f"the default sample (--sample auto) keeps the counter pass within {budget:,} kernels: "
        + ", ".join(f"{e.phase or 'evaluation'} {e.index} ({e.kernels:,} kernels)" for e in left)
        + f" left out, {keep.phase or 'evaluation'} {keep.index} ({keep.kernels:,}) measured; "
        + "--sample prefill=1,decode=1 measures both"
    )
    return (keep.index,)


def _select(evaluations: list[Evaluation], spec: SampleSpec) -> tuple[int, ...]:
    """The evaluation indexes ``spec`` asks for: the first N of each phase (or, phases unknown, in order)."""
    assert spec.counts is not None
    if any(e.phase is None for e in evaluations):
        n = sum(spec.counts.values())
        return tuple(e.index for e in evaluations[:n])
    out = []
    for phase, n in spec.counts.items():
        out += [e.index for e in evaluations if e.phase == phase][:n]
    return tuple(sorted(out))


def _windows(evaluations: list[Evaluation], selected: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """Launch windows ``(skip, count)`` covering the selected evaluations; near ones merged."""
    spans = sorted((e.first_launch, e.last_launch) for e in evaluations if e.index in set(selected))
    merged: list[list[int]] = []
    for lo, hi in spans:
        if merged and lo - merged[-1][1] - 1 <= MERGE_GAP_LAUNCHES:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi - lo + 1) for lo, hi in merged)


def plan_sample(trace_dir: Path, spec: SampleSpec) -> SamplePlan:
    """Plan the counter sample from a finished trace pass directory (``rocroof collect``).

    Reads the trace pass (and its op metadata sidecar, when written) with the capture readers.

    Raises:
        InputError, ParseError: the trace pass cannot be read (as :func:`read_capture`).
    """
    from ..capture.readers import read_capture

    capture = read_capture(trace_dir)
    traces = [p for p in capture.passes if p.kind == "trace"] or capture.passes
    return plan_from_trace(traces[0], capture.op_metadata, spec)


def sampler_for(spec: SampleSpec) -> Callable[[Path], Sample]:
    """The ``sampler`` of :func:`rocroof.capture.collect.execute` for ``spec``: :func:`plan_sample`."""

    def plan(trace_dir: Path) -> Sample:
        sp = plan_sample(trace_dir, spec)
        return Sample(
            windows=sp.windows if sp.selected else (),
            kernels=sp.kernels,
            launches=sp.launches,
            manifest=sp.manifest(),
        )

    return plan
