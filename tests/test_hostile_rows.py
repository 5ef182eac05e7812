"""Rows another program wrote whose content is not a message read back marked, never as an exception.

Each form is stored with raw SQL, as a foreign writer would, between two messages this library
appended; Python reads, the JSON API, the admin tree page and an export/import round trip then
answer it as the marked message docs/data-model.md describes ("Rows that are not messages").
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection

from agent_sessions import Session
from agent_sessions.manager import SessionManager
from agent_sessions.models import Message, SessionRecord
from agent_sessions.storage import decode
from tests.conftest import msg

DEEP = 5_000

# form → (stored content, what the marked message says, whether the stored parts are kept)
FORMS = {
    "not_json": ('{"id": "bad", "role": "user", "parts": [<b>not json</b>', "not JSON", False),
    "non_object": ('["<b>an array</b>", 1, 2]', "not a JSON object", False),
    "too_deep": (
        '{"id": "bad", "role": "user", "note": "<b>deep</b>", "parts": [' + "[" * DEEP + "]" * DEEP + "]}",
        "nested too deep",
        False,
    ),
    "missing_id": ('{"role": "user", "parts": [{"type": "text", "text": "<b>no id</b>"}]}', "no id", True),
    "missing_role": ('{"id": "bad", "parts": [{"type": "text", "text": "<b>no role</b>"}]}', "no role", True),
    "parts_not_a_list": ('{"id": "bad", "role": "user", "parts": "<b>parts</b>"}', "parts not a list", False),
}
MARKS = {
    "not_json": "not json",
    "non_object": "an array",
    "too_deep": "deep",
    "missing_id": "no id",
    "missing_role": "no role",
    "parts_not_a_list": "parts",
}

pytestmark = [pytest.mark.django_db, pytest.mark.parametrize("form", list(FORMS))]


def _insert(session_id: str, mid: str, parent: str | None, content: str, role: str = "tool") -> None:
    """The row as a foreign writer stores it: the seed's columns only, no depth or token totals."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content, text_content) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            [mid, session_id, parent, role, content, "foreign words"],
        )


def _expected(form: str) -> dict:
    content, reason, kept = FORMS[form]
    if kept:
        stored = json.loads(content)
        return {"id": "bad", "role": "tool", **stored, "metadata": {"agentSessions": {"damaged": reason}}}
    return {
        "id": "bad",
        "role": "tool",
        "parts": [{"type": "text", "text": content}],
        "metadata": {"agentSessions": {"damaged": reason}},
    }


def _damaged(session, form: str) -> dict:
    """a (appended) → bad (foreign, damaged) → c (appended), and a side branch a → b2."""
    session.append_message(msg("a"))
    _insert(session.session_id, "bad", "a", FORMS[form][0])
    session.append_message(msg("c"))  # the latest leaf is "bad": c goes under it
    return _expected(form)


def test_python_reads_return_the_marked_message(session, form):
    expected = _damaged(session, form)
    history = session.get_history()
    assert [m["id"] for m in history] == ["a", "bad", "c"]
    assert history[1] == expected
    assert session.get_message("bad") == expected
    assert session.get_history("bad")[-1] == expected
    recent = session.get_recent_history(max_content_bytes=10**8)
    assert recent.messages == history
    assert session.get_recent_history(max_content_bytes=1, min_recent_messages=2).messages == history[1:]
    assert session.get_branches("a") == [expected]
    assert Message.objects.get(session_id=session.session_id, message_id="bad").message == expected
    # A branching session is read by the walk, whose rows carry no ids: the marked row still has its own.
    session.append_message(msg("b2"), "a")
    assert session.get_history("c") == history
    assert session.get_history("bad") == history[:2]


def test_a_damaged_latest_leaf_reads_marked(session, form):
    session.append_message(msg("a"))
    _insert(session.session_id, "bad", "a", FORMS[form][0])
    assert session.get_latest_leaf() == _expected(form)
    assert session.get_history()[-1] == _expected(form)


def test_equal_damaged_rows_keep_their_own_ids(session, form):
    content = FORMS[form][0]
    session.append_message(msg("a"))
    _insert(session.session_id, "bad", "a", content)
    _insert(session.session_id, "bad2", "bad", content, role="assistant")
    session.append_message(msg("b2"), "a")  # branches: the walk, which reads no ids
    marked = session.get_history("bad2")[1:]
    # What the stored object has is kept; the row's columns fill what it lacks, each row its own.
    stored = json.loads(content) if FORMS[form][2] else {}
    assert [m["role"] for m in marked] == [stored.get("role", "tool"), stored.get("role", "assistant")]
    assert [m["id"] for m in marked] == [stored.get("id", "bad"), stored.get("id", "bad2")]


def test_api_answers_the_marked_message(api, form):
    expected = _damaged_over_api(api, form)
    sid = expected.pop("_sid")
    history = api.get(f"/sessions/{sid}/history")
    assert history.status_code == 200, history.content
    assert history.json()["messages"][1] == expected
    assert api.get(f"/sessions/{sid}/messages/bad").json() == expected
    assert api.get(f"/sessions/{sid}/messages").json()["messages"][1] == expected
    assert api.get(f"/sessions/{sid}/branches", message_id="a").json()["messages"] == [expected]
    recent = api.get(f"/sessions/{sid}/recent-history", max_content_bytes=10**8)
    assert recent.status_code == 200
    assert recent.json()["messages"][1] == expected
    leaf = api.get(f"/sessions/{sid}/leaf")
    assert leaf.status_code == 200, leaf.content


def _damaged_over_api(api, form: str) -> dict:
    sid = api.new_session()
    api.append(sid, "a")
    _insert(sid, "bad", "a", FORMS[form][0])
    api.append(sid, "c")
    return {**_expected(form), "_sid": sid}


def test_admin_tree_page_shows_the_raw_text_escaped(admin_client, session, form):
    SessionRecord.objects.create(id=session.session_id, name="foreign rows")
    _damaged(session, form)
    response = admin_client.get(f"/admin/agent_sessions/sessionrecord/{session.session_id}/change/")
    assert response.status_code == 200
    html = response.content.decode()
    mark = MARKS[form]
    assert f"&lt;b&gt;{mark}&lt;/b&gt;" in html
    assert f"<b>{mark}</b>" not in html
    row = Message.objects.get(session_id=session.session_id, message_id="bad")
    assert admin_client.get(f"/admin/agent_sessions/message/{row.pk}/change/").status_code == 200
    shown = admin_client.get(
        f"/admin/agent_sessions/sessionrecord/{session.session_id}/tree/text/",
        {"node": "bad", "part": "0", "field": "text"},
    )  # the page's "show all" of the part (404: it was short enough to be shown whole)
    assert shown.status_code in (200, 404)
    if form == "too_deep":
        assert shown.status_code == 200
        assert "]]]]" in shown.content.decode()
    export = admin_client.get(f"/admin/agent_sessions/sessionrecord/{session.session_id}/export/")
    assert export.status_code == 200
    exported = json.loads(b"".join(export.streaming_content))
    assert exported["messages"][1]["message"] == _expected(form)
    branch = admin_client.get(f"/admin/agent_sessions/sessionrecord/{session.session_id}/export/", {"leaf": "c"})
    assert branch.json()["history"][1] == _expected(form)


def test_export_and_import_carry_the_row(session, form, tmp_path):
    expected = _damaged(session, form)
    sid = session.session_id
    before = session.get_history()
    out = io.StringIO()
    call_command("export_sessions", sid, stdout=out, stderr=io.StringIO())
    document = json.loads(out.getvalue().splitlines()[0])
    entry = next(m for m in document["messages"] if m["id"] == "bad")
    assert entry["content"] == FORMS[form][0]  # kept as stored, not the marked message
    assert "message" not in entry

    SessionManager().delete(sid)
    assert not Message.objects.filter(session_id=sid).exists()
    path = tmp_path / "export.jsonl"
    path.write_text(out.getvalue(), encoding="utf-8")
    call_command("import_sessions", str(path), stdout=io.StringIO(), stderr=io.StringIO())

    assert Message.objects.get(session_id=sid, message_id="bad").content == FORMS[form][0]
    assert session.get_history() == before
    assert session.get_message("bad") == expected


def test_search_fork_and_compaction_read_past_the_row(session, form):
    _damaged(session, form)
    assert [hit.id for hit in session.search("foreign words")] == ["bad"]
    SessionRecord.objects.filter(id=session.session_id).update(name="foreign rows")  # made by the first append
    fork = SessionManager().fork(session.session_id, "c", "fork").id
    copied = Session.create().for_session(fork).get_history()
    assert [m["role"] for m in copied] == ["user", _expected(form)["role"], "user"]
    assert copied[1]["metadata"]["agentSessions"]["damaged"] == FORMS[form][1]
    assert copied[1]["parts"] == _expected(form)["parts"]
    assert decode.messages([json.dumps(m) for m in copied]) == copied  # the fork stored readable messages


def test_compaction_summarises_a_history_with_a_marked_message(session, form):
    from agent_sessions import create_compact_function
    from agent_sessions.summarizers import extractive_summarizer

    _damaged(session, form)
    for i in range(4):
        session.append_message(msg(f"m{i}", text="more words " * 20))
    compacting = (
        Session.create()
        .on_compaction(create_compact_function(extractive_summarizer, protect_head=0, tail_token_budget=5))
        .for_session(session.session_id)
    )
    assert compacting.compact() is not None
    history = compacting.get_history()
    assert history[0]["id"].startswith("compaction_")
    assert [m["id"] for m in compacting.get_history()][-1] == "m3"


def test_integrations_read_the_marked_message(session, form):
    from agent_sessions.integrations.langchain import DjangoChatMessageHistory

    _damaged(session, form)
    texts = [m.content for m in DjangoChatMessageHistory(session.session_id).messages]
    assert texts[0] == "a text"
    assert texts[-1] == "c text"


def test_the_tool_text_backfill_skips_the_row(form):
    from agent_sessions.migrations._frozen import _tool_text

    assert _tool_text(FORMS[form][0].replace("<b>", "<b>reasoning tool "), 32_768) == ""


def test_a_batch_asks_for_the_columns_of_its_damaged_rows_only(form):
    good = json.dumps(msg("g"))
    asked: list[list[int]] = []

    def identify(bad: list[int]) -> list[tuple[str, str]]:
        asked.append(bad)
        return [("bad", "tool") for _ in bad]

    assert decode.messages([good, good], identify) == [msg("g"), msg("g")]
    assert asked == []  # a clean batch costs no lookup
    assert decode.messages(['{"id": "p", "role": "user"}'], identify) == [{"id": "p", "role": "user"}]
    assert asked == []  # a message without parts is answered as stored
    assert decode.messages([good, FORMS[form][0], good], identify) == [msg("g"), _expected(form), msg("g")]
    assert asked == [[1]]
