"""The dispatch path without eager Celery: on_commit publishing, retries with backoff on a
real worker, the API's asynchronous compaction (202, then poll) served by a real worker,
and the sweeper re-sending an expired named job.

The worker runs ``tests.worker_settings`` (shipped Celery and compaction settings: 5 retries,
exponential backoff with jitter) on a private queue of this test's Redis database.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from agent_sessions import conf, registry
from agent_sessions import tasks as jobs
from agent_sessions.models import CompactionJob
from tests import sessions_registry
from tests.conftest import msg
from tests.e2e.support import fill, redis_client, start_worker, use_broker, wait_for, wait_ready

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

BROKER_URL = os.environ.get("AGENT_SESSIONS_E2E_REDIS_URL", "redis://127.0.0.1:6379/5")
FAIL_FIRST = 2


@pytest.fixture
def queue(monkeypatch):
    client = redis_client(BROKER_URL)
    name = f"agent-sessions-dispatch-{uuid.uuid4().hex[:10]}"
    app = jobs.compact_session.app
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager")}
    use_broker(app, BROKER_URL, eager=False)
    publish = jobs.compact_session.apply_async
    monkeypatch.setattr(jobs.compact_session, "apply_async", lambda *a, **k: publish(*a, **{**k, "queue": name}))
    try:
        yield name
    finally:
        use_broker(app, saved["broker_url"], saved["task_always_eager"])
        client.delete(name, f"_kombu.binding.{name}")


@pytest.fixture
def worker(queue, tmp_path):
    log = tmp_path / "worker.log"
    process = start_worker(
        log, settings_module="tests.worker_settings", broker_url=BROKER_URL, queue=queue, node=queue,
        pool="prefork", concurrency=1, summary_delay=0.2,
        extra_env={"AGENT_SESSIONS_TEST_FAIL_FIRST": str(FAIL_FIRST)},
    )  # fmt: skip
    try:
        wait_ready(process, log, "the worker to start")
        yield log
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


@pytest.mark.django_db  # (no transaction=True: the callbacks are captured, not run at a real commit)
def test_the_publish_is_an_on_commit_callback(queue, session_id, django_capture_on_commit_callbacks, monkeypatch):
    sent = []
    monkeypatch.setattr(jobs.compact_session, "apply_async", lambda *a, **k: sent.append(k))
    fill(session_id, 5)
    session = registry.get(sessions_registry.FAST).get_session(session_id)
    with django_capture_on_commit_callbacks() as callbacks:
        assert session.append_message(msg("crossing", text="this one crosses the threshold " * 10)) is True
    assert len(callbacks) == 1
    assert sent == []
    callbacks[0]()
    assert len(sent) == 1
    assert sent[0]["args"][:2] == (sessions_registry.FAST, session_id)
    job = CompactionJob.objects.get(session_id=session_id)
    assert job.status == "pending"
    assert job.enqueued_at is not None


def test_the_publish_happens_at_the_real_commit(queue, session_id, monkeypatch):
    sent = []
    monkeypatch.setattr(jobs.compact_session, "apply_async", lambda *a, **k: sent.append(k))
    fill(session_id, 5)
    session = registry.get(sessions_registry.FAST).get_session(session_id)
    with transaction.atomic():
        assert session.append_message(msg("crossing", text="this one crosses the threshold " * 10)) is True
        assert sent == []  # nothing published inside the transaction
    assert len(sent) == 1


def test_a_rolled_back_append_publishes_nothing(queue, session_id, django_capture_on_commit_callbacks, monkeypatch):
    sent = []
    monkeypatch.setattr(jobs.compact_session, "apply_async", lambda *a, **k: sent.append(k))
    fill(session_id, 5)
    session = registry.get(sessions_registry.FAST).get_session(session_id)

    def append_then_roll_back() -> None:
        with transaction.atomic():
            session.append_message(msg("crossing", text="this one crosses the threshold " * 10))
            raise RuntimeError("rolled back")

    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError, match="rolled back"),
    ):
        append_then_roll_back()
    assert callbacks == []
    assert sent == []
    assert session.get_message("crossing") is None


def test_transient_failures_are_retried_with_backoff_on_a_real_worker(worker, session_id):
    assert conf.compaction_max_retries() == 5  # shipped: room for the two injected failures
    fill(session_id, 5)
    session = registry.get(sessions_registry.FAST).get_session(session_id)
    assert session.append_message(msg("crossing", text="this one crosses the threshold " * 10)) is True
    [overlay] = wait_for(lambda: session.get_compactions(), 120, "the overlay after the retries", worker)
    assert overlay.summary == "FAST SUMMARY"
    status = wait_for(lambda: (s := jobs.get_compaction_status(session_id))["status"] == "succeeded" and s, 30,
                      "the job to succeed", worker)  # fmt: skip
    assert status["attempts"] == FAIL_FIRST + 1
    log = worker.read_text(errors="replace")
    retries = re.findall(r"Retry in (\d+(?:\.\d+)?)s", log)
    assert len(retries) == FAIL_FIRST, log[-3000:]  # each failure re-queued with a countdown (backoff, jittered)
    assert all(float(r) <= 2 ** (i + 1) for i, r in enumerate(retries))
    assert "injected outage 1" in log
    assert "injected outage 2" in log


def test_api_compaction_202_then_poll_is_served_by_the_worker(worker, api):
    sid = api.new_session("async")
    for i in range(12):  # beyond the default 20,000-token tail budget
        body = {"message": msg(f"u{i}", "user" if i % 2 == 0 else "assistant", f"line {i} " * 1500)}
        assert api.post(f"/sessions/{sid}/messages", body).status_code == 201
    response = api.post(f"/sessions/{sid}/compact")
    assert response.status_code == 202, response.content
    assert response.json()["status"] in {"pending", "running"}  # not run in this process

    def done():
        poll = api.get(f"/sessions/{sid}/compact").json()
        return poll["status"] in {"succeeded", "failed"} and poll

    final = wait_for(done, 90, "the worker to compact the API session", worker)
    # The 202 said pending or running, and the poll reads the outcome. A fast worker may finish
    # before the first poll, so one poll is enough (asking for two failed CI on a 2-core VM).
    assert final["status"] == "succeeded", final
    assert len(api.get(f"/sessions/{sid}/compactions").json()["compactions"]) == 1
    assert "compact_session[" in worker.read_text(errors="replace")  # the worker ran it, not this process


def test_the_sweeper_resends_an_expired_named_job(queue, session_id, monkeypatch):
    sent = []
    monkeypatch.setattr(jobs.compact_session, "apply_async", lambda *a, **k: sent.append(k))
    fill(session_id, 9)
    token = jobs.acquire_lease(session_id, config_name=sessions_registry.FAST, label="gone-elsewhere")
    CompactionJob.objects.filter(session_id=session_id).update(
        holder="another-host:1:1:gone", lease_until=timezone.now() - timedelta(seconds=1)
    )  # its holder vanished on another host: only the expiry tells
    assert token
    assert jobs.sweep_pending_compactions() == 1
    assert len(sent) == 1
    assert sent[0]["args"] == (sessions_registry.FAST, session_id, None)
    job = CompactionJob.objects.get(session_id=session_id)
    assert job.status == "pending"
    assert job.holder == ""
    assert job.enqueued_at is not None
    assert jobs.sweep_pending_compactions() == 0  # published and within the grace period: left alone


def test_compact_sessions_reports_what_it_sent(queue, session_id, monkeypatch):
    from io import StringIO

    from django.core.management import call_command

    sent = []
    monkeypatch.setattr(jobs.compact_session, "apply_async", lambda *a, **k: sent.append(k))
    fill(session_id, 5)
    out = StringIO()
    call_command("compact_sessions", session_id, "--config", sessions_registry.FAST, "--no-progress", stdout=out)
    assert "Compaction: 1 published." in out.getvalue()
    assert len(sent) == 1
    out = StringIO()
    call_command("compact_sessions", session_id, "--config", sessions_registry.FAST, "--no-progress", stdout=out)
    assert "Compaction: 1 skipped (already queued or running)." in out.getvalue()
    assert len(sent) == 1
