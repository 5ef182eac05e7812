"""Compaction summaries and file names are found: by Session.search, across sessions, the API and the admin.

Summaries have their own full-text index (migration 0004); a summary hit has the id its overlay
has as a message (``compaction_<id>``) and comes after the messages. File names lead ``tool_text``.
"""

from __future__ import annotations

import importlib
import json

import pytest
from django.db import connection

from agent_sessions import SessionManager
from agent_sessions.models import Compaction, Message
from agent_sessions.storage import orm
from tests.conftest import msg
from tests.support.search_docs import ids

pytestmark = pytest.mark.django_db

SUMMARY = "Agreed to move the billing ledger to db-replica-3 before the audit."


def file_msg(mid: str, filename: str, text: str = "see attached") -> dict:
    parts = [
        {"type": "text", "text": text},
        {
            "type": "file",
            "mediaType": "application/pdf",
            "filename": filename,
            "url": "data:application/pdf;base64,AA==",
        },
    ]
    return {"id": mid, "role": "user", "parts": parts}


@pytest.fixture
def compacted(session):
    for i in range(6):
        session.append_message(msg(f"m{i}", role="user" if i % 2 == 0 else "assistant", text=f"turn {i} about ledgers"))
    overlay = session.add_compaction(SUMMARY, "m1", "m3")
    return session, overlay


def test_session_search_finds_a_summary_after_the_messages(compacted):
    session, overlay = compacted
    hits = session.search("billing audit")
    assert [h.id for h in hits] == [f"compaction_{overlay.id}"]
    assert hits[0].role == "assistant"
    assert hits[0].content == SUMMARY
    assert hits[0].session_id == session.session_id
    assert "**billing**" in hits[0].snippet
    both = session.search("ledger", limit=50)
    assert both[-1].id == f"compaction_{overlay.id}"
    assert {h.id for h in both[:-1]} == {f"m{i}" for i in range(6)}  # the messages rank first
    assert [h.id for h in session.search("ledger", limit=6)] == [h.id for h in both[:-1]]
    assert ids(session.search("db-replica-3")) == {f"compaction_{overlay.id}"}  # compound terms too


def test_pages_run_through_the_messages_into_the_summary(compacted):
    session, overlay = compacted
    everything = [h.id for h in session.search("ledger", limit=50)]
    paged = [h.id for offset in range(0, 7, 2) for h in session.search("ledger", limit=2, offset=offset)]
    assert paged == everything
    assert len(everything) == 7
    assert [h.id for h in session.search("ledger", limit=3, offset=5)] == everything[5:]
    assert session.search("ledger", limit=2, offset=7) == []


def test_role_filter_and_other_sessions(compacted, session_id):
    session, overlay = compacted
    assert ids(orm.search("billing", session_id=session.session_id, role="user")) == set()
    assert ids(orm.search("billing", session_id=session.session_id, role="assistant")) == {f"compaction_{overlay.id}"}
    assert orm.search("billing", session_id="someone-else") == []
    across = SessionManager().search("billing")
    assert [(h.id, h.session_id) for h in across] == [(f"compaction_{overlay.id}", session.session_id)]


def test_a_deleted_or_changed_summary_is_gone(compacted):
    session, overlay = compacted
    Compaction.objects.filter(compaction_id=overlay.id).update(summary="nothing relevant here")
    assert session.search("billing") == []
    assert ids(session.search("relevant")) == {f"compaction_{overlay.id}"}
    Compaction.objects.filter(compaction_id=overlay.id).delete()
    assert session.search("relevant") == []


def test_api_search_finds_summaries(api):
    sid = api.new_session()
    for i in range(4):
        api.append(sid, f"m{i}", f"turn {i}")
    api.post(f"/sessions/{sid}/compactions", {"summary": SUMMARY, "from_message_id": "m0", "to_message_id": "m1"})
    overlay = Compaction.objects.get(session_id=sid)
    results = api.get(f"/sessions/{sid}/search", q="billing").json()["results"]
    assert [r["id"] for r in results] == [f"compaction_{overlay.compaction_id}"]


def test_admin_finds_summaries(admin_client, compacted):
    session, overlay = compacted
    html = admin_client.get("/admin/agent_sessions/compaction/", {"q": "billing audit"}).content.decode()
    assert "\n1 compaction\n" in html
    assert overlay.id in html
    none = admin_client.get("/admin/agent_sessions/compaction/", {"q": "zeppelin"}).content.decode()
    assert "\n0 compactions\n" in none
    html = admin_client.get("/admin/agent_sessions/message/", {"q": "ledger"}).content.decode()
    assert "Compaction summaries match too" in html
    assert "/admin/agent_sessions/compaction/?q=ledger" in html


def test_file_names_are_found(session):
    session.append_message(file_msg("f1", "q3-report.pdf"))
    session.append_message(file_msg("f2", "q3 summary.pdf", text="q3 report draft"))
    session.append_message(msg("t1", text="nothing attached"))
    row = Message.objects.get(session_id=session.session_id, message_id="f1")
    assert row.tool_text == "q3-report.pdf"
    assert ids(session.search("q3-report.pdf")) == {"f1"}
    assert ids(session.search("summary.pdf")) == {"f2"}
    # A word inside a dotted name: FTS5 splits the name; Postgres' parser keeps it one token ("host").
    expected = {"f2"} if connection.vendor == "postgresql" else {"f1", "f2"}
    assert ids(session.search("report", limit=10)) == expected


def test_admin_finds_file_names(admin_client, session):
    session.append_message(file_msg("f1", "incident-timeline.csv"))
    html = admin_client.get("/admin/agent_sessions/message/", {"q": "incident-timeline.csv"}).content.decode()
    assert "1 result" in html
    assert ">f1<" in html


def test_migration_0004_adds_file_names_to_older_rows(session):
    """Rows written before file names were indexed get them, in front of their tool text."""
    older = file_msg("old", "postmortem-2024.md")
    older["parts"].append({"type": "file", "mediaType": "text/plain", "filename": "  "})  # blank: skipped
    older["parts"].append({"type": "file", "mediaType": "text/plain", "filename": "notes.txt"})
    session.append_message(msg("plain", text="no files"))
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content, tool_text, "
            "tokens, depth) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            ["old", session.session_id, None, "user", json.dumps(older), "see attached", "earlier tool text", 3, 1],
        )
    assert session.search("postmortem-2024.md") == []
    migration = importlib.import_module("agent_sessions.migrations.0004_search_terms")
    statements = migration.FORWARDS[connection.vendor][:1]  # the backfill only: the indexes exist

    class Editor:
        def execute(self, sql, params=None):
            with connection.cursor() as cursor:
                cursor.execute(sql, params)

    migration._run(statements, Editor())
    row = Message.objects.get(session_id=session.session_id, message_id="old")
    assert row.tool_text == "postmortem-2024.md\nnotes.txt\nearlier tool text"
    assert Message.objects.get(session_id=session.session_id, message_id="plain").tool_text == ""
    assert ids(session.search("postmortem-2024.md")) == {"old"}
    assert ids(session.search("notes.txt")) == {"old"}
