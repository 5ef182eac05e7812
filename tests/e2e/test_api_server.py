"""The JSON API served by a real gunicorn process, driven over HTTP with httpx.

Gunicorn (from the venv) runs ``project.wsgi`` with the test settings and the
live test database, so what the test writes through the ORM (a user and its
key) is what the server reads, and vice versa.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection

from agent_sessions.models import ApiKey, Message
from scripts.load import free_port
from tests.support.chat_server import serving

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).parent / "gunicorn"
BIG_WORDS = 6000  # ~7,800 estimated tokens per message: past the default 20,000-token tail budget in a few turns


@pytest.fixture
def server():
    """``http://127.0.0.1:<port>`` of a gunicorn serving the project on the live test database."""
    if not GUNICORN.exists():
        pytest.fail(f"gunicorn is not installed in the venv ({GUNICORN}); see requirements.txt")
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "AGENT_SESSIONS_TEST_DB": settings.DB,
        "AGENT_SESSIONS_DB_NAME": str(connection.settings_dict["NAME"]),
    }
    process = subprocess.Popen(
        [
            str(GUNICORN),
            "project.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "4",
            "--timeout",
            "120",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    with serving(process, f"http://127.0.0.1:{port}", "gunicorn") as base:
        yield base


def text(mid: str, role: str, body: str) -> dict:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": body}]}


def test_conversation_over_http(server, django_user_model):
    user = django_user_model.objects.create_user("e2e", "e2e@example.com", "pw")
    _, token = ApiKey.issue(user, "e2e")
    headers = {"Authorization": f"Bearer {token}"}

    with httpx.Client(base_url=f"{server}/api", headers=headers, timeout=60) as client:
        assert httpx.get(f"{server}/api/sessions").status_code == 401  # no key

        created = client.post("/sessions", json={"name": "Kyoto trip", "model": "demo"})
        assert created.status_code == 201
        sid = created.json()["id"]

        filler = " ".join(["itinerary"] * BIG_WORDS)
        turns = [
            text("u1", "user", "Plan three days in Kyoto with temples and gardens."),
            text("a1", "assistant", "Day one: Nanzen-ji and the Philosopher's Path."),
            text("u2", "user", "What about day two?"),
            text("a2", "assistant", "Day two: Arashiyama bamboo grove and Tenryu-ji. " + filler),
            text("u3", "user", "And day three? " + filler),
            text("a3", "assistant", "Day three: Fushimi Inari at dawn. " + filler),
            text("u4", "user", "Thanks, book the ryokan. " + filler),
        ]
        for message in turns:
            assert client.post(f"/sessions/{sid}/messages", json={"message": message}).status_code == 201

        # Regenerate the first answer: a branch under u1.
        branch = client.post(
            f"/sessions/{sid}/messages",
            json={"message": text("a1-alt", "assistant", "Day one: Kinkaku-ji instead."), "parent_id": "u1"},
        )
        assert branch.status_code == 201
        branches = client.get(f"/sessions/{sid}/branches", params={"message_id": "u1"}).json()["messages"]
        assert [m["id"] for m in branches] == ["a1", "a1-alt"]
        assert client.get(f"/sessions/{sid}/leaf").json()["message"]["id"] == "a1-alt"

        hits = client.get("/search", params={"q": "Arashiyama bamboo"}).json()["results"]
        assert [(h["id"], h["session_id"]) for h in hits] == [("a2", sid)]

        # Compact the main line (leaf u4), asynchronously: 202, then poll the status.
        compact = client.post(f"/sessions/{sid}/compact", json={"leaf_id": "u4"})
        assert compact.status_code == 202
        status_url = compact.json()["status_url"]
        deadline = time.monotonic() + 60
        while (status := client.get(status_url.removeprefix("/api")).json())["status"] in {"pending", "running"}:
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        assert status["status"] == "succeeded", status
        [overlay] = client.get(f"/sessions/{sid}/compactions").json()["compactions"]

        history = client.get(f"/sessions/{sid}/history", params={"leaf_id": "u4"}).json()["messages"]
        ids = [m["id"] for m in history]
        assert ids[:3] == ["u1", "a1", "u2"]
        assert ids[-1] == "u4"
        assert f"compaction_{overlay['id']}" in ids
        assert len(ids) < 7
        summary = next(m for m in history if m["id"] == f"compaction_{overlay['id']}")
        assert summary["parts"][0]["text"] == overlay["summary"]
        assert overlay["summary"].strip()
        # The originals stay stored; the raw path still counts them.
        assert client.get(f"/sessions/{sid}/path-length", params={"leaf_id": "u4"}).json() == {"length": 7}

    assert Message.objects.filter(session_id=sid).count() == 8
