"""The package's layer order (docs/architecture.md): no module imports from a stage above its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "plugin" / "rocroof"
ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"

#: stage of each top-level name under rocroof, lowest first (the order docs/architecture.md gives)
STAGES = {
    "dbfile": 0,
    "labels": 0,
    "note": 0,
    "": 0,  # rocroof/__init__.py: the version
    "errors": 0,
    "records": 0,
    "fileio": 0,
    "memory": 0,
    "spill": 0,
    "keys": 0,
    "text": 0,
    "data": 0,
    "analysis": 1,
    "capture": 2,
    "ingest": 3,
    "store": 4,
    "report": 5,
    "sweep": 6,
    "cli": 7,
    "api": 7,
    "__main__": 7,
}
#: The one import against the order: ``rocroof.open()``, the notebook entry point, imports the
#: facade of stage 7 when called (docs/architecture.md, "Rules").
ALLOWED_UPWARD = {("rocroof", "rocroof.api")}


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _stage(module: str) -> int:
    parts = module.split(".")
    assert parts[0] == "rocroof", module
    top = parts[1] if len(parts) > 1 else ""
    assert top in STAGES, f"rocroof.{top} has no stage: add it to docs/architecture.md and STAGES"
    return STAGES[top]


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every rocroof import in a file, function-level ones included."""
    name, is_package = _module_name(path)
    package = name if is_package else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "rocroof":
                continue
            for alias in node.names:  # "from . import x" names a module when x is one
                sub = f"{target}.{alias.name}"
                is_module = (PKG.parent / Path(*sub.split("."))).with_suffix(".py").is_file() or (
                    PKG.parent / Path(*sub.split("."))
                ).is_dir()
                found.append((node.lineno, sub if is_module else target))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "rocroof"]
    return found


MODULES = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_imports_from_a_stage_above_its_own(path: Path) -> None:
    name, _ = _module_name(path)
    own = _stage(name)
    upward = [
        f"line {line}: {target}"
        for line, target in _imports(path)
        if _stage(target) > own and (name, target) not in ALLOWED_UPWARD
    ]
    assert not upward, f"{name} (stage {own}) imports upward: {upward}"


def test_the_layer_order_in_the_docs_is_the_one_checked() -> None:
    text = ARCHITECTURE.read_text()
    listed = re.findall(r"^\| (\d) \| `([\w/.,` ]+)` \|", text, flags=re.M)
    assert listed, "docs/architecture.md has no layer table"
    for stage, names in listed:
        for name in re.findall(r"[\w]+", names):
            if name in ("py",):
                continue
            assert STAGES.get(name) == int(stage), f"docs/architecture.md puts {name} at stage {stage}"


def test_the_checker_sees_relative_and_late_imports(tmp_path: Path) -> None:
    # an upward import inside a function, written relative, is found (the cli imports stages lazily)
    found = _imports(PKG / "cli" / "capture.py")
    assert any(t.startswith("rocroof.ingest") for _, t in found)
    assert any(t == "rocroof.capture.readers" for _, t in found)
