"""Session events (SPEC §10): what a session is doing, for every connected client.

:func:`emit` builds the payload (``id``, ``session_id``, ``type``, ``phase``, ``tokenEstimate``,
``tokenThreshold``, and ``compacted`` / ``error`` / ``message_ids`` when they apply) and, once the write's
transaction commits, sends the :data:`~agent_sessions.signals.session_event` signal in this process and hands
the payload to a background publisher.  The publisher (one thread per process) runs one Lua script per event
on the Redis of ``AGENT_SESSIONS_REDIS_URL``: it makes the id strictly increasing per session across
processes, appends the event to the session's backlog (a Redis stream, for ``Last-Event-ID`` catch-up) and
publishes it on the session's channel.  A write never waits for Redis: the hand-over is a ``put_nowait`` on a
bounded queue; a full queue or a broker that does not answer within ``AGENT_SESSIONS_ENQUEUE_TIMEOUT_SECONDS``
drops events (logged), never the write.

Ids are microseconds since the epoch, raised past the last id this process gave out: increasing per session
in a process without Redis; with Redis the script raises an id that is not above the session's last one
(another process's clock), so the published ids increase strictly.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import transaction

from . import conf
from .signals import session_event

__all__ = ["CHANNEL_PREFIX", "channel", "emit", "flush", "listened", "next_id", "stream_key"]

logger = logging.getLogger("agent_sessions")

CHANNEL_PREFIX = "agent_sessions:events:"
"""Pub/sub channel of a session: this prefix and the session id (subscribe to the pattern ``prefix*``)."""
_BACKLOG_PREFIX = "agent_sessions:backlog:"
_COUNTER_PREFIX = "agent_sessions:event-id:"

TYPES = frozenset({"message", "compaction", "context", "prompt", "cleared", "deleted"})

_dumps: Callable[[Any], bytes]
try:  # the ``fast`` extra
    from orjson import dumps as _dumps
except ImportError:  # pragma: no cover - where orjson is not installed

    def _dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":")).encode()


# KEYS: counter, backlog stream, channel.  ARGV: proposed id, the payload's JSON without its id, backlog, ttl.
# Returns the id given.  Numbers stay below 2**53 (microseconds since 1970), so Lua's doubles hold them exactly.
_PUBLISH = """
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local id = tonumber(ARGV[1])
if id <= last then id = last + 1 end
local text = string.format('%.0f', id)
redis.call('SET', KEYS[1], text, 'EX', ARGV[4])
local data = '{"id":' .. text .. ',' .. string.sub(ARGV[2], 2)
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], text .. '-0', 'd', data)
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('PUBLISH', KEYS[3], data)
return text
"""


def channel(session_id: str) -> str:
    return CHANNEL_PREFIX + session_id


def stream_key(session_id: str) -> str:
    """The Redis stream holding a session's recent events; entry ids are ``<event id>-0``, field ``d`` the JSON."""
    return _BACKLOG_PREFIX + session_id


_id_guard = threading.Lock()
_last_id = 0


def next_id() -> int:
    """A new event id: microseconds since the epoch, above every id this process gave out before."""
    global _last_id
    now = time.time_ns() // 1000
    with _id_guard:
        _last_id = now if now > _last_id else _last_id + 1
        return _last_id


def listened() -> bool:
    """Whether an event would go anywhere: events on, and Redis configured or a signal receiver connected."""
    return conf.session_events() and (conf.redis_url() is not None or session_event.has_listeners())


def emit(
    session_id: str,
    kind: str,
    *,
    using: str | None = None,
    phase: str = "idle",
    token_estimate: int | None = None,
    token_threshold: int | None = None,
    compacted: dict | None = None,
    error: str | None = None,
    message_ids: list[str] | None = None,
) -> None:
    """Announce a change of ``session_id`` once the transaction on ``using`` commits; never raises.

    Costs nothing when events are off or nobody listens (no signal receiver, no Redis)."""
    if not conf.session_events():
        return
    url = conf.redis_url()
    if url is None and not session_event.has_listeners():
        return
    body: dict[str, Any] = {
        "session_id": session_id,
        "type": kind,
        "phase": phase,
        "tokenEstimate": token_estimate,
        "tokenThreshold": token_threshold,
    }
    if compacted is not None:
        body["compacted"] = compacted
    if error is not None:
        body["error"] = error
    if message_ids is not None:
        body["message_ids"] = list(message_ids)

    def deliver() -> None:
        event_id = next_id()
        if url is not None:
            _publisher(url).put(session_id, event_id, body)
        try:
            session_event.send(sender=session_id, event={"id": event_id, **body})
        except Exception:  # noqa: BLE001 - a failing receiver must not fail the write that committed
            logger.exception("agent_sessions: a session_event receiver failed")

    try:
        transaction.on_commit(deliver, using=using)
    except Exception:  # noqa: BLE001 - an unknown alias (a custom storage): deliver now
        deliver()


class _Publisher:
    """One daemon thread per process and Redis URL that publishes queued events, bounded in time."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.queue: queue.Queue[tuple[str, int, dict]] = queue.Queue(maxsize=conf.events_queue_size())
        self.dropped = 0
        self._warned_at = 0.0
        self._thread = threading.Thread(target=self._run, name="agent-sessions-events", daemon=True)
        self._thread.start()

    def put(self, session_id: str, event_id: int, body: dict) -> None:
        try:
            self.queue.put_nowait((session_id, event_id, body))
        except queue.Full:
            self.dropped += 1
            self._warn("the event queue is full (is Redis down?); events are dropped")

    def _warn(self, text: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._warned_at > 30:
            self._warned_at = now
            logger.warning("agent_sessions: " + text, *args)

    def _client(self) -> Any:
        import redis  # the ``redis`` package: only where Redis is configured

        timeout = conf.enqueue_timeout_seconds()
        return redis.Redis.from_url(self.url, socket_timeout=timeout, socket_connect_timeout=timeout)

    def _run(self) -> None:
        client = None
        script = None
        while True:
            batch = [self.queue.get()]
            while len(batch) < 256:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            try:
                if client is None:
                    client = self._client()
                    script = client.register_script(_PUBLISH)
                assert script is not None
                backlog, ttl = conf.events_backlog(), conf.events_ttl_seconds()
                pipe = client.pipeline(transaction=False)
                for session_id, event_id, body in batch:
                    keys = [_COUNTER_PREFIX + session_id, stream_key(session_id), channel(session_id)]
                    script(keys=keys, args=[event_id, _dumps(body), backlog, ttl], client=pipe)
                pipe.execute()
            except Exception as exc:  # noqa: BLE001 - Redis down: drop these events, keep the thread
                self.dropped += len(batch)
                self._warn("could not publish %d session event(s): %s", len(batch), exc)
                client = None
            finally:
                for _ in batch:
                    self.queue.task_done()

    def idle(self) -> bool:
        return self.queue.unfinished_tasks == 0


_publishers: dict[tuple[int, str], _Publisher] = {}
_publishers_guard = threading.Lock()


def _publisher(url: str) -> _Publisher:
    key = (os.getpid(), url)  # a forked child starts its own thread
    found = _publishers.get(key)
    if found is None:
        with _publishers_guard:
            found = _publishers.get(key)
            if found is None:
                found = _publishers[key] = _Publisher(url)
    return found


def flush(timeout: float = 5.0) -> bool:
    """Wait until this process's queued events are published (or dropped); False on timeout.  For tests."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(p.idle() for (pid, _), p in list(_publishers.items()) if pid == os.getpid()):
            return True
        time.sleep(0.005)
    return False
