"""What the Celery worker e2e tests share: Redis, waiting, starting a worker process, filling a session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from agent_sessions import Session
from tests.conftest import msg

ROOT = Path(__file__).resolve().parents[2]


def unavailable(reason: str, skip_reason: str | None = None) -> None:
    """Fail under CI (``CI`` set), else skip (with ``skip_reason`` when given)."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(skip_reason or reason)


def redis_client(url: str) -> Any:
    """A pinged Redis client for ``url``; without the server, see :func:`unavailable`."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001
        unavailable(f"Redis at {url} is unreachable: {exc}")
    return client


def wait_for(
    predicate: Callable[[], Any],
    timeout: float,
    what: str,
    log: Path | None = None,
    details: Callable[[], str] | None = None,
) -> Any:
    """``predicate()``'s first truthy value within ``timeout`` seconds; else fail with the worker log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
    extra = f"; {details()}" if details is not None else ""
    pytest.fail(f"timed out waiting for {what}{extra}\n--- worker log ---\n{tail}")


def start_worker(
    log: Path,
    *,
    settings_module: str,
    broker_url: str,
    queue: str,
    node: str,
    pool: str,
    concurrency: int,
    summary_delay: float,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """A celery worker on the live test database consuming ``queue`` (own process group, output to ``log``)."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings_module,
        "PYTHONPATH": str(ROOT),
        "AGENT_SESSIONS_TEST_DB": "postgres" if connection.vendor == "postgresql" else "sqlite",
        "AGENT_SESSIONS_WORKER_DB_NAME": str(connection.settings_dict["NAME"]),
        "AGENT_SESSIONS_WORKER_BROKER_URL": broker_url,
        "AGENT_SESSIONS_WORKER_QUEUE": queue,
        "AGENT_SESSIONS_TEST_SUMMARY_DELAY": str(summary_delay),
        **(extra_env or {}),
    }
    command = [
        str(Path(sys.executable).with_name("celery")), "-A", "project", "worker", f"--pool={pool}",
        f"--concurrency={concurrency}", "-Q", queue, "-l", "info", "--without-mingle", "--without-gossip",
        "--without-heartbeat", "-n", f"{node}@%h",
    ]  # fmt: skip
    with log.open("w") as out:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip


def wait_ready(process: subprocess.Popen, log: Path, what: str) -> None:
    """Wait until the worker logs ``ready.`` (fail if it exits first)."""
    wait_for(lambda: process.poll() is not None or "ready." in log.read_text(errors="replace"), 60, what, log)
    assert process.poll() is None, log.read_text(errors="replace")


def use_broker(app: Any, url: str, eager: bool) -> None:
    """Point the Celery app at ``url``, forgetting pools cached for the old one.

    The pools are not closed: kombu keeps producer pools in a global registry keyed by
    URL, and a closed one would be handed out again on the next switch to that URL.
    """
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.update(broker_url=url, task_always_eager=eager)


@contextmanager
def compactions_sent_to(
    process: subprocess.Popen, log: Path, broker_url: str, queue: str, monkeypatch
) -> Iterator[None]:
    """While in the block, this process's compaction tasks go to the worker ``process`` (on ``queue`` of
    ``broker_url``); after it, the Celery app is restored, the worker stopped and its queue deleted."""
    from agent_sessions import tasks as jobs

    app = jobs.compact_session.app
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager")}
    try:
        wait_ready(process, log, "the worker to start")
        use_broker(app, broker_url, eager=False)
        publish = jobs.compact_session.apply_async
        monkeypatch.setattr(jobs.compact_session, "apply_async", lambda *a, **k: publish(*a, **{**k, "queue": queue}))
        yield
    finally:
        use_broker(app, saved["broker_url"], saved["task_always_eager"])
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        redis_client(broker_url).delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")


def fill(session_id: str, n: int) -> None:
    """Messages under the tests' configuration threshold, appended without any trigger."""
    plain = Session.create().for_session(session_id)
    for i in range(n):
        plain.append_message(msg(f"m{i}", "user" if i % 2 == 0 else "assistant", " ".join([f"word{i}"] * 10)))
