"""Write the schema-and-data dumps of a database migrated by the old migration chain (0001-0028).

Run once, at the last commit before the chain was squashed into
``agent_sessions/migrations/0001_squashed_0028_context_owner.py`` (the commit that added this
script), from the repository root::

    python scripts/dump_migration_chain.py sqlite     # needs the sqlite3 shell
    python scripts/dump_migration_chain.py postgres   # needs pg_dump and the local server
    python scripts/dump_migration_chain.py seed       # Postgres, no pg_dump needed

Each run makes an empty scratch database, migrates it with the chain, writes representative
data through the library (sessions with branches, a fork, compactions, context blocks with and
without an owner, a stored prompt, search entries, a compaction job, an API key, usage), and
writes a plain SQL dump of the whole database (schema, data, ``django_migrations``) to
``tests/fixtures/migrations/<vendor>_chain.sql``.  ``tests/test_migrations.py`` loads those dumps
and migrates them forward with today's code.  ``seed`` lays out an empty Postgres database with the
seed's DDL (tests/support/seed_schema.sql), migrates it with the chain, which adopts the seed's
tables, and writes its catalog (``tests.support.schema.catalog``) to
``tests/fixtures/migrations/postgres_seed_chain_catalog.json``: what ``migrate`` must build there.
The dumps are history: do not regenerate them from a later commit (the chain is gone there).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "migrations"
PG = dict(host=os.environ.get("PGHOST", "127.0.0.1"), port=os.environ.get("PGPORT", "5432"))
PG_USER = os.environ.get("PGUSER", "postgres")


def _text(mid: str, role: str, text: str) -> dict:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text}]}


def fill() -> None:
    """Representative rows, written through the library (raw SQL only for what a foreign writer does)."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from agent_sessions import DjangoSearchProvider, SessionManager
    from agent_sessions.models import ApiKey, CompactionJob, SessionRecord

    user = get_user_model().objects.create_user("dump-owner", "owner@example.com", "not-a-password")
    manager = SessionManager().with_context("memory", description="Learned facts").with_cached_prompt()
    first = manager.create("Trip planning", model="demo-model", source="dump").id
    for message in [
        _text("u1", "user", "Plan three days in Kyoto in spring."),
        _text("a1", "assistant", "Cherry blossoms peak in early April."),
        _text("u2", "user", "I like temples and quiet gardens: 静かな庭"),
        {
            "id": "a2",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "Checking the weather."},
                {
                    "type": "tool-weather",
                    "toolCallId": "call-1",
                    "state": "output-available",
                    "input": {"city": "Kyoto"},
                    "output": {"high_c": 19, "rain_days": 9},
                },
            ],
        },
        _text("u3", "user", "And day two?"),
        _text("a3", "assistant", "Arashiyama bamboo grove, then Tenryu-ji."),
    ]:
        manager.append(first, message)
    manager.append(first, _text("a3b", "assistant", "Alternative: Fushimi Inari at dawn."), "u3")  # a branch
    manager.append(first, _text("r2", "user", "A second root."), None)
    manager.add_compaction(first, "## Topic\nA spring trip to Kyoto.", "u1", "a2")
    manager.add_usage(first, 1200, 340, 0.0123)
    SessionRecord.objects.filter(id=first).update(owner=user)  # as the JSON API records a session's owner
    session = manager.get_session(first)
    session.replace_context_block("memory", "Prefers quiet places.")
    session.freeze_system_prompt()
    entries = DjangoSearchProvider(label=f"knowledge_{first}", session_id=first)
    entries.set("kyoto-temples", "Nanzen-ji and Ginkaku-ji are on the Philosopher's Path.")
    entries.set("kyoto-food", "Yudofu near Nanzen-ji; 湯豆腐.")

    second = manager.create("Other user_chat", model="demo-model").id
    manager.append(second, _text("x1", "user", "Hello there."))
    manager.append(second, _text("x2", "assistant", "Hi! How can I help?"))
    manager.add_compaction(second, "Greetings.", "x1", "x2")
    manager.get_session(second).replace_context_block("memory", "Says hello.")
    forked = manager.fork(first, "a1", "Trip planning (fork)").id
    manager.append(forked, _text("f1", "user", "Fork: make it four days."))

    CompactionJob.objects.create(session_id=first, config_name="", status="failed", attempts=2, last_error="boom")
    ApiKey.issue(user, "dump key")
    with connection.cursor() as cursor:
        # Rows as the seed's providers (and other programs) write them: no owner, no seq named.
        cursor.execute("INSERT INTO cf_agents_context_blocks (label, content) VALUES ('_system_prompt', 'Default.')")
        cursor.execute("INSERT INTO cf_agents_context_blocks (label, content) VALUES ('notes_nobody', 'Foreign.')")
        cursor.execute(
            "INSERT INTO cf_agents_search_entries (label, key, content) VALUES ('shared', 'faq', 'Open daily.')"
        )
        cursor.execute(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content) "
            "VALUES ('seed-1', 'seed-only', NULL, 'user', %s, 'written by the seed')",
            ['{"id":"seed-1","role":"user","parts":[{"type":"text","text":"written by the seed"}]}'],
        )


def _setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from django.db.migrations.recorder import MigrationRecorder

    applied = MigrationRecorder.Migration.objects.filter(app="agent_sessions").values_list("name", flat=True)
    if sorted(applied)[-1:] != ["0028_context_owner"] or len(applied) != 28:
        raise SystemExit(f"not the old chain: {sorted(applied)}")
    fill()
    from django.db import connections

    connections.close_all()


def dump_sqlite() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chain.sqlite3"
        _setup(f"sqlite:///{path}")
        # The sqlite3 shell's .dump, not Python's iterdump: it restores FTS5 tables through their
        # shadow tables, where iterdump inserts into the virtual tables before they exist.
        return subprocess.run(["sqlite3", str(path), ".dump"], check=True, capture_output=True, text=True).stdout


def dump_postgres() -> str:
    import psycopg

    name = f"agent_sessions_chain_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dbname="postgres", user=PG_USER, autocommit=True, **PG) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        _setup(f"postgres://{PG_USER}@{PG['host']}:{PG['port']}/{name}")
        out = subprocess.run(
            ["pg_dump", "--inserts", "--no-owner", "--no-privileges", "-h", PG["host"], "-p", PG["port"]]
            + ["-U", PG_USER, "-d", name],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        with psycopg.connect(dbname="postgres", user=PG_USER, autocommit=True, **PG) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    # psql's \restrict guard lines (pg_dump 15.14+) are no SQL; the loaders run the text as SQL.
    return "".join(
        line for line in out.splitlines(keepends=True) if not line.startswith(("\\restrict", "\\unrestrict"))
    )


def seed_catalog() -> str:
    import json

    import psycopg

    name = f"agent_sessions_seed_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dbname="postgres", user=PG_USER, autocommit=True, **PG) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(dbname=name, user=PG_USER, autocommit=True, **PG) as conn:
            conn.execute((ROOT / "tests" / "support" / "seed_schema.sql").read_text())
        url = f"postgres://{PG_USER}@{PG['host']}:{PG['port']}/{name}"
        env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="project.settings", PYTHONPATH=str(ROOT))
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        sys.path.insert(0, str(ROOT))
        from tests.support.schema import catalog

        with psycopg.connect(dbname=name, user=PG_USER, **PG) as conn:
            return json.dumps(catalog(conn), indent=1, ensure_ascii=False) + "\n"
    finally:
        with psycopg.connect(dbname="postgres", user=PG_USER, autocommit=True, **PG) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    vendor = sys.argv[1] if len(sys.argv) > 1 else ""
    dumps = {"sqlite": dump_sqlite, "postgres": dump_postgres, "seed": seed_catalog}
    if vendor not in dumps:
        raise SystemExit("usage: dump_migration_chain.py sqlite|postgres|seed")
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / ("postgres_seed_chain_catalog.json" if vendor == "seed" else f"{vendor}_chain.sql")
    target.write_text(dumps[vendor](), encoding="utf-8")
    print(f"wrote {target.relative_to(ROOT)} ({target.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
