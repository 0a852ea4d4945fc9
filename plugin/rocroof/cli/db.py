"""``rocroof merge`` and ``rocroof db``: databases as a whole."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from .. import __version__
from ..errors import InputError
from .app import (
    cli,
    db_arg,
    db_option,
    echo,
    lock_notice,
)

# ---- rocroof merge ------------------------------------------------------------------------------


@cli.command()
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option(
    "--into",
    "into",
    required=True,
    metavar="DB",
    help="Target database: a SQLite file (created when absent) or a URL (postgresql://user@host/db).",
)
def merge(sources: tuple[str, ...], into: str) -> None:
    """Copy every run of the SOURCE databases, with all its rows, into one database.

    SOURCEs and the target are SQLite files or URLs (postgresql://...), in any mix. Each run is
    copied in one transaction and gets a new run id; a run whose content the target already
    holds (same raw capture) is skipped and named. All databases must be at this rocroof's
    schema version: run 'rocroof db upgrade --db X' on an older one first.

    \b
    Examples:
      rocroof merge alice.db bob.db --into team.db
      rocroof merge sweep-*.db --into postgresql://rocroof@dbhost/rocroof
      rocroof merge postgresql://rocroof@dbhost/rocroof --into snapshot.db
    """
    from ..store import shown_db
    from ..store.merge import MergedRun
    from ..store.merge import merge as merge_databases

    def report_run(r: MergedRun) -> None:
        what = f"run {r.source_run_id} of {r.source}" + (f" ({r.source_path})" if r.source_path else "")
        if r.run_id is not None:
            echo(f"Copied {what} as run {r.run_id} ({r.rows:,} rows)")
        elif r.existing_run_id is not None:
            echo(f"Skipped {what}: already stored as run {r.existing_run_id} (same content)")
        else:
            echo(f"Skipped {what}: stored by another writer meanwhile (same content)")

    done = merge_databases(list(sources), into, on_run=report_run, on_wait=lock_notice())
    copied = [r.run_id for r in done if r.run_id is not None]
    ids = f" (run ids {min(copied)}–{max(copied)})" if len(copied) > 1 else f" (run {copied[0]})" if copied else ""
    echo(f"Merged {len(copied)} run(s) into {shown_db(into)}{ids}; skipped {len(done) - len(copied)} already there.")


# ---- end of rocroof merge -----------------------------------------------------------------------


@cli.group()
def db() -> None:
    """Database schema: status and upgrades.

    \b
    Examples:
      rocroof db status --db team.db
      rocroof db upgrade --db team.db
    """


def _listed(run_ids: list[int]) -> str:
    """``runs 1, 2, 3`` (the first ten, then how many more)."""
    shown = ", ".join(map(str, run_ids[:10]))
    more = f" and {len(run_ids) - 10} more" if len(run_ids) > 10 else ""
    return f"run{'s' if len(run_ids) > 1 else ''} {shown}{more}"


@db.command("status")
@db_option
def db_status(db: str) -> None:
    """Show the schema migrations, whether they are applied, and runs without a stored op report.

    \b
    Example:
      rocroof db status --db team.db
    """
    from ..store import Store
    from ..store.migrations import MIGRATIONS, SCHEMA_VERSION

    store = Store(db, read_only=True)
    known = {name for name, _ in MIGRATIONS}
    for name, applied in store.status():
        if name not in known:
            echo(f"{name}: applied {applied} (unknown to rocroof {__version__}: written by a newer rocroof)")
        else:
            echo(f"{name}: {'applied ' + applied if applied else 'pending'}")
    echo(f"rocroof {__version__} knows schema version {SCHEMA_VERSION}")
    if all(applied for name, applied in store.status() if name in known):
        missing = store.runs_without_reports()
        if missing:
            echo(
                f"{len(missing)} run(s) without an op report stored by rocroof {__version__} ({_listed(missing)}): "
                "rocroof report builds theirs from the tables each time (about a second); "
                f"'rocroof db upgrade{db_arg(db)}' stores them"
            )


@db.command("upgrade")
@db_option
def db_upgrade(db: str) -> None:
    """Create the schema or apply pending migrations; store the op report of runs that lack one.

    `rocroof report --by op` (table or Markdown) prints a run's op report stored with it at ingest,
    in a fraction of a second. Runs ingested before schema 9, or by another rocroof version, have
    none: their report is built from the tables each time (about a second, more for large runs)
    until `db upgrade` stores it.

    \b
    Example:
      rocroof db upgrade --db team.db
    """
    from ..report.tables import stored_reports
    from ..store import Store

    store = Store(db, on_wait=lock_notice())
    ran = store.upgrade(recreate_views=True)
    echo(f"applied {', '.join(ran)}" if ran else "schema is up to date")
    missing = store.runs_without_reports()
    for run_id in missing:
        store.store_reports(run_id, stored_reports)
    if missing:
        echo(f"stored the op report of {len(missing)} run(s): {_listed(missing)}")


@db.command("datasette-metadata")
@db_option
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the JSON here (default: standard output).",
)
def db_datasette_metadata(db: str, out: Path | None) -> None:
    """Datasette metadata for the database: every table's, view's and column's description, canned queries.

    Datasette (https://datasette.io, `pip install datasette`) browses a SQLite file in a web page;
    with this metadata it shows what each table and column holds and offers the "start here"
    questions of docs/schema.md as canned queries.

    \b
    Example:
      rocroof db datasette-metadata --db demo/rocroof-demo.db --out metadata.json
      datasette demo/rocroof-demo.db --metadata metadata.json
    """
    import json

    from ..store import Store, is_url
    from ..store.docs import datasette_metadata

    if is_url(db):
        raise InputError(f"{db}: Datasette browses SQLite files; give the database's file")
    store = Store(db, read_only=True)
    try:
        store.check()  # a rocroof database of this schema, not a typo's new file
    finally:
        store.close()
    text = json.dumps(datasette_metadata(Path(db).stem), indent=2) + "\n"
    if out is None:
        echo(text, nl=False)
        return
    try:
        out.write_text(text)
    except OSError as exc:
        raise InputError(f"{out}: cannot write ({exc.strerror or exc})") from exc
    echo(f"wrote {out}; browse with: datasette {shlex.quote(db)} --metadata {shlex.quote(str(out))}")
