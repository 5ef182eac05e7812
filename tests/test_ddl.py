"""A migration step's SQL runs on the vendors it names, verbatim, and nowhere else."""

from __future__ import annotations

import pytest
from django.db import connection

from agent_sessions.storage import ddl

pytestmark = pytest.mark.django_db(transaction=True)

_CREATE = "CREATE TABLE ddl_probe (v TEXT DEFAULT '100%')"


def _tables() -> set[str]:
    return set(connection.introspection.table_names())


def test_statements_run_verbatim_on_the_named_vendor_and_are_built_only_there():
    built: list[str] = []

    def statements(vendor: str) -> list[str]:
        built.append(vendor)
        return [_CREATE, "INSERT INTO ddl_probe DEFAULT VALUES"]

    other = ddl.SQLITE if connection.vendor == "postgresql" else ddl.POSTGRES
    with connection.schema_editor() as editor:
        ddl.run_on(editor, other, statements)
    assert built == []
    assert "ddl_probe" not in _tables()
    try:
        with connection.schema_editor() as editor:
            ddl.run_on(editor, ddl.BOTH, statements)
        assert built == [connection.vendor]
        with connection.cursor() as cursor:
            cursor.execute("SELECT v FROM ddl_probe")
            assert cursor.fetchall() == [("100%",)]  # the % was not taken for a placeholder
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS ddl_probe")


def test_run_on_postgres_runs_nothing_elsewhere():
    try:
        with connection.schema_editor() as editor:
            ddl.run_on_postgres(editor, [_CREATE])
        assert ("ddl_probe" in _tables()) == (connection.vendor == "postgresql")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS ddl_probe")
