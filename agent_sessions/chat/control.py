"""The chat's resume and stop routes (SPEC §10): ``GET {chat url}/{id}/stream`` and ``POST {chat url}/{id}/stop``.

Resumable generations (a reply run apart from the request, its chunks in Redis) are not built yet: no
generation is ever active, so the resume route answers 204 No Content (what ``useChat({resume: true})``
expects when there is nothing to resume: it shows the stored messages and waits) and the stop route answers
204 too (a streaming reply stops when its client closes the connection).  Both check the caller as the chat
POST does: no credential is a 401, another owner's chat a 404; a chat that does not exist yet is a 204 (a
client resumes on page load, before its first message).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from ..api.auth import is_staff
from ..api.config import get_manager
from ..api.errors import ApiError, error_body, not_found
from ..manager import SessionManager
from ..storage import session_rows
from .access import authenticate


def _check_owner(request: HttpRequest, chat_id: str, manager: SessionManager) -> None:
    """A 404 when the chat exists and belongs to someone else (staff see every chat)."""
    user = authenticate(request)
    if is_staff(user):
        return
    if session_rows.session_state(manager.using, chat_id) is None:
        return  # not created yet: nothing to resume or stop
    if session_rows.session_state(manager.using, chat_id, owner_id=user.pk) is None:
        raise not_found("session")


@method_decorator(csrf_exempt, name="dispatch")  # CSRF is checked by authenticate(), for login sessions only
class ChatControlView(View):
    """``stream`` (GET, and DELETE to stop) and ``stop`` (POST) of one chat; see the module docstring."""

    action = "stream"
    manager: SessionManager | None = None

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        allowed = {"stream": ("GET", "DELETE"), "stop": ("POST",)}[self.action]
        if request.method not in allowed:
            return JsonResponse(error_body(405, "method_not_allowed", f"Use {' or '.join(allowed)}."), status=405)
        try:
            _check_owner(request, kwargs["chat_id"], self.manager or get_manager())
        except ApiError as exc:
            return JsonResponse(error_body(exc.status, exc.code, exc.detail), status=exc.status)
        return HttpResponse(status=204)  # no generation is active (resumable generations are not built)
