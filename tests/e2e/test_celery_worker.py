"""Auto-compaction on a real Celery worker process over the local Redis broker.

The worker runs ``tests.worker_settings`` pointed at this test's live database (read
from ``connection.settings_dict``) and imports ``tests.sessions_registry``, whose
``tests-slow`` configuration summarises slowly, so the test can see the append return
before the summary exists.  Each run uses its own queue on Redis db 5, so concurrent
runs (SQLite and Postgres) never steal each other's tasks.  Without Redis the test
skips, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest
from django.db import connections

from agent_sessions import Session, registry
from agent_sessions import tasks as jobs
from tests import sessions_registry
from tests.conftest import msg
from tests.e2e.support import compactions_sent_to, fill, redis_client, start_worker, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

BROKER_URL = os.environ.get("AGENT_SESSIONS_E2E_REDIS_URL", "redis://127.0.0.1:6379/5")
SUMMARY_DELAY = 1.5


@pytest.fixture
def worker(tmp_path, monkeypatch):
    """A celery worker on the live test database; the test process publishes to its queue."""
    client = redis_client(BROKER_URL)
    queue = f"agent-sessions-e2e-{uuid.uuid4().hex[:10]}"
    log = tmp_path / "worker.log"
    process = start_worker(
        log, settings_module="tests.worker_settings", broker_url=BROKER_URL, queue=queue, node=queue,
        pool="threads", concurrency=2, summary_delay=SUMMARY_DELAY,
        extra_env={"AGENT_SESSIONS_TEST_SUMMARY_HOLD": str(tmp_path / "hold-summaries")},
    )  # fmt: skip
    with compactions_sent_to(process, log, BROKER_URL, queue, monkeypatch):
        yield log, lambda: f"queue length {client.llen(queue)}"


def _compactions(session_id: str) -> list:
    return Session.create().for_session(session_id).get_compactions()


def test_append_returns_before_the_worker_stores_the_summary(worker, session_id, tmp_path):
    """Causal, not timed: the summariser is held, so an append that waited for it could not return."""
    log, queue_info = worker
    fill(session_id, 5)
    session = registry.get(sessions_registry.SLOW).get_session(session_id)
    assert session.compaction.estimate_tokens() <= sessions_registry.THRESHOLD
    hold = tmp_path / "hold-summaries"
    hold.touch()
    try:
        assert session.append_message(msg("crossing", text="this one crosses the threshold " * 10)) is True
        assert session.get_compactions() == []  # the summary does not exist yet
        assert jobs.get_compaction_status(session_id)["status"] in {"pending", "running"}
    finally:
        hold.unlink()

    [overlay] = wait_for(
        lambda: _compactions(session_id),
        60,
        "the overlay",
        log,
        lambda: f"{jobs.get_compaction_status(session_id)}; {queue_info()}",
    )
    assert overlay.summary == "SLOW SUMMARY"
    history = session.get_history()
    assert history[1]["id"] == f"compaction_{overlay.id}"
    assert history[-1]["id"] == "crossing"
    status = wait_for(
        lambda: (s := jobs.get_compaction_status(session_id))["status"] == "succeeded" and s,
        30,
        "the job to finish",
        log,
    )
    assert status["attempts"] == 1
    assert status["last_error"] == ""


def test_concurrent_triggers_produce_one_compaction(worker, session_id):
    log_path, queue_info = worker
    fill(session_id, 9)
    assert (
        registry.get(sessions_registry.SLOW).get_session(session_id).compaction.estimate_tokens()
        > sessions_registry.THRESHOLD
    )
    barrier = threading.Barrier(4)

    def trigger(kind: str) -> None:
        try:
            barrier.wait()
            if kind == "enqueue":  # what the admin and the API do (joins a queued request)
                jobs.enqueue_compaction(sessions_registry.SLOW, session_id, force=False)
            else:  # a duplicate delivery straight to the broker: only the lease stops it
                jobs.compact_session.apply_async(args=(sessions_registry.SLOW, session_id))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=trigger, args=(kind,)) for kind in ("enqueue", "enqueue", "raw", "raw")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    wait_for(
        lambda: _compactions(session_id),
        60,
        "the overlay",
        log_path,
        lambda: f"{jobs.get_compaction_status(session_id)}; {queue_info()}",
    )
    time.sleep(SUMMARY_DELAY * 2 + 1)  # room for any duplicate to (wrongly) finish a second summary
    assert len(_compactions(session_id)) == 1
    assert jobs.get_compaction_status(session_id)["status"] in {"succeeded", "idle"}
    log = log_path.read_text(errors="replace")
    assert log.count("'status': 'succeeded'") == 1, log[-4000:]
    # Several deliveries reached the worker (the enqueues may join into one task), and
    # every one but the summarising one backed off (lease held) or found nothing to do.
    received = log.count("compact_session[") - log.count("] succeeded in")
    assert received >= 2
    assert log.count("'status': 'busy'") + log.count("'status': 'idle'") >= received - 1
