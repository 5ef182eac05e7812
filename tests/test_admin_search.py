"""Changelist search boxes count every match (no silent cap) and paginate; records link to each other."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from agent_sessions.admin.search import matches
from agent_sessions.models import Compaction, Message, SessionRecord
from agent_sessions.types import text_content
from tests.support.admin_data import branched_session

pytestmark = pytest.mark.django_db

BASE = "/admin/agent_sessions"


def _rows(session_id: str, texts: list[str]) -> list[Message]:
    out = []
    for i, body in enumerate(texts):
        message = {"id": f"{session_id}-{i}", "role": "user", "parts": [{"type": "text", "text": body}]}
        out.append(
            Message(
                message_id=message["id"],
                session_id=session_id,
                parent_id=None,
                role="user",
                content=json.dumps(message),
                text_content=text_content(message),
                depth=1,
                tokens=5,
                path_tokens=5,
            )
        )
    return out


@pytest.fixture
def many_sessions():
    """210 sessions with 3 "timeout" messages each (630 hits, more than the old 500-hit cap), 5 without."""
    SessionRecord.objects.bulk_create([SessionRecord(id=f"s{k:03d}", name=f"Session {k}") for k in range(215)])
    rows = []
    for k in range(210):
        rows += _rows(f"s{k:03d}", [f"upstream timeout number {j} in session {k}" for j in range(3)])
    for k in range(210, 215):
        rows += _rows(f"s{k:03d}", ["all calm here"])
    Message.objects.bulk_create(rows, batch_size=500)


def result_count(html: str) -> int:
    return int(re.search(r"(\d+) results?", html).group(1))


def test_session_search_lists_every_matching_session(admin_client, many_sessions):
    html = admin_client.get(f"{BASE}/sessionrecord/", {"q": "timeout"}).content.decode()
    assert result_count(html) == 210
    listed = set()
    for p in (1, 2, 3):
        page = admin_client.get(f"{BASE}/sessionrecord/", {"q": "timeout", "p": p}).content.decode()
        listed |= set(re.findall(r"/sessionrecord/(s\d{3})/change/", page))
    assert listed == {f"s{k:03d}" for k in range(210)}


def test_message_search_counts_and_pages_every_hit(admin_client, many_sessions):
    html = admin_client.get(f"{BASE}/message/", {"q": "timeout"}).content.decode()
    assert result_count(html) == 630
    assert html.count('class="field-message_id"') == 100  # one page of the changelist
    last = admin_client.get(f"{BASE}/message/", {"q": "timeout", "p": 7}).content.decode()
    assert last.count('class="field-message_id"') == 30
    assert result_count(admin_client.get(f"{BASE}/message/", {"q": "timeout session 7"}).content.decode()) == 3


def test_matches_counts_honestly_beyond_the_cap(many_sessions):
    found = matches("timeout", using="default", cap=100)
    assert found.capped
    assert found.count == 100
    assert found.label == "more than 100 messages match"
    exact = matches("timeout", using="default", session_id="s001")
    assert not exact.capped
    assert exact.count == 3
    assert exact.label == "3 messages match"
    assert not matches("", using="default").valid
    assert matches('"unterminated', using="default").count == 0


def test_the_changelist_sends_the_search_not_its_hits(admin_client, many_sessions):
    """The search is one ``IN (search SQL)`` condition: the SQL sent and the queries made do not grow with hits."""

    def page(term: str) -> tuple[int, int, str]:
        with CaptureQueriesContext(connections["default"]) as sent:
            html = admin_client.get(f"{BASE}/message/", {"q": term}).content.decode()
        return len(sent.captured_queries), max(len(q["sql"]) for q in sent.captured_queries), html

    few_queries, few_longest, few = page("session 7")
    many_queries, many_longest, many = page("timeout")
    assert (result_count(few), result_count(many)) == (3, 630)
    assert many_queries == few_queries
    assert many_longest < 4_000  # 630 hits; the old IN lists grew by ~30 bytes a hit
    assert abs(many_longest - few_longest) < 500


def test_sessions_changelist_search_is_one_condition(admin_client, many_sessions):
    with CaptureQueriesContext(connections["default"]) as sent:
        html = admin_client.get(f"{BASE}/sessionrecord/", {"q": "timeout"}).content.decode()
    assert result_count(html) == 210
    assert max(len(q["sql"]) for q in sent.captured_queries) < 4_000


def test_counts_past_the_threshold_are_estimated_and_say_so(admin_client, many_sessions, monkeypatch, is_postgres):
    monkeypatch.setattr("agent_sessions.admin.search.EXACT_COUNT", 100)
    with connections["default"].cursor() as cursor:
        if is_postgres:
            cursor.execute("ANALYZE assistant_messages")
    html = admin_client.get(f"{BASE}/message/", {"q": "timeout"}).content.decode()
    assert html.count('class="field-message_id"') == 100
    if is_postgres:  # the planner's estimate, said to be one
        assert "the database&#x27;s estimate: counts are exact up to 100" in html
        assert result_count(html) > 100
    else:  # SQLite keeps no estimates: the count stays exact
        assert "estimate" not in html
        assert result_count(html) == 630
    small = admin_client.get(f"{BASE}/message/", {"q": "timeout session 7"}).content.decode()
    assert result_count(small) == 3
    assert "estimate" not in small


def test_refused_and_empty_searches(admin_client, many_sessions):
    html = admin_client.get(f"{BASE}/message/", {"q": '"unterminated'}).content.decode()
    assert result_count(html) == 0
    html = admin_client.get(f"{BASE}/message/", {"q": "* --"}).content.decode()
    assert result_count(html) == 0


def test_records_link_to_each_other(admin_client, db):
    branched_session("chat-1")
    SessionRecord.objects.create(id="chat-2", name="Fork", parent_session_id="chat-1")
    html = admin_client.get(f"{BASE}/sessionrecord/chat-2/change/").content.decode()
    assert 'href="/admin/agent_sessions/sessionrecord/chat-1/tree/" data-fork-parent' in html
    a3 = Message.objects.get(session_id="chat-1", message_id="a3")
    html = admin_client.get(f"{BASE}/message/{a3.pk}/change/").content.decode()
    assert 'href="/admin/agent_sessions/sessionrecord/chat-1/tree/?leaf=u3#msg-u3">u3</a>' in html
    overlay = Compaction.objects.get(session_id="chat-1")
    html = admin_client.get(f"{BASE}/compaction/{overlay.pk}/change/").content.decode()
    assert 'tree/?leaf=u1#msg-u1">u1</a>' in html
    assert 'tree/?leaf=a1#msg-a1">a1</a>' in html


def test_message_ids_and_session_ids_are_found_in_the_same_condition(admin_client, many_sessions):
    html = admin_client.get(f"{BASE}/message/", {"q": "s007-1"}).content.decode()
    assert result_count(html) == 1
    html = admin_client.get(f"{BASE}/message/", {"q": "s007"}).content.decode()
    assert result_count(html) == 3  # its messages, by session id
    html = admin_client.get(f"{BASE}/message/", {"q": "s212"}).content.decode()
    assert result_count(html) == 1  # no word hit, the id still is
