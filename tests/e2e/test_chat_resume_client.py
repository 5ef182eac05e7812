"""Resumable chat generations and session events with the real ``ai`` client (SPEC §10), against the compose
stack's ASGI server (gunicorn + uvicorn workers) with Redis configured.

``tests/js/chat/resume.test.mjs`` drives ``AbstractChat`` + ``DefaultChatTransport`` as ``useChat`` does: a reload
mid-answer (a second ``Chat`` resumes), two tabs on one chat, a stop mid-answer, ``onData`` receiving
``data-session-status`` parts, and a generation whose server is killed (``kill -9``) mid-answer and a resume
against a fresh server.  A subscriber to ``/api/sessions/{id}/events`` sees ``compacting`` then ``compacted``
from a real Celery worker's compaction.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
import redis
from django.conf import settings
from django.db import connection

from agent_sessions import registry
from agent_sessions.api.config import get_manager
from agent_sessions.conf import DEFAULTS
from agent_sessions.models import ApiKey, Message, SessionRecord
from tests import sessions_registry
from tests.conftest import msg
from tests.e2e.support import compactions_sent_to, start_worker
from tests.support.api import make_user
from tests.support.chat_server import asgi_process, node_project
from tests.support.live_server_settings import AGENT_SESSIONS_REDIS_URL as REDIS_URL

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
SETTINGS = "tests.support.live_server_settings"
LEASE = DEFAULTS["CHAT_LEASE_SECONDS"]  # the shipped lease: the server runs with it


def comparable(message: dict) -> dict:
    return {k: message.get(k) for k in ("id", "role", "parts", "metadata")}


def need_redis(url: str) -> None:
    try:
        redis.Redis.from_url(url).ping()
    except redis.ConnectionError:
        pytest.fail(f"no Redis at {url}") if os.environ.get("CI") else pytest.skip(f"no Redis at {url}")


def node(project, scenario: str, base: str, token: str, **env: str) -> subprocess.Popen:
    environ = {"CHAT_API": f"{base}/api/chat", "CHAT_TOKEN": token, "SCENARIO": scenario, **env}
    environ["PATH"] = "/usr/bin:/usr/local/bin:/bin"
    return subprocess.Popen([shutil.which("node") or "node", "resume.test.mjs"], cwd=project, env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def finished(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-4000:]
    return json.loads(out)


def stored(chat_id: str, message_id: str) -> dict:
    found = get_manager().get_session(chat_id).get_message(message_id)
    assert found is not None, f"{message_id} is not stored"
    return dict(found)


@pytest.fixture(scope="module")
def live_run(django_db_blocker):
    """One run of the ``live`` scenario; what the clients hold and what the store holds, read before the flush."""
    need_redis(REDIS_URL)
    project = node_project()
    with django_db_blocker.unblock():
        from django.contrib.auth import get_user_model

        user = make_user(get_user_model(), f"resume-{time.monotonic_ns()}")
        _, token = ApiKey.issue(user, "resume")
        with asgi_process(settings.DB, str(connection.settings_dict["NAME"]), settings=SETTINGS) as (base, _):
            out = finished(node(project, "live", base, token))
        chats = {out["reload"]["first"]["id"], out["tabs"]["tab1"]["id"], out["stop"]["id"]}
        trees = {
            chat_id: {m: stored(chat_id, m) for m in Message.objects.filter(session_id=chat_id).values_list(
                "message_id", flat=True)}
            for chat_id in chats
        }  # fmt: skip
    return out, trees


def test_a_reloaded_page_resumes_and_gets_the_whole_answer(live_run):
    out, trees = live_run
    first, second = out["reload"]["first"], out["reload"]["second"]
    assert first["status"] == second["status"] == "ready"
    assert first["messages"] == second["messages"]
    reply = first["messages"][-1]
    assert reply["parts"][1]["text"] == "".join(f"w{i} " for i in range(40))
    assert comparable(trees[first["id"]][reply["id"]]) == comparable(reply)
    assert len(trees[first["id"]]) == 2  # one user message, one reply: stored once for two watchers


def test_the_chat_streams_session_status_parts_reach_on_data(live_run):
    out, _ = live_run
    chat_id = out["reload"]["first"]["id"]
    status = [p for p in out["reload"]["data"] if p["type"] == "data-session-status"]
    assert status, out["reload"]["data"]
    assert {p["data"]["session_id"] for p in status} == {chat_id}
    assert all(p["data"]["type"] == "message" and p["data"]["tokenEstimate"] > 0 for p in status)
    assert all("data-session-status" not in json.dumps(m["parts"]) for m in out["reload"]["first"]["messages"])


def test_two_tabs_on_one_chat_end_with_the_same_messages(live_run):
    out, trees = live_run
    tab1, tab2, after = out["tabs"]["tab1"], out["tabs"]["tab2"], out["tabs"]["after"]
    assert tab1["messages"] == tab2["messages"]
    reply = tab1["messages"][-1]
    assert comparable(trees[tab1["id"]][reply["id"]]) == comparable(reply)
    assert after["status"] == "ready"
    assert [m["role"] for m in after["messages"]] == ["user", "assistant", "user", "assistant"]
    assert after["messages"][-1]["parts"][-1]["text"] == "Reply 1 to: and again"
    assert len(trees[tab1["id"]]) == 4


def test_stop_mid_answer_ends_both_watchers_and_stores_the_partial_marked_stopped(live_run):
    out, trees = live_run
    chat = out["stop"]
    assert chat["stopStatus"] == 204
    assert chat["status"] == chat["watcher"]["status"] == "ready"
    reply = chat["messages"][-1]
    assert chat["watcher"]["messages"] == chat["messages"]
    assert reply["metadata"] == {"partial": {"reason": "stopped"}}
    assert 2 < len(reply["parts"][1]["text"].split()) < 40
    assert comparable(trees[chat["id"]][reply["id"]]) == comparable(reply)
    assert chat["later"]["messages"] == [chat["messages"][0]]  # a resume afterwards: 204, nothing to add
    assert chat["later"]["status"] == "ready"


def test_a_killed_generation_is_stored_as_interrupted_and_a_resume_answers_204(django_user_model):
    need_redis(REDIS_URL)
    project = node_project()
    user = make_user(django_user_model, f"killed-{uuid.uuid4().hex[:6]}")
    _, token = ApiKey.issue(user, "kill")
    database, name = settings.DB, str(connection.settings_dict["NAME"])
    with asgi_process(database, name, settings=SETTINGS) as (base, server):
        client = node(project, "kill-start", base, token)
        assert client.stdout is not None
        line = client.stdout.readline()
        assert line.startswith("STREAMING "), client.communicate(timeout=10)[1][-2000:]
        _, chat_id, user_id = line.split()
        os.killpg(server.pid, signal.SIGKILL)  # the server and its worker, mid-answer
        server.wait(timeout=10)
        client.kill()
        client.wait()
    history = get_manager().get_session(chat_id).get_history()
    assert [m["id"] for m in history] == [user_id]  # the reply was never stored by its generation
    time.sleep(LEASE + 0.5)  # the bounded time: the lease lapses
    with asgi_process(database, name, settings=SETTINGS) as (base, _):
        resumed = finished(node(project, "kill-resume", base, token, CHAT_ID=chat_id, MESSAGES=json.dumps(history)))
        again = httpx.get(f"{base}/api/chat/{chat_id}/stream", headers={"Authorization": f"Bearer {token}"})
    assert resumed["status"] == "ready"
    assert [m["id"] for m in resumed["messages"]] == [user_id]  # 204: nothing to resume
    assert again.status_code == 204
    [reply] = [m for m in get_manager().get_session(chat_id).get_history() if m["role"] == "assistant"]
    assert reply["metadata"]["partial"] == {"reason": "interrupted"}
    assert reply["parts"][1]["text"].startswith("w0 w1 w2 w3 ")
    assert reply["parts"][1]["state"] == "done"


# ── session events from a real Celery worker ──────────────────────────────────────────────────────────────────

BROKER_URL = os.environ.get("AGENT_SESSIONS_E2E_REDIS_URL", "redis://127.0.0.1:6379/5")


@pytest.fixture
def worker(tmp_path, monkeypatch):
    """A celery worker on the live test database; it publishes session events on its broker's Redis."""
    need_redis(BROKER_URL)
    queue = f"agent-sessions-live-{uuid.uuid4().hex[:10]}"
    log = tmp_path / "worker.log"
    process = start_worker(log, settings_module="tests.worker_settings", broker_url=BROKER_URL, queue=queue,
                           node=queue, pool="threads", concurrency=1, summary_delay=1.0)  # fmt: skip
    with compactions_sent_to(process, log, BROKER_URL, queue, monkeypatch):
        yield log


def sse_events(lines: Iterator[str], until: str, deadline: float) -> list[dict]:
    found = []
    for line in lines:
        if line.startswith("data: "):
            found.append(json.loads(line[6:]))
            if found[-1]["type"] == "compaction" and until in found[-1]:
                return found
        assert time.monotonic() < deadline, f"only {found}"
    raise AssertionError(f"the stream ended after {found}")


def test_a_subscriber_sees_compacting_then_compacted_from_a_real_worker(worker, django_user_model):
    from tests.e2e.support import fill

    user = make_user(django_user_model, f"events-{uuid.uuid4().hex[:6]}")
    _, token = ApiKey.issue(user, "events")
    session_id = f"live-{uuid.uuid4().hex}"
    fill(session_id, 5)
    SessionRecord.objects.filter(id=session_id).update(owner=user)
    session = registry.get(sessions_registry.SLOW).get_session(session_id)
    # the server reads events from the worker's Redis (its broker: the worker's AGENT_SESSIONS_REDIS_URL fallback)
    with asgi_process(settings.DB, str(connection.settings_dict["NAME"]), settings=SETTINGS,
                      env={"AGENT_SESSIONS_LIVE_REDIS_URL": BROKER_URL}) as (base, _):  # fmt: skip
        url = f"{base}/api/sessions/{session_id}/events"
        with httpx.stream("GET", url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            for line in lines:
                if line == ": subscribed":
                    break
            assert session.append_message(msg("crossing", text="this one crosses the threshold " * 10)) is True
            got = sse_events(lines, "compacted", time.monotonic() + 90)
    compaction = [e for e in got if e["type"] == "compaction"]
    assert [e["phase"] for e in compaction[-2:]] == ["compacting", "idle"]
    done = compaction[-1]["compacted"]
    assert done["tokensAfter"] < done["tokensBefore"]
    assert all(e["session_id"] == session_id for e in got)
    assert [e["id"] for e in got] == sorted({e["id"] for e in got})
    assert session.get_compactions()  # the worker stored it
