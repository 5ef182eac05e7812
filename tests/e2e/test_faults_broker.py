"""The broker down, then back; the broker hung (SIGSTOP): on the shipped settings, no beat.

Each test starts its own ``redis-server`` on a free port (so the shared Redis is never
stopped) and points this process's Celery app, and the worker it starts, at it.

* Down for 30 s: appends keep working, the job stays ``pending`` (nothing published),
  ``compact_sessions`` says "failed to publish" and exits non-zero; once Redis is back,
  with no further append and no beat, the worker's own sweep re-sends the job and the
  session compacts.
* Hung: the post-commit publish gives up after ``AGENT_SESSIONS_ENQUEUE_TIMEOUT_SECONDS``
  (1 s): the append returns within 2 s and the job waits, pending, for a later send.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agent_sessions import conf, registry
from agent_sessions import tasks as jobs
from tests import sessions_registry
from tests.conftest import msg
from tests.e2e.support import fill, start_worker, unavailable, wait_for, wait_ready

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

OUTAGE = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivateRedis:
    """A redis-server of this test only: start, stop, pause (SIGSTOP) and resume."""

    def __init__(self, tmp_path: Path) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            unavailable("redis-server is not installed")
        self.port = _free_port()
        self.dir = tmp_path
        self.process: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.dir)]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._answers, 20, "the private redis-server to answer")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(timeout=10)

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)


def _use_broker(url: str) -> None:
    app = jobs.compact_session.app
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.update(broker_url=url, task_always_eager=False)


@pytest.fixture
def redis_server(tmp_path):
    server = PrivateRedis(tmp_path)
    server.start()
    app = jobs.compact_session.app
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager")}
    _use_broker(server.url)
    try:
        yield server
    finally:
        server.stop()
        app._pool = None
        app.amqp._producer_pool = None
        app.conf.update(saved)


def test_the_shipped_bounds():
    from django.conf import settings

    assert conf.enqueue_timeout_seconds() == 1.0
    assert conf.compaction_sweep_seconds() == 30
    assert settings.CELERY_BROKER_CONNECTION_TIMEOUT == 2
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["socket_timeout"] == 5


def test_hung_broker_append_returns_within_two_seconds(redis_server, session_id):
    session = registry.get(sessions_registry.FAST).get_session(session_id)
    fill(session_id, 5)
    jobs.compact_session.app.connection_for_write().ensure_connection(max_retries=1)  # a warm pool, as in production
    redis_server.pause()
    try:
        started = time.monotonic()
        assert session.append_message(msg("crossing", text="this one crosses the threshold " * 10)) is True
        took = time.monotonic() - started
        status = jobs.get_compaction_status(session_id)
    finally:
        redis_server.resume()
    assert took <= 2.0, f"the append waited {took:.1f}s on a hung broker"
    assert status["status"] == "pending"
    assert status["enqueued_at"] is None
    assert "EnqueueTimeout" in status["last_error"]
    assert session.get_message("crossing") is not None


def test_broker_down_thirty_seconds_then_back_compacts_without_beat(redis_server, session_id, tmp_path):
    queue = f"agent-sessions-down-{uuid.uuid4().hex[:10]}"
    log = tmp_path / "worker.log"
    worker = start_worker(
        log, settings_module="tests.worker_settings", broker_url=redis_server.url, queue=queue, node=queue,
        pool="prefork", concurrency=1, summary_delay=0.1,
    )  # fmt: skip
    try:
        wait_ready(worker, log, "the worker to start")
        fill(session_id, 5)
        session = registry.get(sessions_registry.FAST).get_session(session_id)
        redis_server.stop()
        went_down = time.monotonic()
        for i in range(3):  # the crossing and two more: all stored, none published
            started = time.monotonic()
            assert session.append_message(msg(f"x{i}", text="this one crosses the threshold " * 10)) is True
            assert time.monotonic() - started <= 2.0
        status = jobs.get_compaction_status(session_id)
        assert status["status"] == "pending"
        assert status["enqueued_at"] is None
        assert "enqueue failed" in status["last_error"]
        with pytest.raises(CommandError, match="could not publish"):
            call_command("compact_sessions", session_id, "--config", sessions_registry.FAST, "--no-progress")
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - went_down)))
        assert session.get_compactions() == []

        redis_server.start()  # back, on the same port; no append, no beat from here on
        back = time.monotonic()
        [overlay] = wait_for(lambda: session.get_compactions(), 120, "the compaction after the outage", log)
        recovered = time.monotonic() - back
        assert overlay.summary == "FAST SUMMARY"
        # The overlay commits first; the job row is marked done when the worker releases its lease.
        wait_for(lambda: jobs.get_compaction_status(session_id)["status"] == "succeeded", 30, "the job to finish", log)
        assert recovered < 2 * conf.compaction_sweep_seconds() + 30, recovered
        assert [m["id"] for m in session.get_history()][-1] == "x2"
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(timeout=5)
