"""``ChatView``: the backend of the AI SDK's ``useChat`` / ``Chat`` (``DefaultChatTransport``), on this store.

``ChatView.as_view(respond=...)`` serves the POST; :func:`chat_urls` mounts it in one ``include``.
With Redis configured the reply is a resumable generation (:mod:`.generation`): it runs in a thread of
its own and the POST follows its Redis stream, as a resume does.  Otherwise it runs in the request: under
ASGI chunk by chunk; under WSGI a streaming response of a sync iterator (an async ``respond`` is collected
first).
"""

from __future__ import annotations

import logging
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
from . import generation
from .access import authenticate
from .control import ChatControlView
from .placement import check
from .reply import Reply
from .request import parse
from .stream import CONTENT_TYPE, HEADERS

logger = logging.getLogger(__name__)
_BUSY = "A reply is being generated for this chat: resume it (GET <chat url>/<id>/stream) or stop it (POST …/stop)."


@method_decorator(csrf_exempt, name="dispatch")  # CSRF is checked by authenticate(), for login sessions only
class ChatView(View):
    """POST ``{id, messages, trigger, messageId?}`` → a UI message stream; the turn and the reply are stored.

    Options (``as_view`` keywords): ``respond(session, history)`` (required) yields UI chunks or text
    deltas, sync or async; ``manager`` the SessionManager sessions live in (default: the JSON API's);
    ``model`` the model name recorded with each reply; ``error_text(exc)`` the ``errorText`` sent
    when ``respond`` fails (default: a fixed sentence, no exception detail); ``resumable`` run the reply apart
    from the request, resumable and stopped only by the stop route (default None: the
    ``AGENT_SESSIONS_CHAT_RESUMABLE`` setting, on where Redis is configured)."""

    http_method_names = ["post", "options"]
    respond: Callable[..., Any] | None = None
    manager: SessionManager | None = None
    model: str | None = None
    error_text: Callable[[BaseException], str] | None = None
    resumable: bool | None = None

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
        asgi = isinstance(request, ASGIRequest)
        if generation.resumable(self.resumable):
            try:
                stream_id = generation.start(target, self.respond, model=self.model, error_text=self.error_text)
            except generation.Busy:
                return JsonResponse(error_body(409, "generation_running", _BUSY), status=409)
            except generation.RedisUnavailable as exc:  # Redis is down: the reply runs in the request, as without it
                logger.warning("chat %s: Redis unavailable (%s); the reply is not resumable", target.chat.chat_id, exc)
            else:
                body = generation.body(target.chat.chat_id, stream_id, target.manager, asgi=asgi)
                return StreamingHttpResponse(body, content_type=CONTENT_TYPE, headers=HEADERS)
        reply = Reply(target, self.respond, model=self.model, error_text=self.error_text)
        body = reply.aevents() if asgi else reply.events()
        return StreamingHttpResponse(body, content_type=CONTENT_TYPE, headers=HEADERS)


def chat_urls(*, respond: Callable[..., Any], **options: Any) -> list[URLPattern]:
    """The URL patterns of one chat endpoint: ``path("api/chat", include(chat_urls(respond=...)))``.

    Serves the POST at the mount point (SPEC §9), ``GET <id>/stream`` (resume) and ``POST <id>/stop``
    (:mod:`.control`); ``options`` are :class:`ChatView`'s."""
    control = {"manager": options.get("manager"), "resumable": options.get("resumable")}
    # "api/chat" is mounted without a trailing slash (SPEC §10), so the id follows a "/" of its own.
    return [
        path("", ChatView.as_view(respond=respond, **options), name="agent_sessions_chat"),
        re_path(r"^(?:/|)(?P<chat_id>[^/].*)/stream$", ChatControlView.as_view(action="stream", **control)),
        re_path(r"^(?:/|)(?P<chat_id>[^/].*)/stop$", ChatControlView.as_view(action="stop", **control)),
    ]
