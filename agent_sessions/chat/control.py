"""The chat's resume and stop routes (SPEC §10): ``GET {chat url}/{id}/stream`` and ``POST {chat url}/{id}/stop``.

``GET …/stream`` answers the chat's active generation (:mod:`.generation`) from its first chunk, then its
live tail, ending with ``finish``; 204 No Content when none is active (what ``useChat({resume: true})``
expects: it shows the stored messages and waits), also when the generation's process died (its partial
reply is stored, marked interrupted, first).  ``POST …/stop`` (or ``DELETE …/stream``) stops the active
generation and answers 204 once its partial reply is stored.  Without resumable generations (no Redis, or
``resumable=False``) both answer 204.  Both check the caller as the chat POST does: no credential is a 401,
another owner's chat a 404; a chat that does not exist yet is a 204 (a client resumes on page load, before
its first message), except to the caller whose first POST's reply is starting (its session row is written
by the generation, just after the first bytes).
"""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from ..api.auth import is_staff
from ..api.config import get_manager
from ..api.errors import ApiError, error_body, not_found
from ..manager import SessionManager
from ..storage import session_rows
from . import generation, live
from .access import authenticate
from .stream import CONTENT_TYPE, HEADERS


def _check_owner(request: HttpRequest, chat_id: str, manager: SessionManager) -> bool:
    """Whether the chat's session exists; a 404 when it belongs to someone else (staff see every chat)."""
    user = authenticate(request)
    if session_rows.session_state(manager.using, chat_id) is None:
        return False  # not created yet (or its first reply is starting)
    if not is_staff(user) and session_rows.session_state(manager.using, chat_id, owner_id=user.pk) is None:
        raise not_found("session")
    return True


def _active(chat_id: str, user: Any, exists: bool) -> str | None:
    """The chat's active stream id, or None; before the session row exists (a first POST's reply, whose turn is
    not stored yet) only for the user who started it."""
    redis = live.client()
    stream_id = live.active(redis, chat_id)
    if stream_id is None or exists or is_staff(user):
        return stream_id
    return stream_id if live.started_by(redis, stream_id) == str(user.pk) else None


def _resume(request: HttpRequest, chat_id: str, manager: SessionManager, exists: bool) -> HttpResponse:
    redis = live.client()
    stream_id = _active(chat_id, request.auth, exists)
    if stream_id is None:
        return HttpResponse(status=204)
    if not live.alive(redis, stream_id):  # its process died: store what it wrote, then there is nothing to resume
        generation.recover(chat_id, stream_id, manager)
        return HttpResponse(status=204)
    body = generation.body(chat_id, stream_id, manager, asgi=isinstance(request, ASGIRequest))
    return StreamingHttpResponse(body, content_type=CONTENT_TYPE, headers=HEADERS)


@method_decorator(csrf_exempt, name="dispatch")  # CSRF is checked by authenticate(), for login sessions only
class ChatControlView(View):
    """``stream`` (GET, and DELETE to stop) and ``stop`` (POST) of one chat; see the module docstring."""

    action = "stream"
    manager: SessionManager | None = None
    resumable: bool | None = None

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        allowed = {"stream": ("GET", "DELETE"), "stop": ("POST",)}[self.action]
        if request.method not in allowed:
            return JsonResponse(error_body(405, "method_not_allowed", f"Use {' or '.join(allowed)}."), status=405)
        manager, chat_id = self.manager or get_manager(), kwargs["chat_id"]
        try:
            exists = _check_owner(request, chat_id, manager)
        except ApiError as exc:
            return JsonResponse(error_body(exc.status, exc.code, exc.detail), status=exc.status)
        if not generation.resumable(self.resumable):
            return HttpResponse(status=204)
        try:
            if request.method == "GET":
                return _resume(request, chat_id, manager, exists)
            if _active(chat_id, request.auth, exists) is not None:
                generation.stop(chat_id, manager)
        except live.RedisError:
            body = error_body(503, "redis_unavailable", "The chat's generations are out of reach; try again.")
            return JsonResponse(body, status=503)
        return HttpResponse(status=204)
