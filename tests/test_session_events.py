"""Session events (SPEC §10): the signal in process, the Redis publish across processes, on both databases."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
import redis
from django.db import transaction
from django.test import RequestFactory
from django.test.utils import override_settings

from agent_sessions import Session, create_compact_function, events
from agent_sessions.chat import ChatView
from agent_sessions.models import ApiKey
from agent_sessions.signals import session_event
from tests.conftest import msg
from tests.support.api import make_user

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("AGENT_SESSIONS_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")


@pytest.fixture
def received() -> Iterator[list[dict]]:
    seen: list[dict] = []

    def receiver(sender, event, **kwargs):
        assert sender == event["session_id"]
        seen.append(event)

    session_event.connect(receiver, dispatch_uid="test_session_events")
    yield seen
    session_event.disconnect(dispatch_uid="test_session_events")


@pytest.fixture
def redis_client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        client.ping()
    except redis.ConnectionError:
        if os.environ.get("CI"):
            pytest.fail(f"no Redis at {REDIS_URL}")
        pytest.skip(f"no Redis at {REDIS_URL}")
    yield client
    client.close()


def test_every_change_emits_an_event_with_the_seed_fields(session_id, received):
    session = Session.create().for_session(session_id).with_context("memory")
    session.append_message(msg("a", text="hello there"))
    session.append_message(msg("b", role="assistant", text="hi"))
    session.update_message(msg("b", role="assistant", text="hi again"))
    session.replace_context_block("memory", "likes tea")
    session.refresh_system_prompt()
    session.delete_messages(["b"])
    session.clear_messages()
    kinds = [(e["type"], e.get("message_ids")) for e in received]
    assert kinds == [
        ("message", ["a"]),
        ("message", ["b"]),
        ("message", ["b"]),
        ("context", None),
        ("prompt", None),
        ("deleted", ["b"]),
        ("cleared", None),
    ]
    assert all(e["session_id"] == session_id and e["phase"] == "idle" for e in received)
    assert all(e["tokenThreshold"] is None for e in received)
    ids = [e["id"] for e in received]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    # the append's estimate is its running path total: no read of the history
    assert received[0]["tokenEstimate"] > 0
    assert received[1]["tokenEstimate"] > received[0]["tokenEstimate"]


def test_an_appends_estimate_matches_the_threshold_check(session_id, received):
    session = Session.create().for_session(session_id)
    session.on_compaction(create_compact_function(lambda p: "S", protect_head=1, min_tail_messages=1))
    session.compact_after(100_000)
    for i in range(4):
        session.append_message(msg(f"m{i}", text=f"message {i} " * 5))
    assert received[-1]["tokenThreshold"] == 100_000
    assert received[-1]["tokenEstimate"] == session.compaction.estimate_tokens()


def test_compaction_emits_compacting_then_compacted(session_id, received):
    session = Session.create().for_session(session_id)
    session.on_compaction(
        create_compact_function(lambda p: "SHORT", protect_head=1, tail_token_budget=10, min_tail_messages=1)
    )
    for i in range(8):
        session.append_message(msg(f"m{i}", text=f"a long message number {i} " * 20))
    received.clear()
    assert session.compact() is not None
    phases = [(e["type"], e["phase"], "compacted" in e) for e in received]
    assert phases == [("compaction", "compacting", False), ("compaction", "idle", True)]
    compacted = received[-1]["compacted"]
    assert compacted["tokensAfter"] < compacted["tokensBefore"]
    assert compacted["tokensAfter"] == session.compaction.estimate_tokens()


def test_a_failing_compaction_emits_an_error(session_id, received):
    session = Session.create().for_session(session_id)

    def broken(messages, context):
        raise RuntimeError("summariser down")

    session.on_compaction(broken)
    session.append_message(msg("a"))
    received.clear()
    with pytest.raises(RuntimeError):
        session.compact()
    assert [e["phase"] for e in received] == ["compacting", "idle"]
    assert received[-1]["error"] == "RuntimeError: summariser down"


def test_events_wait_for_the_commit_and_a_rollback_sends_none(session_id, received):
    session = Session.create().for_session(session_id)
    with transaction.atomic():
        session.append_message(msg("a"))
        assert received == []
    assert [e["message_ids"] for e in received] == [["a"]]
    received.clear()
    try:
        with transaction.atomic():
            session.append_message(msg("b"))
            raise ZeroDivisionError
    except ZeroDivisionError:
        pass
    assert received == []
    assert session.get_message("b") is None


def test_off_sends_nothing(session_id, received):
    with override_settings(AGENT_SESSIONS_SESSION_EVENTS=False):
        Session.create().for_session(session_id).append_message(msg("a"))
    assert received == []


def test_a_failing_receiver_does_not_fail_the_write(session_id):
    def bad(**kwargs):
        raise RuntimeError("receiver bug")

    session_event.connect(bad, dispatch_uid="bad")
    try:
        session = Session.create().for_session(session_id)
        assert session.append_message(msg("a")) is True
    finally:
        session_event.disconnect(dispatch_uid="bad")
    assert session.get_message("a") is not None


def test_redis_gets_the_event_on_the_channel_and_in_the_backlog(session_id, redis_client):
    pubsub = redis_client.pubsub()
    pubsub.subscribe(events.channel(session_id))
    assert pubsub.get_message(timeout=2)["type"] == "subscribe"
    with override_settings(AGENT_SESSIONS_REDIS_URL=REDIS_URL):
        session = Session.create().for_session(session_id)
        session.append_message(msg("a"))
        session.append_message(msg("b"))
        assert events.flush(5)
    live = [json.loads(pubsub.get_message(timeout=2)["data"]) for _ in range(2)]
    assert [e["message_ids"] for e in live] == [["a"], ["b"]]
    assert live[0]["id"] < live[1]["id"]
    backlog = redis_client.xrange(events.stream_key(session_id))
    assert [json.loads(fields["d"]) for _, fields in backlog] == live
    assert [entry_id for entry_id, _ in backlog] == [f"{e['id']}-0" for e in live]
    pubsub.close()
    redis_client.delete(events.stream_key(session_id), "agent_sessions:event-id:" + session_id)


def test_redis_ids_increase_even_when_a_process_proposes_a_lower_one(session_id, redis_client):
    counter = "agent_sessions:event-id:" + session_id
    redis_client.set(counter, str(events.next_id() + 10_000_000))  # another process, its clock ahead
    with override_settings(AGENT_SESSIONS_REDIS_URL=REDIS_URL):
        Session.create().for_session(session_id).append_message(msg("a"))
        assert events.flush(5)
    ((entry_id, fields),) = redis_client.xrange(events.stream_key(session_id))
    assert json.loads(fields["d"])["id"] == int(redis_client.get(counter))
    assert entry_id == f"{redis_client.get(counter)}-0"
    redis_client.delete(events.stream_key(session_id), counter)


def test_a_dead_broker_never_fails_or_slows_a_write(session_id, received):
    import time

    with override_settings(
        AGENT_SESSIONS_REDIS_URL="redis://10.255.255.1:6379/13", AGENT_SESSIONS_ENQUEUE_TIMEOUT_SECONDS=0.2
    ):
        session = Session.create().for_session(session_id)
        started = time.monotonic()
        for i in range(20):
            session.append_message(msg(f"m{i}"))
        elapsed = time.monotonic() - started
    assert elapsed < 2.0, elapsed  # the unreachable broker is the publisher thread's problem
    assert len(received) == 20  # the in-process signal still fires
    assert session.get_path_length() == 20


def test_the_chat_stream_carries_session_events_as_transient_data_parts(session_id, received, django_user_model):
    user = make_user(django_user_model, f"chat-{session_id[-8:]}")
    _, token = ApiKey.issue(user, "chat")
    view = ChatView.as_view(respond=lambda session, history: iter(["Hello", " there"]))
    body = {"id": session_id, "trigger": "submit-message", "messages": [msg("u1", text="hi")]}
    request = RequestFactory().post(
        "/api/chat", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    response = view(request)
    chunks = [
        json.loads(line[6:])
        for line in b"".join(response.streaming_content).decode().splitlines()
        if line.startswith("data: {")
    ]
    kinds = [c["type"] for c in chunks]
    status = [c for c in chunks if c["type"] == "data-session-status"]
    assert all(c["transient"] is True for c in status)
    assert [c["data"]["message_ids"] for c in status] == [["u1"], [chunks[0]["messageId"]]]
    # the user message's event comes before the reply's text; the reply's own just before finish
    assert kinds.index("data-session-status") < kinds.index("text-delta")
    assert kinds[-2:] == ["data-session-status", "finish"]
    assert [e["id"] for e in received] == [c["data"]["id"] for c in status]
    stored = Session.create().for_session(session_id).get_message(chunks[0]["messageId"])
    assert "data-session-status" not in json.dumps(stored)


def test_the_chat_stream_has_status_parts_without_redis_or_receivers(session_id, django_user_model):
    user = make_user(django_user_model, f"chat2-{session_id[-8:]}")
    _, token = ApiKey.issue(user, "chat")
    view = ChatView.as_view(respond=lambda session, history: iter(["ok"]))
    body = {"id": session_id, "trigger": "submit-message", "messages": [msg("u1", text="hi")]}
    request = RequestFactory().post(
        "/api/chat", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    text = b"".join(view(request).streaming_content).decode()
    assert text.count('"type":"data-session-status"') == 2
    assert not session_event.has_listeners()  # the tap is gone once the reply ends
