"""Attribute a marker-free pass to ggml op invocations by aligning its kernel sequence with the fork's.

AMD's fork writes ``GGML_ROOFLINE_OUT`` rows with each invocation's kernels in launch order (names
and GPU times) but no counters; a counter run of the same command (rocprofv3, Nsight Compute)
without rocroof's markers has counters but no ops. Both list the same kernels in the same order,
give or take kernels one of them has and the other not (memsets and copies, a warm-up evaluation
before the fork's rows start, a kernel a profiler failed to replay). :func:`align` walks the two
name sequences from their ends, so that an evaluation run before the fork's rows begin is what stays
unmatched, not the last one, and resynchronises after each difference; each matched kernel of the
pass takes its partner's invocation.

Names are compared as their kernel family (:func:`kernel_family`: the function name without return
type, template arguments or parameters), since profilers print template arguments differently
(``rms_norm_f32<(int)1024, (bool)1>`` in Nsight Systems, ``rms_norm_f32<1024, 1>`` in Nsight
Compute).

A graph evaluation repeats the same kernels, so a pass that holds only part of the fork's kernels
(one sampled token of sixteen) could be placed on any evaluation: the alignment is refused unless
it matches at least :data:`MIN_MATCHED` of the fork's kernels.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The fork's kernels must be matched at least this much (a share): the pass must hold the fork's run.
#: The pass may hold more (a warm-up evaluation before the fork's rows begin, memsets).
MIN_MATCHED = 0.9
#: Kernels skipped at most on each side to resynchronise after a difference.
WINDOW = 16
#: Kernels that must agree in a row where the walk resynchronises.
CONFIRM = 4

_TEMPLATE_OR_ARGS = re.compile(r"[<(]")


def kernel_family(name: object) -> str:
    """``void rms_norm_f32<(int)1024, (bool)1>(const float *, ...)`` -> ``rms_norm_f32``."""
    text = str(name or "").strip()
    if text.startswith("void "):
        text = text[5:]
    cut = _TEMPLATE_OR_ARGS.search(text)
    return (text[: cut.start()] if cut else text).strip()


@dataclass(frozen=True)
class Alignment:
    """The result of :func:`align`.

    Attributes:
        partner: per kernel of the pass, the index of its partner in the reference (-1: none).
        matched: kernels matched.
        share_of_pass: matched / kernels of the pass.
        share_of_reference: matched / kernels of the reference.
    """

    partner: np.ndarray
    matched: int
    share_of_pass: float
    share_of_reference: float

    @property
    def acceptable(self) -> bool:
        """At least :data:`MIN_MATCHED` of the reference matched."""
        return self.share_of_reference >= MIN_MATCHED


def align(reference: Sequence[object], names: Sequence[object]) -> Alignment:
    """Match the kernel names of a pass (``names``, launch order) to a reference sequence.

    Both sequences are walked together from their ends (module docstring: an extra evaluation
    before the fork's rows stays unmatched). Equal families match; at a difference the walk
    resynchronises at the nearest pair of positions, fewest kernels skipped on both sides
    together (at most :data:`WINDOW` on each), where :data:`CONFIRM` kernels in a row agree, so
    that one repeated kernel of a periodic sequence does not pull the walk off by a layer; with
    no such pair within the window, the pass's kernel is left unmatched. O(n x WINDOW^2) at worst.

    Returns:
        The :class:`Alignment`.
    """
    ref = [kernel_family(n) for n in reference]
    mine = [kernel_family(n) for n in names]
    partner = np.full(len(mine), -1, dtype=np.int64)

    def agree(i: int, j: int) -> bool:
        """ref[i-k] == mine[j-k] for k < CONFIRM (or to the start of either)."""
        for k in range(CONFIRM):
            if i - k < 0 or j - k < 0:
                return True
            if ref[i - k] != mine[j - k]:
                return False
        return True

    i, j = len(ref) - 1, len(mine) - 1
    while i >= 0 and j >= 0:
        if ref[i] == mine[j]:
            partner[j] = i
            i, j = i - 1, j - 1
            continue
        found = None
        for total in range(1, 2 * WINDOW + 1):
            for di in range(max(0, total - WINDOW), min(total, WINDOW) + 1):
                dj = total - di
                if i - di >= 0 and j - dj >= 0 and agree(i - di, j - dj):
                    found = (di, dj)
                    break
            if found:
                break
        if found is None:
            j -= 1  # nothing near agrees: this kernel of the pass has no partner
            continue
        i, j = i - found[0], j - found[1]
    matched = int((partner >= 0).sum())
    return Alignment(
        partner=partner,
        matched=matched,
        share_of_pass=matched / len(mine) if mine else 0.0,
        share_of_reference=matched / len(ref) if ref else 0.0,
    )
