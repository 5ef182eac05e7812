"""A Celery worker killed with SIGKILL in the middle of a compaction (issue #9).

A real worker (``scripts/fault_worker_settings.py``: the live test database, Redis db 10,
a private queue) picks up the auto-compaction task and sleeps in the summariser; the test
kills the worker's whole process group with SIGKILL, so nothing is acknowledged
(``acks_late``).  A new worker started afterwards receives the redelivered task once the
Redis visibility timeout has passed, takes over the expired lease and stores the overlay:
exactly one, and the appends made meanwhile are all kept.

Without Redis the test skips, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from agent_sessions import registry
from agent_sessions import tasks as jobs
from tests import sessions_registry
from tests.conftest import msg
from tests.e2e.support import fill, redis_client, start_worker, wait_for, wait_ready

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

TASK_ID = re.compile(r"agent_sessions\.tasks\.compact_session\[([0-9a-f-]{36})\] received")
BROKER_URL = os.environ.get("AGENT_SESSIONS_FAULTS_WORKER_REDIS_URL", "redis://127.0.0.1:6379/10")
SUMMARY_DELAY = 4.0
VISIBILITY_TIMEOUT = 6.0
LEASE_SECONDS = 4.5


class Workers:
    """Start celery workers on one private queue; kill them; clean up."""

    def __init__(self, tmp_path: Path, queue: str) -> None:
        self.tmp_path = tmp_path
        self.queue = queue
        self.processes: list[subprocess.Popen] = []

    def start(self, name: str) -> Path:
        log = self.tmp_path / f"{name}.log"
        process = start_worker(
            log, settings_module="scripts.fault_worker_settings", broker_url=BROKER_URL, queue=self.queue,
            node=f"{name}-{self.queue}", pool="prefork", concurrency=1, summary_delay=SUMMARY_DELAY,
            extra_env={
                "AGENT_SESSIONS_FAULT_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
                "AGENT_SESSIONS_FAULT_LEASE_SECONDS": str(LEASE_SECONDS),
            },
        )
        self.processes.append(process)
        wait_ready(process, log, f"worker {name} to start")
        return log

    def kill9(self, index: int) -> None:
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
def workers(tmp_path, monkeypatch, settings):
    client = redis_client(BROKER_URL, missing_skip="no redis client")
    queue = f"agent-sessions-kill-{uuid.uuid4().hex[:10]}"
    pool = Workers(tmp_path, queue)
    app = jobs.compact_session.app
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager")}
    settings.AGENT_SESSIONS_COMPACTION_LEASE_SECONDS = LEASE_SECONDS
    app.conf.update(broker_url=BROKER_URL, task_always_eager=False)
    publish = jobs.compact_session.apply_async
    monkeypatch.setattr(jobs.compact_session, "apply_async", lambda *a, **k: publish(*a, **{**k, "queue": queue}))
    try:
        yield pool
    finally:
        pool.stop_all()
        app.conf.update(saved)
        keys = [queue, f"_kombu.binding.{queue}"]
        client.delete(*keys)


def test_worker_killed_mid_compaction_the_task_is_redelivered_and_stores_one_overlay(workers, session_id):
    first = workers.start("first")
    fill(session_id, 5)
    session = registry.get(sessions_registry.SLOW).get_session(session_id)
    assert session.append_message(msg("crossing", text="this one crosses the threshold " * 10)) is True

    # The worker is inside the summariser (job running, no overlay yet): kill everything.
    wait_for(lambda: jobs.get_compaction_status(session_id)["status"] == "running", 30, "the run to start", first)
    wait_for(lambda: "compact_session[" in first.read_text(errors="replace"), 10, "the task in the log", first)
    time.sleep(0.5)
    workers.kill9(0)
    killed_at = time.monotonic()
    assert session.get_compactions() == []
    assert "succeeded" not in first.read_text(errors="replace")
    assert jobs.get_compaction_status(session_id)["status"] == "running"  # the dead run's lease

    # Appends go on while no worker runs.
    for i in range(3):
        assert session.append_message(msg(f"late{i}", text="more words after the crash")) is True

    second = workers.start("second")
    [overlay] = wait_for(lambda: session.get_compactions(), 60, "the redelivered task's overlay", second)
    redelivered_after = time.monotonic() - killed_at
    assert overlay.summary == "SLOW SUMMARY"
    wait_for(lambda: jobs.get_compaction_status(session_id)["status"] == "succeeded", 30, "the job to finish", second)
    time.sleep(SUMMARY_DELAY + 1)  # room for any duplicate run to (wrongly) store a second overlay
    assert len(session.get_compactions()) == 1
    log = second.read_text(errors="replace")
    assert "'status': 'succeeded'" in log, log[-3000:]
    # The very task the killed worker had received is the one the new worker ran.
    [task_id] = set(TASK_ID.findall(first.read_text(errors="replace")))
    assert task_id in TASK_ID.findall(log), log[-3000:]
    status = jobs.get_compaction_status(session_id)
    assert status["attempts"] >= 2  # the killed run and the redelivered one
    ids = [m["id"] for m in session.get_history()]
    assert ids[-3:] == ["late0", "late1", "late2"] and ids[0] == "m0"
    assert redelivered_after >= VISIBILITY_TIMEOUT - 2  # it came back through the broker, not a retry in place
