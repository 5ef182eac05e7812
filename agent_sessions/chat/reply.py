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
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async

from .assemble import ReplyBuilder
from .placement import Turn
from .store import store_reply
from .stream import DONE, Envelope, sse

logger = logging.getLogger(__name__)
_END = object()
DEFAULT_ERROR_TEXT = "The reply failed; what arrived so far is saved."


def _next(iterator: Iterator[Any]) -> Any:
    return next(iterator, _END)


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
        turn: Turn,
        respond: Callable[..., Any],
        *,
        model: str | None = None,
        error_text: Callable[[BaseException], str] | None = None,
    ) -> None:
        self.turn = turn
        self.respond = respond
        self.model = model
        self.error_text = error_text or (lambda exc: DEFAULT_ERROR_TEXT)
        self.envelope = Envelope(turn.message_id)
        self.builder = ReplyBuilder(turn.message_id, turn.base)
        self.stored = False

    # ── shared steps ────────────────────────────────────────────────
    def _emit(self, chunks: list[dict]) -> bytes:
        for chunk in chunks:
            self.builder.apply(chunk)
        return b"".join(sse(chunk) for chunk in chunks)

    def _store(self) -> None:
        self.stored = True
        turn = self.turn
        store_reply(
            turn.session,
            self.builder.message,
            parent_id=turn.parent_id,
            continued=turn.base is not None,
            using=turn.using,
            model=self.model,
        )

    def _finish(self) -> bytes:
        """Close the envelope and store the complete reply; the closing chunks follow the store."""
        closing = self._emit(self.envelope.close())
        self._store()
        return closing + DONE

    def _fail(self, exc: BaseException) -> bytes:
        """Store the partial reply, marked, then the ``error`` chunk."""
        logger.warning("chat reply %s failed: %r", self.turn.message_id, exc, exc_info=exc)
        text = self.error_text(exc)
        self.builder.mark_partial("error", text)
        try:
            if not self.stored:
                self._store()
        except Exception:  # noqa: BLE001 - the client still gets its error chunk
            logger.exception("storing the partial reply %s failed", self.turn.message_id)
        return b"".join(sse(chunk) for chunk in self.envelope.fail(text))

    def _gone(self) -> None:
        """The client went away: store what arrived, marked."""
        if self.stored:
            return
        self.builder.mark_partial("disconnect")
        try:
            self._store()
        except Exception:  # noqa: BLE001
            logger.exception("storing the partial reply %s after a disconnect failed", self.turn.message_id)

    # ── WSGI ────────────────────────────────────────────────────────
    def events(self) -> Iterator[bytes]:
        """The SSE body as a sync iterator (an async ``respond`` is run to the end first)."""
        yield self._emit(self.envelope.open())
        source: Any = None
        try:
            source = self.respond(self.turn.session, self.turn.history)
            if inspect.isawaitable(source) or hasattr(source, "__aiter__"):
                source = async_to_sync(_collect)(source)
            for item in source:
                data = self._emit(self.envelope.feed(item))
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
        yield tail

    # ── ASGI ────────────────────────────────────────────────────────
    async def aevents(self) -> AsyncIterator[bytes]:
        """The SSE body as an async iterator: each chunk is sent as ``respond`` yields it."""
        yield self._emit(self.envelope.open())
        source: Any = None
        try:
            source = await self._start()
            if hasattr(source, "__aiter__"):
                async for item in source:
                    data = self._emit(self.envelope.feed(item))
                    if data:
                        yield data
            else:
                iterator = iter(source)
                step = sync_to_async(_next)
                while (item := await step(iterator)) is not _END:
                    data = self._emit(self.envelope.feed(item))
                    if data:
                        yield data
            tail = await sync_to_async(self._finish)()
        except (asyncio.CancelledError, GeneratorExit):
            await sync_to_async(self._gone)()
            await _aclose(source)
            raise
        except Exception as exc:  # noqa: BLE001
            yield await sync_to_async(self._fail)(exc)
            return
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
