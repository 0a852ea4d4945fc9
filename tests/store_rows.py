"""The rows of a results database as comparable frames: per table, per run, through rocroof's own reader."""

from __future__ import annotations

import pandas as pd
import sqlalchemy as sa

from rocroof.store import Store, schema


def table_rows(target: str, run_id: int | None = None) -> dict[str, pd.DataFrame]:
    """Every table (or one run's rows of it) with SQLAlchemy's result types, in key order.

    Ingest times are left out (each ingest records its own); with ``run_id`` the ``run_id``
    column too, so that a run can be compared with its copy under another id.
    """
    store = Store(target, read_only=True)
    try:
        out = {}
        for table in schema.metadata.sorted_tables:
            stmt = sa.select(*(c for c in table.columns if c.name not in ("created_at", "run_id")))
            if "run_id" not in table.c:  # the schema's own rows (attribution_method): the same in every database
                if run_id is not None:
                    continue
            elif run_id is None:
                stmt = stmt.add_columns(table.c.run_id)
            else:
                stmt = stmt.where(table.c.run_id == run_id)
            out[table.name] = store.frame(stmt.order_by(*table.primary_key.columns))
        return out
    finally:
        store.close()


#: Views that read as the tables of schemas 1-5 (counted with the tables).
LOGICAL_VIEWS = ("dispatch", "counter_value", "counter_instance", "dram_traffic")


def row_counts(target: str) -> dict[str, int]:
    """Rows per table of a SQLite file or a URL, and per view of :data:`LOGICAL_VIEWS`."""
    store = Store(target, read_only=True)
    try:
        names = [t.name for t in schema.metadata.sorted_tables] + list(LOGICAL_VIEWS)
        return {n: int(store.query(f'SELECT COUNT(*) AS n FROM "{n}"')["n"][0]) for n in names}
    finally:
        store.close()
