"""The demo project's chat: the page needs a login and carries the pinned ai version; the endpoint streams
the fake model and stores the turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client

from agent_sessions.api.config import get_manager
from agent_sessions.models import ApiKey
from project.chat_demo import AI_VERSION
from tests.support.api import make_user

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[1]


def test_the_page_pins_the_ai_version_the_node_tests_use():
    pinned = json.loads((ROOT / "tests/js/chat/package.json").read_text())["dependencies"]["ai"]
    assert pinned == AI_VERSION


def test_the_page_needs_a_login_and_carries_a_csrf_token(django_user_model):
    assert Client().get("/chat/").status_code == 302
    client = Client()
    client.force_login(make_user(django_user_model, "demo"))
    page = client.get("/chat/")
    assert page.status_code == 200
    assert f"https://esm.sh/ai@{AI_VERSION}" in page.content.decode()
    assert client.cookies["csrftoken"].value


def test_the_demo_endpoint_streams_the_fake_model_and_stores_the_turn(django_user_model):
    _, token = ApiKey.issue(make_user(django_user_model, "demo2"), "k")
    body = {"id": "demo-1", "trigger": "submit-message",
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi there"}]}]}  # fmt: skip
    response = Client().post(
        "/api/chat", json.dumps(body), content_type="application/json", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode()
    assert '"type":"reasoning-delta"' in text
    history = get_manager().get_session("demo-1").get_history()
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert history[1]["parts"][-1]["text"] == "You said: hi there "
