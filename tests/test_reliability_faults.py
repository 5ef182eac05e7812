"""Faults that must not lose anything: the broker down, a dropped database connection.

* Redis down: the Celery broker points at a closed port on 127.0.0.1.  Appends still
  succeed and the crossing triggers a compaction job that stays ``pending``; once the
  broker is the real Redis (db 9, a private queue) the periodic sweep publishes the task
  for real, and running the delivered message produces the overlay.
* Dropped connection (Postgres): ``pg_terminate_backend`` on the app's own backend.  The
  call in flight fails (not acknowledged); at the next request boundary Django drops the
  dead connection and the next call succeeds.  With ``CONN_HEALTH_CHECKS`` a persistent
  connection is replaced before any error reaches the caller.  Nothing acknowledged is lost.

Without Redis the broker test skips, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import time
import uuid

import psycopg
import pytest
from django.db import DatabaseError, close_old_connections, connection

from agent_sessions import Session, registry
from agent_sessions import tasks as jobs
from tests import sessions_registry
from tests.conftest import msg

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

REDIS_URL = os.environ.get("AGENT_SESSIONS_FAULTS_REDIS_URL", "redis://127.0.0.1:6379/9")


def _redis():
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("CI"):
            pytest.fail(f"Redis at {REDIS_URL} is unreachable: {exc}")
        pytest.skip(f"Redis at {REDIS_URL} is unreachable: {exc}")
    return client


def _closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _point_broker_at(app, url: str) -> None:
    """Switch the Celery app's broker and drop its cached connection and producer pools."""
    for pool in (app._pool, app.amqp._producer_pool):
        if pool is not None:
            with contextlib.suppress(Exception):  # a pool that never connected
                pool.force_close_all()
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.update(broker_url=url, task_always_eager=False)  # timeouts and retries as shipped


@pytest.fixture
def broker(monkeypatch):
    """Yields a function that points the broker at a URL; restores eager mode afterwards."""
    app = jobs.compact_session.app
    keys = ("broker_url", "task_always_eager")
    saved = {key: app.conf[key] for key in keys}
    yield lambda url: _point_broker_at(app, url)
    _point_broker_at(app, saved["broker_url"])
    app.conf.update(saved)


def test_redis_down_appends_succeed_and_the_sweep_recovers_the_compaction(broker, monkeypatch, settings, session_id):
    client = _redis()
    queue = f"agent-sessions-faults-{uuid.uuid4().hex[:10]}"
    publish = jobs.compact_session.apply_async
    monkeypatch.setattr(jobs.compact_session, "apply_async", lambda *a, **k: publish(*a, **{**k, "queue": queue}))
    sessions_registry.ERRORS.clear()
    session = registry.get(sessions_registry.FAST).get_session(session_id)

    broker(f"redis://127.0.0.1:{_closed_port()}/9")
    acked, slowest = [], 0.0
    for i in range(12):  # crosses the threshold part-way: every append after that wants a compaction
        started = time.monotonic()
        assert session.append_message(msg(f"m{i}", "user" if i % 2 == 0 else "assistant", f"word{i} " * 12))
        slowest = max(slowest, time.monotonic() - started)
        acked.append(f"m{i}")
    assert [m["id"] for m in session.get_history()] == acked  # every append stored
    assert slowest <= 2, f"an append waited {slowest:.1f}s for the dead broker"
    status = jobs.get_compaction_status(session_id)
    assert status["status"] == "pending"
    assert "enqueue failed" in status["last_error"]
    assert session.get_compactions() == []
    assert sessions_registry.ERRORS, "the enqueue failure reached on_compaction_error"

    broker(REDIS_URL)  # nothing was published, so the sweep re-sends it at once (no grace period)
    try:
        assert jobs.sweep_pending_compactions() == 1
        raw = client.lpop(queue)
        assert raw is not None, "the sweep published nothing to Redis"
        envelope = json.loads(raw)
        assert envelope["headers"]["task"] == "agent_sessions.tasks.compact_session"
        args, kwargs, _ = json.loads(base64.b64decode(envelope["body"]))
        assert args[:2] == [sessions_registry.FAST, session_id]
        # What a worker does with the delivered message:
        result = jobs.compact_session.apply(args=args, kwargs=kwargs).get()
    finally:
        client.delete(queue, f"_kombu.binding.{queue}")
    assert result["status"] == "succeeded"
    [overlay] = session.get_compactions()
    assert overlay.summary == "FAST SUMMARY"
    assert jobs.get_compaction_status(session_id)["status"] == "succeeded"
    assert {m["id"] for m in session.get_history()} >= {acked[0], acked[-1]}


def _terminate_backend(pid: int) -> None:
    """Kill a backend from a separate superuser connection, and wait until it is gone."""
    params = connection.get_connection_params()
    with psycopg.connect(
        host=params.get("host"), port=params.get("port"), user=params.get("user"), dbname="postgres", autocommit=True
    ) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]
        for _ in range(50):
            if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
                return
            time.sleep(0.05)


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


@pytest.mark.postgres_only
def test_terminated_backend_next_call_reconnects_nothing_acknowledged_lost(session_id):
    session = Session.create().for_session(session_id)
    acked = [f"a{i}" for i in range(5)]
    for mid in acked:
        assert session.append_message(msg(mid))
    old_pid = _backend_pid()
    _terminate_backend(old_pid)

    # No request boundary, no health checks: the library sees the server closed the idle
    # connection and reconnects before the next call (a worker or agent loop keeps going).
    assert session.append_message(msg("after-terminate")) is True
    assert _backend_pid() != old_pid
    assert session.append_message(msg("after")) is True
    ids = [m["id"] for m in session.get_history()]
    assert ids == [*acked, "after-terminate", "after"]  # nothing acknowledged lost, nothing doubled


@pytest.mark.postgres_only
def test_a_read_that_fails_on_a_dead_connection_is_retried_once(session_id, monkeypatch):
    from agent_sessions.storage import postgres

    session = Session.create().for_session(session_id)
    assert session.append_message(msg("a0"))
    monkeypatch.setattr(postgres, "server_closed", lambda raw: False)  # no pre-check: the read fails
    _terminate_backend(_backend_pid())
    assert [m["id"] for m in session.get_history()] == ["a0"]  # failed once, retried on a fresh connection
    _terminate_backend(_backend_pid())
    with pytest.raises(DatabaseError):  # a write is not retried blindly: it may have landed
        session.append_message(msg("w"))
    connection.close()


@pytest.mark.postgres_only
def test_health_checks_replace_a_dead_persistent_connection_before_the_call(session_id):
    saved = {k: connection.settings_dict[k] for k in ("CONN_MAX_AGE", "CONN_HEALTH_CHECKS")}
    connection.settings_dict.update(CONN_MAX_AGE=None, CONN_HEALTH_CHECKS=True)
    connection.close()
    try:
        session = Session.create().for_session(session_id)
        for i in range(3):
            close_old_connections()  # each "request"
            assert session.append_message(msg(f"h{i}"))
            old_pid = _backend_pid()
            _terminate_backend(old_pid)
        close_old_connections()
        assert session.append_message(msg("h-final"))  # no error at all: the health check reconnected
        assert _backend_pid() != old_pid
        assert [m["id"] for m in session.get_history()] == ["h0", "h1", "h2", "h-final"]
    finally:
        connection.close()
        connection.settings_dict.update(saved)


@pytest.mark.postgres_only
def test_api_answers_503_with_retry_after_while_the_database_is_down(django_user_model):
    from django.test import Client

    from agent_sessions.models import ApiKey

    user = django_user_model.objects.create_user("outage", password="x")
    _, token = ApiKey.issue(user, name="outage")
    client = Client(raise_request_exception=False)
    headers = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/sessions", headers=headers).status_code == 200
    saved = connection.settings_dict["PORT"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]  # nothing listens here once the probe closes
    connection.close()
    connection.settings_dict["PORT"] = str(closed_port)
    try:
        response = client.get("/api/sessions", headers=headers)
    finally:
        connection.close()
        connection.settings_dict["PORT"] = saved
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json()["code"] == "database_unavailable"
    assert client.get("/api/sessions", headers=headers).status_code == 200
