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


# A pop: Postgres sends the lock and the find-delete-stamp statement as one query (one round trip;
# with parameters bound by the server, one statement a command: BEGIN, both, COMMIT); SQLite runs
# BEGIN IMMEDIATE, the write lock, the leaf lookup, the delete, the stamp, COMMIT.
ONE_POP = {"postgresql": 1, "postgresql, server-side binding": 4, "sqlite": 6}


def _pop_kind() -> str:
    bound = connection.settings_dict["OPTIONS"].get("server_side_binding") is True
    return f"{connection.vendor}, server-side binding" if bound else connection.vendor


def test_agents_session_pop_item_is_one_round_trip():
    pytest.importorskip("agents")
    from agent_sessions.integrations.openai_agents import AgentsSession
    from agent_sessions.models import SessionRecord

    session = AgentsSession(f"rt-pop-{uuid.uuid4().hex[:8]}")
    session.add_items_sync([{"role": "user", "content": text} for text in ("first", "second", "third")])
    before = SessionRecord.objects.get(id=session.session_id).updated_at
    popped: list = []
    pops = _statements(lambda: popped.append(session.pop_item_sync()))
    assert len(pops) <= ONE_POP[_pop_kind()], pops
    assert popped == [{"role": "user", "content": "third"}]
    row = SessionRecord.objects.get(id=session.session_id)
    assert row.message_count == 2  # the count and updated_at move with the delete
    assert row.updated_at > before
    assert [i["content"] for i in session.get_items_sync(None)] == ["first", "second"]
    session.add_items_sync([{"role": "user", "content": "fourth"}])  # continues under "second"
    assert [i["content"] for i in session.get_items_sync(None)] == ["first", "second", "fourth"]
    assert [session.pop_item_sync() for _ in range(4)] == [
        {"role": "user", "content": "fourth"},
        {"role": "user", "content": "second"},
        {"role": "user", "content": "first"},
        None,
    ]
    assert SessionRecord.objects.get(id=session.session_id).message_count == 0
