"""Schema migrations: an ordered list of named steps, each applied once in its own transaction.

The ``rocroof_migration`` table records what was applied (the design of sqlite-utils'
``Migrations``). ``SCHEMA_VERSION`` is the number of known migrations. Views are derived
objects: they are dropped and re-created after every upgrade.

When the schema changes, freeze the DDL of the existing steps and append a new step; never
edit an applied step.

Several processes may upgrade one database at once (parallel ingests into a new file or a
team server): each step runs under :func:`write_lock` and is skipped when another process
applied it meanwhile.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

import sqlalchemy as sa

from .. import SCHEMA_VERSION as _PACKAGE_SCHEMA_VERSION
from ..errors import SchemaError
from . import locking, schema, views
from .locking import LockWait

migration_table = sa.Table(
    "rocroof_migration",
    sa.MetaData(),
    sa.Column("name", sa.String(64), primary_key=True, info={"doc": "Migration step name (e.g. 0001_initial)."}),
    sa.Column("applied_at", sa.String(32), nullable=False, info={"doc": "When it was applied, ISO 8601 UTC."}),
)


def _m0001_initial(conn: sa.Connection) -> None:
    """A new database: every table of the current layout (the later steps find nothing to change)."""
    schema.metadata.create_all(conn)
    for index in schema.INDEXES:
        index.create(conn, checkfirst=True)


def _m0002_model(conn: sa.Connection) -> None:
    """Modelled bytes/FLOPs per op, the op graph's edges and the run's ceilings (new tables only)."""
    schema.metadata.create_all(conn, tables=[schema.metadata.tables[n] for n in ("op_model", "op_edge", "run_ceiling")])


#: The counter tables in the layout of 0003 (SQLite only: PostgreSQL tables have no rowid).
_ROWID_FREE = ("counter_value", "counter_instance")
#: Their DDL in that layout, frozen (0006_lean_layout replaced them).
_ROWID_FREE_DDL = {
    "counter_value": "CREATE TABLE counter_value (run_id INTEGER NOT NULL, dispatch_index INTEGER NOT NULL, "
    "counter_name VARCHAR(255) NOT NULL, value FLOAT NOT NULL, PRIMARY KEY (run_id, dispatch_index, counter_name), "
    "FOREIGN KEY(run_id) REFERENCES run (run_id) ON DELETE CASCADE) WITHOUT ROWID",
    "counter_instance": "CREATE TABLE counter_instance (run_id INTEGER NOT NULL, dispatch_index INTEGER NOT NULL, "
    "counter_name VARCHAR(255) NOT NULL, instance INTEGER NOT NULL, value FLOAT NOT NULL, "
    "PRIMARY KEY (run_id, dispatch_index, counter_name, instance), "
    "FOREIGN KEY(run_id) REFERENCES run (run_id) ON DELETE CASCADE) WITHOUT ROWID",
}
_ROWID_FREE_COLUMNS = {
    "counter_value": ("run_id", "dispatch_index", "counter_name", "value"),
    "counter_instance": ("run_id", "dispatch_index", "counter_name", "instance", "value"),
}


def _m0003_counter_tables(conn: sa.Connection) -> None:
    """Counter tables keyed by their primary key alone; no index by counter or kernel name.

    A run of 10^6 dispatches holds 8x10^6 counter values: as a rowid table plus its primary-key
    index plus ``ix_counter_name`` they took three B-trees (three quarters of a GB) and half the
    ingest time. On SQLite ``counter_value`` and ``counter_instance`` become ``WITHOUT ROWID``
    tables (the primary key, which starts with the run and the dispatch, is the table); a query
    by counter name scans the run's rows. The rows are copied over in key order.
    ``ix_dispatch_kernel`` (kernel names of a few hundred bytes, one entry per dispatch) took a
    third of the time to store the dispatches and did not make ``kernel_summary`` faster.
    """
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_counter_name")
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_dispatch_kernel")
    if conn.dialect.name != "sqlite":
        return
    for name in _ROWID_FREE:
        ddl = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).scalar()
        if ddl is None or "WITHOUT ROWID" in str(ddl).upper():
            continue  # created by 0001 in this layout already
        cols = _ROWID_FREE_COLUMNS[name]
        _rebuild(conn, name, _ROWID_FREE_DDL[name], cols, cols, cols[:-1])


def _rebuild(
    conn: sa.Connection,
    name: str,
    create: str | sa.Table,
    columns: Sequence[str],
    values: Sequence[str],
    key: Sequence[str],
) -> None:
    """Re-create SQLite table ``name`` (``create``: its DDL or Table) with its rows copied over in ``key`` order.

    ``values`` are the SQL expressions over the old table's columns that fill the new ``columns``.
    """
    conn.exec_driver_sql(f"CREATE TEMP TABLE rocroof_copy AS SELECT * FROM {name}")
    conn.exec_driver_sql(f"DROP TABLE {name}")
    if isinstance(create, str):
        conn.exec_driver_sql(create)
    else:
        create.create(conn)
    conn.exec_driver_sql(
        f"INSERT INTO {name} ({', '.join(columns)}) SELECT {', '.join(values)} FROM temp.rocroof_copy "
        f"ORDER BY {', '.join(key)}"
    )
    conn.exec_driver_sql("DROP TABLE temp.rocroof_copy")


def fill_op_total(conn: sa.Connection, run_id: int | None = None) -> None:
    """Store the op_summary rows of one run (or of every run) in ``op_total``.

    The rows come from the view itself, in the same transaction as the run's rows, so that what
    ``rocroof report --by op`` reads is exactly what ``SELECT * FROM op_summary`` gives.
    """
    cols = ", ".join(schema.OP_TOTAL_COLUMNS)
    where = "" if run_id is None else " WHERE run_id = :rid"
    # rows by op name, byte order, the unattributed (NULL) first: as SQLite orders, on PostgreSQL too
    order = 'op COLLATE "C" NULLS FIRST' if conn.dialect.name == "postgresql" else "op"
    conn.execute(
        sa.text(
            f"INSERT INTO op_total (row_index, {cols}) "
            f"SELECT ROW_NUMBER() OVER (PARTITION BY run_id ORDER BY {order}) - 1, {cols} FROM op_summary{where}"
        ),
        {} if run_id is None else {"rid": run_id},
    )


def _m0004_op_total(conn: sa.Connection) -> None:
    """``op_total``: each run's op_summary rows, stored (filled for the stored runs by 0006_lean_layout)."""
    schema.op_total.create(conn, checkfirst=True)


def _add_column(conn: sa.Connection, table: str, column: str, ddl_type: str) -> None:
    """``ALTER TABLE ... ADD COLUMN`` unless the column exists (0001 creates tables from the current schema)."""
    if column not in {c["name"] for c in sa.inspect(conn).get_columns(table)}:
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {ddl_type}")


def _m0005_ceiling_rule(conn: sa.Connection) -> None:
    """``run.dram_peak_rule`` (how the DRAM ceiling was chosen) and ``agent.pci_device_id``."""
    _add_column(conn, "run", "dram_peak_rule", "VARCHAR(32)")
    _add_column(conn, "agent", "pci_device_id", "INTEGER")


def _is_table(conn: sa.Connection, name: str) -> bool:
    return name in set(sa.inspect(conn).get_table_names())


def _m0006_lean_layout(conn: sa.Connection) -> None:
    """Numbers instead of repeated text, DRAM bytes on the dispatch row, no self-index.

    A run of 10^6 dispatches with 8 counters each took ~908 bytes per dispatch: the kernel's name
    (a few hundred bytes, a few dozen distinct) on every dispatch, the counter's name on every
    counter value, the byte formula on every ``dram_traffic`` row, bounds equal to the value
    when exact, and an index mapping each dispatch to itself. The tables become
    ``kernel_symbol``, ``dispatch_record`` (with the DRAM bytes, bounds NULL when exact, formula
    and note by number into ``dram_text``), ``counter`` + ``counter_reading`` (16 counters a
    row) and
    ``counter_instance_reading``; views named ``dispatch``, ``counter_value``,
    ``counter_instance`` and ``dram_traffic`` read as the old tables did. Stored runs are
    converted in place (numbers in name order per run), and ``op_total`` is filled again.
    """
    old_layout = _is_table(conn, "dispatch")
    views.drop_all(conn)  # the old views read the old tables
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_dispatch_op")
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_dispatch_timing")
    new = ("kernel_symbol", "dram_text", "dispatch_record", "counter", "counter_reading", "counter_instance_reading")
    tables = [schema.metadata.tables[n] for n in new]
    schema.metadata.create_all(conn, tables=tables)
    for index in schema.INDEXES:
        index.create(conn, checkfirst=True)
    if old_layout:
        _convert_to_lean(conn)
    views.create_all(conn)
    conn.execute(schema.op_total.delete())
    fill_op_total(conn)


def _convert_to_lean(conn: sa.Connection) -> None:
    """Copy the rows of the schema 1-5 tables into the 0006 layout, then drop the old tables."""
    number = "ROW_NUMBER() OVER (PARTITION BY run_id ORDER BY {}) - 1"
    conn.exec_driver_sql(
        "INSERT INTO kernel_symbol (run_id, kernel_index, kernel_name) "
        f"SELECT run_id, {number.format('kernel_name')}, kernel_name "
        "FROM (SELECT DISTINCT run_id, kernel_name FROM dispatch WHERE kernel_name IS NOT NULL) k"
    )
    conn.exec_driver_sql(
        "INSERT INTO dram_text (run_id, text_index, text) "
        f"SELECT run_id, {number.format('text')}, text FROM ("
        "SELECT run_id, dram_formula AS text FROM dram_traffic WHERE dram_formula IS NOT NULL "
        "UNION SELECT run_id, dram_bytes_note FROM dram_traffic WHERE dram_bytes_note IS NOT NULL) t"
    )
    # the dispatch record's columns (the attribution method by number since 0007: converted here)
    kept = ", ".join(name for name, _, _ in schema._RECORD_COLUMNS)
    d_kept = ", ".join(
        _method_number("d.attribution_method") if name == "attribution_index" else f"d.{name}"
        for name, _, _ in schema._RECORD_COLUMNS
    )

    def bound(column: str, value: str) -> str:
        return f"CASE WHEN t.{column} = t.{value} THEN NULL ELSE t.{column} END"

    conn.exec_driver_sql(
        f"INSERT INTO dispatch_record (run_id, dispatch_index, pass_index, ordinal, kernel_index, {kept}, "
        "dram_read_bytes, dram_read_bytes_min, dram_read_bytes_max, dram_write_bytes, dram_write_bytes_min, "
        "dram_write_bytes_max, dram_formula_index, dram_note_index) "
        f"SELECT d.run_id, d.dispatch_index, d.pass_index, d.ordinal, k.kernel_index, {d_kept}, "
        f"t.dram_read_bytes, {bound('dram_read_bytes_min', 'dram_read_bytes')}, "
        f"{bound('dram_read_bytes_max', 'dram_read_bytes')}, t.dram_write_bytes, "
        f"{bound('dram_write_bytes_min', 'dram_write_bytes')}, {bound('dram_write_bytes_max', 'dram_write_bytes')}, "
        "f.text_index, n.text_index FROM dispatch d "
        "LEFT JOIN kernel_symbol k ON k.run_id = d.run_id AND k.kernel_name = d.kernel_name "
        "LEFT JOIN dram_traffic t ON t.run_id = d.run_id AND t.dispatch_index = d.dispatch_index "
        "LEFT JOIN dram_text f ON f.run_id = t.run_id AND f.text = t.dram_formula "
        "LEFT JOIN dram_text n ON n.run_id = t.run_id AND n.text = t.dram_bytes_note "
        "ORDER BY d.run_id, d.dispatch_index"
    )
    conn.exec_driver_sql(
        "INSERT INTO counter (run_id, counter_index, counter_name) "
        f"SELECT run_id, {number.format('counter_name')}, counter_name FROM ("
        "SELECT run_id, counter_name FROM counter_value UNION SELECT run_id, counter_name FROM counter_instance) c"
    )
    per = schema.COUNTERS_PER_READING
    slots = ", ".join(f"value_{j}" for j in range(per))
    slot = f"c.counter_index - (c.counter_index / {per}) * {per}"  # integer division on both databases
    pivot = ", ".join(f"MAX(CASE WHEN {slot} = {j} THEN v.value END)" for j in range(per))
    conn.exec_driver_sql(
        f"INSERT INTO counter_reading (run_id, dispatch_index, block, {slots}) "
        f"SELECT v.run_id, v.dispatch_index, c.counter_index / {per}, {pivot} FROM counter_value v "
        "JOIN counter c ON c.run_id = v.run_id AND c.counter_name = v.counter_name "
        f"GROUP BY v.run_id, v.dispatch_index, c.counter_index / {per} "
        f"ORDER BY v.run_id, v.dispatch_index, c.counter_index / {per}"
    )
    conn.exec_driver_sql(
        "INSERT INTO counter_instance_reading (run_id, dispatch_index, counter_index, instance, value) "
        "SELECT v.run_id, v.dispatch_index, c.counter_index, v.instance, v.value FROM counter_instance v "
        "JOIN counter c ON c.run_id = v.run_id AND c.counter_name = v.counter_name "
        "ORDER BY v.run_id, v.dispatch_index, c.counter_index, v.instance"
    )
    for name in ("counter_value", "counter_instance", "dram_traffic", "dispatch"):
        conn.exec_driver_sql(f"DROP TABLE {name}")


def _method_number(column: str) -> str:
    """SQL: the number of the attribution method named in ``column`` (schema.ATTRIBUTION_METHODS)."""
    whens = " ".join(f"WHEN '{name}' THEN {i}" for i, (name, _) in enumerate(schema.ATTRIBUTION_METHODS))
    return f"(CASE {column} {whens} END)"


#: The tables that 0007_clustered_tables stores by their primary key on SQLite.
_CLUSTERED = ("dispatch_record", "marker_range", "op_invocation", "op_node", "op_operand", "op_model", "op_edge")


def _m0007_clustered_tables(conn: sa.Connection) -> None:
    """Dispatch records, marker ranges and the op tables stored by their primary key; a partial op index.

    On SQLite a table with a rowid is two B-trees, the rows and its primary key's index: these
    tables become ``WITHOUT ROWID`` (their primary key, which starts with the run, is the table),
    copied over in key order. ``ix_dispatch_op`` keeps the timing records only (what the summary
    views read; Nsight runs store a second record per kernel for the counter pass). ``ix_op_op``
    (op invocations by op name: 14 bytes a dispatch, read by no rocroof query; a run's
    invocations scan in ~0.1 s per 10^6) goes. At 10^6
    dispatches with 8 counters: 507 -> 431 bytes per dispatch for Nsight runs, 387 -> 345 for
    rocprofv3 (benchmarks/RESULTS.md), and fewer B-trees to fill at ingest. The attribution
    method is stored by number (``attribution_index``; names and descriptions in the new
    ``attribution_method`` table, the views show the name as before): 11 bytes less a record.
    A dispatch record's ``op_index`` and ``kernel_index`` become foreign keys (deferred to the
    commit) into ``op_invocation`` and ``kernel_symbol``, links that a browser such as Datasette follows.
    """
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_dispatch_op")
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_op_op")
    if conn.dialect.name == "sqlite":
        views.drop_all(conn)
        for name in _CLUSTERED:
            ddl = conn.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
            ).scalar()
            if ddl is None or "WITHOUT ROWID" in str(ddl).upper():
                continue  # created in this layout already (by 0001, 0002 or 0006 of this version)
            table = schema.metadata.tables[name]
            old_cols = {r[1] for r in conn.exec_driver_sql(f"PRAGMA table_info({name})")}
            # columns added by later steps stay NULL here; their own step fills them
            cols = [c.name for c in table.columns if c.name in old_cols or c.name == "attribution_index"]
            # schema 6 stored the attribution method by name: numbered now
            values = [
                _method_number("attribution_method") if c == "attribution_index" and c not in old_cols else c
                for c in cols
            ]
            key = [c.name for c in table.primary_key.columns]
            _rebuild(conn, name, table, cols, values, key)
    else:  # PostgreSQL: in place
        if "attribution_method" in {c["name"] for c in sa.inspect(conn).get_columns("dispatch_record")}:
            # the column by name becomes the column by number
            conn.exec_driver_sql("ALTER TABLE dispatch_record ADD COLUMN attribution_index INTEGER")
            number = _method_number("attribution_method")
            conn.exec_driver_sql(f"UPDATE dispatch_record SET attribution_index = {number}")
            conn.exec_driver_sql("ALTER TABLE dispatch_record DROP COLUMN attribution_method")
        existing = {fk["name"] for fk in sa.inspect(conn).get_foreign_keys("dispatch_record")}
        for fk in schema.dispatch_record.foreign_key_constraints:
            if fk.name and fk.name not in existing and fk.referred_table.name != "run":
                fk_cols = ", ".join(c.name for c in fk.columns)
                refs = ", ".join(e.column.name for e in fk.elements)
                conn.exec_driver_sql(
                    f"ALTER TABLE dispatch_record ADD CONSTRAINT {fk.name} FOREIGN KEY ({fk_cols}) "
                    f"REFERENCES {fk.referred_table.name} ({refs}) DEFERRABLE INITIALLY DEFERRED"
                )
    schema.attribution_method.create(conn, checkfirst=True)
    conn.execute(schema.attribution_method.delete())
    conn.execute(
        schema.attribution_method.insert(),
        [
            {"method_index": i, "method": name, "description": text}
            for i, (name, text) in enumerate(schema.ATTRIBUTION_METHODS)
        ],
    )
    for index in schema.INDEXES:
        index.create(conn, checkfirst=True)  # those dropped with their tables, and the partial ix_dispatch_op


def _m0008_compute_ceiling(conn: sa.Connection) -> None:
    """``op_model.compute_ceiling``, decided for the stored runs from their ops' shapes and GPU.

    The ``op_verdict`` view reads it; the decision is rocroof.analysis.roofline.compute_ceilings,
    the one the reports make.
    """
    import pandas as pd

    from ..analysis.roofline import compute_ceilings

    _add_column(conn, "op_model", "compute_ceiling", "VARCHAR(32)")
    runs = conn.execute(
        sa.text("SELECT DISTINCT m.run_id, r.gpu_arch FROM op_model m JOIN run r ON r.run_id = m.run_id")
    ).all()
    for run_id, arch in runs:
        shapes = pd.DataFrame(
            conn.execute(
                sa.text(
                    "SELECT m.op_index, i.op, i.quant, i.m, i.n_experts FROM op_model m "
                    "LEFT JOIN op_invocation i ON i.run_id = m.run_id AND i.op_index = m.op_index "
                    "WHERE m.run_id = :rid"
                ),
                {"rid": run_id},
            ).all(),
            columns=["op_index", "op", "quant", "m", "n_experts"],
        )
        names = compute_ceilings(shapes, arch)
        conn.execute(
            sa.text("UPDATE op_model SET compute_ceiling = :c WHERE run_id = :rid AND op_index = :i"),
            [{"c": c, "rid": run_id, "i": int(i)} for c, i in zip(names, shapes["op_index"], strict=True)],
        )


def _m0009_stored_report(conn: sa.Connection) -> None:
    """``stored_report``: reports kept with their run (runs stored before it are reported from their tables)."""
    schema.stored_report.create(conn, checkfirst=True)


MIGRATIONS: list[tuple[str, Callable[[sa.Connection], None]]] = [
    ("0001_initial", _m0001_initial),
    ("0002_model", _m0002_model),
    ("0003_counter_tables", _m0003_counter_tables),
    ("0004_op_total", _m0004_op_total),
    ("0005_ceiling_rule", _m0005_ceiling_rule),
    ("0006_lean_layout", _m0006_lean_layout),
    ("0007_clustered_tables", _m0007_clustered_tables),
    ("0008_compute_ceiling", _m0008_compute_ceiling),
    ("0009_stored_report", _m0009_stored_report),
]
SCHEMA_VERSION = len(MIGRATIONS)
if SCHEMA_VERSION != _PACKAGE_SCHEMA_VERSION:  # pragma: no cover - a migration added without the constant
    raise RuntimeError(f"rocroof.SCHEMA_VERSION is {_PACKAGE_SCHEMA_VERSION}, the migrations make {SCHEMA_VERSION}")


#: ``pg_advisory_xact_lock`` key that serialises rocroof's schema changes on a PostgreSQL server.
_PG_LOCK_KEY = 0x726F63726F6F66  # "rocroof"


def write_lock(
    conn: sa.Connection,
    *,
    location: str = "the database",
    timeout_s: float | None = None,
    on_wait: LockWait | None = None,
) -> None:
    """Make the transaction just begun on ``conn`` wait for, then exclude, other rocroof writers.

    SQLite: ``BEGIN IMMEDIATE`` takes the database's write lock now (waiting up to ``timeout_s``,
    default :data:`~rocroof.store.locking.WRITE_TIMEOUT_S`, in short tries that a signal
    interrupts; ``on_wait`` and ``location`` as in :func:`~rocroof.store.locking.retry_while_locked`),
    so what the transaction reads first cannot change before it writes, and DDL runs inside the
    transaction (Python's sqlite3 leaves it in autocommit otherwise). PostgreSQL: a
    transaction-scoped advisory lock, held until commit or rollback.
    """
    if conn.dialect.name == "sqlite":
        timeout = locking.WRITE_TIMEOUT_S if timeout_s is None else timeout_s
        locking.begin_immediate(conn, location=location, timeout_s=timeout, on_wait=on_wait)
    elif conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_LOCK_KEY)))


def applied(conn: sa.Connection) -> dict[str, str]:
    """``{name: applied_at}`` of the migrations recorded in the database (empty if none)."""
    if not sa.inspect(conn).has_table("rocroof_migration"):
        return {}
    return {r.name: r.applied_at for r in conn.execute(sa.select(migration_table))}


def check(conn: sa.Connection, location: str) -> int:
    """Verify a database can be read by this rocroof; return its schema version.

    Raises:
        SchemaError: an empty or foreign database, a newer schema, or pending migrations.
    """
    tables = sa.inspect(conn).get_table_names()  # before the migrations: see refuse_foreign_or_newer
    done = applied(conn)
    known = [name for name, _ in MIGRATIONS]
    unknown = sorted(set(done) - set(known))
    if unknown:
        raise SchemaError(
            f"{location}: written by a newer rocroof (migration {unknown[-1]}); upgrade rocroof to read it"
        )
    if not done:
        if tables:
            raise SchemaError(f"{location}: not a rocroof database (no rocroof_migration table)")
        raise SchemaError(f"{location}: empty database; ingest a capture first (rocroof ingest PATH --db ...)")
    pending = [n for n in known if n not in done]
    if pending:
        raise SchemaError(
            f"{location}: schema is out of date ({len(pending)} pending migration(s)); "
            f"run 'rocroof db upgrade --db {location}'"
        )
    return len(done)


def refuse_foreign_or_newer(conn: sa.Connection, location: str) -> dict[str, str]:
    """Refuse a database this rocroof must not write to.

    An empty database and one with pending migrations pass (:func:`upgrade` handles them).
    Nothing is written.

    Args:
        conn: a connection to the database.
        location: how to name the database in messages.

    Returns:
        ``{name: applied_at}`` of the applied migrations.

    Raises:
        SchemaError: the database holds a newer schema or another program's tables.
    """
    # Tables first, then migrations: another process may be creating the schema right now, and a
    # migration commits its tables with its rocroof_migration row, so tables seen here imply rows
    # seen below (the other order can see tables without their row and call the file foreign).
    tables = set(sa.inspect(conn).get_table_names())
    done = applied(conn)
    unknown = sorted(set(done) - {n for n, _ in MIGRATIONS})
    if unknown:
        raise SchemaError(f"{location}: written by a newer rocroof (migration {unknown[-1]}); upgrade rocroof")
    if not done:
        foreign = tables - {"rocroof_migration"}
        if foreign:
            raise SchemaError(f"{location}: not a rocroof database (has tables {', '.join(sorted(foreign)[:5])})")
    return done


def upgrade(
    engine: sa.Engine,
    location: str,
    *,
    recreate_views: bool = False,
    timeout_s: float | None = None,
    on_wait: LockWait | None = None,
) -> list[str]:
    """Apply pending migrations (one transaction each) and (re-)create the views.

    Views are re-created when a migration ran, when one is missing, or when asked
    (``rocroof db upgrade``); a release that changes a view adds a migration step. A database
    with nothing to do is only read (no lock is taken). ``timeout_s`` and ``on_wait``: how each
    step waits for the write lock (:func:`write_lock`).

    Returns:
        The names of the migrations applied now (not those another process applied meanwhile).

    Raises:
        SchemaError: the database holds a newer schema or foreign tables.
    """
    known = [name for name, _ in MIGRATIONS]
    with engine.connect() as conn:
        done = refuse_foreign_or_newer(conn, location)
        if not recreate_views and all(n in done for n in known) and not _missing_views(conn):
            return []

    def lock(conn: sa.Connection) -> None:
        write_lock(conn, location=location, timeout_s=timeout_s, on_wait=on_wait)

    with engine.begin() as conn:
        lock(conn)
        refuse_foreign_or_newer(conn, location)  # again, now that no other rocroof is changing it
        migration_table.create(conn, checkfirst=True)
    ran = []
    for name, step in MIGRATIONS:
        with engine.begin() as conn:
            lock(conn)
            if name in applied(conn):
                continue
            step(conn)
            conn.execute(
                migration_table.insert().values(
                    name=name, applied_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
                )
            )
        ran.append(name)
    with engine.begin() as conn:
        lock(conn)
        if recreate_views or ran or _missing_views(conn):
            views.create_all(conn)
    return ran


def _missing_views(conn: sa.Connection) -> list[str]:
    existing = set(sa.inspect(conn).get_view_names())
    return [v.name for v in views.VIEWS if v.name not in existing]
