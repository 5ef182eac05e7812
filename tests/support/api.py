"""Fixtures of the JSON API tests: users, keys, a Bearer client, test configurations.

Loaded for every test module by ``pytest_plugins`` in ``tests/conftest.py``; import only the helpers
(``Api``, ``ui``, ``make_user``) from here, never the fixtures.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from agent_sessions import StaticProvider, create_compact_function, registry
from agent_sessions.manager import SessionManager
from agent_sessions.models import ApiKey
from agent_sessions.summarizers import extractive_summarizer

BASE = "/api"
TEST_CONFIG = "api-tests"
PLAIN_CONFIG = "api-tests-plain"


class Api:
    """A Django test client that speaks JSON and sends a Bearer key (or nothing)."""

    def __init__(self, token: str | None = None, client: Client | None = None) -> None:
        self.client = client or Client()
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | str | None = None, **params: Any):
        url = BASE + path
        kwargs: dict[str, Any] = {"headers": self.headers}
        if method == "get":
            return self.client.get(url, params, **kwargs)
        if raw is not None:
            data = raw
        else:
            data = json.dumps(body) if body is not None else ""
        if params:
            url += "?" + "&".join(f"{k}={v}" for k, v in params.items())
        return getattr(self.client, method)(url, data=data, content_type="application/json", **kwargs)

    def get(self, path: str, **params: Any):
        return self.request("get", path, **params)

    def post(self, path: str, body: Any = None, **kw: Any):
        return self.request("post", path, body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any):
        return self.request("put", path, body, **kw)

    def patch(self, path: str, body: Any = None, **kw: Any):
        return self.request("patch", path, body, **kw)

    def delete(self, path: str, **kw: Any):
        return self.request("delete", path, None, **kw)

    # conveniences
    def new_session(self, name: str = "Chat", **fields: Any) -> str:
        response = self.post("/sessions", {"name": name, **fields})
        assert response.status_code == 201, response.content
        return response.json()["id"]

    def append(self, sid: str, mid: str, text: str | None = None, role: str = "user", **parent: Any) -> dict:
        message = {"id": mid, "role": role, "parts": [{"type": "text", "text": text or f"{mid} text"}]}
        response = self.post(f"/sessions/{sid}/messages", {"message": message, **parent})
        assert response.status_code in (200, 201), response.content
        return response.json()


def ui(mid: str, text: str | None = None, role: str = "user", **extra: Any) -> dict:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": text or f"{mid} text"}], **extra}


def make_user(django_user_model, username: str, **flags: Any):
    return django_user_model.objects.create_user(username, f"{username}@example.com", "pw-" + username, **flags)


@pytest.fixture
def alice(django_user_model):
    return make_user(django_user_model, "alice")


@pytest.fixture
def bob(django_user_model):
    return make_user(django_user_model, "bob")


@pytest.fixture
def staff_user(django_user_model):
    return make_user(django_user_model, "root", is_staff=True)


@pytest.fixture
def api(alice) -> Api:
    """Alice's Bearer client."""
    return Api(ApiKey.issue(alice, "tests")[1])


@pytest.fixture
def bob_api(bob) -> Api:
    return Api(ApiKey.issue(bob, "tests")[1])


@pytest.fixture
def staff_api(staff_user) -> Api:
    return Api(ApiKey.issue(staff_user, "tests")[1])


@pytest.fixture
def anon() -> Api:
    return Api()


@pytest.fixture
def custom_config(settings):
    """Point the API at a configuration with a readonly and a small writable block and eager-to-compact compaction."""
    manager = (
        SessionManager(name=TEST_CONFIG)
        .with_context("soul", provider=StaticProvider("You are helpful."))
        .with_context("memory", description="Learned facts", max_tokens=60)
        .with_cached_prompt()
        .on_compaction(
            create_compact_function(extractive_summarizer, protect_head=1, tail_token_budget=5, min_tail_messages=1)
        )
    )
    settings.AGENT_SESSIONS_API_CONFIG = TEST_CONFIG
    yield manager
    registry.unregister(TEST_CONFIG)


@pytest.fixture
def plain_config(settings):
    """A configuration without context blocks or compaction."""
    manager = SessionManager(name=PLAIN_CONFIG)
    settings.AGENT_SESSIONS_API_CONFIG = PLAIN_CONFIG
    yield manager
    registry.unregister(PLAIN_CONFIG)
