"""Browsing a results database with Datasette: the shipped metadata describes every table, view and column.

Datasette (``pip install datasette``, a dev dependency) is run in-process with its own test
client (``Datasette(...).client``): the same pages a browser gets from ``datasette DB --metadata``.
The "start here" queries of docs/schema.md run on SQLite here and on PostgreSQL in test_postgres.
"""

from __future__ import annotations

import asyncio
import html
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocroof.cli import cli
from rocroof.store import Store, schema, views
from rocroof.store.docs import START_HERE

from .conftest import REPO

datasette_app = pytest.importorskip("datasette.app", reason="Datasette is a dev dependency: pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The demo database (examples/h200 ingested) and the metadata `rocroof db datasette-metadata` wrote for it."""
    root = tmp_path_factory.mktemp("ds")
    db = root / "rocroof-demo.db"
    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", str(REPO / "examples" / "h200"), "--db", str(db)])
    assert result.exit_code == 0, result.output
    meta = root / "metadata.json"
    result = runner.invoke(cli, ["db", "datasette-metadata", "--db", str(db), "--out", str(meta)])
    assert result.exit_code == 0, result.output
    assert f"datasette {db} --metadata {meta}" in result.output
    return db, meta


def _get(ds: object, path: str) -> tuple[int, str]:
    async def fetch() -> tuple[int, str]:
        response = await ds.client.get(path)  # type: ignore[attr-defined]
        return response.status_code, response.text

    return asyncio.run(fetch())


def test_datasette_shows_each_table_and_views_description(demo: tuple[Path, Path]) -> None:
    db, meta = demo
    metadata = json.loads(meta.read_text())
    ds = datasette_app.Datasette([str(db)], metadata=metadata)
    name = db.stem
    for table in ("op_total", "dispatch_record", "kernel_symbol", "attribution_method"):
        status, page = _get(ds, f"/{name}/{table}")
        assert status == 200, table
        described = schema.metadata.tables[table].info.get("doc") or ""
        if described:
            assert described[:60] in html.unescape(page), table
    for view in ("op_summary", "dispatch_dram", "op_roofline"):
        status, page = _get(ds, f"/{name}/{view}")
        doc = next(v.doc for v in views.VIEWS if v.name == view)
        assert status == 200 and doc[:60] in html.unescape(page), view
    # a column's description is on its table's page (Datasette shows the metadata's "columns")
    status, page = _get(ds, f"/{name}/op_total")
    assert "Sum of GPU time, ns (NULL if any dispatch's is unknown)." in html.unescape(page)
    # the canned queries run
    for query, question, _where, _sql in START_HERE:
        status, page = _get(ds, f"/{name}/{query}")
        assert status == 200 and question in html.unescape(page), query


def test_every_table_view_and_column_has_a_description_in_the_metadata(demo: tuple[Path, Path]) -> None:
    db, meta = demo
    tables = json.loads(meta.read_text())["databases"][db.stem]["tables"]
    for table in schema.metadata.sorted_tables:
        assert tables[table.name]["description"], table.name
        assert set(tables[table.name]["columns"]) == {c.name for c in table.columns}
        assert all(tables[table.name]["columns"].values()), table.name
    for view in views.VIEWS:
        assert tables[view.name]["description"] == view.doc
        assert tables[view.name]["columns"] == view.columns


def test_the_start_here_queries_answer_on_the_demo_database(demo: tuple[Path, Path]) -> None:
    db, _ = demo
    store = Store(db, read_only=True)
    for name, _question, _where, sql in START_HERE:
        rows = store.query(sql)
        assert len(rows) > 0 or name == "notes", name


def test_a_url_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["db", "datasette-metadata", "--db", "postgresql://u@h/db"])
    assert result.exit_code == 1 and "Datasette browses SQLite files" in result.output
