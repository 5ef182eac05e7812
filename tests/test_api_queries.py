"""Statements per request of the hot API routes (a contract: the HTTP load benchmark and its goals count on it).

Every session route checks ownership with one short statement; history is one walk, a per-session
search one query, an append one insert plus the ``updated_at`` touch in one transaction.  The counts
include the API key lookup (one query; its ``last_used_at`` write is throttled and done in setup).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent_sessions.models import Message, SessionRecord
from agent_sessions.search.plan import MESSAGES
from agent_sessions.storage import appends, session_rows
from tests.support.api import ui

pytestmark = pytest.mark.django_db

AUTH = 1
OWNER = 1
# A path read: one statement on Postgres; SQLite looks the leaf up first (in-process, storage/range_reads.py).
HISTORY = 1 if connection.vendor == "postgresql" else 2


@pytest.fixture
def chat(api):
    sid = api.new_session("Q")
    for i in range(5):
        api.append(sid, f"m{i}", f"deploy note {i}")
    return sid


SUMMARIES = 1  # a page the messages do not fill goes on with the compaction summaries (their own index)
TRANSACTION = 2  # inside the test's transaction the route's atomic block is SAVEPOINT … RELEASE


def test_history_is_auth_owner_and_one_path_read(api, chat, django_assert_num_queries):
    with django_assert_num_queries(AUTH + OWNER + HISTORY):
        response = api.get(f"/sessions/{chat}/history")
    assert [m["id"] for m in response.json()["messages"]] == [f"m{i}" for i in range(5)]


def test_history_at_a_leaf_adds_one_existence_check(api, chat, django_assert_num_queries):
    with django_assert_num_queries(AUTH + OWNER + 1 + HISTORY):
        response = api.get(f"/sessions/{chat}/history", leaf_id="m2")
    assert [m["id"] for m in response.json()["messages"]] == ["m0", "m1", "m2"]


def _without_stem_probes(queries: list[dict]) -> list[str]:
    """SQLite asks a temporary FTS5 table how porter stems the query's words (search/fts5.py): not a read."""
    return [q["sql"] for q in queries if "agent_sessions_stem_probe" not in q["sql"]]


def test_session_search_is_auth_owner_and_one_query(api, chat):
    with CaptureQueriesContext(connection) as queries:
        response = api.get(f"/sessions/{chat}/search", q="deploy", limit=2)
    assert len(response.json()["results"]) == 2
    assert len(_without_stem_probes(queries.captured_queries)) == AUTH + OWNER + 1  # a full page: messages only
    with CaptureQueriesContext(connection) as queries:
        response = api.get(f"/sessions/{chat}/search", q="deploy", limit=20)
    assert len(response.json()["results"]) == 5
    assert len(_without_stem_probes(queries.captured_queries)) == AUTH + OWNER + 1 + SUMMARIES


def test_search_across_sessions_filters_owners_inside_the_search_query(api, bob_api, chat):
    theirs = bob_api.new_session("B")
    bob_api.append(theirs, "b0", "deploy elsewhere")
    with CaptureQueriesContext(connection) as queries:
        response = api.get("/search", q="deploy")
    assert {hit["session_id"] for hit in response.json()["results"]} == {chat}
    # one query per index searched: the owner filter is part of each ranking query
    assert len(_without_stem_probes(queries.captured_queries)) == AUTH + SUMMARIES + 1


def test_append_is_owner_insert_and_touch_in_one_transaction(api, chat, django_assert_num_queries):
    before = SessionRecord.objects.get(id=chat).updated_at
    # SQLite: the write-lock reservation is one more statement; Postgres: the lock travels with the insert.
    reserve = 1 if connection.vendor == "sqlite" else 0
    with django_assert_num_queries(AUTH + OWNER + reserve + 2 + TRANSACTION):
        response = api.post(f"/sessions/{chat}/messages", {"message": ui("m5", "next")})
    assert response.status_code == 201
    assert SessionRecord.objects.get(id=chat).updated_at > before


def test_append_to_someone_elses_session_is_a_404_that_writes_nothing(bob_api, chat):
    response = bob_api.post(f"/sessions/{chat}/messages", {"message": ui("x", "no")})
    assert (response.status_code, response.json()["code"]) == (404, "session_not_found")
    assert not Message.objects.filter(session_id=chat, message_id="x").exists()


def test_staff_pass_the_owner_check_of_any_session(staff_api, chat):
    assert staff_api.get(f"/sessions/{chat}/history").status_code == 200


def test_written_out_statements_name_the_models_tables():
    """The owner check, the existence check and the touch are plain SQL: they follow the models' tables."""
    sessions, messages = SessionRecord._meta.db_table, Message._meta.db_table
    assert f"FROM {sessions} " in session_rows.SESSION_STATE
    assert f"FROM {messages} " in session_rows.MESSAGE_EXISTS
    assert "FROM assistant_sessions WHERE owner_id = %s" in MESSAGES.owned_scopes
    assert sessions == "assistant_sessions"
    assert session_rows.TOUCH.startswith(f"UPDATE {sessions} ")
    assert appends.STAMP.startswith(f"UPDATE {sessions} ")
    assert f"FROM {messages} " in appends.STAMP
    columns = {f.column for f in SessionRecord._meta.fields}
    assert {"id", "end_reason", "owner_id", "updated_at"} <= columns
    assert {"session_id", "id"} <= {f.column for f in Message._meta.fields}


def test_owner_filtered_search_keeps_the_global_order_and_snippets(api, bob_api, staff_api):
    """The caller's hits are the all-sessions ranking with other users' hits left out, snippets included."""
    mine = api.new_session("A")
    theirs = bob_api.new_session("B")
    for i in range(8):
        api.append(mine, f"a{i}", " ".join(["deploy"] * (i % 4 + 1)) + f" friday note {i}")
        bob_api.append(theirs, f"b{i}", " ".join(["deploy"] * (i % 3 + 1)) + " friday")
    everyone = staff_api.get("/search", q="deploy friday", limit=100).json()["results"]
    expected = [hit for hit in everyone if hit["session_id"] == mine]
    assert len(expected) == 8
    assert api.get("/search", q="deploy friday", limit=100).json()["results"] == expected
    page = api.get("/search", q="deploy friday", limit=3, offset=2).json()["results"]
    assert page == expected[2:5]
