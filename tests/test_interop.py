"""Interop with the seed's TypeScript providers: same tables, same columns, rows readable both ways."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from agent_sessions import Session

ROOT = Path(__file__).resolve().parent.parent


def _seed_insert(session_id: str, mid: str, parent: str | None, text: str) -> None:
    content = json.dumps({"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]})
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            [mid, session_id, parent, "user", content, text],
        )


@pytest.mark.django_db
def test_rows_inserted_the_seed_way_are_read_and_found(session):
    _seed_insert(session.session_id, "a", None, "we deploy the database on Friday")
    _seed_insert(session.session_id, "b", "a", "sounds good")
    assert [m["id"] for m in session.get_history()] == ["a", "b"]
    assert [h.id for h in session.search("deploy database")] == ["a"]
    assert session.get_latest_leaf()["id"] == "b"
    assert session.get_path_length() == 2


@pytest.mark.django_db
def test_rows_written_here_have_the_seed_columns(session):
    session.append_message({"id": "x", "role": "user", "parts": [{"type": "text", "text": "hello"}]})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, session_id, parent_id, role, content, text_content, created_at FROM assistant_messages "
            "WHERE session_id = %s",
            [session.session_id],
        )
        (mid, sid, parent, role, content, text, created) = cursor.fetchone()
    assert (mid, sid, parent, role, text) == ("x", session.session_id, None, "user", "hello")
    assert json.loads(content)["parts"] == [{"type": "text", "text": "hello"}]
    assert created is not None


@pytest.mark.postgres_only  # the seed's DDL is Postgres DDL
def test_database_laid_out_by_the_seed_ddl_migrates_and_works():
    import psycopg

    name = f"agent_sessions_seed_{uuid.uuid4().hex[:8]}"
    params = dict(
        host=settings.DATABASES["default"]["HOST"],
        port=settings.DATABASES["default"]["PORT"],
        user=settings.DATABASES["default"]["USER"],
    )
    admin = psycopg.connect(dbname="postgres", autocommit=True, **params)
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with psycopg.connect(dbname=name, autocommit=True, **params) as conn:
            conn.execute((Path(__file__).parent / "support" / "seed_schema.sql").read_text())
            conn.execute(
                "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content) "
                "VALUES ('old', 'legacy', NULL, 'user', '{\"id\":\"old\",\"role\":\"user\",\"parts\":[]}', '')"
            )
        url = f"postgres://{params['user']}@{params['host']}:{params['port']}/{name}"
        env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="project.settings", PYTHONPATH=str(ROOT))
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        out = subprocess.run(
            [sys.executable, "-m", "tests.support.seed_interop"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        assert result["history"] == ["s1", "s2", "p1"]
        assert result["search"] == ["s1"]
        assert result["path_length"] == 3
        assert [r[:2] for r in result["rows"]] == [["s1", None], ["s2", "s1"], ["p1", "s2"]]
        with psycopg.connect(dbname=name, autocommit=True, **params) as conn:
            # The pre-existing row got a seq; the seed's primary key is still there.
            assert conn.execute("SELECT seq FROM assistant_messages WHERE id = 'old'").fetchone()[0] is not None
            pk = conn.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'assistant_messages'::regclass "
                "AND contype = 'p'"
            ).fetchone()[0]
            assert pk == "PRIMARY KEY (session_id, id)"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_session_create_accepts_a_custom_provider_object():
    class Memory:
        def __init__(self):
            self.rows: list[tuple[dict, object]] = []

        def append_message(self, message, parent_id="omitted"):
            self.rows.append((message, parent_id))

        def get_history(self, leaf_id=None):
            return [m for m, _ in self.rows]

    store = Memory()
    s = Session.create(store)
    s.append_message({"id": "a", "role": "user", "parts": []})
    s.append_message({"id": "b", "role": "user", "parts": []}, None)
    assert [p for _, p in store.rows] == ["omitted", None]
    assert [m["id"] for m in s.get_history()] == ["a", "b"]
