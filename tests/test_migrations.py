"""The migrations are history: a database the old chain (0001-0028) built upgrades to exactly the
schema a fresh ``migrate`` builds, with every row intact and nothing re-run, and no migration
module imports the app's code (which would make a fresh ``migrate`` follow today's code).

The dumps in tests/fixtures/migrations were written by scripts/dump_migration_chain.py at the last
commit of the old chain.
"""

from __future__ import annotations

import ast
import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings

from tests.support.schema import (
    by_position,
    catalog,
    pg_dump_schema,
    pg_rows,
    sqlite_master,
    sqlite_rows,
)
from tests.support.scratch import run_with

ROOT = Path(__file__).resolve().parent.parent
MIGRATIONS = ROOT / "agent_sessions" / "migrations"
FIXTURES = Path(__file__).parent / "fixtures" / "migrations"
SQUASH = "0001_squashed_0028_context_owner"


def _old_chain(names: set[str]) -> bool:
    return len(names) == 28 and max(names) == "0028_context_owner"


# ── no migration imports the app ─────────────────────────────────────────────


def _app_imports(path: Path) -> list[str]:
    """Imports of ``agent_sessions…`` outside ``agent_sessions.migrations`` (relative ones resolved),
    and string arguments of import_module / import_string / __import__ naming such a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = "agent_sessions.migrations"

    def foreign(module: str) -> bool:
        return (module == "agent_sessions" or module.startswith("agent_sessions.")) and not (
            module == package or module.startswith(package + ".")
        )

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if foreign(a.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
                names = [module] if node.module else [f"{module}.{a.name}" for a in node.names]
            else:
                names = [node.module or ""]
            found += [f"from {n} import …" for n in names if foreign(n)]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in {"import_module", "import_string", "__import__"}:
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and foreign(arg.value):
                        found.append(f"{name}({arg.value!r})")
    return found


def test_no_migration_module_imports_app_code():
    modules = sorted(MIGRATIONS.glob("*.py"))
    assert any(p.name.startswith(SQUASH) for p in modules)
    offenders = {p.name: found for p in modules if (found := _app_imports(p))}
    assert offenders == {}, "migrations are history: copy what they need beside them (see _frozen.py)"


def test_the_import_check_sees_every_way_of_importing(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import agent_sessions.storage\n"
        "from agent_sessions import models\n"
        "from .. import schema\n"
        "from ..storage import postgres\n"
        "from . import _frozen\n"
        "from agent_sessions.migrations import _frozen_sql\n"
        "import django.db\n"
        "importlib.import_module('agent_sessions.storage.postgres_append')\n"
        "import_string('agent_sessions.triggers.TREE_ERROR')\n"
        "__import__('agent_sessions')\n"
        "import_module('agent_sessions.migrations._frozen')\n"
    )
    assert _app_imports(probe) == [
        "import agent_sessions.storage",
        "from agent_sessions import …",
        "from agent_sessions.schema import …",
        "from agent_sessions.storage import …",
        "import_module('agent_sessions.storage.postgres_append')",
        "import_string('agent_sessions.triggers.TREE_ERROR')",
        "__import__('agent_sessions')",
    ]


def test_few_migration_files():
    assert len(list(MIGRATIONS.glob("0*.py"))) <= 4


# ── a database the old chain built, upgraded ─────────────────────────────────


@contextmanager
def _postgres_database() -> Iterator[tuple[str, dict, str]]:
    import psycopg

    default = settings.DATABASES["default"]
    params = dict(host=default["HOST"], port=default["PORT"], user=default["USER"])
    name = f"agent_sessions_mig_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name, params, f"postgres://{params['user']}@{params['host']}:{params['port']}/{name}"
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg_state(name: str, params: dict) -> tuple[dict, str | None, dict]:
    import psycopg

    with psycopg.connect(dbname=name, autocommit=True, **params) as conn:
        return by_position(catalog(conn)), pg_dump_schema(conn, params, name), pg_rows(conn)


def _applied(rows: list[str]) -> set[str]:
    return {r["name"] for r in map(json.loads, rows) if r["app"] == "agent_sessions"}


LATER_OBJECTS = (
    "model_call",
    "modelcall",
    "export_sessionrecord",
    "compact_sessionrecord",
    "assistant_compactions_fts",
    "assistant_cmp_summary_fts",
)
"""Names in what later migrations add (0002: the model-call records' tables, indexes and trigger; their
content types and permissions; 0003: the admin's export and compact permissions; 0004: the compaction
summaries' full-text tables, triggers and index)."""


def _later(row: str) -> bool:
    return any(name in row for name in LATER_OBJECTS)


def _without_later_tables(snapshot: dict[str, list]) -> dict[str, list]:
    """A catalog without what the migrations after the squash added, so it compares with the squash's."""
    return {key: [row for row in rows if not _later(str(row))] for key, rows in snapshot.items()}


def _rows_kept(rows: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each table's rows but those of what later migrations added (and the bookkeeping of ids and migrations)."""
    skip = {"django_migrations", "sqlite_sequence"}
    return {t: [r for r in v if not _later(r)] for t, v in rows.items() if t not in skip and not _later(t)}


def _assert_upgraded(before_rows: dict, after_rows: dict, applied_names) -> None:
    """Every row of the dump intact; django_migrations gained the squash only (nothing re-ran)."""
    assert set(after_rows) == set(before_rows)
    for table, rows in before_rows.items():
        if table != "django_migrations":
            assert after_rows[table] == rows, table
    old = before_rows["django_migrations"]
    assert set(old) <= set(after_rows["django_migrations"])  # the old rows, their applied times too
    assert _old_chain(applied_names(old))
    assert applied_names(after_rows["django_migrations"]) - applied_names(old) == {SQUASH}
    assert len(after_rows["django_migrations"]) == len(old) + 1


@pytest.mark.postgres_only
def test_postgres_database_of_the_old_chain_upgrades_to_the_fresh_schema_with_every_row():
    import psycopg

    dump = (FIXTURES / "postgres_chain.sql").read_text(encoding="utf-8")
    with _postgres_database() as (old, params, old_url), _postgres_database() as (fresh, _, fresh_url):
        with psycopg.connect(dbname=old, autocommit=True, **params) as conn:
            conn.execute(dump)
        loaded_catalog, loaded_dump, before = _pg_state(old, params)
        assert sum(len(rows) for rows in before.values()) > 100
        run_with(old_url, "manage.py", "migrate", "agent_sessions", SQUASH, "--noinput", "-v0")
        upgraded_catalog, upgraded_dump, after = _pg_state(old, params)
        # The migrations after the squash add tables beside it: the old chain's database and a fresh
        # one end up alike, and without those additions the schema is the squash's.
        run_with(old_url, "manage.py", "migrate", "--noinput", "-v0")
        run_with(fresh_url, "manage.py", "migrate", "--noinput", "-v0")
        latest_catalog, latest_dump, latest_rows = _pg_state(old, params)
        fresh_catalog, fresh_dump, _ = _pg_state(fresh, params)
    assert upgraded_catalog == loaded_catalog  # migrate to the squash changed no schema: it ran nothing
    assert upgraded_dump == loaded_dump  # None (both) without a pg_dump of the server's version
    assert latest_catalog == fresh_catalog
    assert latest_dump == fresh_dump
    assert _without_later_tables(latest_catalog) == loaded_catalog
    assert _rows_kept(latest_rows) == _rows_kept(after)
    _assert_upgraded(before, after, _applied)


@pytest.mark.sqlite_only
def test_sqlite_database_of_the_old_chain_upgrades_to_the_fresh_schema_with_every_row(tmp_path):
    old, fresh = tmp_path / "old.sqlite3", tmp_path / "fresh.sqlite3"
    conn = sqlite3.connect(old)
    conn.executescript((FIXTURES / "sqlite_chain.sql").read_text(encoding="utf-8"))  # the sqlite3 shell's .dump
    conn.close()  # its FTS5 tables were written into the schema directly: read on a new connection
    loaded, before = sqlite_master(str(old)), sqlite_rows(str(old))
    assert sum(len(rows) for rows in before.values()) > 100
    run_with(f"sqlite:///{old}", "manage.py", "migrate", "agent_sessions", SQUASH, "--noinput", "-v0")
    assert sqlite_master(str(old)) == loaded  # migrate to the squash ran nothing
    after = sqlite_rows(str(old))
    # The migrations after the squash add tables beside it: both databases end up alike.
    run_with(f"sqlite:///{old}", "manage.py", "migrate", "--noinput", "-v0")
    run_with(f"sqlite:///{fresh}", "manage.py", "migrate", "--noinput", "-v0")
    assert sqlite_master(str(old)) == sqlite_master(str(fresh))
    assert [r for r in sqlite_master(str(old)) if not _later(str(r))] == loaded
    assert _rows_kept(sqlite_rows(str(old))) == _rows_kept(after)

    def applied(rows: list[str]) -> set[str]:
        return {ast.literal_eval(r)[2] for r in rows if ast.literal_eval(r)[1] == "agent_sessions"}

    # sqlite_sequence counts the squash's row in django_migrations; nothing else of it changes.
    before["sqlite_sequence"] = [r for r in before["sqlite_sequence"] if "django_migrations" not in r]
    after["sqlite_sequence"] = [r for r in after["sqlite_sequence"] if "django_migrations" not in r]
    _assert_upgraded(before, after, applied)
    with sqlite3.connect(old) as conn:  # the FTS5 indexes still match their rows
        for fts in ("assistant_fts", "assistant_fts_trigram", "cf_agents_search_fts", "cf_agents_search_fts_trigram"):
            conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")


@pytest.mark.postgres_only
def test_database_laid_out_by_the_seed_ddl_gets_what_the_old_chain_gave_it():
    """The seed's tables are adopted (their keys kept, this app's columns and indexes added) exactly as
    the old chain adopted them (its catalog, recorded before the squash)."""
    import psycopg

    expected = json.loads((FIXTURES / "postgres_seed_chain_catalog.json").read_text(encoding="utf-8"))
    with _postgres_database() as (name, params, url):
        with psycopg.connect(dbname=name, autocommit=True, **params) as conn:
            conn.execute((Path(__file__).parent / "support" / "seed_schema.sql").read_text())
        run_with(url, "manage.py", "migrate", "--noinput", "-v0")
        with psycopg.connect(dbname=name, autocommit=True, **params) as conn:
            migrated = catalog(conn)
    # The later migrations' tables stand beside the seed's and change none of them.
    assert _without_later_tables(migrated) == expected
    assert any(row[0] == "agent_sessions_model_calls" for row in migrated["columns"])


@pytest.mark.postgres_only
def test_migrate_back_to_zero_and_forward_again():
    import psycopg

    with _postgres_database() as (name, params, url):
        run_with(url, "manage.py", "migrate", "--noinput", "-v0")
        with psycopg.connect(dbname=name, autocommit=True, **params) as conn:
            migrated = catalog(conn)
        run_with(url, "manage.py", "migrate", "agent_sessions", "zero", "--noinput", "-v0")
        with psycopg.connect(dbname=name, autocommit=True, **params) as conn:
            left = catalog(conn)
            assert not [c for c in left["columns"] if c[0].startswith(("assistant_", "cf_agents_", "agent_sessions"))]
            assert [f[0] for f in left["functions"]] == ["_pgtrigger_should_ignore"]  # pgtrigger's, shared
        run_with(url, "manage.py", "migrate", "--noinput", "-v0")
        with psycopg.connect(dbname=name, autocommit=True, **params) as conn:
            assert catalog(conn) == migrated


@pytest.mark.sqlite_only
def test_sqlite_migrates_back_to_zero_and_forward_again(tmp_path):
    path = tmp_path / "db.sqlite3"
    run_with(f"sqlite:///{path}", "manage.py", "migrate", "--noinput", "-v0")
    migrated = sqlite_master(str(path))
    run_with(f"sqlite:///{path}", "manage.py", "migrate", "agent_sessions", "zero", "--noinput", "-v0")
    left = sqlite_master(str(path))
    assert not [r for r in left if r[2].startswith(("assistant_", "cf_agents_", "agent_sessions"))]
    run_with(f"sqlite:///{path}", "manage.py", "migrate", "--noinput", "-v0")
    assert sqlite_master(str(path)) == migrated


@pytest.mark.django_db
def test_a_database_part_way_through_the_replaced_chain_is_stopped_by_check_and_migrate():
    """Django would leave such a database out of ``migrate`` silently (the replaced files are gone):
    E030 names how far it got, and ``migrate`` refuses to run on it."""
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError
    from django.db import connection
    from django.db.migrations.recorder import MigrationRecorder

    from agent_sessions.checks import check_half_migrated

    recorder = MigrationRecorder(connection)
    assert ("agent_sessions", SQUASH) in recorder.applied_migrations()
    assert check_half_migrated(databases=["default"]) == []  # migrated by the squash: nothing to say
    recorder.migration_qs.filter(app="agent_sessions").delete()
    for name in ("0001_initial", "0002_message_origin_id", "0003_compactionjob"):
        recorder.record_applied("agent_sessions", name)
    errors = check_half_migrated(databases=["default"])
    assert [e.id for e in errors] == ["agent_sessions.E030"]
    assert "3 of 28 applied, the last 0003_compactionjob" in errors[0].msg
    assert "0028_context_owner" in errors[0].hint
    with pytest.raises(SystemCheckError, match="E030"):
        call_command("migrate", "agent_sessions", plan=True, verbosity=0, skip_checks=False)
    for name in [f"{n:04d}" for n in range(4, 29)]:  # the whole old chain: the squash counts as applied
        recorder.record_applied("agent_sessions", next(k[1] for k in _replaced() if k[1].startswith(name)))
    assert check_half_migrated(databases=["default"]) == []


def _replaced() -> list[tuple[str, str]]:
    from agent_sessions.checks import squashed_migrations

    return dict(squashed_migrations())[SQUASH]
