"""Checks that run before ninja parses a request: body size and NUL characters in the URL.

Both would otherwise reach the database or the parser as something other than
a clean 4xx (Postgres cannot store or compare text containing NUL).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from .. import conf
from .errors import json_error


def _content_length(request: HttpRequest) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def _url_has_nul(request: HttpRequest) -> bool:
    if "\x00" in request.path:
        return True
    return any("\x00" in key or any("\x00" in v for v in values) for key, values in request.GET.lists())


def guard_request(run: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Wraps an operation (ninja ``mode="view"``): 413 over the body limit, 400 for NUL in path or query."""

    @functools.wraps(run)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        limit = conf.api_max_body_bytes()
        if limit is not None and _content_length(request) > limit:
            return json_error(413, "body_too_large", f"Request body is larger than {limit} bytes.")
        if _url_has_nul(request):
            return json_error(400, "invalid_characters", "The URL must not contain NUL characters.")
        return run(request, *args, **kwargs)

    return guarded
