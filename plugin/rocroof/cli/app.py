"""The ``rocroof`` click group, its error handling, and the helpers every command module uses.

Every :class:`~rocroof.errors.RocroofError` becomes a one-line ``Error: ...`` message and exit
status 1; anything else is a bug and keeps its traceback. ``--traceback`` shows tracebacks for
user errors too.
"""

from __future__ import annotations

import errno
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from .. import SCHEMA_VERSION, __version__
from ..dbfile import damaged, damaged_message
from ..errors import InputError, OutputError, RocroofError
from ..labels import label_problem
from ..text import one_line, printable, storable

if TYPE_CHECKING:  # imported where used: rich and SQLAlchemy cost ~150 ms, more than `rocroof --help` may take
    from rich.console import Console
    from rich.progress import Progress

DEFAULT_DB = "rocroof.db"
DB_HELP = (
    "Results database: a SQLite file or an SQLAlchemy URL (postgresql://...). [env ROCROOF_DB; default rocroof.db]"
)
FORMATS = ("table", "csv", "json", "markdown")


#: The commands that write runs into a database (an interrupted one says what became of them).
_STORING_COMMANDS = frozenset({"ingest", "collect", "sweep", "merge", "db"})


#: The global flag that keeps tracebacks; accepted before the command or anywhere after it.
TRACEBACK_FLAG = "--traceback"


class RocroofGroup(click.Group):
    """A click group that turns :class:`RocroofError` into one-line messages."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse the group's options; ``--traceback`` counts wherever it stands before a ``--``.

        ``rocroof ingest X --traceback`` is ``rocroof --traceback ingest X``: the flag is moved in
        front of the command, for the group to parse. Words after ``--`` (``collect -- APP ARGS``)
        belong to the application and stay where they are.
        """
        if ctx.parent is None and TRACEBACK_FLAG in args:
            end = args.index("--") if "--" in args else len(args)
            if TRACEBACK_FLAG in args[:end]:
                args = [TRACEBACK_FLAG, *(a for a in args[:end] if a != TRACEBACK_FLAG), *args[end:]]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; user errors become ``Error: <message>`` and exit status 1."""
        args = [*getattr(ctx, "_protected_args", []), *ctx.args]  # the subcommand line, to name the database
        try:
            return super().invoke(ctx)
        except StdoutClosed:  # `| head`: the reader has what it wants; exit 0, however the output was written
            return None
        except KeyboardInterrupt:
            # Ctrl-C, or SIGTERM (rocroof.cli.main): a run being stored rolled back, a profiler stopped
            # with rocroof; exit status 130 as a shell gives a job stopped by SIGINT (and as a sweep does)
            stores = ctx.invoked_subcommand in _STORING_COMMANDS
            why = "; nothing is stored half (a run being stored was rolled back)" if stores else ""
            click.echo(f"Aborted: interrupted{why}.", err=True)
            raise click.exceptions.Exit(130) from None
        except RocroofError as exc:
            if ctx.params.get("traceback") or os.environ.get("ROCROOF_TRACEBACK"):
                raise
            raise click.ClickException(one_line(str(exc))) from None
        except Exception as exc:
            # the database refused (read-only, locked, full disk, gone) or is damaged: a driver's error,
            # which only a command that opened the database can raise; anything else goes on unchanged
            if ctx.params.get("traceback") or os.environ.get("ROCROOF_TRACEBACK"):
                raise
            message = _database_failure(exc, args)
            if message is None:
                raise
            raise click.ClickException(one_line(message)) from None


def _database_failure(exc: BaseException, args: Sequence[str]) -> str | None:
    """The one-line message for a database that refused a command or is damaged; None for anything else.

    ``exc`` is what a command raised: SQLAlchemy's ``OperationalError`` (the database refused:
    read-only, locked, full disk, gone), or a damaged SQLite file as SQLAlchemy's ``DBAPIError`` or
    the standard library's ``sqlite3.DatabaseError`` (the stored report is read without
    SQLAlchemy). Any other exception is a bug, and keeps its traceback (None).
    """
    known = refused = False
    driver: BaseException | None = None  # the driver's own exception: its first line is the reason
    if "sqlalchemy.exc" in sys.modules:  # only a command that imported SQLAlchemy can raise its errors
        from sqlalchemy import exc as sa_exc

        if isinstance(exc, sa_exc.DBAPIError):
            known, driver, refused = True, exc.orig, isinstance(exc, sa_exc.OperationalError)
    if not known and "sqlite3" in sys.modules:
        import sqlite3

        if isinstance(exc, sqlite3.DatabaseError):
            known, driver, refused = True, exc, isinstance(exc, sqlite3.OperationalError)
    if not known:
        return None
    text = str(driver).strip() if driver is not None else ""
    reason = text.splitlines()[0] if text else ""
    shown = _db_in_args(args) or "the database"
    if damaged(reason):
        return damaged_message(shown, reason)
    if not refused:
        return None  # a constraint or a statement rocroof got wrong: a bug, with its traceback
    return f"{shown}: the database refused the command ({reason or type(exc).__name__}); no run is left half-written"


def _db_in_args(args: Sequence[str]) -> str | None:
    """The database a command line names (``--into``, ``--db``, else ``ROCROOF_DB``), shown safely."""
    from ..store import shown_db  # here, not at start-up: the store pulls in pandas

    for flag in ("--into", "--db"):
        for i, a in enumerate(args):
            if a == flag and i + 1 < len(args):
                return shown_db(args[i + 1])
            if a.startswith(flag + "="):
                return shown_db(a.split("=", 1)[1])
    env = os.environ.get("ROCROOF_DB")
    return shown_db(env) if env else None


def _stop_writing_stdout() -> None:
    """After a closed pipe (``| head``): point stdout at the null device.

    Nothing more is written, and the interpreter's last flush does not fail (the recipe of the
    Python documentation's ``signal`` page, "Note on SIGPIPE").
    """
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's captured stdout)
        sys.stdout = _Silenced(sys.stdout)


class _Silenced:
    """Standard output after it failed: the interpreter's last flush must not fail again."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class StdoutClosed(Exception):
    """The reader of stdout went away (``| head``): :class:`RocroofGroup` ends the command with status 0."""


def echo(text: str, nl: bool = True, *, exact: bool = False) -> None:
    """Print ``text`` to stdout, made printable (:func:`printable`).

    ``exact`` (CSV with ``--raw``: the cells as stored) writes ``text`` as it is, control
    characters included, into a file or a pipe, as JSON carries them (``\\u001b`` there); to a
    terminal, which would act on them rather than keep them, it is made printable all the same.

    Raises:
        OutputError: stdout cannot be written (a full disk, ``> /dev/full``).
        StdoutClosed: a closed pipe (``| head``); stdout then goes to the null device
            (:func:`_stop_writing_stdout`), and the command ends quietly with status 0, whether its
            output was one write or many (a streamed CSV, a query's batches).
    """
    as_is = exact and not _stdout_is_terminal()
    try:
        # click flushes: a full disk shows here, not at exit; color=True: click would strip what looks like
        # a colour code from text going to a pipe, and exact text keeps every character
        click.echo(storable(text) if as_is else printable(text), nl=nl, color=True if as_is else None)
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            _stop_writing_stdout()
            raise StdoutClosed() from exc
        sys.stdout = _Silenced(sys.stdout)
        raise OutputError(f"cannot write the output: {exc.strerror or exc}") from exc


def _stdout_is_terminal() -> bool:
    """Whether standard output is a terminal (not a file or a pipe)."""
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):  # replaced or closed
        return False


def stderr_console() -> Console:
    """A rich console on stderr, for progress and messages that are not the command's output."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def lock_notice() -> Callable[[str, float, float], None]:
    """A :class:`~rocroof.store.Store` ``on_wait`` hook: one line on stderr when a wait for a lock passes 2 s.

    Another process writing to the database (or holding it locked) makes a command wait up to
    :data:`~rocroof.store.WRITE_TIMEOUT_S`; the line says so once per wait, after
    :data:`~rocroof.store.locking.WAIT_NOTICE_S`, instead of a silent pause.
    """
    from ..store.locking import WAIT_NOTICE_S

    waited: dict[str, float] = {}  # per database, the wait reported last (a new wait starts lower)

    def on_wait(location: str, waited_s: float, timeout_s: float) -> None:
        before = waited.get(location, 0.0)
        waited[location] = waited_s
        if before < WAIT_NOTICE_S <= waited_s:
            stderr_console().print(
                f"waiting for {printable(location)}: another process is writing to it "
                f"(up to {timeout_s:g} s; Ctrl-C to stop)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )

    return on_wait


def db_arg(db: str) -> str:
    """`` --db X`` for a command to print, or ``""`` where ``db`` is what a bare command opens (the default)."""
    import shlex

    from ..store import shown_db

    return "" if db == (os.environ.get("ROCROOF_DB") or DEFAULT_DB) else f" --db {shlex.quote(shown_db(db))}"


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan``, ``inf`` and ``-inf``: a usage error (exit status 2).

    NaN passes any range check (every comparison with it is false), and an infinite threshold
    (``--fail-on-regression inf``, ``--min-change-us inf``) turns the check it sets off without a
    word; a threshold is a finite number.
    """

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """``value`` as a float within the range; fails on a non-number, one out of range or not finite."""
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


def db_option(fn: Any) -> Any:
    """The ``--db FILE|URL`` option (env ``ROCROOF_DB``, default ``rocroof.db``)."""
    return click.option("--db", "db", envvar="ROCROOF_DB", default=DEFAULT_DB, show_default=False, help=DB_HELP)(fn)


def format_option(fn: Any) -> Any:
    """The ``--format table|csv|json|markdown`` option."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="table for terminals, markdown for PR reviews, csv/json for scripts (raw values, units in names).",
    )(fn)


def label_option(fn: Any) -> Any:
    """The repeatable ``--label KEY=VALUE`` filter on a run's labels (``label_filters``)."""
    return click.option(
        "--label",
        "label_filters",
        multiple=True,
        metavar="KEY=VALUE",
        help="Only runs with this label (repeatable; all must match; * matches any text).",
    )(fn)


def raw_option(fn: Any) -> Any:
    """The ``--raw`` flag: CSV text cells exactly as stored (no formula guard, control characters kept)."""
    return click.option(
        "--raw",
        is_flag=True,
        help="CSV: write text cells exactly as stored (as JSON carries them): formulas, and control characters "
        "(ESC, CR...) when writing to a file or pipe; a terminal still shows those as escapes (\\x1b). By default "
        "a cell starting with = + - @ (a formula to a spreadsheet: =HYPERLINK(...), +cmd|...) gets a leading ' so "
        "that opening the file runs nothing, and control characters but tab and newline are written as escapes.",
    )(fn)


def all_columns_option(fn: Any) -> Any:
    """The ``--all-columns`` flag: Markdown tables with every column (default: 9 at most, for a PR review)."""
    return click.option(
        "--all-columns",
        is_flag=True,
        help="markdown: every column (by default at most 9, the verdicts kept, so that a PR review shows them "
        "without scrolling; the others are named under the table).",
    )(fn)


@click.group(cls=RocroofGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(
    __version__, prog_name="rocroof", message=f"%(prog)s %(version)s (results database schema {SCHEMA_VERSION})"
)
@click.option(
    TRACEBACK_FLAG,
    is_flag=True,
    help="Show Python tracebacks for errors (for bug reports); before or after the command "
    "(rocroof ingest X --traceback). [env ROCROOF_TRACEBACK=1]",
)
def cli(traceback: bool) -> None:
    """rocroof: per-ggml-op DRAM roofline profiles of llama.cpp, in a database you can query.

    \b
    Typical session:
      rocroof collect --out cap1 -- llama-bench -m model.gguf -p 512 -n 0 -r 1
      rocroof report --by op
      rocroof report --by dispatch --top 20 --format markdown
      rocroof query "SELECT op, SUM(duration_ns) FROM dispatch_dram GROUP BY op"

    \b
    Already have profiler output? Ingest it:
      rocroof ingest path/to/rocprofv3-output/ --label model=qwen3-30b
    """


def parse_labels(labels: Sequence[str]) -> dict[str, str]:
    """``--label KEY=VALUE`` options as a mapping.

    Raises:
        InputError: a label without ``=``, one the run selector could not pick again
            (:func:`rocroof.labels.label_problem`: control characters, non-UTF-8 bytes, ``,``, the
            selector wildcard ``*`` in a value...), or
            a key given two different values.
    """
    out: dict[str, str] = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--label {item!r}: expected key=value")
        problem = label_problem(key.strip(), value.strip())  # the rule of every way a label is stored
        if problem:
            hint = "; give each label its own --label" if "','" in problem else ""
            raise InputError(f"--label {item!r}: {problem}{hint}")
        if key.strip() in out and out[key.strip()] != value.strip():
            raise InputError(
                f"--label {key.strip()!r} given twice ({out[key.strip()]!r} and {value.strip()!r}): a run keeps one "
                "value per key; keep one, or use two keys"
            )
        out[key.strip()] = value.strip()
    return out


def progress_bar() -> Progress:
    """A transient progress display on stderr (off when stderr is not a terminal)."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = stderr_console()
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),  # a capture's path: text, not console markup
        BarColumn(),
        TextColumn("{task.fields[detail]}", markup=False),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # a pipe or log file gets no spinner frames or stray newlines
    )
