"""Every conversation is listed: a session made by any Python entry point gets its registry row.

The admin lists ``assistant_sessions`` and ``GET /api/sessions`` lists the caller's rows of it, so a
conversation without a row is invisible.  Each entry point (a bare ``Session``, the manager, the
adapters' store, the import commands) is checked for the row, its owner and who then sees it.
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent_sessions import Session, SessionManager
from agent_sessions.exceptions import InvalidMessage
from agent_sessions.integrations._store import SessionStore
from agent_sessions.models import SessionRecord
from agent_sessions.storage.orm import DjangoSessionProvider
from tests.conftest import msg

pytestmark = pytest.mark.django_db(transaction=False)


def _sid() -> str:
    return f"v-{uuid.uuid4().hex[:12]}"


def test_a_bare_session_registers_itself_on_its_first_append():
    sid = _sid()
    session = Session.create().for_session(sid)
    assert not SessionRecord.objects.filter(id=sid).exists()  # building writes nothing
    session.append_message(msg("a"))
    session.append_message(msg("b"))
    row = SessionRecord.objects.get(id=sid)
    assert (row.name, row.owner_id, row.message_count) == ("", None, 2)


def test_the_registry_row_costs_one_statement_per_session_not_per_append():
    sid = _sid()
    session = Session.create().for_session(sid)
    session.append_message(msg("first"))
    with CaptureQueriesContext(connection) as later:
        for i in range(5):
            session.append_message(msg(f"m{i}"))
    assert not [q for q in later.captured_queries if "INSERT INTO assistant_sessions" in q["sql"]]
    assert SessionRecord.objects.get(id=sid).message_count == 6


def test_the_first_append_writes_the_row_and_the_message_in_one_transaction():
    sid = _sid()
    session = Session.create().for_session(sid)
    with CaptureQueriesContext(connection) as first:
        session.append_message(msg("a"))
    sql = [q["sql"] for q in first.captured_queries]
    assert sum("INSERT INTO assistant_sessions" in s for s in sql) == 1
    assert SessionRecord.objects.get(id=sid).message_count == 1


def test_bad_input_writes_no_registry_row():
    sid = _sid()
    session = Session.create().for_session(sid)
    with pytest.raises(InvalidMessage):
        session.append_message({"id": "x", "role": "user", "parts": "not a list"})
    assert not SessionRecord.objects.filter(id=sid).exists()
    session.append_message(msg("ok"))  # and the next good append still registers it
    assert SessionRecord.objects.get(id=sid).message_count == 1


def test_the_default_namespace_gets_no_row():
    Session.create().append_message(msg(f"d-{uuid.uuid4().hex[:8]}"))
    assert not SessionRecord.objects.filter(id="").exists()


def test_an_owner_given_to_the_builder_owns_the_row(django_user_model):
    alice = django_user_model.objects.create_user("alice-v")
    sid = _sid()
    Session.create(owner=alice).for_session(sid).append_message(msg("a"))
    assert SessionRecord.objects.get(id=sid).owner_id == alice.pk
    other = _sid()
    Session.create(owner=alice.pk).for_session(other).append_message(msg("a"))  # a pk works too
    assert SessionRecord.objects.get(id=other).owner_id == alice.pk


def test_an_existing_row_keeps_its_owner_and_fields(django_user_model):
    alice = django_user_model.objects.create_user("alice-v")
    mallory = django_user_model.objects.create_user("mallory-v")
    info = SessionManager().create("Planning", owner=alice)
    Session.create(owner=mallory).for_session(info.id).append_message(msg("a"))
    row = SessionRecord.objects.get(id=info.id)
    assert (row.name, row.owner_id, row.message_count) == ("Planning", alice.pk, 1)


def test_owner_is_refused_with_a_custom_storage():
    with pytest.raises(ValueError, match="owner"):
        Session.create(DjangoSessionProvider("x"), owner=1)


def test_rows_already_stored_are_counted_when_the_row_is_made():
    sid = _sid()
    DjangoSessionProvider(sid).insert_rows([{"id": "old", "role": "user", "content": "{}", "text_content": ""}])
    Session.create().for_session(sid).append_message(msg("new"))
    assert SessionRecord.objects.get(id=sid).message_count == 2


def test_manager_appends_to_an_uncreated_id_register_it_and_split_makes_one_row():
    manager = SessionManager()
    sid = _sid()
    manager.append(sid, msg("a"))
    assert SessionRecord.objects.filter(id=sid).count() == 1
    split = manager.compact_and_split(sid, "summary", name="next")
    assert SessionRecord.objects.get(id=split.id).name == "next"


def test_adapter_store_registers_with_owner_name_and_source(django_user_model):
    alice = django_user_model.objects.create_user("alice-v")
    sid = _sid()
    store = SessionStore(sid, source="test-adapter", owner=alice)
    store.append([msg("a"), msg("b")])
    row = SessionRecord.objects.get(id=sid)
    assert (row.name, row.source, row.owner_id, row.message_count) == (sid, "test-adapter", alice.pk, 2)


def test_api_lists_a_builder_made_session_for_its_owner_and_staff_only(api, bob_api, staff_api, alice):
    sid = _sid()
    Session.create(owner=alice).for_session(sid).append_message(msg("a"))
    assert sid in [s["id"] for s in api.get("/sessions").json()["items"]]
    assert sid not in [s["id"] for s in bob_api.get("/sessions").json()["items"]]
    assert sid in [s["id"] for s in staff_api.get("/sessions").json()["items"]]
    ownerless = _sid()
    Session.create().for_session(ownerless).append_message(msg("a"))
    assert ownerless in [s["id"] for s in staff_api.get("/sessions").json()["items"]]
    assert ownerless not in [s["id"] for s in api.get("/sessions").json()["items"]]


def test_admin_lists_a_builder_made_session(admin_client):
    sid = _sid()
    Session.create().for_session(sid).append_message(msg("a"))
    page = admin_client.get("/admin/agent_sessions/sessionrecord/")
    assert page.status_code == 200
    assert sid in page.content.decode()


def test_import_sessions_registers_a_line_without_a_record_under_the_given_owner(tmp_path, django_user_model):
    alice = django_user_model.objects.create_user("alice-v")
    sid = _sid()
    line = {"format": "agent_sessions.session/1", "session_id": sid, "messages": [{"id": "a", "message": msg("a")}]}
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(CommandError, match="no user named"):
        call_command("import_sessions", str(path), "--owner", "nobody", "--no-progress", verbosity=0)
    assert not SessionRecord.objects.filter(id=sid).exists()
    call_command("import_sessions", str(path), "--owner", "alice-v", "--no-progress", verbosity=0)
    row = SessionRecord.objects.get(id=sid)
    assert (row.owner_id, row.message_count) == (alice.pk, 1)


def test_import_openai_transcript_takes_an_owner(tmp_path, django_user_model):
    alice = django_user_model.objects.create_user("alice-v")
    sid = _sid()
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]))
    call_command(
        "import_openai_transcript", str(path), "--session-id", sid, "--owner", "alice-v", "--no-progress", verbosity=0
    )
    row = SessionRecord.objects.get(id=sid)
    assert (row.owner_id, row.message_count) == (alice.pk, 2)
