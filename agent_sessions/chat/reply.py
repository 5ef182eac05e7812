"""Run ``respond`` for one turn: stream its chunks in the envelope and store the reply they describe.

Two drivers share :class:`Reply`: :meth:`Reply.events` (a sync iterator, for WSGI; an async
``respond`` is collected first, so the answer is buffered) and :meth:`Reply.aevents` (an async
iterator, for ASGI; a sync ``respond`` is advanced in a worker thread one item at a time, so each
chunk reaches the client as it is yielded).  Whatever stops the stream early (``respond`` raising,
the client going away) stores the reply so far, marked partial, before the ``error`` chunk.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async

from .. import conf
from ..api.errors import ApiError
from ..session import ModelCall
from .assemble import ReplyBuilder
from .placement import Target, Turn, place
from .status import StatusTap
from .store import store_reply
from .stream import DONE, Envelope, sse

logger = logging.getLogger(__name__)
DEFAULT_ERROR_TEXT = "The reply failed; what arrived so far is saved."


async def _collect(source: Any) -> list[Any]:
    if inspect.isawaitable(source):
        source = await source
    if hasattr(source, "__aiter__"):
        return [item async for item in source]
    return list(source)


class Reply:
    """One streamed reply: the envelope, the message it builds, and the store at the end."""

    def __init__(
        self,
        target: Target,
        respond: Callable[..., Any],
        *,
        model: str | None = None,
        error_text: Callable[[BaseException], str] | None = None,
    ) -> None:
        self.target = target
        self.message_id = target.message_id
        self.respond = respond
        self.model = model
        self.error_text = error_text or (lambda exc: DEFAULT_ERROR_TEXT)
        self.envelope = Envelope(target.message_id)
        self.builder = ReplyBuilder(target.message_id)
        self._turn: Turn | None = None
        self._opening: list[dict] = []
        self._call: ModelCall | None = None
        self._error = ""
        self.stored = False
        self._tap: StatusTap | None = None
        # Hooks of a resumable generation (:mod:`.generation`): why to stop now (None: go on), the turn once it
        # is stored, and whether this reply may be stored (once: a recovery may have stored it already).
        self.halt: Callable[[], str | None] | None = None
        self.on_placed: Callable[[Turn], None] | None = None
        self.may_store: Callable[[], bool] | None = None
        self.ended = False  # the bytes about to be sent are the last ones

    @property
    def turn(self) -> Turn:
        assert self._turn is not None, "the turn is placed before respond runs"
        return self._turn

    # ── shared steps ────────────────────────────────────────────────
    def _emit(self, chunks: list[dict]) -> bytes:
        for chunk in chunks:
            self.builder.apply(chunk)
        return b"".join(sse(chunk) for chunk in chunks)

    def _open(self) -> bytes:
        """``start`` and the first ``start-step``: the first bytes, sent before anything is written."""
        self._opening = self.envelope.open()
        return b"".join(sse(chunk) for chunk in self._opening)

    def _place(self) -> None:
        """Store the posted turn; the reply's message starts from the continued one (a tool follow-up) if any."""
        self._turn = place(self.target)
        self.builder = ReplyBuilder(self.message_id, self._turn.base)
        for chunk in self._opening:
            self.builder.apply(chunk)
        if self.model:  # the input respond gets, snapshotted for the reply's model-call record (SPEC §8)
            turn = self._turn
            leaf = turn.base["id"] if turn.base is not None else turn.parent_id
            # turn.history is the visible path to that leaf, read by place() a moment ago in this thread
            self._call = turn.session.model_call(model=self.model, leaf_id=leaf or None).start(path=turn.history)
        if self.on_placed is not None:
            self.on_placed(self._turn)

    def _item(self, item: Any) -> bytes:
        """The SSE bytes of one item ``respond`` yielded (a text delta of the open text part: the short way)."""
        if type(item) is str and item:
            delta = self.envelope.continue_text(item)
            if delta is not None:
                self.builder.add_delta(delta["id"], item)
                return sse(delta)
        return self._emit(self.envelope.feed(item))

    def _store(self) -> None:
        if self._turn is None:  # the turn itself was not stored: there is nothing to hang a reply on
            return
        if self.may_store is not None and not self.may_store():
            return
        self.stored = True
        turn = self.turn
        store_reply(
            turn.session,
            self.builder.message,
            parent_id=turn.parent_id,
            continued=turn.base is not None,
            using=turn.using,
            call=self._call,
            error=self._error,
        )

    def _finish(self) -> bytes:
        """Close the envelope and store the complete reply; the closing chunks follow the store, the session
        events of the store (``data-session-status``) come just before ``finish``."""
        chunks = self.envelope.close()  # ends with ``finish``
        closing, last = self._emit(chunks[:-1]), self._emit(chunks[-1:])
        self._store()
        self.ended = True
        return closing + self._status() + last + DONE

    def _halted(self, reason: str) -> bytes:
        """Stopped on request (``reason``: stopped): the envelope closed, ``metadata.partial`` sent as a
        ``message-metadata`` chunk (so the client's message equals the stored one), the reply stored."""
        chunks = self.envelope.close()
        self.builder.mark_partial(reason)
        mark = {"type": "message-metadata", "messageMetadata": {"partial": {"reason": reason}}}
        closing = b"".join(sse(chunk) for chunk in [*chunks[:-1], mark])
        for chunk in chunks:
            self.builder.apply(chunk)
        self._error = reason
        self._store()
        self.ended = True
        return closing + self._status() + sse(chunks[-1]) + DONE

    # ── session events on the stream ────────────────────────────────
    def _listen(self) -> None:
        if conf.session_events():  # the tap is a receiver itself: events flow with or without Redis
            self._tap = StatusTap(self.target.chat.chat_id)

    def _status(self) -> bytes:
        return self._tap.drain() if self._tap is not None else b""

    def _unlisten(self) -> None:
        if self._tap is not None:
            self._tap.close()
            self._tap = None

    def _fail(self, exc: BaseException) -> bytes:
        """Store the partial reply, marked, then the ``error`` chunk."""
        logger.warning("chat reply %s failed: %r", self.message_id, exc, exc_info=exc)
        text = exc.detail if isinstance(exc, ApiError) else self.error_text(exc)  # our own words are safe to send
        self.builder.mark_partial("error", text)
        self._error = str(exc) or type(exc).__name__
        self.ended = True
        try:
            if not self.stored:
                self._store()
        except Exception:  # noqa: BLE001 - the client still gets its error chunk
            logger.exception("storing the partial reply %s failed", self.message_id)
        return b"".join(sse(chunk) for chunk in self.envelope.fail(text))

    def _gone(self) -> None:
        """The client went away: store what arrived, marked."""
        if self.stored:
            return
        self.builder.mark_partial("disconnect")
        self._error = "the client disconnected"
        try:
            self._store()
        except Exception:  # noqa: BLE001
            logger.exception("storing the partial reply %s after a disconnect failed", self.message_id)

    # ── WSGI ────────────────────────────────────────────────────────
    def events(self) -> Iterator[bytes]:
        """The SSE body as a sync iterator (an async ``respond`` is run to the end first)."""
        yield self._open()
        source: Any = None
        self._listen()
        try:
            self._place()
            status = self._status()
            if status:
                yield status
            source = self.respond(self.turn.session, self.turn.history)
            if inspect.isawaitable(source) or hasattr(source, "__aiter__"):
                source = async_to_sync(_collect)(source)
            for item in source:
                data = self._item(item) + self._status()
                if data:
                    yield data
            tail = self._finish()
        except GeneratorExit:
            self._gone()
            _close(source)
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of respond ends the stream with an error chunk
            yield self._fail(exc)
            return
        finally:
            self._unlisten()
        yield tail

    # ── ASGI ────────────────────────────────────────────────────────
    async def aevents(self) -> AsyncGenerator[bytes, None]:
        """The SSE body as an async iterator: each chunk is sent as ``respond`` yields it."""
        yield self._open()
        source: Any = None
        self._listen()
        try:
            await sync_to_async(self._place)()
            status = self._status()
            if status:
                yield status
            source = await self._start()
            reason = None
            if hasattr(source, "__aiter__"):
                async for item in source:
                    data = self._item(item) + self._status()
                    if data:
                        yield data
                    if self.halt is not None and (reason := self.halt()):
                        break
            else:
                batches = _drained(iter(source))
                try:
                    async for batch in batches:
                        data = b"".join([self._item(item) for item in batch]) + self._status()
                        if data:
                            yield data
                        if self.halt is not None and (reason := self.halt()):
                            break
                finally:
                    await batches.aclose()
            if reason:
                await _aclose(source)
                tail = await sync_to_async(self._halted)(reason)
            else:
                tail = await sync_to_async(self._finish)()
        except (asyncio.CancelledError, GeneratorExit):
            await sync_to_async(self._gone)()
            await _aclose(source)
            raise
        except Exception as exc:  # noqa: BLE001
            yield await sync_to_async(self._fail)(exc)
            return
        finally:
            self._unlisten()
        yield tail

    async def _start(self) -> Any:
        """Call ``respond``: a coroutine function on the loop, anything else in the worker thread."""
        respond = self.respond
        if inspect.iscoroutinefunction(respond) or inspect.isasyncgenfunction(respond):
            source = respond(self.turn.session, self.turn.history)
        else:
            source = await sync_to_async(respond)(self.turn.session, self.turn.history)
        if inspect.isawaitable(source):
            source = await source
        return source


async def _drained(iterator: Iterator[Any]) -> AsyncGenerator[list[Any], None]:
    """A sync iterator's items, as it yields them: one worker-thread call runs the whole iteration (the
    request's thread-sensitive thread, where its ORM use belongs) and hands each item to the loop, rather
    than a thread hop per item.  Items that arrived together come as one list (one write, none held
    back).  When the consumer stops early, the iteration stops at its next item."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[bool, Any]] = asyncio.Queue()
    stop = threading.Event()

    def drain() -> None:
        outcome: Any = None
        try:
            for item in iterator:
                if stop.is_set():
                    break
                loop.call_soon_threadsafe(queue.put_nowait, (True, item))
        except Exception as exc:  # noqa: BLE001 - raised again on the loop, in the consumer
            outcome = exc
        finally:
            if stop.is_set():
                _close(iterator)
        loop.call_soon_threadsafe(queue.put_nowait, (False, outcome))

    worker = asyncio.ensure_future(sync_to_async(drain)())
    try:
        while True:
            batch, end = [], None
            more, value = await queue.get()
            while more:
                batch.append(value)
                if queue.empty():
                    break
                more, value = queue.get_nowait()
            if not more:
                end = (value,)
            if batch:
                yield batch
            if end is not None:
                if end[0] is not None:
                    raise end[0]
                break
        await worker
    finally:
        stop.set()  # what runs next in the request's thread (storing the partial reply) waits for drain()


def _close(source: Any) -> None:
    close = getattr(source, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # noqa: BLE001
            logger.exception("closing respond's iterator failed")


async def _aclose(source: Any) -> None:
    if hasattr(source, "aclose"):
        try:
            await source.aclose()
        except Exception:  # noqa: BLE001
            logger.exception("closing respond's async iterator failed")
    elif source is not None:
        await sync_to_async(_close)(source)
