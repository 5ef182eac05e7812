"""``GET /api/sessions/{id}/events``: a session's events as Server-Sent Events (SPEC §10).

A plain async Django view beside the ninja routes (a stream that stays open is not a JSON operation):
authentication and ownership as the API (a 404 in its error shape for another owner's session), then
``retry:``, the backlog after ``Last-Event-ID`` and the live events, one ``id:`` / ``data:`` block each,
with a comment line as heartbeat.  Under ASGI a subscriber is a coroutine waiting on a queue
(:mod:`.event_hub`); under WSGI (no event loop to share) each subscriber holds a thread and its own
Redis subscription.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue as sync_queue
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import SyncToAsync, sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse

from .. import conf, events
from ..signals import session_event
from .access import owned_manager
from .auth import ApiKeyAuth, LoginSessionAuth
from .errors import ApiError, error_body
from .event_hub import CLOSED, backlog_after, event_bytes, hub

HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
RETRY_MS = 2000
AUTHORIZING_AT_ONCE = 8
"""Subscribers authorized at the same time per process: each takes a database connection for the check,
so a thousand clients reconnecting together never exceed the database's connection limit."""
_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def _gate() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = asyncio.Semaphore(AUTHORIZING_AT_ONCE)
    return gate


def _authorize(request: HttpRequest, session_id: str) -> None:
    """The API's credentials (a Bearer key or a login session) and ownership; raises ApiError."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if header and scheme.lower() == "bearer":
        user = ApiKeyAuth().authenticate(request, token)
    else:
        user = LoginSessionAuth().authenticate(request, None)
    if user is None:
        raise ApiError(401, "not_authenticated", "Authentication required: send Authorization: Bearer <key>.")
    request.auth = user
    owned_manager(request, session_id)


def _authorize_and_release(request: HttpRequest, session_id: str) -> None:
    """:func:`_authorize`, then close this thread's database connections: a stream that stays open for hours
    must not hold one (the request's end, which would close them, is that far away)."""
    try:
        _authorize(request, session_id)
    finally:
        for connection in connections.all(initialized_only=True):
            connection.close()


def _release_request_thread() -> None:
    """End the worker thread asgiref keeps for this request's sync calls (Django's ``request_started``
    receivers, the authorization): an open stream would otherwise hold an idle thread per subscriber.
    A later sync call of the request (``request_finished``) starts a short-lived one."""
    context = SyncToAsync.thread_sensitive_context.get(None)
    executors = getattr(SyncToAsync, "context_to_thread_executor", None)
    if context is None or executors is None:
        return
    executor = executors.pop(context, None)
    if executor is not None:
        executor.shutdown(wait=False)


def _last_event_id(request: HttpRequest) -> int | None:
    value = request.headers.get("Last-Event-ID") or request.GET.get("lastEventId")
    try:
        return int(value) if value else None
    except ValueError:
        return None


def frame(data: bytes) -> tuple[int, bytes]:
    """An event's id and its SSE block."""
    event_id = int(json.loads(data)["id"])
    return event_id, b"id: %d\ndata: %s\n\n" % (event_id, data)


async def session_events(request: HttpRequest, session_id: str) -> HttpResponse:
    """The view (mounted by ``agent_sessions.urls``)."""
    if request.method != "GET":
        return JsonResponse(error_body(405, "method_not_allowed", "Use GET."), status=405)
    try:
        async with _gate():
            await sync_to_async(_authorize_and_release, thread_sensitive=True)(request, session_id)
    except ApiError as exc:
        return JsonResponse(error_body(exc.status, exc.code, exc.detail), status=exc.status)
    if isinstance(request, ASGIRequest):
        _release_request_thread()
    last = _last_event_id(request)
    body: Any = _astream(session_id, last) if isinstance(request, ASGIRequest) else _stream(session_id, last)
    return StreamingHttpResponse(body, content_type="text/event-stream", headers=HEADERS)


async def _astream(session_id: str, last: int | None) -> AsyncIterator[bytes]:
    events_hub = hub()
    queue = await events_hub.subscribe(session_id)  # before the backlog read: nothing falls in between
    try:
        yield b"retry: %d\n: subscribed\n\n" % RETRY_MS
        sent = last or 0
        if last is not None:
            for data in await backlog_after(session_id, last):
                event_id, block = frame(data)
                if event_id > sent:
                    sent = event_id
                    yield block
        heartbeat = conf.events_heartbeat_seconds()
        while True:
            try:
                data = await asyncio.wait_for(queue.get(), timeout=heartbeat)
            except TimeoutError:
                yield b": ping\n\n"
                continue
            if data == CLOSED:
                return
            event_id, block = frame(data)
            if event_id > sent:
                sent = event_id
                yield block
    finally:
        events_hub.unsubscribe(session_id, queue)


def _stream(session_id: str, last: int | None) -> Iterator[bytes]:
    """The WSGI twin: a blocking subscription on this request's thread."""
    url = conf.redis_url()
    yield b"retry: %d\n: subscribed\n\n" % RETRY_MS
    heartbeat = conf.events_heartbeat_seconds()
    if url is None:
        received: sync_queue.Queue[bytes] = sync_queue.Queue(maxsize=256)

        def receiver(sender: str, event: dict, **kwargs: Any) -> None:
            if sender == session_id:
                with contextlib.suppress(sync_queue.Full):  # a stalled reader loses events, never blocks a write
                    received.put_nowait(event_bytes(event))

        session_event.connect(receiver, weak=False)
        try:
            while True:
                try:
                    yield frame(received.get(timeout=heartbeat))[1]
                except sync_queue.Empty:
                    yield b": ping\n\n"
        finally:
            session_event.disconnect(receiver)
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=conf.enqueue_timeout_seconds())
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    try:
        pubsub.subscribe(events.channel(session_id))
        sent = last or 0
        if last is not None:
            entries: Any = client.xrange(events.stream_key(session_id), min=f"{last + 1}-0", max="+")
            for _, fields in entries:
                event_id, block = frame(fields[b"d"])
                if event_id > sent:
                    sent = event_id
                    yield block
        while True:
            message = pubsub.get_message(timeout=heartbeat)
            if message is None:
                yield b": ping\n\n"
                continue
            event_id, block = frame(message["data"])
            if event_id > sent:
                sent = event_id
                yield block
    finally:
        pubsub.close()
        client.close()
