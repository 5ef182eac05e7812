"""Session events (SPEC §10): what a session is doing, for every connected client.

:func:`emit` builds the payload (``id``, ``session_id``, ``type``, ``phase``, ``tokenEstimate``,
``tokenThreshold``, and ``compacted`` / ``error`` / ``message_ids`` when they apply) and, once the write's
transaction commits, sends the :data:`~agent_sessions.signals.session_event` signal in this process and hands
the payload to a background publisher.  The publisher (one thread per process) runs one Lua script per batch of
events on the Redis of ``AGENT_SESSIONS_REDIS_URL``: for each event it makes the id strictly increasing per
session across processes, appends the event to the session's backlog (a Redis stream, for ``Last-Event-ID``
catch-up) and
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
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from . import conf
from .signals import session_event

__all__ = ["CHANNEL_PREFIX", "channel", "emit", "flush", "listened", "next_id", "stream_key"]

logger = logging.getLogger("agent_sessions")

CHANNEL_PREFIX = "agent_sessions:events:"
"""Pub/sub channel of a session: this prefix and the session id (subscribe to the pattern ``prefix*``)."""
_BACKLOG_PREFIX = "agent_sessions:backlog:"
_COUNTER_PREFIX = "agent_sessions:event-id:"

LINGER_SECONDS = 0.005
"""How long the publisher waits after an event for more to batch with it (fewer round trips, less CPU)."""

TYPES = frozenset({"message", "compaction", "context", "prompt", "cleared", "deleted"})

_dumps: Callable[[Any], bytes]
try:  # the ``fast`` extra
    from orjson import dumps as _dumps
except ImportError:  # pragma: no cover - where orjson is not installed

    def _dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":")).encode()


# One call publishes a batch.  ARGV: the key prefixes (counter, backlog, channel), backlog length, ttl, then
# per event: session id, proposed id, the payload's JSON without its id.  Numbers stay below 2**53
# (microseconds since 1970), so Lua's doubles hold them exactly.
_PUBLISH = """
local counter, backlog, channel = ARGV[1], ARGV[2], ARGV[3]
for i = 6, #ARGV, 3 do
  local session = ARGV[i]
  local last = tonumber(redis.call('GET', counter .. session) or '0')
  local id = tonumber(ARGV[i + 1])
  if id <= last then id = last + 1 end
  local text = string.format('%.0f', id)
  redis.call('SET', counter .. session, text, 'EX', ARGV[5])
  local data = '{"id":' .. text .. ',' .. string.sub(ARGV[i + 2], 2)
  redis.call('XADD', backlog .. session, 'MAXLEN', '~', ARGV[4], text .. '-0', 'd', data)
  redis.call('EXPIRE', backlog .. session, ARGV[5])
  redis.call('PUBLISH', channel .. session, data)
end
return 1
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
        connection = connections[using or DEFAULT_DB_ALIAS]
    except Exception:  # noqa: BLE001 - an alias this project does not have (a custom storage): deliver now
        deliver()
        return
    if connection.in_atomic_block:
        connection.on_commit(deliver)
    else:  # autocommit: the write has committed already (what transaction.on_commit would do, for less)
        deliver()


class _Publisher:
    """One daemon thread per process and Redis URL that publishes queued events, bounded in time.

    The hand-over is a ``deque.append`` (atomic, no lock); the thread is woken only when it sleeps."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pending: deque[tuple[str, int, dict]] = deque()
        self.limit = conf.events_queue_size()
        self.dropped = 0
        self.busy = False
        self._wake = threading.Event()
        self._warned_at = 0.0
        self._thread = threading.Thread(target=self._run, name="agent-sessions-events", daemon=True)
        self._thread.start()

    def put(self, session_id: str, event_id: int, body: dict) -> None:
        if len(self.pending) >= self.limit:
            self.dropped += 1
            self._warn("the event queue is full (is Redis down?); events are dropped")
            return
        self.pending.append((session_id, event_id, body))
        if not self._wake.is_set():
            self._wake.set()

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
            self._wake.wait()
            self.busy = True
            time.sleep(LINGER_SECONDS)  # let a burst gather: one script call carries it
            self._wake.clear()
            batch: list[tuple[str, int, dict]] = []
            while self.pending and len(batch) < 512:
                batch.append(self.pending.popleft())
            if self.pending:
                self._wake.set()
            try:
                if batch:
                    if client is None:
                        client = self._client()
                        script = client.register_script(_PUBLISH)
                    assert script is not None
                    args: list[Any] = [_COUNTER_PREFIX, _BACKLOG_PREFIX, CHANNEL_PREFIX]
                    args += [conf.events_backlog(), conf.events_ttl_seconds()]
                    for session_id, event_id, body in batch:
                        args += [session_id, event_id, _dumps(body)]
                    script(keys=[], args=args)
            except Exception as exc:  # noqa: BLE001 - Redis down: drop these events, keep the thread
                self.dropped += len(batch)
                self._warn("could not publish %d session event(s): %s", len(batch), exc)
                client = None
            finally:
                self.busy = False

    def idle(self) -> bool:
        return not self.pending and not self.busy and not self._wake.is_set()


_publishers: dict[str, _Publisher] = {}
_publishers_guard = threading.Lock()


def _forget_publishers() -> None:
    _publishers.clear()  # a forked child starts its own threads


os.register_at_fork(after_in_child=_forget_publishers)


def _publisher(url: str) -> _Publisher:
    found = _publishers.get(url)
    if found is None:
        with _publishers_guard:
            found = _publishers.get(url)
            if found is None:
                found = _publishers[url] = _Publisher(url)
    return found


def flush(timeout: float = 5.0) -> bool:
    """Wait until this process's queued events are published (or dropped); False on timeout.  For tests."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(p.idle() for p in list(_publishers.values())):
            return True
        time.sleep(0.005)
    return False
