"""The Redis side of resumable chat generations (SPEC §10): keys, the chunk stream, the lease, followers.

A generation writes what its client would receive to a Redis stream of its own (``…:stream:<stream id>``),
one entry per yield of ``respond`` (field ``c``: the SSE bytes), one entry with the turn's place in the tree
(field ``m``, for recovering a dead generation's reply) and a last entry ``e`` once the stream is complete.
The chat's active stream id is a Redis key (``…:active:<chat id>``); the generation's lease another
(``…:lease:<stream id>``, refreshed while it runs); a stop request a third (``…:stop:<stream id>``); and
``…:claim:<stream id>`` says who stores the reply, so it is stored once.  Every key expires
(``AGENT_SESSIONS_CHAT_STREAM_TTL_SECONDS``) and the stream is capped (``AGENT_SESSIONS_CHAT_STREAM_MAXLEN``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .. import conf

PREFIX = "agent_sessions:chat:"

# Clear the chat's active stream only if it is still this one (a newer generation may have replaced it).
_CLEAR = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('DEL', KEYS[2])
return 1
"""


try:
    from redis import RedisError
except ImportError:  # pragma: no cover - Redis is optional; without it nothing here runs

    class RedisError(Exception):  # type: ignore[no-redef]
        """Stands for ``redis.RedisError`` where the ``redis`` package is not installed."""


def active_key(chat_id: str) -> str:
    return f"{PREFIX}active:{chat_id}"


def stream_key(stream_id: str) -> str:
    return f"{PREFIX}stream:{stream_id}"


def lease_key(stream_id: str) -> str:
    return f"{PREFIX}lease:{stream_id}"


def stop_key(stream_id: str) -> str:
    return f"{PREFIX}stop:{stream_id}"


def claim_key(stream_id: str) -> str:
    return f"{PREFIX}claim:{stream_id}"


def owner_key(stream_id: str) -> str:
    return f"{PREFIX}owner:{stream_id}"


_clients: dict[tuple[int, str], Any] = {}
_clients_guard = threading.Lock()


def client() -> Any:
    """This process's Redis client for ``AGENT_SESSIONS_REDIS_URL`` (a pool; a forked child makes its own)."""
    url = conf.redis_url()
    assert url is not None, "resumable generations need Redis"
    key = (os.getpid(), url)
    found = _clients.get(key)
    if found is None:
        import redis

        with _clients_guard:
            found = _clients.get(key)
            if found is None:
                timeout = conf.enqueue_timeout_seconds()
                found = _clients[key] = redis.Redis.from_url(
                    url, socket_connect_timeout=timeout, socket_timeout=block_seconds() + 10
                )
    return found


def block_seconds() -> float:
    """How long a follower waits on the stream before it checks the generation's lease."""
    return min(1.0, conf.chat_lease_seconds() / 2)


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def active(redis: Any, chat_id: str) -> str | None:
    """The chat's active stream id, or None."""
    return _text(redis.get(active_key(chat_id)))


def alive(redis: Any, stream_id: str) -> bool:
    """Whether the generation writing ``stream_id`` still holds its lease."""
    return bool(redis.exists(lease_key(stream_id)))


def begin(redis: Any, chat_id: str, stream_id: str, owner: Any = None) -> bool:
    """Make ``stream_id`` the chat's active stream and take its lease; False when another is active.  ``owner``
    (the caller's user pk) answers who may resume it before the session row exists (the first POST's reply)."""
    ttl = conf.chat_stream_ttl_seconds()
    if not redis.set(active_key(chat_id), stream_id, nx=True, ex=ttl):
        return False
    pipe = redis.pipeline(transaction=False)
    pipe.set(lease_key(stream_id), "1", px=int(conf.chat_lease_seconds() * 1000))
    pipe.set(owner_key(stream_id), str(owner), ex=ttl)
    pipe.execute()
    return True


def started_by(redis: Any, stream_id: str) -> str | None:
    """The user pk (as text) that started the generation ``stream_id``."""
    return _text(redis.get(owner_key(stream_id)))


def refresh(redis: Any, chat_id: str, stream_id: str) -> bool:
    """Renew the lease (and the active stream's expiry: a generation may outlive the TTL); True when a stop was
    asked for."""
    ttl = conf.chat_stream_ttl_seconds()
    pipe = redis.pipeline(transaction=False)
    pipe.set(lease_key(stream_id), "1", px=int(conf.chat_lease_seconds() * 1000))
    pipe.exists(stop_key(stream_id))
    pipe.expire(active_key(chat_id), ttl)
    pipe.expire(owner_key(stream_id), ttl)
    return bool(pipe.execute()[1])


def append(redis: Any, stream_id: str, data: bytes = b"", *, meta: dict | None = None) -> bool:
    """Add one entry (SSE bytes, or the turn's ``meta``) to the stream; True when a stop was asked for."""
    fields: dict[str, Any] = {"m": json.dumps(meta)} if meta is not None else {"c": data}
    pipe = redis.pipeline(transaction=False)
    pipe.xadd(stream_key(stream_id), fields, maxlen=conf.chat_stream_maxlen(), approximate=True)
    pipe.expire(stream_key(stream_id), conf.chat_stream_ttl_seconds())
    pipe.exists(stop_key(stream_id))
    return bool(pipe.execute()[2])


def end(redis: Any, chat_id: str, stream_id: str, data: bytes = b"") -> None:
    """The last bytes and the end mark, after the chat's active stream is cleared and the lease dropped, so a
    client that reads ``finish`` and posts again at once finds no generation running."""
    redis.eval(_CLEAR, 2, active_key(chat_id), lease_key(stream_id), stream_id)
    pipe = redis.pipeline(transaction=False)
    if data:
        pipe.xadd(stream_key(stream_id), {"c": data}, maxlen=conf.chat_stream_maxlen(), approximate=True)
    pipe.xadd(stream_key(stream_id), {"e": "1"}, maxlen=conf.chat_stream_maxlen(), approximate=True)
    pipe.expire(stream_key(stream_id), conf.chat_stream_ttl_seconds())
    pipe.execute()


def ask_stop(redis: Any, stream_id: str) -> None:
    redis.set(stop_key(stream_id), "1", ex=conf.chat_stream_ttl_seconds())


def claim(redis: Any, stream_id: str, holder: str) -> bool:
    """Take the right to store the reply (once per generation): the generation itself, or a recovery."""
    return bool(redis.set(claim_key(stream_id), holder, nx=True, ex=conf.chat_stream_ttl_seconds()))


def entries(redis: Any, stream_id: str) -> tuple[dict | None, list[bytes], bool]:
    """What the stream holds: the turn's meta (None before the turn was stored), the SSE bytes, and whether
    it is complete."""
    meta, data, done = None, [], False
    for _, fields in redis.xrange(stream_key(stream_id)):
        if b"m" in fields:
            meta = json.loads(fields[b"m"])
        if b"c" in fields:
            data.append(fields[b"c"])
        if b"e" in fields:
            done = True
    return meta, data, done


# How many lease checks a follower makes after the lease lapsed before it gives up on an end mark (a recovery
# in another process that died half-way): a resume never hangs.
_DEAD_CHECKS = 5


def follow(stream_id: str, on_dead: Callable[[], None], *, deadline: float | None = None) -> Iterator[bytes]:
    """The stream's bytes from its first entry, then its live tail, until the end mark (or ``deadline``, a
    ``time.monotonic()``).  When the generation's lease lapses, ``on_dead()`` (a recovery: it writes the closing
    chunks and the end mark) runs."""
    redis = client()
    key, last, dead = stream_key(stream_id), b"0-0", 0
    block = int(block_seconds() * 1000)
    while deadline is None or time.monotonic() < deadline:
        found = redis.xread({key: last}, count=512, block=block)
        if not found:
            if not alive(redis, stream_id):
                dead += 1
                if dead == 1:
                    on_dead()
                elif dead > _DEAD_CHECKS or not redis.exists(key):
                    return
            continue
        for entry_id, fields in found[0][1]:
            last = entry_id
            if b"c" in fields:
                yield fields[b"c"]
            if b"e" in fields:
                return


async def afollow(stream_id: str, on_dead: Callable[[], Any]) -> AsyncIterator[bytes]:
    """:func:`follow` for ASGI: a waiting follower is a coroutine on its own Redis connection, not a thread;
    ``on_dead`` is a coroutine function."""
    import redis.asyncio as aredis

    url = conf.redis_url()
    assert url is not None
    redis: Any = aredis.Redis.from_url(url, socket_connect_timeout=conf.enqueue_timeout_seconds())
    key, last, dead = stream_key(stream_id), b"0-0", 0
    block = int(block_seconds() * 1000)
    try:
        while True:
            found = await redis.xread({key: last}, count=512, block=block)
            if not found:
                if not await redis.exists(lease_key(stream_id)):
                    dead += 1
                    if dead == 1:
                        await on_dead()
                    elif dead > _DEAD_CHECKS or not await redis.exists(key):
                        return
                continue
            for entry_id, fields in found[0][1]:
                last = entry_id
                if b"c" in fields:
                    yield fields[b"c"]
                if b"e" in fields:
                    return
    finally:
        await redis.aclose()
