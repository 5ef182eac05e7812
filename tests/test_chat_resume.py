"""Resumable chat generations (SPEC §10) through Django's test clients on a real Redis: the POST and a resume
follow one generation's Redis stream; a disconnect does not stop it, the stop route does; a generation whose
lease lapsed (its process died) is recovered as an interrupted partial reply; one store per reply."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client
from django.test.utils import override_settings

from agent_sessions.api.config import get_manager
from agent_sessions.chat import generation, live
from agent_sessions.chat.stream import sse
from agent_sessions.models import ApiKey, Message
from tests.support.api import make_user

REDIS_URL = os.environ.get("AGENT_SESSIONS_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.support.chat_urls")]


@pytest.fixture(autouse=True)
def with_redis():
    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except redis.ConnectionError:
        pytest.fail(f"no Redis at {REDIS_URL}") if os.environ.get("CI") else pytest.skip("no Redis")
    with override_settings(AGENT_SESSIONS_REDIS_URL=REDIS_URL, AGENT_SESSIONS_CHAT_LEASE_SECONDS=1.0):
        yield


@pytest.fixture
def token(django_user_model) -> str:
    return ApiKey.issue(make_user(django_user_model, f"resumer-{uuid.uuid4().hex[:6]}"), "chat")[1]


def user_msg(mid: str, text: str) -> dict:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


def chunks(body: bytes) -> list[Any]:
    out: list[Any] = []
    for block in body.decode().split("\n\n"):
        if block:
            data = block.removeprefix("data: ")
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def text_of(got: list[Any]) -> str:
    return "".join(c["delta"] for c in got if isinstance(c, dict) and c["type"] == "text-delta")


def start(token: str, chat_id: str, text: str) -> tuple[Any, Iterator[bytes]]:
    body = {"id": chat_id, "messages": [user_msg(f"u-{chat_id}", text)], "trigger": "submit-message"}
    response = Client().post("/api/chat", json.dumps(body), content_type="application/json",
                             headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert response.status_code == 200, response.content
    return response, iter(response.streaming_content)


def resume(token: str, chat_id: str) -> Any:
    return Client().get(f"/api/chat/{chat_id}/stream", headers={"Authorization": f"Bearer {token}"})


def wait_stored(chat_id: str, message_id: str) -> dict:
    session = get_manager().get_session(chat_id)
    deadline = time.monotonic() + 20
    while (found := session.get_message(message_id)) is None:
        assert time.monotonic() < deadline, "the reply was never stored"
        time.sleep(0.05)
    return dict(found)


def test_a_resume_mid_answer_replays_from_the_first_chunk_and_both_end_alike(token):
    chat_id = f"r-{uuid.uuid4().hex}"
    response, body = start(token, chat_id, "slow please")
    first = [next(body), next(body), next(body)]
    again = resume(token, chat_id)
    assert again.status_code == 200
    assert again["X-Vercel-AI-UI-Message-Stream"] == "v1"
    resumed = chunks(b"".join(again.streaming_content))
    posted = chunks(b"".join([*first, *body]))
    assert resumed == posted  # the same bytes: from the first chunk, through the live tail, to finish
    assert posted[0]["type"] == "start"
    assert posted[-2:] == [{"type": "finish"}, "[DONE]"]
    assert text_of(posted) == "".join(f"w{i} " for i in range(40))
    stored = wait_stored(chat_id, posted[0]["messageId"])
    assert stored["parts"][1]["text"] == text_of(posted)
    assert "partial" not in stored.get("metadata", {})
    assert Message.objects.filter(session_id=chat_id, role="assistant").count() == 1
    assert resume(token, chat_id).status_code == 204  # nothing active any more
    assert live.active(live.client(), chat_id) is None


def test_a_client_that_goes_away_does_not_stop_the_generation(token):
    chat_id = f"r-{uuid.uuid4().hex}"
    response, body = start(token, chat_id, "slow please")
    message_id = chunks(next(body))[0]["messageId"]
    response.close()  # the client went away
    del body
    stored = wait_stored(chat_id, message_id)
    assert stored["parts"][1]["text"] == "".join(f"w{i} " for i in range(40))
    assert "partial" not in stored.get("metadata", {})


def test_stop_ends_every_watcher_with_finish_and_stores_the_partial_marked_stopped(token):
    chat_id = f"r-{uuid.uuid4().hex}"
    response, body = start(token, chat_id, "slow please")
    head = [next(body), next(body), next(body)]
    watcher = resume(token, chat_id)
    stop = Client().post(f"/api/chat/{chat_id}/stop", headers={"Authorization": f"Bearer {token}"})
    assert stop.status_code == 204
    posted = chunks(b"".join([*head, *body]))
    watched = chunks(b"".join(watcher.streaming_content))
    assert watched == posted
    assert posted[-2:] == [{"type": "finish"}, "[DONE]"]
    assert {"type": "message-metadata", "messageMetadata": {"partial": {"reason": "stopped"}}} in posted
    words = text_of(posted).split()
    assert 0 < len(words) < 40
    stored = get_manager().get_session(chat_id).get_message(posted[0]["messageId"])  # stored before the 204
    assert stored is not None
    assert stored["metadata"]["partial"] == {"reason": "stopped"}
    assert stored["parts"][1] == {"type": "text", "text": text_of(posted), "state": "done"}
    assert resume(token, chat_id).status_code == 204
    assert Message.objects.filter(session_id=chat_id, role="assistant").count() == 1


def test_a_second_post_while_a_generation_runs_is_a_409_and_writes_nothing(token):
    chat_id = f"r-{uuid.uuid4().hex}"
    _, body = start(token, chat_id, "slow please")
    next(body)
    again = {"id": chat_id, "messages": [user_msg("u-other", "hello")], "trigger": "submit-message"}
    response = Client().post("/api/chat", json.dumps(again), content_type="application/json",
                             headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert response.status_code == 409
    assert response.json()["code"] == "generation_running"
    assert b"".join(body).endswith(b"data: [DONE]\n\n")
    assert not Message.objects.filter(session_id=chat_id, message_id="u-other").exists()


def test_a_dead_generation_is_stored_as_interrupted_and_a_resume_answers_204(token):
    """What a generation whose process died leaves in Redis: its chunks, its turn, no lease."""
    chat_id = f"r-{uuid.uuid4().hex}"
    _, body = start(token, chat_id, "hello")
    assert b"".join(body).endswith(b"data: [DONE]\n\n")
    user_id = f"u-{chat_id}"
    redis_client, stream_id = live.client(), uuid.uuid4().hex
    assert live.begin(redis_client, chat_id, stream_id)
    live.append(redis_client, stream_id, sse({"type": "start", "messageId": "dead-1"}) + sse({"type": "start-step"}))
    live.append(redis_client, stream_id, meta={"message_id": "dead-1", "parent_id": user_id, "continued": False})
    live.append(redis_client, stream_id, sse({"type": "text-start", "id": "t"}))
    live.append(redis_client, stream_id, sse({"type": "text-delta", "id": "t", "delta": "half an ans"}))
    redis_client.delete(live.lease_key(stream_id))  # the lease lapsed
    assert resume(token, chat_id).status_code == 204
    stored = get_manager().get_session(chat_id).get_message("dead-1")
    assert stored is not None
    assert stored["metadata"]["partial"] == {"reason": "interrupted"}
    assert stored["parts"] == [{"type": "step-start"}, {"type": "text", "text": "half an ans", "state": "done"}]
    assert live.active(redis_client, chat_id) is None
    generation.recover(chat_id, stream_id, get_manager())  # a second recovery stores nothing
    assert Message.objects.filter(session_id=chat_id, message_id="dead-1").count() == 1
    assert resume(token, chat_id).status_code == 204


def test_a_watcher_of_a_generation_that_dies_ends_with_finish(token):
    chat_id = f"r-{uuid.uuid4().hex}"
    _, body = start(token, chat_id, "hello")
    b"".join(body)
    redis_client, stream_id = live.client(), uuid.uuid4().hex
    assert live.begin(redis_client, chat_id, stream_id)
    live.append(redis_client, stream_id, sse({"type": "start", "messageId": "dead-2"}) + sse({"type": "start-step"}))
    live.append(redis_client, stream_id, meta={"message_id": "dead-2", "parent_id": f"u-{chat_id}", "continued": False})
    watcher = resume(token, chat_id)  # the lease still runs: the resume follows, then the lease lapses
    assert watcher.status_code == 200
    got = chunks(b"".join(watcher.streaming_content))
    assert [c if isinstance(c, str) else c["type"] for c in got] == [
        "start", "start-step", "finish-step", "message-metadata", "finish", "[DONE]",
    ]  # fmt: skip
    assert get_manager().get_session(chat_id).get_message("dead-2")["metadata"]["partial"]["reason"] == "interrupted"


async def _apost_and_resume(token: str, chat_id: str) -> tuple[list[Any], int]:
    body = {"id": chat_id, "messages": [user_msg("u1", "hello there")], "trigger": "submit-message"}
    response = await AsyncClient().post("/api/achat", json.dumps(body), content_type="application/json",
                                        headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert response.status_code == 200
    got = chunks(b"".join([piece async for piece in response.streaming_content]))
    resumed = await AsyncClient().get(f"/api/achat/{chat_id}/stream", headers={"Authorization": f"Bearer {token}"})
    return got, resumed.status_code


def test_the_asgi_path_streams_a_resumable_generation(token):
    got, resumed = async_to_sync(_apost_and_resume)(token, f"r-{uuid.uuid4().hex}")
    assert text_of(got) == "Reply 1 to: hello there"
    assert got[-2:] == [{"type": "finish"}, "[DONE]"]
    assert resumed == 204


def test_without_redis_the_reply_runs_in_the_request(token):
    chat_id = f"r-{uuid.uuid4().hex}"
    with override_settings(AGENT_SESSIONS_REDIS_URL=None):
        response, body = start(token, chat_id, "hello")
        assert text_of(chunks(b"".join(body))) == "Reply 1 to: hello"
        assert resume(token, chat_id).status_code == 204
    assert live.active(live.client(), chat_id) is None


def test_a_first_reply_is_resumable_by_its_caller_before_the_session_row_exists(token, django_user_model):
    """The generation writes the session row just after the first bytes: until then only the caller who posted
    may resume it (here a generation that never got that far: its lease lapses, the stream ends with finish)."""
    chat_id = f"r-{uuid.uuid4().hex}"
    redis_client, stream_id = live.client(), uuid.uuid4().hex
    user = django_user_model.objects.get(username__startswith="resumer-")
    other = ApiKey.issue(make_user(django_user_model, f"other-{uuid.uuid4().hex[:6]}"), "k")[1]
    assert live.begin(redis_client, chat_id, stream_id, user.pk)
    live.append(redis_client, stream_id, sse({"type": "start", "messageId": "first-1"}) + sse({"type": "start-step"}))
    assert resume(other, chat_id).status_code == 204
    stopped = Client().post(f"/api/chat/{chat_id}/stop", headers={"Authorization": f"Bearer {other}"})
    assert stopped.status_code == 204
    assert not redis_client.exists(live.stop_key(stream_id))  # another user cannot stop it either
    got = resume(token, chat_id)
    assert got.status_code == 200
    kinds = [c if isinstance(c, str) else c["type"] for c in chunks(b"".join(got.streaming_content))]
    assert kinds == ["start", "start-step", "finish-step", "message-metadata", "finish", "[DONE]"]
    assert live.active(redis_client, chat_id) is None
