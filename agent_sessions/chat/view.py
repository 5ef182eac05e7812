"""``ChatView``: the backend of the AI SDK's ``useChat`` / ``Chat`` (``DefaultChatTransport``), on this store.

``ChatView.as_view(respond=...)`` serves the POST; :func:`chat_urls` mounts it in one ``include``.
Under ASGI the answer streams chunk by chunk; under WSGI it is a streaming response of a sync
iterator (an async ``respond`` is collected first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import URLPattern, path, re_path
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from ..api.config import get_manager
from ..api.errors import ApiError, error_body
from ..manager import SessionManager
from .access import authenticate
from .control import ChatControlView
from .placement import check
from .reply import Reply
from .request import parse
from .stream import CONTENT_TYPE, HEADERS


@method_decorator(csrf_exempt, name="dispatch")  # CSRF is checked by authenticate(), for login sessions only
class ChatView(View):
    """POST ``{id, messages, trigger, messageId?}`` → a UI message stream; the turn and the reply are stored.

    Options (``as_view`` keywords): ``respond(session, history)`` (required) yields UI chunks or text
    deltas, sync or async; ``manager`` the SessionManager sessions live in (default: the JSON API's);
    ``model`` the model name recorded with each reply; ``error_text(exc)`` the ``errorText`` sent
    when ``respond`` fails (default: a fixed sentence, no exception detail)."""

    http_method_names = ["post", "options"]
    respond: Callable[..., Any] | None = None
    manager: SessionManager | None = None
    model: str | None = None
    error_text: Callable[[BaseException], str] | None = None

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Callable[..., HttpResponse]:
        if not callable(initkwargs.get("respond", cls.respond)):
            raise ImproperlyConfigured("ChatView.as_view() needs respond=<callable(session, history)>")
        return super().as_view(**initkwargs)

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            authenticate(request)
            chat = parse(request)
            target = check(request, chat, self.manager or get_manager())
        except ApiError as exc:
            return JsonResponse(error_body(exc.status, exc.code, exc.detail), status=exc.status)
        assert self.respond is not None  # checked by as_view
        reply = Reply(target, self.respond, model=self.model, error_text=self.error_text)
        body = reply.aevents() if isinstance(request, ASGIRequest) else reply.events()
        return StreamingHttpResponse(body, content_type=CONTENT_TYPE, headers=HEADERS)


def chat_urls(*, respond: Callable[..., Any], **options: Any) -> list[URLPattern]:
    """The URL patterns of one chat endpoint: ``path("api/chat", include(chat_urls(respond=...)))``.

    Serves the POST at the mount point (SPEC §9), ``GET <id>/stream`` (resume) and ``POST <id>/stop``
    (:mod:`.control`); ``options`` are :class:`ChatView`'s."""
    manager = options.get("manager")
    # "api/chat" is mounted without a trailing slash (SPEC §10), so the id follows a "/" of its own.
    return [
        path("", ChatView.as_view(respond=respond, **options), name="agent_sessions_chat"),
        re_path(r"^(?:/|)(?P<chat_id>[^/].*)/stream$", ChatControlView.as_view(action="stream", manager=manager)),
        re_path(r"^(?:/|)(?P<chat_id>[^/].*)/stop$", ChatControlView.as_view(action="stop", manager=manager)),
    ]
