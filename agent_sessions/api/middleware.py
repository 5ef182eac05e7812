"""Middleware that keeps every response under the API's URL prefix in the JSON error shape.

Add ``"agent_sessions.api.middleware.ApiErrorMiddleware"`` first in ``MIDDLEWARE``.
Under the prefix it answers over-long URLs with a JSON 414, reads chunked
request bodies (Django only reads ``Content-Length`` bytes), turns Django's and
ninja's own HTML/plain error pages (404, 405, …) into ``{"detail", "code"}``
and an exception that escapes every other handler into a JSON 500.  Other URLs
are left alone.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from functools import lru_cache

from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse

from .. import conf
from .errors import HTTP_CODES, json_error

logger = logging.getLogger(__name__)

_DETAILS = {
    404: "Not found.",
    405: "Method not allowed.",
    500: "Internal server error.",
}


@lru_cache(maxsize=1)
def api_prefix() -> str | None:
    """The path the API is mounted at (``/api/`` in the demo project), or None if it is not mounted."""
    try:
        return reverse("agent_sessions_api:openapi-json").rsplit("openapi.json", 1)[0]
    except NoReverseMatch:
        return None


def _is_json(response: HttpResponse) -> bool:
    return "json" in (response.get("Content-Type") or "")


def _read_chunked(request: HttpRequest) -> HttpResponse | None:
    """Buffer a chunked body so Django sees it (the server de-chunks ``wsgi.input``); 413 over the limit."""
    environ = request.META
    if "chunked" not in environ.get("HTTP_TRANSFER_ENCODING", "").lower() or environ.get("CONTENT_LENGTH"):
        return None
    stream = environ.get("wsgi.input")
    if stream is None:
        return None
    limit = conf.api_max_body_bytes()
    data = stream.read() if limit is None else stream.read(limit + 1)
    if limit is not None and len(data) > limit:
        return json_error(413, "body_too_large", f"Request body is larger than {limit} bytes.")
    environ["CONTENT_LENGTH"] = str(len(data))
    request._stream = io.BytesIO(data)
    request._body = data
    return None


class ApiErrorMiddleware:
    """JSON errors (404/405/414/500…) and chunked bodies for the API's URLs; other URLs pass through."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        prefix = api_prefix()
        if prefix is None or not request.path.startswith(prefix):
            return self.get_response(request)
        limit = conf.api_max_url_bytes()
        if len(request.get_full_path().encode("utf-8", "surrogatepass")) > limit:
            return json_error(414, "uri_too_long", f"The request URL is longer than {limit} bytes.")
        early = _read_chunked(request)
        if early is not None:
            return early
        response = self.get_response(request)
        if response.status_code >= 400 and not _is_json(response):
            response = self._as_json(response)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        prefix = api_prefix()
        if prefix is None or not request.path.startswith(prefix):
            return None
        logger.exception("unhandled error in %s %s", request.method, request.path, exc_info=exception)
        return json_error(500, "server_error", _DETAILS[500])

    @staticmethod
    def _as_json(response: HttpResponse) -> HttpResponse:
        status = response.status_code
        detail = _DETAILS.get(status) or (response.reason_phrase or "Error") + "."
        replacement = json_error(status, HTTP_CODES.get(status, "error"), detail)
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if header in response:
                replacement[header] = response[header]
        return replacement
