"""JSON API: every endpoint through Django's test client, with concrete results (docs/api.md)."""

from __future__ import annotations

import pytest
from django.db import connection

from agent_sessions.api.http import message_etag
from agent_sessions.models import ContextBlockRecord, Message, SessionRecord
from tests.support.api import ui

pytestmark = pytest.mark.django_db


def ids(messages):
    return [m["id"] for m in messages]


# ── sessions ────────────────────────────────────────────────────────
def test_create_session_is_owned_by_the_caller(api, alice):
    response = api.post("/sessions", {"name": "Trip", "model": "m-1", "source": "web"})
    assert response.status_code == 201
    body = response.json()
    assert (body["name"], body["model"], body["source"], body["parent_session_id"]) == ("Trip", "m-1", "web", None)
    assert (body["input_tokens"], body["output_tokens"], body["estimated_cost"], body["end_reason"]) == (
        0,
        0,
        0.0,
        None,
    )
    assert SessionRecord.objects.get(id=body["id"]).owner == alice


def test_create_with_parent_session(api, bob_api):
    parent = api.new_session("P")
    child = api.post("/sessions", {"name": "C", "parent_session_id": parent}).json()
    assert child["parent_session_id"] == parent
    # Someone else's session cannot be named as parent.
    response = bob_api.post("/sessions", {"name": "C", "parent_session_id": parent})
    assert response.status_code == 404  # a referenced resource that is not there (or not yours)
    assert response.json()["code"] == "parent_session_not_found"


def test_list_sessions_paginates_newest_first(api, bob_api):
    made = [api.new_session(f"s{i}") for i in range(3)]
    bob_api.new_session("not alice's")
    page = api.get("/sessions", limit=2).json()
    assert page["count"] == 3
    assert page["limit"] == 2
    assert page["offset"] == 0
    assert [s["id"] for s in page["items"]] == [made[2], made[1]]
    rest = api.get("/sessions", limit=2, offset=2).json()
    assert [s["id"] for s in rest["items"]] == [made[0]]


def test_list_page_size_is_capped(api, settings):
    settings.AGENT_SESSIONS_API_MAX_PAGE_SIZE = 2
    for i in range(3):
        api.new_session(f"s{i}")
    page = api.get("/sessions", limit=50).json()
    assert page["limit"] == 2
    assert len(page["items"]) == 2
    assert page["count"] == 3


def test_get_rename_delete(api):
    sid = api.new_session("Old")
    api.append(sid, "m1")
    before = api.get(f"/sessions/{sid}").json()
    renamed = api.patch(f"/sessions/{sid}", {"name": "New"})
    assert renamed.status_code == 200
    assert renamed.json()["name"] == "New"
    assert renamed.json()["updated_at"] > before["updated_at"]
    assert api.delete(f"/sessions/{sid}").status_code == 204
    assert api.get(f"/sessions/{sid}").status_code == 404
    assert not Message.objects.filter(session_id=sid).exists()


# ── messages ────────────────────────────────────────────────────────
def test_append_parent_omitted_null_and_explicit(api):
    sid = api.new_session()
    assert api.append(sid, "a") == {"id": "a", "inserted": True}
    api.append(sid, "b")  # omitted → child of the latest leaf
    api.append(sid, "r", parent_id=None)  # explicit null → a new root
    api.append(sid, "c", parent_id="a")  # explicit → child of a
    parents = dict(Message.objects.filter(session_id=sid).values_list("message_id", "parent_id"))
    assert parents == {"a": None, "b": "a", "r": None, "c": "a"}


def test_append_status_codes_and_duplicates(api):
    sid = api.new_session()
    first = api.post(f"/sessions/{sid}/messages", {"message": ui("a")})
    again = api.post(f"/sessions/{sid}/messages", {"message": ui("a", "different")})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == {"id": "a", "inserted": False}
    assert api.get(f"/sessions/{sid}/messages/a").json()["parts"][0]["text"] == "a text"


def test_append_unknown_parent_is_rejected_and_writes_nothing(api):
    sid = api.new_session()
    response = api.post(f"/sessions/{sid}/messages", {"message": ui("a"), "parent_id": "ghost"})
    assert response.status_code == 404
    assert response.json()["code"] == "parent_not_found"
    assert not Message.objects.filter(session_id=sid).exists()


def test_message_round_trips_unchanged(api):
    sid = api.new_session()
    message = {
        "id": "t1",
        "role": "assistant",
        "createdAt": "2025-01-01T00:00:00Z",
        "metadata": {"k": [1, 2.5, None, True]},
        "parts": [
            {"type": "text", "text": "héllo ✓"},
            {
                "type": "tool-weather",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"city": "Kyoto"},
                "output": {"high": 19},
            },
        ],
    }
    api.post(f"/sessions/{sid}/messages", {"message": message})
    assert api.get(f"/sessions/{sid}/messages/t1").json() == message
    assert api.get(f"/sessions/{sid}/history").json()["messages"] == [message]


def test_history_pages_are_rendered_as_their_schema_would_render_them(api):
    """History and recent history skip ninja's check of the response against the schema
    (api.http.stored_messages); the bytes and the content type stay what the check gave."""
    from agent_sessions.api.schemas import MessagePage, RecentHistoryOut

    sid = api.new_session()
    for i in range(3):
        message = {"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": f"é {i}"}], "metadata": {"i": i}}
        api.post(f"/sessions/{sid}/messages", {"message": message})
    history = api.get(f"/sessions/{sid}/history")
    assert history.status_code == 200
    assert history["Content-Type"] == api.get(f"/sessions/{sid}")["Content-Type"] == "application/json; charset=utf-8"
    body = history.json()
    assert [m["id"] for m in body["messages"]] == ["m0", "m1", "m2"]
    assert body == MessagePage.model_validate(body).model_dump()
    recent = api.get(f"/sessions/{sid}/recent-history", max_content_bytes=0).json()
    assert recent == RecentHistoryOut.model_validate(recent).model_dump()
    assert [m["id"] for m in recent["messages"]] == ["m2"]
    # A foreign writer's row without parts is answered as stored, not turned into a 500.
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO assistant_messages (id, session_id, parent_id, role, content) "
            "VALUES ('f', %s, 'm2', 'user', '{\"id\": \"f\", \"role\": \"user\"}')",
            [sid],
        )
    foreign = {"id": "f", "role": "user"}
    history = api.get(f"/sessions/{sid}/history")
    assert history.status_code == 200
    assert history.json()["messages"][-1] == foreign
    # So is every other route that answers stored messages.
    assert api.get(f"/sessions/{sid}/messages").json()["messages"][-1] == foreign
    assert api.get(f"/sessions/{sid}/branches", message_id="m2").json()["messages"] == [foreign]
    assert api.get(f"/sessions/{sid}/leaf").json() == {"message": foreign}
    one = api.get(f"/sessions/{sid}/messages/f")
    assert (one.status_code, one.json()) == (200, foreign)
    assert one["ETag"] == message_etag(foreign)


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ({"id": "a", "role": "user"}, "validation_error"),  # no parts
        ({"id": "a", "role": "user", "parts": "text"}, "validation_error"),
        ({"id": "", "role": "user", "parts": []}, "validation_error"),
        ({"id": 5, "role": "user", "parts": []}, "validation_error"),
        ("not an object", "validation_error"),
    ],
)
def test_invalid_messages_are_422(api, message, code):
    sid = api.new_session()
    response = api.post(f"/sessions/{sid}/messages", {"message": message})
    assert response.status_code == 422
    assert response.json()["code"] == code
    assert response.json()["errors"]
    assert not Message.objects.filter(session_id=sid).exists()


def test_library_invalid_message_maps_to_422(api, settings):
    settings.AGENT_SESSIONS_MAX_MESSAGE_BYTES = 100
    sid = api.new_session()
    response = api.post(f"/sessions/{sid}/messages", {"message": ui("a", "x" * 500)})
    assert response.status_code == 413
    assert response.json()["code"] == "message_too_large"
    nan = api.post(f"/sessions/{sid}/messages", raw='{"message": {"id": "n", "role": "user", "parts": [NaN]}}')
    assert nan.status_code == 422
    assert nan.json()["code"] == "invalid_message"


def test_upsert_inserts_then_replaces_in_place(api):
    sid = api.new_session()
    api.append(sid, "a")
    api.append(sid, "b")
    created = api.put(f"/sessions/{sid}/messages", {"message": ui("c"), "parent_id": "a"})
    assert created.status_code == 201
    assert created.json() == {"id": "c", "inserted": True}
    replaced = api.put(f"/sessions/{sid}/messages", {"message": ui("b", "edited")})
    assert replaced.status_code == 200
    assert replaced.json() == {"id": "b", "inserted": False}
    assert api.get(f"/sessions/{sid}/messages/b").json()["parts"][0]["text"] == "edited"
    assert Message.objects.get(session_id=sid, message_id="b").parent_id == "a"


def test_update_message_reindexes_search(api):
    sid = api.new_session()
    api.append(sid, "a", "original wording")
    response = api.put(f"/sessions/{sid}/messages/a", ui("a", "zebra crossing"))
    assert response.status_code == 200
    assert response.json()["parts"][0]["text"] == "zebra crossing"
    assert ids(api.get(f"/sessions/{sid}/search", q="zebra").json()["results"]) == ["a"]
    assert api.get(f"/sessions/{sid}/search", q="original").json()["results"] == []


def test_update_errors(api):
    sid = api.new_session()
    api.append(sid, "a")
    mismatch = api.put(f"/sessions/{sid}/messages/a", ui("b"))
    assert mismatch.status_code == 422
    assert mismatch.json()["code"] == "id_mismatch"
    missing = api.put(f"/sessions/{sid}/messages/zz", ui("zz"))  # PUT stores a new message (child of the leaf)
    assert missing.status_code == 201
    assert missing["Location"].endswith(f"/sessions/{sid}/messages/zz")
    assert api.get(f"/sessions/{sid}/history").json()["messages"][-1]["id"] == "zz"


def test_get_message_with_slashes_and_unknown(api):
    sid = api.new_session()
    api.append(sid, "tool/call 1")
    assert api.get(f"/sessions/{sid}/messages/tool/call%201").json()["id"] == "tool/call 1"
    response = api.get(f"/sessions/{sid}/messages/nope")
    assert response.status_code == 404
    assert response.json() == {
        "detail": "No such message.",
        "code": "message_not_found",
    }


def test_bulk_delete_keeps_children_as_roots(api):
    sid = api.new_session()
    for mid in ("a", "b", "c"):
        api.append(sid, mid)
    response = api.post(f"/sessions/{sid}/delete-messages", {"ids": ["b", "unknown"]})
    assert response.status_code == 200
    assert response.json() == {"deleted": 1}
    assert ids(api.get(f"/sessions/{sid}/history").json()["messages"]) == ["c"]


def test_history_branches_leaf_and_path_length(api):
    sid = api.new_session()
    assert api.get(f"/sessions/{sid}/leaf").json() == {"message": None}
    for mid in ("u1", "a1", "u2"):
        api.append(sid, mid)
    api.append(sid, "a1b", parent_id="u1")  # a second answer: a branch
    assert ids(api.get(f"/sessions/{sid}/history").json()["messages"]) == ["u1", "a1b"]
    assert ids(api.get(f"/sessions/{sid}/history", leaf_id="u2").json()["messages"]) == ["u1", "a1", "u2"]
    assert ids(api.get(f"/sessions/{sid}/branches", message_id="u1").json()["messages"]) == ["a1", "a1b"]
    assert api.get(f"/sessions/{sid}/leaf").json()["message"]["id"] == "a1b"
    assert api.get(f"/sessions/{sid}/path-length").json() == {"length": 2}
    assert api.get(f"/sessions/{sid}/path-length", leaf_id="u2").json() == {"length": 3}
    for path in ("history", "path-length"):
        unknown = api.get(f"/sessions/{sid}/{path}", leaf_id="ghost")
        assert unknown.status_code == 404
        assert unknown.json()["code"] == "message_not_found"
    assert api.get(f"/sessions/{sid}/branches", message_id="ghost").status_code == 404
    assert api.get(f"/sessions/{sid}/branches").status_code == 422  # message_id is required


# ── search ──────────────────────────────────────────────────────────
def test_session_search(api):
    sid = api.new_session()
    other = api.new_session()
    api.append(sid, "a", "the quick brown fox")
    api.append(sid, "b", "a lazy dog")
    api.append(other, "c", "another fox")
    results = api.get(f"/sessions/{sid}/search", q="fox").json()["results"]
    assert [(r["id"], r["role"], r["content"], r["session_id"]) for r in results] == [
        ("a", "user", "the quick brown fox", sid)
    ]
    assert api.get(f"/sessions/{sid}/search", q="quick fox").json()["results"][0]["id"] == "a"
    assert api.get(f"/sessions/{sid}/search", q="quick cat").json()["results"] == []


def test_cross_session_search_sees_only_own_sessions(api, bob_api, staff_api):
    mine = api.new_session()
    theirs = bob_api.new_session()
    for i in range(30):  # many better-or-equal hits in someone else's session
        bob_api.append(theirs, f"b{i}", "pelican pelican pelican")
    api.append(mine, "m1", "a pelican")
    results = api.get("/search", q="pelican", limit=5).json()["results"]
    assert [(r["id"], r["session_id"]) for r in results] == [("m1", mine)]
    staff = staff_api.get("/search", q="pelican", limit=100).json()["results"]
    assert {r["session_id"] for r in staff} == {mine, theirs}
    assert len(staff) == 31


@pytest.mark.parametrize("query", ['"unbalanced', "OR OR -", "a AND (b", "*", "'; DROP TABLE x; --", "   "])
def test_odd_search_syntax_never_fails(api, query):
    sid = api.new_session()
    api.append(sid, "a", "unbalanced quotes here")
    assert api.get("/search", q=query).status_code == 200
    assert api.get(f"/sessions/{sid}/search", q=query).status_code == 200


def test_search_limit_validation(api):
    assert api.get("/search", q="x", limit=0).status_code == 422
    assert api.get("/search").status_code == 422  # q is required


# ── fork, split, usage ──────────────────────────────────────────────
def test_fork(api, alice):
    sid = api.new_session("Main", model="m")
    for mid in ("u1", "a1", "u2", "a2"):
        api.append(sid, mid, f"{mid} words")
    response = api.post(f"/sessions/{sid}/fork", {"at_message_id": "a1", "name": "Alt"})
    assert response.status_code == 201
    fork = response.json()
    assert (fork["name"], fork["parent_session_id"], fork["model"]) == ("Alt", sid, "m")
    assert SessionRecord.objects.get(id=fork["id"]).owner == alice
    texts = [m["parts"][0]["text"] for m in api.get(f"/sessions/{fork['id']}/history").json()["messages"]]
    assert texts == ["u1 words", "a1 words"]
    missing = api.post(f"/sessions/{sid}/fork", {"at_message_id": "ghost", "name": "x"})
    assert missing.status_code == 404
    assert SessionRecord.objects.count() == 2


def test_compact_and_split(api, alice):
    sid = api.new_session("Long", model="m", source="web")
    api.append(sid, "u1")
    response = api.post(f"/sessions/{sid}/split", {"summary": "We planned Kyoto."})
    assert response.status_code == 201
    new = response.json()
    assert (new["name"], new["parent_session_id"], new["model"], new["source"]) == ("Long", sid, "m", "web")
    assert SessionRecord.objects.get(id=new["id"]).owner == alice
    assert api.get(f"/sessions/{sid}").json()["end_reason"] == "compaction"
    [first] = api.get(f"/sessions/{new['id']}/history").json()["messages"]
    assert first["role"] == "assistant"
    assert first["parts"][0]["text"] == "[Context from previous session]\n\nWe planned Kyoto."


def test_usage_accumulates(api):
    sid = api.new_session()
    api.post(f"/sessions/{sid}/usage", {"input_tokens": 100, "output_tokens": 20, "cost": 0.5})
    body = api.post(f"/sessions/{sid}/usage", {"input_tokens": 1, "output_tokens": 2, "cost": 0.25}).json()
    assert (body["input_tokens"], body["output_tokens"], body["estimated_cost"]) == (101, 22, 0.75)
    for bad in ({"input_tokens": -1}, {"cost": "lots"}, {"output_tokens": 10**13}):
        assert api.post(f"/sessions/{sid}/usage", bad).status_code == 422
    nan = api.post(f"/sessions/{sid}/usage", raw='{"cost": NaN}')
    assert nan.status_code == 422


# ── compaction ──────────────────────────────────────────────────────
def _long_conversation(api, sid, n=8):
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        api.append(sid, f"m{i}", f"Message number {i} talks about the Kyoto trip and temples in detail.", role=role)


def test_compact_is_async_with_a_status(api, custom_config):
    sid = api.new_session()
    assert api.get(f"/sessions/{sid}/compact").json()["status"] == "idle"
    _long_conversation(api, sid)
    response = api.post(f"/sessions/{sid}/compact", {})
    assert response.status_code == 202
    body = response.json()
    assert body["session_id"] == sid
    assert body["status_url"] == f"/api/sessions/{sid}/compaction-status"
    # Celery is eager in the tests, so the job has already finished.
    status = api.get(f"/sessions/{sid}/compact").json()
    assert status["status"] == "succeeded"
    assert status["error"] == ""
    [overlay] = api.get(f"/sessions/{sid}/compactions").json()["compactions"]
    assert overlay["from_message_id"] == "m1"
    history = api.get(f"/sessions/{sid}/history").json()["messages"]
    assert history[0]["id"] == "m0"
    assert history[1]["id"] == f"compaction_{overlay['id']}"
    assert len(history) < 8


def test_compact_with_leaf_and_errors(api, custom_config):
    sid = api.new_session()
    _long_conversation(api, sid)
    assert api.post(f"/sessions/{sid}/compact", {"leaf_id": "m5"}).status_code == 202
    [overlay] = api.get(f"/sessions/{sid}/compactions").json()["compactions"]
    assert overlay["to_message_id"] in {"m1", "m2", "m3", "m4"}
    unknown = api.post(f"/sessions/{sid}/compact", {"leaf_id": "ghost"})
    assert unknown.status_code == 404


def test_compact_without_compaction_function_is_409(api, plain_config):
    sid = api.new_session()
    api.append(sid, "a")
    response = api.post(f"/sessions/{sid}/compact")
    assert response.status_code == 409
    assert response.json()["code"] == "compaction_not_configured"


def test_add_and_list_compactions(api):
    sid = api.new_session()
    for mid in ("a", "b", "c", "d"):
        api.append(sid, mid)
    response = api.post(
        f"/sessions/{sid}/compactions", {"summary": "b and c, briefly", "from_message_id": "b", "to_message_id": "c"}
    )
    assert response.status_code == 201
    stored = response.json()
    assert (stored["summary"], stored["from_message_id"], stored["to_message_id"]) == ("b and c, briefly", "b", "c")
    assert api.get(f"/sessions/{sid}/compactions").json()["compactions"] == [stored]
    history = api.get(f"/sessions/{sid}/history").json()["messages"]
    assert ids(history) == ["a", f"compaction_{stored['id']}", "d"]
    bad = api.post(f"/sessions/{sid}/compactions", {"summary": "x", "from_message_id": "zz", "to_message_id": "c"})
    assert bad.status_code == 404


# ── context blocks and the system prompt ────────────────────────────
def test_context_blocks(api, custom_config):
    sid = api.new_session()
    blocks = api.get(f"/sessions/{sid}/context").json()["blocks"]
    assert [(b["label"], b["writable"], b["max_tokens"]) for b in blocks] == [
        ("soul", False, None),
        ("memory", True, 60),
    ]
    assert api.get(f"/sessions/{sid}/context/soul").json()["content"] == "You are helpful."
    replaced = api.put(f"/sessions/{sid}/context/memory", {"content": "likes tea"})
    assert replaced.status_code == 200
    assert replaced.json()["content"] == "likes tea"
    appended = api.post(f"/sessions/{sid}/context/memory/append", {"content": "lives in Kyoto"}).json()
    assert appended["content"] == "likes tea\nlives in Kyoto"
    assert appended["tokens"] > 0
    # Stored under the session's namespace.
    assert ContextBlockRecord.objects.get(label=f"memory_{sid}").content == "likes tea\nlives in Kyoto"


def test_context_block_errors(api, custom_config):
    sid = api.new_session()
    readonly = api.put(f"/sessions/{sid}/context/soul", {"content": "evil"})
    assert readonly.status_code == 409
    assert readonly.json()["code"] == "context_read_only"
    api.put(f"/sessions/{sid}/context/memory", {"content": "short"})
    too_large = api.put(f"/sessions/{sid}/context/memory", {"content": "word " * 500})
    assert too_large.status_code == 422
    assert too_large.json()["code"] == "context_too_large"
    assert api.get(f"/sessions/{sid}/context/memory").json()["content"] == "short"
    for response in (
        api.get(f"/sessions/{sid}/context/nope"),
        api.put(f"/sessions/{sid}/context/nope", {"content": "x"}),
        api.post(f"/sessions/{sid}/context/nope/append", {"content": "x"}),
    ):
        assert response.status_code == 404
        assert response.json()["code"] == "context_block_not_found"


def test_context_blocks_are_per_session(api, custom_config):
    one, two = api.new_session(), api.new_session()
    api.put(f"/sessions/{one}/context/memory", {"content": "one's fact"})
    assert api.get(f"/sessions/{two}/context/memory").json()["content"] == ""


def test_default_configuration_has_a_memory_block(api):
    sid = api.new_session()
    [memory] = api.get(f"/sessions/{sid}/context").json()["blocks"]
    assert (memory["label"], memory["writable"], memory["max_tokens"]) == ("memory", True, 1100)


def test_freeze_and_refresh_system_prompt(api, custom_config):
    sid = api.new_session()
    api.put(f"/sessions/{sid}/context/memory", {"content": "likes tea"})
    frozen = api.post(f"/sessions/{sid}/system-prompt/freeze").json()["prompt"]
    assert "SOUL" in frozen
    assert "You are helpful." in frozen
    assert "likes tea" in frozen
    api.put(f"/sessions/{sid}/context/memory", {"content": "likes coffee"})
    assert api.post(f"/sessions/{sid}/system-prompt/freeze").json()["prompt"] == frozen
    refreshed = api.post(f"/sessions/{sid}/system-prompt/refresh").json()["prompt"]
    assert "likes coffee" in refreshed
    assert "likes tea" not in refreshed


# ── tools ───────────────────────────────────────────────────────────
def test_list_tools(api, custom_config):
    sid = api.new_session()
    tools = {t["name"]: t for t in api.get(f"/sessions/{sid}/tools").json()["tools"]}
    assert {"set_context", "session_search"} <= set(tools)
    assert tools["session_search"]["parameters"]["required"] == ["query"]
    assert tools["set_context"]["parameters"]["type"] == "object"


def test_execute_tools(api, bob_api, custom_config):
    sid = api.new_session()
    api.append(sid, "a", "my own kiwi note")
    theirs = bob_api.new_session()
    bob_api.append(theirs, "b", "bob's secret kiwi note")
    written = api.post(f"/sessions/{sid}/tools/set_context", {"arguments": {"label": "memory", "content": "x y"}})
    assert written.status_code == 200
    assert written.json()["name"] == "set_context"
    assert written.json()["result"].startswith("Written to memory.")
    assert api.get(f"/sessions/{sid}/context/memory").json()["content"] == "x y"
    found = api.post(f"/sessions/{sid}/tools/session_search", {"arguments": {"query": "kiwi"}}).json()["result"]
    assert found == "[user] my own kiwi note"  # bob's message is not visible
    bad = api.post(f"/sessions/{sid}/tools/session_search", {"arguments": {"query": 5, "self": 1}}).json()
    assert bad["result"].startswith("Error:")
    assert api.post(f"/sessions/{sid}/tools/nope", {"arguments": {}}).status_code == 404
    assert api.post(f"/sessions/{sid}/tools/session_search", {"arguments": []}).status_code == 422


# ── docs ────────────────────────────────────────────────────────────
def test_openapi_schema_and_docs(anon):
    schema = anon.client.get("/api/openapi.json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/sessions/{session_id}/messages" in paths
    assert "/api/search" in paths
    assert anon.client.get("/api/docs").status_code == 200
