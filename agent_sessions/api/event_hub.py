"""Fan-out of session events to the SSE subscribers of one process, without a thread per subscriber.

One :class:`EventHub` per event loop holds each session's subscriber queues.  With Redis it reads one
pub/sub connection (a pattern subscription to every session's channel) in one task; without Redis it is fed
by the in-process ``session_event`` signal, so only this process's writes reach it.  A subscriber that falls
``QUEUE_SIZE`` events behind is closed (its client reconnects with ``Last-Event-ID`` and catches up from the
backlog) rather than buffering without bound.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from typing import Any

from .. import conf, events
from ..signals import session_event

logger = logging.getLogger("agent_sessions")

QUEUE_SIZE = 256
CLOSED = b""  # put on a subscriber's queue when it fell behind: its stream ends


def event_bytes(payload: dict) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


class EventHub:
    """Subscriber queues by session id, fed from Redis (``url``) or from this process's signal (None)."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.loop = asyncio.get_running_loop()
        self.subscribers: dict[str, set[asyncio.Queue[bytes]]] = {}
        self._ready = asyncio.Event()
        self._task: asyncio.Task | None = None
        if url is None:
            session_event.connect(self._on_signal, weak=False, dispatch_uid=f"agent_sessions.hub.{id(self)}")
            self._ready.set()

    # ── subscribers ─────────────────────────────────────────────────
    async def subscribe(self, session_id: str) -> asyncio.Queue[bytes]:
        """A queue that receives the session's events (JSON bytes) from now on."""
        queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=QUEUE_SIZE)
        self.subscribers.setdefault(session_id, set()).add(queue)
        if self.url is not None and (self._task is None or self._task.done()):
            self._ready.clear()
            self._task = self.loop.create_task(self._listen())
        await self._ready.wait()
        return queue

    def unsubscribe(self, session_id: str, queue: asyncio.Queue[bytes]) -> None:
        queues = self.subscribers.get(session_id)
        if queues is not None:
            queues.discard(queue)
            if not queues:
                del self.subscribers[session_id]

    def count(self) -> int:
        return sum(len(q) for q in self.subscribers.values())

    def dispatch(self, session_id: str, data: bytes) -> None:
        for queue in list(self.subscribers.get(session_id, ())):
            try:
                queue.put_nowait(data)
            except asyncio.QueueFull:  # too slow a reader: end its stream, it catches up on reconnect
                self.unsubscribe(session_id, queue)
                queue.get_nowait()
                queue.put_nowait(CLOSED)

    # ── sources ─────────────────────────────────────────────────────
    def _on_signal(self, sender: str, event: dict, **kwargs: Any) -> None:
        if sender in self.subscribers:
            self.loop.call_soon_threadsafe(self.dispatch, sender, event_bytes(event))

    async def _listen(self) -> None:
        """Read the pattern subscription until no subscriber is left; reconnect after an error."""
        import redis.asyncio as aioredis

        prefix = events.CHANNEL_PREFIX
        assert self.url is not None  # started only for a Redis hub
        delay = 0.1
        while self.subscribers:
            client = aioredis.Redis.from_url(self.url, socket_connect_timeout=conf.enqueue_timeout_seconds())
            pubsub = client.pubsub()
            try:
                await pubsub.psubscribe(prefix + "*")
                while self.subscribers:
                    message = await pubsub.get_message(ignore_subscribe_messages=False, timeout=1.0)
                    if message is None:
                        continue
                    if message["type"] == "psubscribe":
                        self._ready.set()
                        delay = 0.1
                    elif message["type"] == "pmessage":
                        channel = message["channel"].decode()
                        self.dispatch(channel[len(prefix) :], message["data"])
            except Exception as exc:  # noqa: BLE001 - Redis went away: retry, subscribers keep waiting
                logger.warning("agent_sessions: session event subscription failed: %s", exc)
                self._ready.set()  # subscribers stream heartbeats meanwhile (and the backlog on reconnect)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            finally:
                try:
                    await pubsub.aclose()
                    await client.aclose()
                except Exception:  # noqa: BLE001
                    pass


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, EventHub] = weakref.WeakKeyDictionary()


def hub() -> EventHub:
    """This event loop's hub for the configured Redis (or the signal when there is none)."""
    loop = asyncio.get_running_loop()
    url = conf.redis_url()
    found = _hubs.get(loop)
    if found is None or found.url != url:
        found = _hubs[loop] = EventHub(url)
    return found


async def backlog_after(session_id: str, last_id: int) -> list[bytes]:
    """The session's stored events after ``last_id`` (oldest first); [] without Redis or when it fails."""
    url = conf.redis_url()
    if url is None:
        return []
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url, socket_connect_timeout=conf.enqueue_timeout_seconds())
    try:
        entries: Any = await client.xrange(events.stream_key(session_id), min=f"{last_id + 1}-0", max="+")
        return [fields[b"d"] for _, fields in entries]
    except Exception as exc:  # noqa: BLE001 - no catch-up, the live stream still works
        logger.warning("agent_sessions: could not read the event backlog of %r: %s", session_id, exc)
        return []
    finally:
        await client.aclose()
