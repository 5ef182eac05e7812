"""Tool inputs, outputs, errors and reasoning are searchable, ranked below the text parts.

``text_content`` keeps its meaning (text parts only, as foreign writers fill it);
the extra text lives in ``tool_text`` and is indexed beside it on both databases.
"""

from __future__ import annotations

import pytest
from django.db import connection

from agent_sessions import SessionManager
from agent_sessions.migrations._frozen import backfill_tool_text
from agent_sessions.models import Message
from agent_sessions.search import SNIPPET_START
from agent_sessions.types import tool_text
from tests.conftest import msg, tool_msg
from tests.support.search_docs import ids, search

pytestmark = pytest.mark.django_db


def failed_call(mid: str = "t1") -> dict:
    part = {
        "type": "tool-fetch_page",
        "toolCallId": f"call-{mid}",
        "state": "output-error",
        "input": {"url": "https://status.example.com", "retries": 3},
        "errorText": "TimeoutError upstream after 30 s",
    }
    return {"id": mid, "role": "assistant", "parts": [part]}


def thinking(mid: str = "r1") -> dict:
    parts = [
        {"type": "reasoning", "text": "The quarterly invoice totals disagree with the ledger."},
        {"type": "text", "text": "Let me check the numbers."},
    ]
    return {"id": mid, "role": "assistant", "parts": parts}


def test_tool_text_is_stored_beside_text_content(session):
    session.append_message(failed_call())
    session.append_message(thinking())
    row = Message.objects.get(session_id=session.session_id, message_id="t1")
    assert row.text_content == ""  # text parts only, also for foreign writers
    assert row.tool_text == "TimeoutError upstream after 30 s\nhttps://status.example.com\n3"
    row = Message.objects.get(session_id=session.session_id, message_id="r1")
    assert row.text_content == "Let me check the numbers."
    assert row.tool_text == "The quarterly invoice totals disagree with the ledger."


def test_tool_errors_outputs_inputs_and_reasoning_are_found(session):
    session.append_message(msg("u1", text="is the status page up?"))
    session.append_message(failed_call())
    session.append_message(tool_msg("t2", "lookup", "c2", {"city": "Reykjavik"}, {"forecast": "sleet tomorrow"}))
    session.append_message(thinking())
    assert ids(session.search("TimeoutError upstream")) == {"t1"}
    assert ids(session.search("status.example.com")) == {"t1"}
    assert ids(session.search("Reykjavik")) == {"t2"}  # an input
    assert ids(session.search("sleet")) == {"t2"}  # an output
    assert ids(session.search("ledger invoice")) == {"r1"}  # reasoning
    assert ids(session.search("ledger numbers")) == {"r1"}  # one word in each column
    assert ids(session.search("timeouterror -upstream")) == set()
    hit = session.search("TimeoutError upstream")[0]
    assert hit.content == ""  # SearchResult.content stays the text parts
    assert SNIPPET_START + "TimeoutError" in search(session, "TimeoutError")[0].snippet


def test_substring_search_covers_tool_text(session):
    session.append_message(tool_msg("t1", "translate", "c1", {"text": "hi"}, "สวัสดีครับยินดีต้อนรับ"))
    session.append_message(tool_msg("t2", "translate", "c2", {"text": "tokyo"}, "東京都庁"))
    assert ids(session.search("ยินดีต้อนรับ")) == {"t1"}  # trigram index
    assert ids(session.search("東京")) == {"t2"}  # short: the bounded scan
    assert ids(session.search("tokyo -東京")) == set()
    assert "東京" in search(session, "東京")[0].snippet


def test_text_parts_rank_above_tool_text(session):
    session.append_message(failed_call("tool-hit"))
    session.append_message(msg("text-hit", text="We saw a TimeoutError upstream yesterday"))
    assert [r.id for r in session.search("TimeoutError upstream")] == ["text-hit", "tool-hit"]


def test_cross_session_search_finds_tool_text():
    manager = SessionManager()
    a, b = manager.create("a").id, manager.create("b").id
    manager.append(a, failed_call())
    manager.append(b, msg("m", text="nothing to see"))
    assert [(r.session_id, r.id) for r in manager.search("TimeoutError")] == [(a, "t1")]
    answer = manager.tools()["session_search"].execute(query="TimeoutError upstream")
    assert answer.startswith("[assistant] ")
    assert "**TimeoutError** **upstream**" in answer


def test_update_fork_bulk_and_import_keep_tool_text(session, tmp_path):
    session.append_message(msg("u1"))
    session.append_message(failed_call())
    session.update_message({**failed_call(), "parts": [{**failed_call()["parts"][0], "errorText": "ECONNRESET"}]})
    assert ids(session.search("TimeoutError")) == set()
    assert ids(session.search("ECONNRESET")) == {"t1"}
    manager = SessionManager()
    sid = manager.create("m").id
    manager.append_all(sid, [msg("x"), failed_call("y")])
    fork = manager.fork(sid, "y", "fork")
    found = {(r.session_id, r.id) for r in manager.search("TimeoutError")}
    assert (sid, "y") in found
    assert any(s == fork.id for s, _ in found)


def test_backfill_fills_rows_written_without_tool_text(session):
    session.append_message(failed_call())
    Message.objects.filter(session_id=session.session_id).update(tool_text="")  # as a foreign writer leaves it
    assert ids(session.search("TimeoutError")) == set()
    with connection.cursor() as cursor:
        assert backfill_tool_text(cursor) >= 1
    assert ids(session.search("TimeoutError")) == {"t1"}


def test_tool_text_is_bounded_and_skips_json_syntax(settings):
    settings.AGENT_SESSIONS_SEARCH_TOOL_TEXT_CHARS = 50
    message = tool_msg("t", "dump", "c", {"q": "x"}, {"rows": ["alpha " * 40]})
    text = tool_text(message)
    assert len(text) == 50
    assert text.startswith("x\nalpha")
    assert "{" not in text
    settings.AGENT_SESSIONS_SEARCH_TOOL_TEXT_CHARS = 0
    assert tool_text(message) == ""


def test_indexes_stay_consistent_through_updates_and_deletes(session):
    session.append_message(tool_msg("ascii", "fetch", "c1", {"q": "x"}, "plain ascii output"))
    session.append_message(tool_msg("thai", "fetch", "c2", {"q": "y"}, "ผลลัพธ์ภาษาไทย"))
    session.update_message(tool_msg("ascii", "fetch", "c1", {"q": "x"}, "ตอนนี้มีภาษาไทยแล้ว"))
    session.update_message(tool_msg("thai", "fetch", "c2", {"q": "y"}, "ascii again"))
    assert ids(session.search("ภาษาไทย")) == {"ascii"}
    assert ids(session.search("ascii again")) == {"thai"}
    session.delete_messages(["ascii"])
    assert ids(session.search("ภาษาไทย")) == set()
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            for table in ("assistant_fts", "assistant_fts_trigram"):
                cursor.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
