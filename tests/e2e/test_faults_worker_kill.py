"""Celery workers killed with SIGKILL in the middle of a compaction, on the shipped settings.

A real prefork worker (``tests.worker_settings``: the live test database, Redis, a private
queue; lease, heartbeat and visibility timeout as shipped) runs the auto-compaction task
and sleeps in the summariser.  Two kills, each ending with exactly one overlay:

* the pool child only (what the OOM killer does): the parent requeues the task
  (``reject_on_worker_lost``), a new child receives it, finds the lease's holder dead
  (its pid is gone) and takes the job over at once;
* the whole process group: nothing is acknowledged, nothing is requeued; the next worker
  to start re-sends the orphaned job from its startup sweep (no beat, no waiting for the
  900 s visibility timeout).

Without Redis the test skips, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from agent_sessions import conf, registry
from agent_sessions import tasks as jobs
from tests import sessions_registry
from tests.conftest import msg
from tests.e2e.support import fill, redis_client, start_worker, wait_for, wait_ready

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

BROKER_URL = os.environ.get("AGENT_SESSIONS_FAULTS_WORKER_REDIS_URL", "redis://127.0.0.1:6379/10")
SUMMARY_DELAY = 4.0
RECOVERY_BOUND = 45.0  # seconds from the kill to the overlay (well under the 60 s lease)


class Workers:
    """Start prefork celery workers on one private queue; kill them; clean up."""

    def __init__(self, tmp_path: Path, queue: str) -> None:
        self.tmp_path = tmp_path
        self.queue = queue
        self.processes: list[subprocess.Popen] = []

    def start(self, name: str) -> Path:
        log = self.tmp_path / f"{name}.log"
        process = start_worker(
            log, settings_module="tests.worker_settings", broker_url=BROKER_URL, queue=self.queue,
            node=f"{name}-{self.queue}", pool="prefork", concurrency=1, summary_delay=SUMMARY_DELAY,
        )  # fmt: skip
        self.processes.append(process)
        wait_ready(process, log, f"worker {name} to start")
        return log

    def kill_group(self, index: int) -> None:
        os.killpg(self.processes[index].pid, signal.SIGKILL)
        self.processes[index].wait(timeout=10)

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=5)


@pytest.fixture
def workers(tmp_path, monkeypatch):
    client = redis_client(BROKER_URL)
    queue = f"agent-sessions-kill-{uuid.uuid4().hex[:10]}"
    pool = Workers(tmp_path, queue)
    app = jobs.compact_session.app
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager")}
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.update(broker_url=BROKER_URL, task_always_eager=False)
    publish = jobs.compact_session.apply_async
    monkeypatch.setattr(jobs.compact_session, "apply_async", lambda *a, **k: publish(*a, **{**k, "queue": queue}))
    try:
        yield pool
    finally:
        pool.stop_all()
        app._pool = None
        app.amqp._producer_pool = None
        app.conf.update(saved)
        client.delete(queue, f"_kombu.binding.{queue}", "unacked", "unacked_index")


def _start_a_compaction(workers: Workers, session_id: str):
    log = workers.start("first")
    fill(session_id, 5)
    session = registry.get(sessions_registry.SLOW).get_session(session_id)
    assert session.append_message(msg("crossing", text="this one crosses the threshold " * 10)) is True
    running = wait_for(
        lambda: (s := jobs.get_compaction_status(session_id))["status"] == "running" and s, 60, "the run to start", log
    )
    time.sleep(0.5)  # inside the summariser
    return session, log, running


def _exactly_one_overlay(session, session_id: str, killed_at: float, log: Path) -> None:
    [overlay] = wait_for(lambda: session.get_compactions(), RECOVERY_BOUND, "the overlay after the kill", log)
    assert time.monotonic() - killed_at < RECOVERY_BOUND
    assert overlay.summary == "SLOW SUMMARY"
    wait_for(lambda: _settled(session_id), 30, "the job to finish", log)
    time.sleep(SUMMARY_DELAY + 1)  # room for a duplicate run to (wrongly) store a second overlay
    assert len(session.get_compactions()) == 1
    status = wait_for(lambda: _settled(session_id), 30, "the duplicate run to finish", log)
    assert status["attempts"] >= 1


def _settled(session_id: str) -> dict | None:
    """The job's status once no run holds it: "succeeded", or "idle" when the requeued delivery
    of the killed task ran after the takeover and (rightly) found nothing left to compact."""
    status = jobs.get_compaction_status(session_id)
    if status["holder"] or status["status"] in ("pending", "running"):
        return None
    assert status["status"] in ("succeeded", "idle"), status
    return status


def test_shipped_settings_of_these_drills():
    from django.conf import settings

    assert conf.compaction_lease_seconds() == 60
    assert settings.CELERY_TASK_ACKS_LATE
    assert settings.CELERY_TASK_REJECT_ON_WORKER_LOST
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] == 900


def test_pool_child_killed_mid_compaction_is_taken_over_at_once(workers, session_id):
    session, log, running = _start_a_compaction(workers, session_id)
    child_pid = int(running["holder"].split(":")[1])
    assert child_pid != workers.processes[0].pid  # the pool child, not the parent
    os.kill(child_pid, signal.SIGKILL)
    killed_at = time.monotonic()
    for i in range(3):  # appends go on meanwhile
        assert session.append_message(msg(f"late{i}", text="more words after the crash")) is True
    _exactly_one_overlay(session, session_id, killed_at, log)
    text = log.read_text(errors="replace")
    assert "took over the compaction" in text, text[-3000:]
    ids = [m["id"] for m in session.get_history()]
    assert ids[-3:] == ["late0", "late1", "late2"]
    assert ids[0] == "m0"


def test_whole_worker_group_killed_mid_compaction_recovers_when_a_worker_starts(workers, session_id):
    session, first, running = _start_a_compaction(workers, session_id)
    workers.kill_group(0)
    killed_at = time.monotonic()
    assert session.get_compactions() == []
    assert jobs.get_compaction_status(session_id)["status"] == "running"  # orphaned: its holder is dead
    second = workers.start("second")
    _exactly_one_overlay(session, session_id, killed_at, second)
    text = second.read_text(errors="replace")
    assert "re-sent 1 compaction job" in text, text[-3000:]
