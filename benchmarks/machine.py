"""What a benchmark result is measured on: the machine, the commit, the load (shared by the benchmarks)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def meminfo(key: str) -> float:
    """A /proc/meminfo value in GiB (0 when unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024 / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def machine(extra: str = "") -> str:
    """CPU model, CPUs, RAM, OS and Python, then ``extra`` (library versions), on one line."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} CPUs, {meminfo('MemTotal'):.0f} GiB RAM, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}" + (f", {extra}" if extra else "")
    )


def commit() -> str:
    """The short commit measured, with a note when the working tree differs from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" with uncommitted changes" if dirty else "")


def load() -> str:
    """The load average over 1 / 5 / 15 minutes."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def publish(lines: list[str], write: bool) -> None:
    """Print a result section and, when ``write``, append it to benchmarks/RESULTS.md."""
    text = "\n".join(lines)
    print(text)
    if write:
        with open(REPO / "benchmarks" / "RESULTS.md", "a", encoding="utf-8") as fh:
            fh.write("\n" + text + "\n")
