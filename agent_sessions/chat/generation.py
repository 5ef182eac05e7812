"""Resumable generations (SPEC §10): a reply that runs apart from the request, its chunks in Redis.

:func:`start` runs :class:`~.reply.Reply` in a thread of its own (under WSGI and ASGI alike: the generation
outlives the request, so it cannot live in the request's thread or its thread-sensitive context; the thread
has its own database connection, closed when the generation ends).  Each piece of the answer goes to the
generation's Redis stream (:mod:`.live`); the POST and every resume follow that stream.  A heartbeat renews the
lease and looks for a stop request; a stop ends the reply with ``finish`` and stores it marked
``metadata.partial.reason = "stopped"``.  :func:`recover` stores the reply of a generation whose lease lapsed
(its process died) from the chunks in its stream, marked ``"interrupted"``, and ends the stream.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import connections

from .. import conf
from ..manager import SessionManager
from . import live
from .assemble import ReplyBuilder
from .placement import Target, Turn
from .reply import Reply
from .store import store_reply
from .stream import DONE, sse

logger = logging.getLogger(__name__)

STOPPED = "stopped"
INTERRUPTED = "interrupted"


class Busy(Exception):
    """Another generation of this chat is running."""


class RedisUnavailable(Exception):
    """Redis did not answer when the generation was to start."""


class Generation:
    """One reply run by a thread of its own, written to the stream ``stream_id``."""

    def __init__(self, reply: Reply, chat_id: str, stream_id: str) -> None:
        self.reply, self.chat_id, self.stream_id = reply, chat_id, stream_id
        self.redis = live.client()
        self._stop = threading.Event()
        self._done = threading.Event()
        reply.halt = self._halt
        reply.on_placed = self._placed
        reply.may_store = lambda: live.claim(self.redis, stream_id, "generation")

    def _halt(self) -> str | None:
        return STOPPED if self._stop.is_set() else None

    def _placed(self, turn: Turn) -> None:
        meta = {"message_id": self.reply.message_id, "parent_id": turn.parent_id, "continued": turn.base is not None}
        self._write(meta=meta)

    def _write(self, data: bytes = b"", *, meta: dict | None = None) -> None:
        if live.append(self.redis, self.stream_id, data, meta=meta):
            self._stop.set()

    def _heartbeat(self) -> None:
        every = conf.chat_lease_seconds() / 3
        while not self._done.wait(every):
            try:
                if live.refresh(self.redis, self.chat_id, self.stream_id):
                    self._stop.set()
            except Exception:  # noqa: BLE001 - Redis away for a beat: the next one tries again
                logger.warning("chat generation %s: the lease refresh failed", self.stream_id, exc_info=True)

    async def _drive(self) -> None:
        """Write each piece of the reply to the stream.  The loop is this generation's own (``async_to_sync`` in
        its thread), so a Redis round trip here blocks no one else."""
        body = self.reply.aevents()
        try:
            async for data in body:
                if self.reply.ended:
                    live.end(self.redis, self.chat_id, self.stream_id, data)
                    return
                self._write(data)
        finally:
            await body.aclose()

    def run(self) -> None:
        beat = threading.Thread(target=self._heartbeat, name="agent-sessions-chat-lease", daemon=True)
        beat.start()
        try:
            async_to_sync(self._drive)()
            if not self.reply.ended:  # the body ended without its last bytes (it cannot, but never leave it open)
                live.end(self.redis, self.chat_id, self.stream_id)
        except Exception:
            logger.exception("chat generation %s failed", self.stream_id)
            try:
                live.end(self.redis, self.chat_id, self.stream_id, sse({"type": "error", "errorText": "failed"}))
            except Exception:  # noqa: BLE001 - Redis is gone: the lease lapses and a resume recovers
                logger.exception("chat generation %s could not end its stream", self.stream_id)
        finally:
            self._done.set()
            connections.close_all()  # this thread's connections: nothing is left open when it ends


def start(target: Target, respond: Callable[..., Any], **options: Any) -> str:
    """Start the generation of ``target``'s reply in a thread; its stream id.  :class:`Busy` when another
    generation of the chat still runs (one whose lease lapsed is recovered first)."""
    redis = live.client()
    chat_id = target.chat.chat_id
    stream_id = uuid.uuid4().hex
    try:
        begun = live.begin(redis, chat_id, stream_id, target.user.pk)
    except live.RedisError as exc:
        raise RedisUnavailable(str(exc)) from exc
    if not begun:
        current = live.active(redis, chat_id)
        if current is not None and live.alive(redis, current):
            raise Busy(current)
        if current is not None:
            recover(chat_id, current, target.manager, INTERRUPTED)
        if not live.begin(redis, chat_id, stream_id, target.user.pk):
            raise Busy(chat_id)
    generation = Generation(Reply(target, respond, **options), chat_id, stream_id)
    threading.Thread(target=generation.run, name=f"agent-sessions-chat-{stream_id[:8]}", daemon=True).start()
    return stream_id


def resumable(option: bool | None) -> bool:
    """Whether replies run as resumable generations: the view's option, else the setting; never without Redis."""
    if option is None:
        return conf.chat_resumable()
    return option and conf.redis_url() is not None


def _chunks(data: list[bytes]) -> list[dict]:
    """The chunks in SSE bytes the stream holds (``[DONE]`` left out)."""
    blocks = [block for piece in data for block in piece.split(b"\n\n")]
    return [json.loads(block[6:]) for block in blocks if block.startswith(b"data: ") and block != DONE.strip()]


def closing(chunks: list[dict], reason: str) -> list[dict]:
    """The chunks that end a stream cut short after ``chunks``: open text / reasoning parts and the step
    closed, ``metadata.partial`` set, ``finish``."""
    texts: dict[str, str] = {}
    in_step = False
    for chunk in chunks:
        kind = chunk.get("type")
        if kind in ("text-start", "reasoning-start"):
            texts[chunk["id"]] = kind.replace("start", "end")
        elif kind in ("text-end", "reasoning-end"):
            texts.pop(chunk["id"], None)
        elif kind == "start-step":
            in_step = True
        elif kind == "finish-step":
            in_step = False
            texts.clear()
    out: list[dict] = [{"type": kind, "id": part_id} for part_id, kind in texts.items()]
    if in_step:
        out.append({"type": "finish-step"})
    out.append({"type": "message-metadata", "messageMetadata": {"partial": {"reason": reason}}})
    return [*out, {"type": "finish"}]


def recover(chat_id: str, stream_id: str, manager: SessionManager, reason: str = INTERRUPTED) -> None:
    """Store the reply of a generation whose lease lapsed from its stream's chunks (marked ``reason``), end the
    stream with ``finish`` and clear the chat's active stream.  Once per stream: a second caller does nothing."""
    redis = live.client()
    if not live.claim(redis, stream_id, "recovery"):
        return  # the generation stored its reply, or another recovery runs
    meta, data, done = live.entries(redis, stream_id)
    if done:
        live.end(redis, chat_id, stream_id)
        return
    chunks = _chunks(data)
    tail = closing(chunks, reason) if chunks else []
    if meta is not None:
        session = manager.get_session(chat_id)
        base = session.get_message(meta["message_id"]) if meta["continued"] else None
        builder = ReplyBuilder(meta["message_id"], base)  # type: ignore[arg-type]
        for chunk in [*chunks, *tail]:
            builder.apply(chunk)
        builder.mark_partial(reason)
        store_reply(
            session,
            builder.message,
            parent_id=meta["parent_id"],
            continued=meta["continued"],
            using=manager.using,
            error=reason,
        )
    live.end(redis, chat_id, stream_id, b"".join(sse(chunk) for chunk in tail) + (DONE if tail else b""))
    logger.info("chat %s: generation %s recovered as %s", chat_id, stream_id, reason)


def body(
    chat_id: str, stream_id: str, manager: SessionManager, *, asgi: bool
) -> Iterator[bytes] | AsyncIterator[bytes]:
    """The response body of one watcher: the stream from its first chunk, then its live tail.  The request's
    database connections are closed first: a watcher waits on Redis only (a recovery opens one briefly)."""
    if asgi:
        return _aquiet(live.afollow(stream_id, sync_to_async(lambda: recover(chat_id, stream_id, manager))))
    return _quiet(live.follow(stream_id, lambda: recover(chat_id, stream_id, manager)))


def _release() -> None:
    """Close this thread's database connections that no transaction holds."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


def _quiet(follower: Iterator[bytes]) -> Iterator[bytes]:
    _release()
    yield from follower


async def _aquiet(follower: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    await sync_to_async(_release)()  # the request's thread-sensitive thread, where its connections live
    async for data in follower:
        yield data


def stop(chat_id: str, manager: SessionManager) -> bool:
    """Ask the chat's active generation to stop and wait until its stream ended (a dead one is recovered, marked
    stopped), or a bounded time (a ``respond`` that yields nothing for long stops at its next item); False
    when none was active."""
    redis = live.client()
    stream_id = live.active(redis, chat_id)
    if stream_id is None:
        return False
    live.ask_stop(redis, stream_id)
    deadline = time.monotonic() + 2 * conf.chat_lease_seconds() + 5
    for _ in live.follow(stream_id, lambda: recover(chat_id, stream_id, manager, STOPPED), deadline=deadline):
        pass
    return True
