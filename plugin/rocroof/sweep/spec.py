"""The sweep file (``configs/sweeps/*.yaml``, ``version: 1``): loading and validation.

A sweep is one application command template, a matrix of values for its ``{placeholders}``,
a profiler, a number of repeats, labels, an output root, a database and an error policy.
:func:`load_sweep` reads the file with PyYAML (line numbers from its node marks) and checks
every key by hand; each problem is one :class:`SweepFileError` naming the file, the line, the
key path (``matrix.phase.decode.gen``) and what was expected. Paths in the file are relative to
the directory ``rocroof`` runs from, like every rocroof path option.

Matrix axes come in three forms::

    model: [a.gguf, b.gguf]                   # values: {model} and the label model=<value>
    phase:                                    # named groups of values that go together:
      prefill: {prompt: 512, gen: 0}          #   {phase}, {prompt}, {gen}; labels phase=prefill,
      decode: {prompt: 0, gen: 16}            #   prompt=512, gen=0
    env:                                      # environment variables of the point:
      fusion: {}                              #   a mapping of named sets (label env=<name>) or a
      no-fusion: {GGML_CUDA_DISABLE_FUSION: 1}  # list of sets (label env=K=V+K2=V2 or env=none)

Every label a sweep stores (its ``labels``, each matrix value, group name and group value, each
``env`` set's name) must be one ``--run``/``--label`` can select, by the rule of ``--label``
(:func:`rocroof.labels.label_problem`: no ``,``, no control character...): the file is refused
before anything runs, naming the line and key.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, InputError
from ..labels import CONTROL, label_problem

SWEEP_VERSION = 1
PROFILERS = ("rocprofv3", "ncu", "replay")
ON_ERROR = ("stop", "skip")
#: Labels the sweep sets itself on every run; neither the matrix nor ``labels`` may use them.
RESERVED = ("sweep", "sweep_point", "sweep_gpu", "repeat")
TOP_KEYS = (
    "version",
    "name",
    "command",
    "matrix",
    "profiler",
    "repeats",
    "labels",
    "out",
    "db",
    "on_error",
    "slurm",
)
#: Keys of the ``slurm`` section (``rocroof sweep FILE --executor slurm``).
SLURM_KEYS = ("partition", "account", "qos", "time", "gres", "extra")
#: sbatch options the Slurm executor sets itself; ``slurm.extra`` may not give them.
SLURM_OWN = ("--array", "--output", "--error", "--chdir", "--wrap", "--parsable", "--job-name", "--gres")
SLURM_OWN_SHORT = {"-a": "--array", "-o": "--output", "-e": "--error", "-D": "--chdir", "-J": "--job-name"}
#: Options of each profiler (``profiler: {name: ..., <option>: ...}``).
PROFILER_OPTIONS: dict[str, tuple[str, ...]] = {
    "rocprofv3": ("counters", "output_format", "arch", "sidecar"),
    "ncu": ("counters", "cache_control", "nvtx_include", "nsys", "arch", "sidecar", "bandwidth_probe"),
    "replay": ("capture", "arch"),
}
#: Options that do not change what is measured, left out of the point id.
NOT_IN_ID = ("arch",)
ENV_AXIS = "env"

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: Slurm's names (partitions, accounts, QOS; a comma-separated list of partitions is one value).
_SLURM_NAME = re.compile(r"[A-Za-z0-9_.:+-]+(,[A-Za-z0-9_.:+-]+)*")
#: Slurm's --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]].
_SLURM_TIME = re.compile(r"\d+(:\d{1,2}){0,2}|\d+-\d{1,2}(:\d{1,2}){0,2}|UNLIMITED|INFINITE", re.IGNORECASE)
#: ``--gres`` values: ``gpu:1``, ``gpu:mi300x:1``, several separated by commas.
_SLURM_GRES = re.compile(r"[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)*(,[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)*)*")
#: ``{name}`` placeholders; ``{{`` and ``}}`` are literal braces.
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")

KeyPath = tuple[str | int, ...]


class SweepFileError(ConfigError):
    """A sweep file that cannot be used: ``<file>:<line>: <key path>: <what was expected>``.

    Args:
        path: the sweep file.
        key: the key path (``matrix.model[2]``); empty for the whole document.
        reason: what was expected, in words.
        line: 1-based line of the key in the file, when known.
    """

    def __init__(self, path: str | Path, key: str, reason: str, line: int | None = None) -> None:
        self.path = str(path)
        self.key = key
        self.reason = reason
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {key}: {reason}" if key else f"{where}: {reason}")


@dataclass(frozen=True)
class AxisEntry:
    """One value of a matrix axis.

    Attributes:
        label: the axis label's value (``model=<label>``, ``phase=prefill``, ``env=no-fusion``).
        params: placeholder values this entry sets (the axis's own name included).
        labels: labels this entry adds to a run, in order.
        env: environment variables (``env`` axis only).
    """

    label: str
    params: dict[str, str]
    labels: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Axis:
    """One matrix key and its entries (file order)."""

    key: str
    entries: tuple[AxisEntry, ...]


@dataclass(frozen=True)
class ProfilerSpec:
    """The ``profiler`` section.

    Attributes:
        name: ``rocprofv3``, ``ncu`` or ``replay``.
        options: the validated options: ``counters`` (str), ``output_format``, ``cache_control``,
            ``nsys``, ``arch`` (str), ``nvtx_include`` (tuple of str), ``sidecar``, ``bandwidth_probe`` (bool),
            ``capture`` (replay: the capture directory template).
    """

    name: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def replay(self) -> bool:
        """True when points ingest recorded captures instead of running anything."""
        return self.name == "replay"


@dataclass(frozen=True)
class SlurmSpec:
    """The ``slurm`` section: how ``--executor slurm`` asks for resources (every key optional).

    Attributes:
        partition: ``--partition`` (one name or several separated by commas), or None.
        account: ``--account``, or None.
        qos: ``--qos``, or None.
        time: ``--time`` of each array task, in Slurm's notation (``30``, ``1:30:00``, ``2-00:00:00``), or None.
        gres: ``--gres`` of each task: None means ``gpu:1`` when the sweep profiles and none for
            replay; ``none`` asks for none (GPUs come from ``extra`` or the partition).
        extra: further sbatch arguments, one per ``#SBATCH`` line (``--constraint=mi300x``).
    """

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    gres: str | None = None
    extra: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file.

    Attributes:
        path: the file.
        name: ``name`` (default: the file name without ``.yaml``); every run is labelled ``sweep=<name>``.
        command: the application command template, split into arguments (empty: replay without one).
        matrix: the axes, in file order.
        profiler: the profiler section.
        repeats: how often each combination runs.
        labels: labels for every run.
        out: output root; point ``P`` writes its capture to ``out/P``.
        db: the database (file or URL) named in the file, or None.
        on_error: ``stop`` or ``skip``.
        slurm: the ``slurm`` section (resources of ``--executor slurm``'s array tasks).
    """

    path: Path
    name: str
    command: tuple[str, ...]
    matrix: tuple[Axis, ...]
    profiler: ProfilerSpec
    repeats: int
    labels: dict[str, str]
    out: Path
    db: str | None
    on_error: str
    slurm: SlurmSpec = field(default_factory=SlurmSpec)

    @property
    def placeholders(self) -> list[str]:
        """Every placeholder name the matrix defines, then ``repeat``."""
        names: list[str] = []
        for axis in self.matrix:
            for name in axis.entries[0].params:
                if name not in names:
                    names.append(name)
        return [*names, "repeat"]


# ---- YAML with line numbers ------------------------------------------------------------------


class _Doc:
    """The parsed document and the line of each key path, for messages."""

    def __init__(self, path: Path, data: Any, lines: dict[KeyPath, int], raw: dict[KeyPath, str]) -> None:
        self.path = path
        self.data = data
        self.lines = lines
        self.raw = raw

    def line(self, key: KeyPath) -> int | None:
        while True:
            if key in self.lines:
                return self.lines[key]
            if not key:
                return None
            key = key[:-1]

    def error(self, key: KeyPath, reason: str) -> SweepFileError:
        return SweepFileError(self.path, key_text(key), reason, self.line(key))

    def describe(self, key: KeyPath, value: Any) -> str:
        """Like :func:`describe`, quoting what the file says for a boolean (``on`` rather than ``true``)."""
        if isinstance(value, bool) and key in self.raw:
            text = self.raw[key]
            return f"{text} (YAML reads yes/no/on/off/true/false as a boolean; quote it: '{text}')"
        return describe(value)


def key_text(key: KeyPath) -> str:
    """``("matrix", "model", 2)`` -> ``matrix.model[2]``."""
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


#: Most points one sweep file may expand to (matrix combinations x repeats): far above a real
#: campaign (50 models x a few sizes x env sets), far below what would exhaust memory.
MAX_POINTS = 100_000


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases: ``*name`` could multiply a small file into gigabytes."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        """Refuse an alias (with its line) before it is composed."""
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not supported in sweep files; write the values out", event.start_mark
            )
        return super().compose_node(parent, index)


def _parse(path: Path, text: str) -> _Doc:
    loader = _NoAliasLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join(str(x) for x in (exc.context, exc.problem) if x) or "not valid YAML"
        line = text.splitlines()[mark.line] if mark and mark.line < len(text.splitlines()) else ""
        if "{" in line and re.search(r"[:,]\s*[^'\"\s{][^,}]*\{\w", line):
            # x/{model} inside a flow mapping: YAML reads its brace as the start of another mapping
            reason += "; a value holding {placeholders} inside { } must be quoted (e.g. capture: 'x/{model}')"
        raise SweepFileError(path, "", f"not valid YAML: {reason}", mark.line + 1 if mark else None) from exc
    except yaml.YAMLError as exc:
        raise SweepFileError(path, "", f"not valid YAML: {exc}") from exc
    except RecursionError as exc:  # the YAML composer recurses once per nesting level
        raise SweepFileError(path, "", "nested too deeply (a sweep file is a few levels deep)") from exc
    finally:
        loader.dispose()
    lines: dict[KeyPath, int] = {}
    raw: dict[KeyPath, str] = {}
    if node is not None:
        try:
            _mark_lines(path, node, (), lines, raw)
        except RecursionError as exc:
            raise SweepFileError(path, "", "nested too deeply (a sweep file is a few levels deep)") from exc
    return _Doc(path, data, lines, raw)


def _mark_lines(path: Path, node: yaml.Node, key: KeyPath, lines: dict[KeyPath, int], raw: dict[KeyPath, str]) -> None:
    """Record the line of every mapping key and sequence item and each scalar's text; refuse a key given twice."""
    if isinstance(node, yaml.ScalarNode):
        raw[key] = str(node.value)
    elif isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for k, v in node.value:
            name = str(k.value) if isinstance(k, yaml.ScalarNode) else "?"
            line = k.start_mark.line + 1
            if name in seen and name != "<<":
                raise SweepFileError(
                    path, key_text((*key, name)), f"given twice (lines {seen[name]} and {line}); keep one", line
                )
            seen[name] = line
            lines[(*key, name)] = line
            _mark_lines(path, v, (*key, name), lines, raw)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*key, i)] = item.start_mark.line + 1
            _mark_lines(path, item, (*key, i), lines, raw)


def describe(value: Any) -> str:
    """What a YAML value is, for messages: ``a string ('x')``, ``a list``, ``true (a boolean...)``."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        word = "true" if value else "false"
        return f"{word} (a boolean: YAML reads yes/no/on/off/true/false so; quote it: '{word}')"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def _plain_text(doc: _Doc, key: KeyPath, text: str) -> str:
    """``text`` unless it holds a control character (newline, tab, escape...: :data:`rocroof.labels.CONTROL`).

    Refused in labels and values alike, as ``--label`` refuses them: a newline or escape sequence in a
    label would reach every terminal that lists the runs.
    """
    bad = CONTROL.search(text)
    if bad:
        raise doc.error(key, f"control character {bad.group()!r} in {text!r}; labels and values are one plain line")
    return text


def _label(doc: _Doc, key: KeyPath, name: str, value: str) -> str:
    """``value``, checked as the value of the label ``name`` by the rule of ``--label``.

    Every stored label must be one ``--run``/``--label`` can select (:func:`rocroof.labels.label_problem`):
    refused here, before anything runs, rather than stored and then unreachable.
    """
    problem = label_problem(name, value)
    if problem:
        raise doc.error(key, f"{problem}; runs are labelled {name}=<value>, and --run could not select this one")
    return value


def _scalar(doc: _Doc, key: KeyPath, value: Any, what: str = "a string or a number") -> str:
    """A label, placeholder or environment value as text; booleans, nulls and control characters are refused."""
    if isinstance(value, str):
        return _plain_text(doc, key, value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise doc.error(key, f"expected {what}, got {doc.describe(key, value)}")


def _string(doc: _Doc, key: KeyPath, value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise doc.error(key, f"expected {what}, got {describe(value) if value != '' else 'an empty string'}")
    return value


def _unknown(doc: _Doc, key: KeyPath, name: str, known: tuple[str, ...], what: str) -> SweepFileError:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return doc.error((*key, name), f"unknown {what}{hint}; expected one of: {', '.join(known)}")


# ---- loading --------------------------------------------------------------------------------


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file.

    Args:
        path: the YAML file (``configs/sweeps/h200-tiny.yaml``).

    Returns:
        The validated :class:`Sweep`.

    Raises:
        InputError: the file does not exist or is not UTF-8 text.
        SweepFileError: invalid YAML, a missing or unknown key, a value of the wrong kind, a
            placeholder the matrix does not define; the message names the file, line and key.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such sweep file" + (" (it is a directory)" if path.is_dir() else ""))
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    doc = _parse(path, text)
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error(
            (),
            f"expected a mapping of sweep keys ({', '.join(TOP_KEYS)}), got {describe(data)}"
            if data is not None
            else "the file is empty; a sweep needs at least version, command, matrix and profiler",
        )
    for k in data:
        if str(k) not in TOP_KEYS:
            raise _unknown(doc, (), str(k), TOP_KEYS, "key")
    _check_version(doc, data)
    name = _name(doc, data)
    profiler = _profiler(doc, data.get("profiler"), "profiler" in data)
    matrix = _matrix(doc, data.get("matrix"))
    command = _command(doc, data.get("command"), "command" in data, profiler)
    repeats = _repeats(doc, data.get("repeats", 1), profiler)
    combinations = 1
    for axis in matrix:
        combinations *= max(1, len(axis.entries))
    if combinations * repeats > MAX_POINTS:
        where = ("repeats",) if repeats > MAX_POINTS else ("matrix",)
        raise doc.error(
            where,
            f"expands to {combinations:,} combination(s) x {repeats:,} repeat(s) = {combinations * repeats:,} points; "
            f"a sweep file may hold at most {MAX_POINTS:,} (split it into several files)",
        )
    labels = _labels(doc, data.get("labels"), matrix)
    out = Path(_string(doc, ("out",), data["out"], "a directory path")) if "out" in data else None
    db = _string(doc, ("db",), data["db"], "a database file or URL") if "db" in data else None
    on_error = data.get("on_error", "stop")
    if on_error not in ON_ERROR:
        raise doc.error(("on_error",), f"expected stop or skip, got {describe(on_error)}")
    slurm = _slurm(doc, data.get("slurm"), profiler) if "slurm" in data else SlurmSpec()
    sweep = Sweep(
        path=path,
        name=name,
        command=command,
        matrix=matrix,
        profiler=profiler,
        repeats=repeats,
        labels=labels,
        out=out if out is not None else Path("rocroof-out") / "sweeps" / name,
        db=db,
        on_error=on_error,
        slurm=slurm,
    )
    known = sweep.placeholders
    for i, word in enumerate(command):
        _check_template(doc, ("command",) if isinstance(data.get("command"), str) else ("command", i), word, known)
    if profiler.replay:
        _check_template(doc, ("profiler", "capture"), profiler.options["capture"], known)
    return sweep


def _check_version(doc: _Doc, data: dict[Any, Any]) -> None:
    if "version" not in data:
        raise doc.error(("version",), f"missing; start the file with 'version: {SWEEP_VERSION}'")
    version = data["version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise doc.error(("version",), f"expected the number {SWEEP_VERSION}, got {describe(version)}")
    if version != SWEEP_VERSION:
        raise doc.error(
            ("version",), f"expected {SWEEP_VERSION}, got {version} (this rocroof reads sweep files of version 1)"
        )


def _name(doc: _Doc, data: dict[Any, Any]) -> str:
    if "name" not in data:
        stem = doc.path.name.removesuffix(".yaml").removesuffix(".yml")
        return stem if _NAME.fullmatch(stem) else "sweep"
    name = data["name"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise doc.error(("name",), f"expected a name of letters, digits, '.', '_' and '-', got {describe(name)}")
    return name


def _profiler(doc: _Doc, value: Any, given: bool) -> ProfilerSpec:
    key: KeyPath = ("profiler",)
    if not given:
        raise doc.error(key, f"missing; expected one of {', '.join(PROFILERS)} (or a mapping with name: and options)")
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict):
        raise doc.error(
            key, f"expected {', '.join(PROFILERS)} or a mapping with name: and options, got {describe(value)}"
        )
    if "name" not in value:
        raise doc.error((*key, "name"), f"missing; expected one of {', '.join(PROFILERS)}")
    name = value["name"]
    if name not in PROFILERS:
        raise doc.error(
            (*key, "name") if isinstance(doc.data.get("profiler"), dict) else key,
            f"expected one of {', '.join(PROFILERS)}, got {describe(name)}",
        )
    allowed = PROFILER_OPTIONS[name]
    options: dict[str, Any] = {}
    for opt, v in value.items():
        opt = str(opt)
        if opt == "name":
            continue
        if opt not in allowed:
            owners = [n for n, opts in PROFILER_OPTIONS.items() if opt in opts]
            if owners:
                raise doc.error(
                    (*key, opt),
                    f"an option of {' and '.join(owners)}, not of {name}; {name} takes: {', '.join(allowed)}",
                )
            raise _unknown(doc, key, opt, allowed, f"option for {name}")
        k = (*key, opt)
        if opt == "counters":
            items = v if isinstance(v, list) else [v]
            names = [_string(doc, k, c, "a preset (dram, roofline, ops) or counter names") for c in items]
            if not names:
                raise doc.error(k, "expected a preset (dram, roofline, ops) or counter names, got an empty list")
            options[opt] = ",".join(n.strip() for n in names)
        elif opt == "nvtx_include":
            items = v if isinstance(v, list) else [v]
            options[opt] = tuple(_string(doc, k, e, "an NVTX range expression (or a list of them)") for e in items)
        elif opt in ("sidecar", "bandwidth_probe"):
            if not isinstance(v, bool):
                raise doc.error(k, f"expected true or false, got {doc.describe(k, v)}")
            options[opt] = v
        elif opt == "cache_control":
            if v not in ("all", "none"):
                raise doc.error(k, f"expected all or none, got {describe(v)}")
            options[opt] = v
        elif opt == "output_format":
            if v not in ("rocpd", "csv"):
                raise doc.error(k, f"expected rocpd or csv, got {describe(v)}")
            options[opt] = v
        elif opt == "arch":
            from ..analysis.arch import arch_problem  # the check of ingest/collect --arch

            if not isinstance(v, str):
                raise doc.error(k, f"expected a GPU architecture (gfx942, sm_90...), got {describe(v)}")
            problem = arch_problem(v)
            if problem is not None:
                raise doc.error(k, f"{v!r}: {problem}")
            options[opt] = v.strip().lower()
        else:  # nsys, capture
            what = "the nsys executable or none" if opt == "nsys" else "a capture directory (examples/h200/{case})"
            options[opt] = _string(doc, k, v, what)
    if name == "rocprofv3" and "arch" in options:
        # what collect --dry-run would refuse, refused at load time (sweep --dry-run included)
        from ..capture.profilers.rocprofv3 import resolve_counters
        from ..errors import ConfigError

        try:
            resolve_counters(str(options.get("counters", "dram")), str(options["arch"]))
        except ConfigError as exc:
            raise doc.error((*key, "arch"), str(exc).replace("--counters A,B,...", "counters: [A, B, ...]")) from None
    if name == "replay" and "capture" not in options:
        raise doc.error(
            (*key, "capture"),
            "missing; replay needs the recorded capture of each point, e.g. capture: examples/h200/{case}",
        )
    return ProfilerSpec(name=name, options=options)


def _slurm(doc: _Doc, value: Any, profiler: ProfilerSpec) -> SlurmSpec:
    key: KeyPath = ("slurm",)
    if value is None:
        return SlurmSpec()
    if not isinstance(value, dict):
        raise doc.error(key, f"expected a mapping of sbatch settings ({', '.join(SLURM_KEYS)}), got {describe(value)}")
    found: dict[str, Any] = {}
    for raw, v in value.items():
        opt = str(raw)
        k = (*key, opt)
        if opt not in SLURM_KEYS:
            raise _unknown(doc, key, opt, SLURM_KEYS, "slurm setting")
        if opt in ("partition", "account", "qos"):
            text = _scalar(doc, k, v, f"a {opt} name")
            if not _SLURM_NAME.fullmatch(text):
                raise doc.error(k, f"expected a {opt} name (letters, digits, '_', '.', '-'), got {describe(v)}")
            found[opt] = text
        elif opt == "time":
            # YAML 1.1 reads 1:30:00 as the base-60 number 5400: take the text as written
            text = doc.raw.get(k, str(v)) if isinstance(v, int) and not isinstance(v, bool) else v
            if not isinstance(text, str) or not _SLURM_TIME.fullmatch(text.strip()):
                raise doc.error(
                    k,
                    f"expected a Slurm time limit (minutes, H:MM:SS or D-HH:MM:SS, e.g. 30 or 2:00:00), got "
                    f"{doc.describe(k, v)}",
                )
            found[opt] = text.strip()
        elif opt == "gres":
            text = _string(doc, k, v, "a generic resource such as gpu:1 or gpu:mi300x:1 (none: ask for no GPU)")
            if not _SLURM_GRES.fullmatch(text):
                raise doc.error(k, f"expected a generic resource such as gpu:1 or gpu:mi300x:1, got {describe(v)}")
            if profiler.replay and text != "none":
                raise doc.error(k, "replay points ingest recorded captures and use no GPU; remove slurm.gres")
            found[opt] = text
        else:  # extra
            items = v if isinstance(v, list) else [v]
            args = []
            for i, arg in enumerate(items):
                ki = (*k, i) if isinstance(v, list) else k
                text = _string(doc, ki, arg, "sbatch arguments such as --constraint=mi300x (a list of them)")
                if not text.startswith("-") or any(c.isspace() for c in text):
                    raise doc.error(
                        ki,
                        f"expected one sbatch option without spaces (it becomes an #SBATCH line), such as "
                        f"--constraint=mi300x, got {describe(arg)}",
                    )
                reason = slurm_own_option(text)
                if reason:
                    raise doc.error(ki, reason)
                args.append(text)
            found[opt] = tuple(args)
    return SlurmSpec(**found)


def slurm_own_option(arg: str) -> str:
    """Why ``arg`` may not be an extra sbatch argument ('' when it may): the executor sets it itself."""
    name = arg.split("=", 1)[0] if arg.startswith("--") else SLURM_OWN_SHORT.get(arg[:2], "")
    if name == "--gres":
        return "--gres is set from slurm.gres (default gpu:1 when the sweep profiles); give it there"
    if name in SLURM_OWN:
        return f"{name} is set by rocroof (the array, its logs, directory and job name); leave it out"
    return ""


def _matrix(doc: _Doc, value: Any) -> tuple[Axis, ...]:
    key: KeyPath = ("matrix",)
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise doc.error(key, f"expected a mapping of placeholder names to lists of values, got {describe(value)}")
    axes: list[Axis] = []
    owner: dict[str, str] = {}  # placeholder -> key path that defines it

    def claim(name: str, k: KeyPath) -> None:
        if name in RESERVED:
            raise doc.error(k, f"{name!r} is set by the sweep itself ({', '.join(RESERVED)}); choose another name")
        if name in owner and owner[name] != key_text(k[:2]):
            raise doc.error(k, f"{name!r} is also set by {owner[name]}; each placeholder comes from one matrix key")
        owner[name] = key_text(k[:2])

    for raw, entries in value.items():
        axis = str(raw)
        k = (*key, axis)
        if not _IDENT.fullmatch(axis):
            raise doc.error(k, "expected a name of letters, digits and '_' (it is a {placeholder} and a label key)")
        claim(axis, k)
        if axis == ENV_AXIS:
            axes.append(Axis(axis, _env_entries(doc, k, entries)))
        elif isinstance(entries, list):
            axes.append(Axis(axis, _value_entries(doc, k, entries)))
        elif isinstance(entries, dict):
            axes.append(Axis(axis, _group_entries(doc, k, entries, claim)))
        else:
            raise doc.error(
                k,
                f"expected a list of values or a mapping of named groups ({{name: {{key: value}}}}), got "
                f"{describe(entries)}",
            )
    return tuple(axes)


def _value_entries(doc: _Doc, key: KeyPath, values: list[Any]) -> tuple[AxisEntry, ...]:
    if not values:
        raise doc.error(key, "expected a non-empty list of values")
    axis = str(key[-1])
    seen: set[str] = set()
    out = []
    for i, v in enumerate(values):
        if isinstance(v, list | dict):
            raise doc.error(
                (*key, i),
                f"expected a string or a number, got {describe(v)}; for values that go together use a "
                "mapping of named groups",
            )
        text = _scalar(doc, (*key, i), v)
        if text in seen:
            raise doc.error((*key, i), f"{text!r} is listed twice")
        seen.add(text)
        _label(doc, (*key, i), axis, text)
        out.append(AxisEntry(label=text, params={axis: text}, labels={axis: text}))
    return tuple(out)


def _group_entries(doc: _Doc, key: KeyPath, groups: dict[Any, Any], claim: Any) -> tuple[AxisEntry, ...]:
    if not groups:
        raise doc.error(key, "expected at least one named group")
    axis = str(key[-1])
    first: list[str] | None = None
    first_name = ""
    out = []
    for raw, values in groups.items():
        name = _scalar(doc, (*key, str(raw)), raw, "a group name")
        k = (*key, name)
        _label(doc, k, axis, name)
        if not isinstance(values, dict) or not values:
            raise doc.error(
                k, f"expected a mapping of placeholder values ({{prompt: 512, gen: 0}}), got {describe(values)}"
            )
        params = {axis: name}
        labels = {axis: name}
        for inner, v in values.items():
            inner = str(inner)
            if not _IDENT.fullmatch(inner):
                raise doc.error((*k, inner), "expected a name of letters, digits and '_' (it is a {placeholder})")
            if inner == axis:
                raise doc.error((*k, inner), f"{inner!r} is the group's own name; choose another key")
            claim(inner, (*k, inner))
            text = _label(doc, (*k, inner), inner, _scalar(doc, (*k, inner), v))
            params[inner] = text
            labels[inner] = text
        keys = sorted(params)
        if first is None:
            first, first_name = keys, name
        elif keys != first:
            raise doc.error(
                k,
                f"sets {', '.join(n for n in keys if n != axis)}; the first group ({first_name}) sets "
                f"{', '.join(n for n in first if n != axis)} (every group of an axis sets the same keys)",
            )
        out.append(AxisEntry(label=name, params=params, labels=labels))
    return tuple(out)


def _env_entries(doc: _Doc, key: KeyPath, value: Any) -> tuple[AxisEntry, ...]:
    named: list[tuple[str | None, KeyPath, Any]]
    if isinstance(value, list):
        named = [(None, (*key, i), v) for i, v in enumerate(value)]
    elif isinstance(value, dict):
        named = [(_plain_text(doc, (*key, str(n)), str(n)), (*key, str(n)), v) for n, v in value.items()]
    else:
        raise doc.error(
            key, f"expected a list of environment-variable mappings or a mapping of named ones, got {describe(value)}"
        )
    if not named:
        raise doc.error(key, "expected at least one set of environment variables ({} for none)")
    out = []
    seen: dict[tuple[tuple[str, str], ...], str] = {}
    labels_seen: dict[str, str] = {}  # label -> key path of the set
    for name, k, env in named:
        if env is None:
            env = {}
        if not isinstance(env, dict):
            raise doc.error(k, f"expected a mapping of environment variables (NAME: value), got {describe(env)}")
        variables: dict[str, str] = {}
        for var, v in env.items():
            var = str(var)
            if not _IDENT.fullmatch(var):
                raise doc.error((*k, var), "expected an environment variable name (letters, digits and '_')")
            variables[var] = _scalar(doc, (*k, var), v)
        signature = tuple(sorted(variables.items()))
        if signature in seen:
            raise doc.error(k, f"the same variables as {seen[signature]}")
        seen[signature] = key_text(k)
        # a list's set is labelled by its variables, joined by '+' (a ',' could not be selected)
        label = name if name is not None else ("+".join(f"{a}={b}" for a, b in signature) or "none")
        problem = label_problem(ENV_AXIS, label)
        if problem:
            hint = "; name the set (a mapping of named sets: env: {my-set: {...}})" if name is None else ""
            raise doc.error(k, f"{problem}; runs are labelled {ENV_AXIS}=<set>, and --run could not select it{hint}")
        if label in labels_seen:
            raise doc.error(k, f"labelled {ENV_AXIS}={label}, as {labels_seen[label]} is; name the sets")
        labels_seen[label] = key_text(k)
        out.append(AxisEntry(label=label, params={ENV_AXIS: label}, labels={ENV_AXIS: label}, env=variables))
    return tuple(out)


def _command(doc: _Doc, value: Any, given: bool, profiler: ProfilerSpec) -> tuple[str, ...]:
    key: KeyPath = ("command",)
    if not given or value is None:
        if profiler.replay:
            return ()
        raise doc.error(key, "missing; expected the application command, e.g. llama-bench -m {model} -p {prompt}")
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise doc.error(key, f"cannot split into arguments ({exc})") from exc
    elif isinstance(value, list):
        words = [_scalar(doc, (*key, i), w) for i, w in enumerate(value)]
    else:
        raise doc.error(key, f"expected a command line (a string) or a list of arguments, got {describe(value)}")
    if not words:
        raise doc.error(key, "expected the application command, got an empty one")
    return tuple(words)


def _repeats(doc: _Doc, value: Any, profiler: ProfilerSpec) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise doc.error(("repeats",), f"expected a whole number of at least 1, got {describe(value)}")
    if profiler.replay and value != 1:
        raise doc.error(("repeats",), "a recorded capture is stored once; replay takes repeats: 1")
    return value


def _labels(doc: _Doc, value: Any, matrix: tuple[Axis, ...]) -> dict[str, str]:
    key: KeyPath = ("labels",)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise doc.error(key, f"expected a mapping of label keys to values, got {describe(value)}")
    matrix_labels = {name for axis in matrix for name in axis.entries[0].labels}
    out: dict[str, str] = {}
    for raw, v in value.items():
        name = str(raw).strip()
        k = (*key, str(raw))
        if not name:
            raise doc.error(k, "expected a label key, got an empty one")
        _plain_text(doc, k, name)
        if "," in name or "=" in name:
            raise doc.error(k, f"a label key cannot hold ',' or '=' (labels are listed as key=value,...), got {name!r}")
        if name in RESERVED:
            raise doc.error(k, f"{name!r} is set by the sweep itself ({', '.join(RESERVED)}); choose another key")
        if name in matrix_labels:
            raise doc.error(k, f"{name!r} is also a matrix key (each point is labelled with its value)")
        out[name] = _label(doc, k, name, _scalar(doc, k, v))
    return out


def _check_template(doc: _Doc, key: KeyPath, text: str, known: list[str]) -> None:
    for m in PLACEHOLDER.finditer(text):
        token = m.group(0)
        if token in ("{{", "}}"):
            continue
        name = m.group(1)
        if name is None:
            raise doc.error(key, f"unmatched {token!r} in {text!r}; write {{{{ or }}}} for a literal brace")
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {{{close[0]}}}?)" if close else ""
            raise doc.error(
                key,
                f"unknown placeholder {{{name}}}{hint}; the matrix defines: {', '.join('{' + n + '}' for n in known)}",
            )


def fill(template: str, params: Mapping[str, str]) -> str:
    """Replace each ``{name}`` in ``template`` by ``params[name]`` (``{{``/``}}`` are literal braces).

    Raises:
        KeyError: a placeholder missing from ``params`` (:func:`load_sweep` has checked them).
    """

    def sub(m: re.Match[str]) -> str:
        token = m.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return params[m.group(1)]

    return PLACEHOLDER.sub(sub, template)
