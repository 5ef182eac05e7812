"""Database triggers: a session delete leaves no rows behind (every path), and a message cannot move in the tree."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from agent_sessions import Session, SessionManager
from agent_sessions.models import (
    CompactionJob,
    ContextBlockRecord,
    Message,
    SearchEntry,
    SessionRecord,
)
from agent_sessions.triggers import TREE_ERROR
from tests.conftest import msg

pytestmark = pytest.mark.django_db

BASE = "/admin/agent_sessions/sessionrecord"


def rows(session_id: str) -> dict[str, int]:
    """Rows that belong to ``session_id`` in every table, counted with plain SQL."""
    suffix = f"%\\_{session_id}"
    queries = {
        "assistant_sessions": ("SELECT count(*) FROM assistant_sessions WHERE id = %s", session_id),
        "assistant_messages": ("SELECT count(*) FROM assistant_messages WHERE session_id = %s", session_id),
        "assistant_compactions": ("SELECT count(*) FROM assistant_compactions WHERE session_id = %s", session_id),
        "agent_sessions_compaction_jobs": (
            "SELECT count(*) FROM agent_sessions_compaction_jobs WHERE session_id = %s",
            session_id,
        ),
        "cf_agents_context_blocks": (
            "SELECT count(*) FROM cf_agents_context_blocks WHERE label LIKE %s ESCAPE '\\'",
            suffix,
        ),
        "cf_agents_search_entries": (
            "SELECT count(*) FROM cf_agents_search_entries WHERE label LIKE %s ESCAPE '\\'",
            suffix,
        ),
    }
    with connection.cursor() as cursor:
        counts = {}
        for table, (sql, param) in queries.items():
            cursor.execute(sql, [param])
            counts[table] = cursor.fetchone()[0]
    return counts


FULL = {
    "assistant_sessions": 1,
    "assistant_messages": 3,
    "assistant_compactions": 1,
    "agent_sessions_compaction_jobs": 1,
    "cf_agents_context_blocks": 2,
    "cf_agents_search_entries": 1,
}
EMPTY = dict.fromkeys(FULL, 0)


def populate(session_id: str, owner=None) -> str:
    """A registry row with messages (a branch too), an overlay, a block, the stored prompt, an entry, a job."""
    SessionRecord.objects.create(id=session_id, name="chat", owner=owner)
    session = Session.create().for_session(session_id)
    session.append_message(msg("u1", "user", f"zanzibar question {session_id}"))
    session.append_message(msg("a1", "assistant", "zanzibar answer"))
    session.append_message(msg("a2", "assistant", "zanzibar other answer"), "u1")
    session.add_compaction("summary", "u1", "a1")
    ContextBlockRecord.objects.create(label=f"memory_{session_id}", content="remember")
    ContextBlockRecord.objects.create(label=f"_system_prompt_{session_id}", content="prompt")
    SearchEntry.objects.create(label=f"notes_{session_id}", key="k", content="zanzibar note")
    CompactionJob.objects.create(session_id=session_id)
    assert rows(session_id) == FULL
    return session_id


@pytest.fixture
def victim(session_id):
    return populate(session_id)


@pytest.fixture
def bystander(session_id):
    """Another session whose id extends the victim's: none of its rows may go."""
    return populate(session_id + "-keep")


def assert_cascaded(victim: str, bystander: str) -> None:
    assert rows(victim) == EMPTY
    assert rows(bystander) == FULL
    assert ContextBlockRecord.objects.filter(label__endswith=victim).count() == 0
    # The search indexes forgot the deleted rows (SQLite FTS5 triggers, Postgres tsvector).
    assert {m.session_id for m in Message.objects.search("zanzibar")} == {bystander}


def test_manager_delete(victim, bystander):
    SessionManager().delete(victim)
    assert_cascaded(victim, bystander)


def test_queryset_delete_of_several_sessions(victim, bystander):
    third = populate(victim + "-third")
    deleted, _ = SessionRecord.objects.filter(pk__in=[victim, third]).delete()
    assert deleted == 2
    assert rows(third) == EMPTY
    assert_cascaded(victim, bystander)


def test_model_instance_delete(victim, bystander):
    SessionRecord.objects.get(pk=victim).delete()
    assert_cascaded(victim, bystander)


def test_raw_sql_delete_by_a_foreign_writer(victim, bystander):
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM assistant_sessions WHERE id = %s", [victim])
    assert_cascaded(victim, bystander)


def test_api_delete(api, alice, session_id):
    victim = populate(session_id, owner=alice)
    bystander = populate(session_id + "-keep", owner=alice)
    assert api.delete(f"/sessions/{victim}").status_code == 204
    assert_cascaded(victim, bystander)


def test_admin_delete_selected_action(admin_client, victim, bystander):
    confirm = admin_client.post(f"{BASE}/", {"action": "delete_selected", "_selected_action": [victim]})
    html = confirm.content.decode()
    assert confirm.status_code == 200
    assert "Are you sure" in html
    assert "messages: 3" in html.lower()
    assert "compactions: 1" in html.lower()
    assert rows(victim) == FULL  # nothing happens before the confirmation
    done = admin_client.post(f"{BASE}/", {"action": "delete_selected", "_selected_action": [victim], "post": "yes"})
    assert done.status_code == 302
    assert_cascaded(victim, bystander)


def test_admin_delete_view(admin_client, victim, bystander):
    confirm = admin_client.get(f"{BASE}/{victim}/delete/")
    assert confirm.status_code == 200
    assert "messages: 3" in confirm.content.decode().lower()
    done = admin_client.post(f"{BASE}/{victim}/delete/", {"post": "yes"})
    assert done.status_code == 302
    assert_cascaded(victim, bystander)


def test_default_namespace_never_cascades(db):
    Session.create().append_message(msg("d1"))  # session_id ''
    ContextBlockRecord.objects.create(label="memory_", content="x")
    SessionRecord.objects.create(id="")
    SessionRecord.objects.filter(id="").delete()
    assert Message.objects.filter(session_id="").count() == 1
    assert ContextBlockRecord.objects.filter(label="memory_").count() == 1


def test_delete_rolls_back_with_its_transaction(victim):
    def delete_then_roll_back() -> None:
        with transaction.atomic():
            SessionRecord.objects.filter(pk=victim).delete()
            assert rows(victim) == EMPTY
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError, match="roll back"):
        delete_then_roll_back()
    assert rows(victim) == FULL


# ── the tree cannot be corrupted ─────────────────────────────────────────
@pytest.mark.parametrize(
    "change",
    [
        {"parent_id": "a1"},
        {"parent_id": None},
        {"session_id": "elsewhere"},
        {"message_id": "renamed"},
    ],
)
def test_updates_that_move_a_message_are_refused(victim, change):
    with pytest.raises(IntegrityError, match=TREE_ERROR), transaction.atomic():
        Message.objects.filter(session_id=victim, message_id="a2").update(**change)
    row = Message.objects.get(session_id=victim, message_id="a2")
    assert (row.session_id, row.parent_id) == (victim, "u1")


def test_raw_sql_re_parenting_is_refused(victim):
    with pytest.raises(IntegrityError, match=TREE_ERROR), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE assistant_messages SET parent_id = 'a1' WHERE session_id = %s AND id = 'a2'", [victim])
    assert Message.objects.get(session_id=victim, message_id="a2").parent_id == "u1"


def test_other_updates_still_work(victim):
    session = Session.create().for_session(victim)
    # Same values are not a change; content, depth and path_tokens stay writable.
    assert Message.objects.filter(session_id=victim, message_id="a2").update(parent_id="u1") == 1
    assert Message.objects.filter(session_id=victim).update(depth=None, path_tokens=None) == 3
    assert session.update_message(msg("a2", "assistant", "edited")) is True
    session.delete_messages(["u1"])  # its children become roots: depth re-derived, parent_id kept
    assert sorted(Message.objects.filter(session_id=victim).values_list("message_id", "depth")) == [
        ("a1", 1),
        ("a2", 1),
    ]
    assert session.get_history("a2")[0]["parts"][0]["text"] == "edited"


# ── message_count and updated_at follow every writer ──────────────────────
def count(session_id: str) -> int:
    return SessionRecord.objects.values_list("message_count", flat=True).get(pk=session_id)


def test_message_count_follows_appends_and_deletes(session_id):
    # A second old: SQLite's trigger stamps to the millisecond, and two appends can follow the
    # row's own (microsecond) stamp within the millisecond it was written in.
    before = timezone.now() - timedelta(seconds=1)
    SessionRecord.objects.create(id=session_id, created_at=before, updated_at=before)
    session = Session.create().for_session(session_id)  # no manager: only the triggers keep the row current
    session.append_message(msg("u1"))
    session.append_message(msg("a1", "assistant"))
    assert count(session_id) == 2
    assert SessionRecord.objects.get(pk=session_id).updated_at > before
    assert session.append_message(msg("a1", "assistant")) is False  # a duplicate inserts nothing
    assert count(session_id) == 2
    session.delete_messages(["a1"])
    assert count(session_id) == 1
    session.clear_messages()
    assert count(session_id) == 0


def stamp(session_id: str):
    return SessionRecord.objects.values_list("updated_at", flat=True).get(pk=session_id)


def test_count_triggers_never_move_updated_at_back(session_id):
    """A stamp ahead of the database clock (the registry's own clock can be) stays; one behind moves on."""
    ahead = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)  # no fraction: the shortest text form
    SessionRecord.objects.create(id=session_id, created_at=ahead, updated_at=ahead)
    session = Session.create().for_session(session_id)
    session.append_message(msg("u1"))
    assert (count(session_id), stamp(session_id)) == (1, ahead)
    with connection.cursor() as cursor:  # a foreign writer's insert, then a delete: the same triggers
        cursor.execute(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content) "
            "VALUES ('f', %s, 'u1', 'user', '{}')",
            [session_id],
        )
    session.delete_messages(["u1"])
    assert (count(session_id), stamp(session_id)) == (1, ahead)
    ahead = timezone.now() + timedelta(seconds=30)  # microseconds: longer than SQLite's millisecond stamp
    SessionRecord.objects.filter(pk=session_id).update(updated_at=ahead)
    session.append_message(msg("u2"))
    assert stamp(session_id) == ahead
    behind = timezone.now() - timedelta(hours=1)
    SessionRecord.objects.filter(pk=session_id).update(updated_at=behind)
    session.append_message(msg("u3"))
    moved = stamp(session_id)
    assert behind + timedelta(minutes=59) < moved <= timezone.now()
    session.clear_messages()
    assert count(session_id) == 0
    assert stamp(session_id) >= moved


def test_message_count_of_bulk_writes_fork_and_foreign_rows(db):
    manager = SessionManager()
    info = manager.create("bulk")
    manager.append_all(info.id, [msg(f"m{i}") for i in range(7)])
    assert count(info.id) == 7
    fork = manager.fork(info.id, "m3", "fork")
    assert (count(fork.id), count(info.id)) == (4, 7)
    # SQLite's trigger stamps to the millisecond: a foreign write in the millisecond the fork's
    # registry row was stamped (from the process clock, in microseconds) need not pass it.
    time.sleep(0.002)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content) "
            "VALUES ('f', %s, 'm6', 'user', '{}')",
            [info.id],
        )
    assert count(info.id) == 8
    assert [s.id for s in manager.list()][:1] == [info.id]  # the foreign append made it the latest


def test_registry_row_made_after_its_messages_starts_with_their_count(session_id):
    session = Session.create().for_session(session_id)
    session.storage.mark_registered()  # no registry row from the appends: the one below is made after them
    for mid in ("a", "b", "c"):
        session.append_message(msg(mid))
    assert not SessionRecord.objects.filter(id=session_id).exists()
    SessionRecord.objects.create(id=session_id)
    assert count(session_id) == 3


_PROBE = """
import django; django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
call_command("makemigrations", "agent_sessions", "--check", "--dry-run", verbosity=0)
TRIGGERS = {
    "postgresql": "SELECT tgname FROM pg_trigger WHERE tgname LIKE 'pgtrigger_%%' OR tgname LIKE 'agent_sessions_%%'",
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'agent_sessions_%%'",
}
with connection.cursor() as c:
    c.execute(TRIGGERS[connection.vendor])
    print(len(c.fetchall()))
    c.execute("INSERT INTO assistant_sessions (id, name) VALUES ('s', '')")
    c.execute("INSERT INTO assistant_messages (id, session_id, role, content) VALUES ('m', 's', 'user', '{}')")
    c.execute("DELETE FROM assistant_sessions WHERE id = 's'")
    c.execute("SELECT count(*) FROM assistant_messages")
    print(c.fetchone()[0])
connection.close()
"""


def _admin_sql(statement: str) -> None:
    """Run CREATE/DROP DATABASE on the test server (outside any transaction)."""
    import psycopg

    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"], port=db["PORT"], user=db["USER"], password=db["PASSWORD"], dbname="postgres", autocommit=True
    ) as admin:
        admin.execute(statement)


def test_migrations_install_the_triggers_without_pgtrigger_in_installed_apps(tmp_path):
    """A project that never added "pgtrigger" gets the same triggers and a clean makemigrations."""
    import os
    import subprocess
    import sys
    import uuid

    from django.conf import settings

    postgres = connection.vendor == "postgresql"
    name = f"agent_sessions_nopgt_{uuid.uuid4().hex[:8]}" if postgres else str(tmp_path / "nopgt.sqlite3")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings_no_pgtrigger",
        "AGENT_SESSIONS_TEST_DB": settings.DB,
        "AGENT_SESSIONS_DB_NAME": name,
    }
    if postgres:
        _admin_sql(f'CREATE DATABASE "{name}"')
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=300)
    finally:
        if postgres:
            _admin_sql(f'DROP DATABASE IF EXISTS "{name}"')
    assert done.returncode == 0, done.stderr
    # five triggers of django-pgtrigger's and the model-call records' cascade; the session's message went with it
    assert done.stdout.split() == ["6", "0"]
