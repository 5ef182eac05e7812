"""URLs of the chat benchmark (``bench/chat.py``): ChatView on a fake model, and the bare floor.

``/chat/async`` and ``/chat/sync`` serve ``ChatView`` with a model that yields ``CHUNKS`` text deltas
(an async and a sync generator); ``/bare`` is a bare ``StreamingHttpResponse`` of an async
generator yielding the same chunks ours sends (each encoded as it is sent), with no auth, no
parsing, no envelope, no rebuilt message and no storage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from django.db import connections
from django.http import HttpRequest, StreamingHttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from agent_sessions.chat import ChatView
from agent_sessions.chat.stream import CONTENT_TYPE, DONE, HEADERS, Envelope, sse

CHUNKS = 200
DELTA = "word "
USING = {"alias": "default"}  # the database the benchmark stores in (set by bench/chat.py)


def deltas() -> list[str]:
    return [DELTA] * CHUNKS


async def arespond(session: Any, history: list[dict]) -> AsyncIterator[str]:
    for delta in deltas():
        yield delta


def respond(session: Any, history: list[dict]) -> Iterator[str]:
    yield from deltas()


def same_chunks() -> list[dict]:
    """The chunks ChatView sends for ``deltas()``."""
    envelope = Envelope("bare")
    chunks = envelope.open()
    for delta in deltas():
        chunks += envelope.feed(delta)
    return chunks + envelope.close()


@csrf_exempt
def bare(request: HttpRequest) -> StreamingHttpResponse:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield sse(chunk)  # encoded as it is sent, as any SSE endpoint does
        yield DONE

    chunks = same_chunks()

    return StreamingHttpResponse(body(), content_type=CONTENT_TYPE, headers=HEADERS)


@csrf_exempt
def bare_connected(request: HttpRequest) -> StreamingHttpResponse:
    """:func:`bare`, after opening the database connection (under ASGI each request's thread opens its own)."""
    connections[USING["alias"]].ensure_connection()
    return bare(request)


class BenchChatView(ChatView):
    """ChatView storing in the benchmark's database alias."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        from agent_sessions.manager import SessionManager

        self.manager = SessionManager(using=USING["alias"])
        return super().post(request, *args, **kwargs)


urlpatterns = [
    path("chat/async", BenchChatView.as_view(respond=arespond)),
    path("chat/sync", BenchChatView.as_view(respond=respond)),
    path("bare", bare),
    path("bare/connected", bare_connected),
]
