"""ChatView through Django's test clients: the sync (WSGI) path with ``Client``, the async (ASGI) path
with ``AsyncClient``; what was stored is read back through the Session API."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import AsyncClient, Client

from agent_sessions.api.config import get_manager
from agent_sessions.models import ApiKey, Message, SessionRecord
from tests.support.api import make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.support.chat_urls")]


def user_msg(mid: str, text: str) -> dict:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


def events(body: bytes) -> list[Any]:
    """The SSE events of a body: parsed chunks, and the final ``[DONE]`` as a string."""
    out: list[Any] = []
    for block in body.decode().split("\n\n"):
        if block:
            assert block.startswith("data: "), block
            data = block.removeprefix("data: ")
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


@pytest.fixture
def token(django_user_model) -> str:
    _, secret = ApiKey.issue(make_user(django_user_model, "chatter"), "chat")
    return secret


def post(token: str | None, body: dict, url: str = "/api/chat", **headers: str):
    client = Client()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    response = client.post(url, json.dumps(body), content_type="application/json", headers=headers)
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return response, content


def chat(token: str, chat_id: str, messages: list[dict], trigger: str = "submit-message", message_id=None, **kw):
    body = {"id": chat_id, "messages": messages, "trigger": trigger, "messageId": message_id}
    response, content = post(token, body, **kw)
    assert response.status_code == 200, content
    assert response["Content-Type"] == "text/event-stream"
    assert response["X-Vercel-AI-UI-Message-Stream"] == "v1"
    return events(content)


def session(chat_id: str):
    return get_manager().get_session(chat_id)


def test_first_post_creates_the_session_and_streams_the_envelope(token):
    got = chat(token, "c1", [user_msg("u1", "hello there")])
    kinds = [e if isinstance(e, str) else e["type"] for e in got]
    # the session's events (SPEC §10) as transient data parts: the posted message's, then the reply's before finish
    assert kinds == [
        "start", "start-step", "data-session-status", "text-start", "text-delta", "text-delta", "text-delta",
        "text-end", "finish-step", "data-session-status", "finish", "[DONE]",
    ]  # fmt: skip
    reply_id = got[0]["messageId"]
    assert "".join(e["delta"] for e in got if isinstance(e, dict) and e["type"] == "text-delta") == (
        "Reply 1 to: hello there"
    )
    row = SessionRecord.objects.get(id="c1")
    assert row.owner.username == "chatter"
    assert row.name == "hello there"
    history = session("c1").get_history()
    assert [m["id"] for m in history] == ["u1", reply_id]
    assert history[1]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Reply 1 to: hello there", "state": "done"},
    ]


def test_whole_history_and_last_message_only_place_messages_the_same_way(token):
    first = chat(token, "c2", [user_msg("u1", "one")])[0]["messageId"]
    reply1 = session("c2").get_message(first)
    # whole history: u2 goes under the reply before it in the posted list
    second = chat(token, "c2", [user_msg("u1", "one"), reply1, user_msg("u2", "two")])[0]["messageId"]
    # only the last message: u3 goes under the latest leaf
    chat(token, "c2", [user_msg("u3", "three")])
    ids = [m["id"] for m in session("c2").get_history()]
    assert ids[:5] == ["u1", first, "u2", second, "u3"]
    assert Message.objects.filter(session_id="c2").count() == 6


def test_ids_already_stored_are_never_written_again(token):
    chat(token, "c3", [user_msg("u1", "original")])
    chat(token, "c3", [user_msg("u1", "edited by the client")], trigger="regenerate-message")
    assert session("c3").get_message("u1")["parts"][0]["text"] == "original"


def test_regenerate_stores_a_sibling_and_answers_the_path_ending_at_the_user_message(token):
    old = chat(token, "c4", [user_msg("u1", "hi")])[0]["messageId"]
    chat(token, "c4", [user_msg("u2", "later")])  # the latest leaf is now further down
    new = chat(token, "c4", [user_msg("u1", "hi")], trigger="regenerate-message", message_id=old)[0]["messageId"]
    assert new != old
    branches = session("c4").get_branches("u1")
    assert [m["id"] for m in branches] == [old, new]
    assert [m["parts"][1]["text"] for m in branches] == ["Reply 1 to: hi", "Reply 2 to: hi"]
    assert [m["id"] for m in session("c4").get_history(new)] == ["u1", new]
    assert session("c4").get_message(old)["parts"][1]["text"] == "Reply 1 to: hi"  # not overwritten


def test_client_side_tool_round_trip_continues_the_same_message(token):
    got = chat(token, "c5", [user_msg("u1", "what is the weather")])
    reply_id = got[0]["messageId"]
    assert got[-2] == {"type": "finish", "finishReason": "tool-calls"}
    stored = session("c5").get_message(reply_id)
    tool = stored["parts"][2]
    assert tool == {
        "type": "tool-getLocation", "toolCallId": "call-u1", "state": "input-available", "input": {"precise": True},
    }  # fmt: skip
    client_copy = {**stored, "parts": [*stored["parts"][:2], {**tool, "state": "output-available", "output": "Oslo"}]}
    follow = chat(token, "c5", [user_msg("u1", "what is the weather"), client_copy], message_id=reply_id)
    assert follow[0] == {"type": "start", "messageId": reply_id}
    final = session("c5").get_message(reply_id)
    assert [p["type"] for p in final["parts"]] == ["step-start", "text", "tool-getLocation", "step-start", "text"]
    assert final["parts"][2]["state"] == "output-available"
    assert final["parts"][2]["output"] == "Oslo"
    assert final["parts"][4]["text"] == "Sunny in Oslo."
    assert Message.objects.filter(session_id="c5").count() == 2


def test_respond_raising_stores_a_marked_partial_reply_before_the_error_chunk(token):
    got = chat(token, "c6", [user_msg("u1", "please fail")])
    assert got[-1]["type"] == "error"
    assert "the model broke" not in got[-1]["errorText"]
    stored = session("c6").get_message(got[0]["messageId"])
    assert stored["parts"][1] == {"type": "text", "text": "Partial answer", "state": "streaming"}
    assert stored["metadata"]["partial"]["reason"] == "error"
    assert session("c6").get_message("u1") is not None


def test_reasoning_and_metadata_are_stored(token):
    got = chat(token, "c7", [user_msg("u1", "think first")])
    stored = session("c7").get_message(got[0]["messageId"])
    assert stored["parts"][1] == {"type": "reasoning", "text": "The user wants a thought.", "state": "done"}
    assert stored["parts"][2]["text"] == "Here is my answer."
    assert stored["metadata"] == {"model": "scripted"}


def test_no_credential_is_401_and_writes_nothing(db):
    response, content = post(None, {"id": "c8", "messages": [user_msg("u1", "hi")]})
    assert response.status_code == 401
    assert json.loads(content)["code"] == "not_authenticated"
    response, _ = post("ask_wrong", {"id": "c8", "messages": [user_msg("u1", "hi")]})
    assert response.status_code == 401
    assert not SessionRecord.objects.filter(id="c8").exists()
    assert not Message.objects.exists()


def test_login_session_needs_csrf_and_bearer_does_not(token, django_user_model):
    user = make_user(django_user_model, "browser")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    body = json.dumps({"id": "c9", "messages": [user_msg("u1", "hi")], "trigger": "submit-message"})
    refused = client.post("/api/chat", body, content_type="application/json")
    assert refused.status_code == 403
    assert refused.json()["code"] == "csrf_failed"
    assert not SessionRecord.objects.filter(id="c9").exists()
    client.get("/admin/login/")  # sets the csrftoken cookie
    csrf = client.cookies["csrftoken"].value
    ok = client.post("/api/chat", body, content_type="application/json", headers={"X-CSRFToken": csrf})
    assert ok.status_code == 200
    b"".join(ok.streaming_content)
    assert SessionRecord.objects.get(id="c9").owner == user


def test_another_owners_chat_is_404_and_untouched(token, django_user_model):
    chat(token, "c10", [user_msg("u1", "mine")])
    _, other = ApiKey.issue(make_user(django_user_model, "other"), "k")
    response, content = post(other, {"id": "c10", "messages": [user_msg("x1", "intrude")]})
    assert response.status_code == 404
    assert json.loads(content)["code"] == "session_not_found"
    assert Message.objects.filter(session_id="c10").count() == 2


@pytest.mark.parametrize(
    "body",
    [
        {"id": "c11", "messages": []},
        {"id": "c11", "messages": [{"id": "u1", "role": "user"}]},
        {"id": "", "messages": [user_msg("u1", "x")]},
        {"id": "c11", "messages": [user_msg("u1", "x")], "trigger": "resume-stream"},
        {"id": "c11", "messages": [user_msg("u1", "x"), user_msg("u1", "x")]},
    ],
)
def test_bad_bodies_are_400_and_write_nothing(token, body):
    response, content = post(token, body)
    assert response.status_code == 400, content
    assert set(json.loads(content)) >= {"detail", "code"}
    assert not SessionRecord.objects.filter(id="c11").exists()
    assert not Message.objects.exists()


def test_not_json_is_400(token):
    response = Client().post(
        "/api/chat", b"{nope", content_type="application/json", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_json"


def test_get_is_not_allowed(token):
    assert Client().get("/api/chat", headers={"Authorization": f"Bearer {token}"}).status_code == 405


async def _apost(token: str, body: dict, url: str) -> tuple[int, list[Any]]:
    response = await AsyncClient().post(
        url, json.dumps(body), content_type="application/json", headers={"Authorization": f"Bearer {token}"}
    )
    chunks = [chunk async for chunk in response.streaming_content]
    return response.status_code, events(b"".join(chunks))


@pytest.mark.parametrize("url", ["/api/chat", "/api/achat"])
def test_asgi_path_streams_and_stores_for_sync_and_async_respond(token, url):
    from asgiref.sync import async_to_sync

    status, got = async_to_sync(_apost)(token, {"id": "c12", "messages": [user_msg("u1", "hello")]}, url)
    assert status == 200
    assert got[-1] == "[DONE]"
    stored = session("c12").get_message(got[0]["messageId"])
    assert stored["parts"][1]["text"] == "Reply 1 to: hello"
    status, got = async_to_sync(_apost)(token, {"id": "c12", "messages": [user_msg("u2", "fail now")]}, url)
    assert got[-1]["type"] == "error"
    assert session("c12").get_message(got[0]["messageId"])["metadata"]["partial"]["reason"] == "error"


def test_wsgi_path_runs_an_async_respond(token):
    response, content = post(token, {"id": "c13", "messages": [user_msg("u1", "hello")]}, url="/api/achat")
    got = events(content)
    assert response.status_code == 200
    assert got[-1] == "[DONE]"
    assert session("c13").get_message(got[0]["messageId"])["parts"][1]["text"] == "Reply 1 to: hello"


def test_a_turn_that_cannot_be_placed_ends_in_an_error_chunk_and_writes_nothing(token):
    lone_reply = {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "orphan"}]}
    got = chat(token, "c14", [lone_reply], trigger="regenerate-message")
    assert got[0]["type"] == "start"
    assert got[-1] == {"type": "error", "errorText": "Nothing to regenerate: no message before the reply."}
    assert not SessionRecord.objects.filter(id="c14").exists()
    assert not Message.objects.exists()


# ── model-call records (SPEC §8): the view's ``model`` option records each reply ─────────────


def test_each_reply_records_the_input_respond_got(token):
    first = chat(token, "m1", [user_msg("u1", "hi")])[0]["messageId"]
    second = chat(token, "m1", [user_msg("u2", "again")])[0]["messageId"]  # only the last: under the leaf
    seen = session("m1").model_input(second)
    assert [m["id"] for m in seen["messages"]] == ["u1", first, "u2"]
    assert (seen["model"], seen["status"]) == ("scripted", "ok")
    assert [m["id"] for m in session("m1").model_input(first)["messages"]] == ["u1"]


def test_a_recorded_reply_reads_the_path_once(token, monkeypatch):
    """The record's snapshot is the path placing the turn read (what respond gets), not a second read."""
    from agent_sessions.storage.orm import DjangoSessionProvider

    chat(token, "m5", [user_msg("u1", "hi")])
    reads: list = []
    read = DjangoSessionProvider.get_history

    def counted(self, leaf_id=None):
        reads.append(leaf_id)
        return read(self, leaf_id)

    monkeypatch.setattr(DjangoSessionProvider, "get_history", counted)
    reply = chat(token, "m5", [user_msg("u2", "again")])[0]["messageId"]
    assert reads == ["u2"]
    monkeypatch.undo()
    assert [m["id"] for m in session("m5").model_input(reply)["messages"]][-1] == "u2"


def test_a_regenerated_reply_and_the_one_it_replaces_saw_the_same_input(token):
    old = chat(token, "m2", [user_msg("u1", "hi")])[0]["messageId"]
    new = chat(token, "m2", [user_msg("u1", "hi")], trigger="regenerate-message", message_id=old)[0]["messageId"]
    assert session("m2").model_input(old)["messages"] == session("m2").model_input(new)["messages"]


def test_a_failed_reply_is_recorded_as_an_error_with_its_partial_message(token):
    reply = chat(token, "m3", [user_msg("u1", "please fail")])[0]["messageId"]
    [call] = session("m3").model_calls()
    assert (call["status"], call["message_id"], call["error"]) == ("error", reply, "the model broke")


def test_a_tool_follow_up_records_the_continuation_with_the_tool_output_in_its_input(token):
    got = chat(token, "m4", [user_msg("u1", "what is the weather")])
    reply_id = got[0]["messageId"]
    stored = session("m4").get_message(reply_id)
    tool = stored["parts"][2]
    client_copy = {**stored, "parts": [*stored["parts"][:2], {**tool, "state": "output-available", "output": "Oslo"}]}
    chat(token, "m4", [user_msg("u1", "what is the weather"), client_copy], message_id=reply_id)
    calls = session("m4").model_calls()
    assert [c["message_id"] for c in calls] == [reply_id, reply_id]
    latest = session("m4").model_input(reply_id)
    assert latest["messages"][-1]["parts"][2]["output"] == "Oslo"
