"""The session delete confirmation counts everything that goes with the session, loading no row."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent_sessions import SessionManager
from agent_sessions.models import ContextBlockRecord, Message, ModelCallRecord, SearchEntry, SessionRecord
from tests.conftest import msg

pytestmark = pytest.mark.django_db

BASE = "/admin/agent_sessions/sessionrecord"


def make(messages: int) -> str:
    manager = SessionManager()
    info = manager.create("doomed")
    session = manager.get_session(info.id).with_context("memory", description="facts").with_cached_prompt()
    manager.append_all(info.id, [msg(f"m{i}", "user" if i % 2 == 0 else "assistant") for i in range(messages)])
    session.replace_context_block("memory", "the user likes tea")
    session.freeze_system_prompt()
    session.add_compaction("early turns", "m0", "m1")
    with session.model_call(model="m") as call:
        call.finish(msg("reply", "assistant"))
    SearchEntry.objects.create(label=f"notes_{info.id}", key="k", content="entry", session_id=info.id)
    return info.id


def counts(html: str) -> dict[str, int]:
    return {name.strip().lower(): int(n) for name, n in re.findall(r"<li>([\w -]+): (\d+)</li>", html)}


def test_the_confirmation_counts_every_table_the_delete_reaches(admin_client):
    sid = make(10)
    html = admin_client.get(f"{BASE}/{sid}/delete/").content.decode()
    found = counts(html)
    assert found["messages"] == 11
    assert found["compactions"] == 1
    assert found["context blocks"] == 2  # the memory block and the frozen prompt
    assert found["search entries"] == 1
    assert found["model calls"] == 1
    assert found["model call contents"] == 3  # the prompt, the tool list and the overlay the call saw
    assert SessionRecord.objects.filter(id=sid).exists()  # a GET deletes nothing
    admin_client.post(f"{BASE}/{sid}/delete/", {"post": "yes"})
    for model in (Message, ModelCallRecord, SearchEntry):
        assert not model.objects.filter(session_id=sid).exists(), model
    assert not ContextBlockRecord.objects.filter(label__endswith=sid).exists()


def test_the_confirmation_reads_counts_not_rows(admin_client):
    small, big = make(4), make(400)
    sizes = []
    for sid in (small, big):
        with CaptureQueriesContext(connection) as ctx:
            assert admin_client.get(f"{BASE}/{sid}/delete/").status_code == 200
        reads = [q["sql"] for q in ctx.captured_queries if 'FROM "assistant_messages"' in q["sql"]]
        assert all("COUNT" in sql for sql in reads), reads
        sizes.append(len(ctx.captured_queries))
    assert sizes[0] == sizes[1]
