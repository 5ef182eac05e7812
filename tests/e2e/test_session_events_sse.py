"""``GET /api/sessions/{id}/events`` over real HTTP (gunicorn with uvicorn workers, as the compose stack runs it):
a subscriber sees an append made by another process, heartbeats, ``Last-Event-ID`` catch-up, ownership."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
import redis
from django.conf import settings
from django.db import connection
from django.test.utils import override_settings

from agent_sessions import Session, events
from agent_sessions.models import ApiKey
from tests.conftest import msg
from tests.support.api import make_user
from tests.support.chat_server import asgi_server
from tests.support.events_server_settings import AGENT_SESSIONS_REDIS_URL as REDIS_URL

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def server(django_db_blocker) -> Iterator[str]:
    try:
        redis.Redis.from_url(REDIS_URL).ping()
    except redis.ConnectionError:
        pytest.fail(f"no Redis at {REDIS_URL}") if __import__("os").environ.get("CI") else pytest.skip("no Redis")
    with django_db_blocker.unblock():
        name = str(connection.settings_dict["NAME"])
    with asgi_server(settings.DB, name, settings="tests.support.events_server_settings") as base:
        yield base


def read_events(lines: Iterator[str], count: int, *, deadline: float = 10.0) -> tuple[list[dict], int]:
    """The next ``count`` events of an SSE line iterator (and how many heartbeats came in between)."""
    found: list[dict] = []
    pings = 0
    event_id = None
    stop = time.monotonic() + deadline
    for line in lines:
        if line.startswith(": ping"):
            pings += 1
        elif line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("data: "):
            payload = json.loads(line[6:])
            assert payload["id"] == event_id
            found.append(payload)
            if len(found) == count:
                return found, pings
        assert time.monotonic() < stop, f"only {found} within {deadline}s"
    raise AssertionError(f"the stream ended after {found}")


def subscribed(lines: Iterator[str]) -> None:
    for line in lines:
        if line == ": subscribed":
            return


@pytest.fixture
def owner(django_user_model):
    user = make_user(django_user_model, f"sse-{uuid.uuid4().hex[:8]}")
    _, token = ApiKey.issue(user, "sse")
    return user, token


def test_a_subscriber_sees_an_append_and_catches_up_after_a_reconnect(server, owner):
    user, token = owner
    session_id = f"sse-{uuid.uuid4().hex}"
    headers = {"Authorization": f"Bearer {token}"}
    with override_settings(AGENT_SESSIONS_REDIS_URL=REDIS_URL):
        session = Session.create(owner=user).for_session(session_id)
        session.append_message(msg("first"))
        assert events.flush(5)
        url = f"{server}/api/sessions/{session_id}/events"
        with httpx.stream("GET", url, headers=headers, timeout=10) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.iter_lines()
            subscribed(lines)
            session.append_message(msg("second", role="assistant", text="hello"))
            (event,), _ = read_events(lines, 1)
            assert event["session_id"] == session_id
            assert event["type"] == "message"
            assert event["message_ids"] == ["second"]
            assert event["phase"] == "idle"
            assert event["tokenEstimate"] > 0
            # idle: heartbeats keep the connection open
            _, pings = read_events_or_pings(lines, pings=2)
        # two writes while no one is connected, then a reconnect with Last-Event-ID
        session.append_message(msg("third"))
        session.update_message(msg("third", text="edited"))
        assert events.flush(5)
        with httpx.stream("GET", url, headers={**headers, "Last-Event-ID": str(event["id"])}, timeout=10) as again:
            missed, _ = read_events(again.iter_lines(), 2)
    assert [(e["type"], e["message_ids"]) for e in missed] == [("message", ["third"]), ("message", ["third"])]
    assert event["id"] < missed[0]["id"] < missed[1]["id"]


def read_events_or_pings(lines: Iterator[str], *, pings: int) -> tuple[None, int]:
    seen = 0
    for line in lines:
        if line.startswith(": ping"):
            seen += 1
            if seen == pings:
                return None, seen
    raise AssertionError("the stream ended")


def test_another_owners_session_is_a_404_in_the_api_shape(server, owner, django_user_model):
    user, _ = owner
    session_id = f"sse-{uuid.uuid4().hex}"
    Session.create(owner=user).for_session(session_id).append_message(msg("a"))
    other = make_user(django_user_model, f"other-{uuid.uuid4().hex[:8]}")
    _, other_token = ApiKey.issue(other, "other")
    response = httpx.get(
        f"{server}/api/sessions/{session_id}/events", headers={"Authorization": f"Bearer {other_token}"}, timeout=10
    )
    assert response.status_code == 404
    assert response.json() == {"detail": "No such session.", "code": "session_not_found"}
    assert httpx.get(f"{server}/api/sessions/{session_id}/events", timeout=10).status_code == 401
