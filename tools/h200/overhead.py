#!/usr/bin/env python3
"""Summarise the llama.cpp marker-hook overhead rounds of ``tools/h200/record.sh overhead|check``.

    python3 tools/h200/overhead.py BENCH_DIR [--base hook-off]

BENCH_DIR holds ``<model>-<config>.jsonl`` files (``llama-bench -o jsonl``, one line per test and
round, configurations run in round-robin). For each model, test (pp = prompt processing, tg =
token generation) and configuration, it prints the median over rounds of the per-round ratio of
tokens/s to the base configuration, a 95% bootstrap interval of that median (4000 resamples,
fixed seed) and in how many rounds the configuration was faster. A ratio below 1 is a cost.
Pairing by round cancels the host's drift (a shared host moves throughput by 10-30% between
minutes); the interval says whether a difference is measurable.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path


def load(path: Path) -> dict[str, list[float]]:
    """Tokens/s per test ("pp" or "tg") in round order, from one llama-bench JSONL file.

    Raises:
        SystemExit: a line that is not a llama-bench row, or tokens/s that is not a positive number.
    """
    out: dict[str, list[float]] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(f"{path}: cannot read it as llama-bench JSONL text ({exc})") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise SystemExit(f"{path}:{n}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise SystemExit(f"{path}:{n}: expected a llama-bench JSON object, not {type(row).__name__}")
        prompt, tokens_per_s = row.get("n_prompt"), row.get("avg_ts")
        if not _count(prompt):
            raise SystemExit(f"{path}:{n}: n_prompt is {prompt!r}; expected a token count (0 for generation)")
        if not _count(tokens_per_s) or not math.isfinite(tokens_per_s) or tokens_per_s <= 0:
            raise SystemExit(f"{path}:{n}: avg_ts is {tokens_per_s!r}; expected tokens/s above 0")
        out.setdefault("pp" if prompt else "tg", []).append(float(tokens_per_s))
    return out


def _count(value: object) -> bool:
    """A JSON number that is not a boolean (``true`` is 1 to Python)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def median_interval(ratios: list[float], rng: random.Random, resamples: int = 4000) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the median of ``ratios``."""
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]


def main(argv: list[str] | None = None) -> int:
    """Print the Markdown table; 1 when BENCH_DIR holds no JSONL files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_dir", type=Path)
    parser.add_argument("--base", default="hook-off", help="configuration the others are divided by")
    args = parser.parse_args(argv)
    if not args.bench_dir.is_dir():
        what = "not a folder" if args.bench_dir.exists() else "no such folder"
        print(f"{args.bench_dir}: {what} (expected one holding <model>-<config>.jsonl)", file=sys.stderr)
        return 1
    files = sorted(args.bench_dir.glob("*.jsonl"))
    if not files:
        print(f"{args.bench_dir}: no *.jsonl files (expected <model>-<config>.jsonl)", file=sys.stderr)
        return 1
    runs: dict[str, dict[str, dict[str, list[float]]]] = {}
    for f in files:
        model, _, config = f.stem.rpartition("-")
        for known in ("hook-off", "hook-on", "no-option"):  # configuration names with a dash
            if f.stem.endswith("-" + known):
                model, config = f.stem[: -len(known) - 1], known
        if not model:
            print(f"{f}: expected a name <model>-<config>.jsonl", file=sys.stderr)
            return 1
        runs.setdefault(model, {})[config] = load(f)
    if not any(args.base in configs and len(configs) > 1 for configs in runs.values()):
        print(
            f"{args.bench_dir}: no model with both {args.base!r} runs and another configuration "
            f"(found: {', '.join(f'{m}: {sorted(c)}' for m, c in runs.items())})",
            file=sys.stderr,
        )
        return 1
    rng = random.Random(1)
    table: list[str] = []
    for model, configs in runs.items():
        if args.base not in configs:
            print(f"{model}: no {args.base} runs", file=sys.stderr)
            continue
        base = configs[args.base]
        for config, tests in sorted(configs.items()):
            if config == args.base:
                continue
            for test in ("pp", "tg"):
                # a round cut by the deadline leaves one file a row short: pair the complete rounds
                pairs = list(zip(tests.get(test, []), base.get(test, []), strict=False))
                if not pairs:
                    continue
                ratios = [a / b for a, b in pairs]
                short = max(len(tests.get(test, [])), len(base.get(test, []))) - len(pairs)
                if short:  # a round cut by the deadline: say so rather than drop it quietly
                    print(f"{model} {test} {config}: {short} unpaired round(s) left out", file=sys.stderr)
                lo, hi = median_interval(ratios, rng)
                faster = sum(r > 1 for r in ratios)
                table.append(
                    f"| {model} | {test} | {config} | {len(ratios)} | {statistics.median(ratios):.3f} "
                    f"| {lo:.3f}–{hi:.3f} | {faster}/{len(ratios)} |"
                )
    if not table:
        print(f"{args.bench_dir}: no test has rounds in both {args.base!r} and another configuration", file=sys.stderr)
        return 1
    print("| model | test | config | rounds | median ratio to " + args.base + " | 95% interval | faster in |")
    print("|---|---|---|---:|---:|---:|---:|")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BrokenPipeError:  # piped into head: the reader has what it wanted
        sys.stderr.close()
        raise SystemExit(0) from None
