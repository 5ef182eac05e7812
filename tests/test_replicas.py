"""The read-replica router of docs/scaling.md: reads go to ``replica``, writes to ``default``.

In tests ``replica`` mirrors the default database (settings: ``TEST: {"MIRROR": "default"}``):
a second connection to the same data, so every query shows which alias ran it.
"""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext, override_settings

from agent_sessions import Session, SessionManager
from agent_sessions.models import Message
from agent_sessions.storage import postgres_reads
from tests.conftest import msg


class AgentSessionsRouter:
    """The router from docs/scaling.md, verbatim."""

    def db_for_read(self, model, **hints):
        return "replica" if model._meta.app_label == "agent_sessions" else None

    def db_for_write(self, model, **hints):
        return "default" if model._meta.app_label == "agent_sessions" else None


ROUTERS = ["tests.test_replicas.AgentSessionsRouter"]
pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "replica"])


def _captured(alias: str):
    return CaptureQueriesContext(connections[alias])


@override_settings(DATABASE_ROUTERS=ROUTERS)
def test_writes_go_to_default_and_orm_reads_to_the_replica(session_id):
    session = Session.create().for_session(session_id)
    with _captured("default") as primary, _captured("replica") as replica:
        session.append_message(msg("a", text="kites over the harbour"))
        session.append_message(msg("b"))
    appends = ("INSERT INTO assistant_messages", "agent_sessions_append(")  # Postgres appends call the function
    assert any(a in q["sql"] for q in primary.captured_queries for a in appends)
    assert not replica.captured_queries
    with _captured("default") as primary, _captured("replica") as replica:
        rows = list(Message.objects.filter(session_id=session_id).values_list("message_id", flat=True))
        hits = [(h.session_id, h.id) for h in SessionManager().search("kites")]
    assert sorted(rows) == ["a", "b"]
    assert hits == [(session_id, "a")]
    assert not primary.captured_queries  # the ORM read and the cross-session search ran on the replica
    assert len(replica.captured_queries) >= 2
    # A Session's own reads follow db_for_write: a conversation never reads behind its own appends.
    with _captured("default") as primary, _captured("replica") as replica:
        assert [m["id"] for m in session.get_history()] == ["a", "b"]
    assert primary.captured_queries
    assert not replica.captured_queries


@override_settings(DATABASE_ROUTERS=ROUTERS)
def test_using_pins_a_conversation_turn_to_one_alias(session_id):
    pinned = Session.create(using="default").for_session(session_id)
    with _captured("default") as primary, _captured("replica") as replica:
        pinned.append_message(msg("a"))
        pinned.append_message(msg("b"))
        history = [m["id"] for m in pinned.get_history()]
    assert history == ["a", "b"]
    assert not replica.captured_queries
    path_reads = ("FROM assistant_messages m", f"FROM {postgres_reads.PATH.name}(")  # the statement, or its function
    assert any(read in q["sql"] for q in primary.captured_queries for read in path_reads)
    # The same conversation read explicitly through the replica alias.
    with _captured("default") as primary, _captured("replica") as replica:
        assert [m["id"] for m in Session.create(using="replica").for_session(session_id).get_history()] == ["a", "b"]
    assert not primary.captured_queries
    assert replica.captured_queries


@override_settings(DATABASE_ROUTERS=ROUTERS)
def test_session_manager_writes_to_default_and_reads_where_told(session_id):
    manager = SessionManager()
    with _captured("default") as primary, _captured("replica") as replica:
        record = manager.create(name="routed")
    assert any("INSERT INTO" in q["sql"] and "assistant_sessions" in q["sql"] for q in primary.captured_queries)
    assert not any("INSERT" in q["sql"] for q in replica.captured_queries)
    reader = SessionManager(using="replica")
    with _captured("default") as primary:
        assert reader.get(record.id).name == "routed"
    assert not primary.captured_queries
