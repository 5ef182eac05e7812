"""Statements per adapter call, on both databases: a one-message write is one statement (the registry's
``updated_at`` is stamped inside the append), a read one statement."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db(transaction=True)  # autocommit, as a deployment runs the adapters

# Postgres runs the whole append (advisory lock, insert, count and updated_at) as one statement;
# SQLite, in-process (no round trips), as one transaction: BEGIN IMMEDIATE, the lock, the insert,
# the registry's stamp, COMMIT.
ONE_WRITE = {"postgresql": 1, "sqlite": 5}
# A history read: one statement on Postgres; on SQLite the latest leaf, then its rows.
ONE_READ = {"postgresql": 1, "sqlite": 2}


def _statements(fn) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        fn()
    return [q["sql"] for q in captured.captured_queries]


def test_agents_session_add_and_get_items_are_one_statement_each():
    pytest.importorskip("agents")
    from agent_sessions.integrations.openai_agents import AgentsSession

    session = AgentsSession(f"rt-{uuid.uuid4().hex[:8]}")
    session.add_items_sync([{"role": "user", "content": "first"}])  # registers the session once
    for text in ("hello", "again"):
        writes = _statements(lambda text=text: session.add_items_sync([{"role": "user", "content": text}]))
        assert len(writes) <= ONE_WRITE[connection.vendor], writes
        assert len(_statements(lambda: session.get_items_sync(None))) <= ONE_READ[connection.vendor]
    assert [i["content"] for i in session.get_items_sync(None)] == ["first", "hello", "again"]
    from agent_sessions.models import SessionRecord

    row = SessionRecord.objects.get(id=session.session_id)
    assert row.message_count == 3  # the count and updated_at move with the one statement


def test_langchain_and_pydantic_ai_stores_write_one_message_in_one_statement():
    pytest.importorskip("langchain_core")
    pytest.importorskip("pydantic_ai")
    from langchain_core.messages import HumanMessage
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from agent_sessions.integrations.langchain import DjangoChatMessageHistory
    from agent_sessions.integrations.pydantic_ai import ModelMessageHistory

    chat = DjangoChatMessageHistory(f"rt-lc-{uuid.uuid4().hex[:8]}")
    chat.add_messages([HumanMessage(content="first")])
    writes = _statements(lambda: chat.add_messages([HumanMessage(content="second")]))
    assert len(writes) <= ONE_WRITE[connection.vendor], writes
    assert len(_statements(lambda: chat.messages)) <= ONE_READ[connection.vendor]

    history = ModelMessageHistory(f"rt-pai-{uuid.uuid4().hex[:8]}")
    history.add_messages([ModelRequest(parts=[UserPromptPart(content="first")])])
    writes = _statements(lambda: history.add_messages([ModelRequest(parts=[UserPromptPart(content="x")])]))
    assert len(writes) <= ONE_WRITE[connection.vendor], writes
    assert len(_statements(history.get_messages)) <= ONE_READ[connection.vendor]
