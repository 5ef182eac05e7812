"""Checks that run before ninja parses a request: body size, media type, JSON shape and characters.

Each would otherwise reach the parser or the database as something other than
a clean 4xx: a lone UTF-16 surrogate cannot be encoded for any database (it is
rejected anywhere in a body), Postgres TEXT cannot hold NUL (the schemas reject
it in every plain string field; inside message parts it is stored escaped), and
a body that is not a JSON object has no fields to read.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja.parser import Parser

from .. import conf
from .errors import error_body, json_error

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_PARSED = "_agent_sessions_json"


def _content_length(request: HttpRequest) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def _url_has_nul(request: HttpRequest) -> bool:
    if "\x00" in request.path:
        return True
    return any("\x00" in key or any("\x00" in v for v in values) for key, values in request.GET.lists())


def unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored (a NUL or a lone surrogate), or None."""
    if "\x00" in text:
        return "must not contain NUL characters"
    return _SURROGATES if _has_surrogate(text) else None


_SURROGATES = "must not contain lone UTF-16 surrogates"


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def find_unstorable(value: Any, loc: tuple = ()) -> tuple[tuple, str] | None:
    """The location and reason of the first string (key or value) in a JSON document with a lone surrogate."""
    if isinstance(value, str):
        return (loc, _SURROGATES) if _has_surrogate(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if _has_surrogate(key):
                return (*loc, key.encode("utf-8", "backslashreplace").decode()), f"keys {_SURROGATES}"
            found = find_unstorable(item, (*loc, key))
            if found:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = find_unstorable(item, (*loc, index))
            if found:
                return found
    return None


def _is_json_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _invalid(loc: tuple, msg: str, kind: str) -> HttpResponse:
    errors = [{"loc": ["body", *(str(p) for p in loc)], "msg": msg, "type": kind}]
    body = error_body(422, "validation_error", "Request is invalid.", errors)
    return HttpResponse(json.dumps(body), status=422, content_type="application/json")


def check_body(request: HttpRequest) -> HttpResponse | None:
    """415 for a body that is not JSON, 400 for malformed JSON, 422 for a non-object or unstorable text."""
    if request.method not in BODY_METHODS:
        return None
    try:
        raw = request.body
    except RequestDataTooBig:
        return json_error(413, "body_too_large", "Request body is too large.")
    if not raw:
        return None
    if not _is_json_type(request.META.get("CONTENT_TYPE", "")):
        return json_error(415, "unsupported_media_type", "Send the request body as application/json.")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return json_error(400, "malformed_json", "The request body is not valid JSON.")
    if not isinstance(data, dict):
        return _invalid((), "The request body must be a JSON object.", "object_type")
    if b"\\u" in raw:  # a lone surrogate can only arrive as a \u escape (raw, it is invalid UTF-8)
        found = find_unstorable(data)
        if found:
            return _invalid(found[0], found[1], "string_unstorable")
    setattr(request, _PARSED, data)
    return None


class CheckedJsonParser(Parser):
    """Ninja's JSON parser, reusing the document :func:`check_body` already parsed."""

    def parse_body(self, request: HttpRequest) -> dict:
        parsed = getattr(request, _PARSED, None)
        return parsed if parsed is not None else super().parse_body(request)


def guard_request(run: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Wraps an operation (ninja ``mode="view"``): 413 over the body limit, 400 for NUL in path or query,
    then the body checks of :func:`check_body`."""

    @functools.wraps(run)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        limit = conf.api_max_body_bytes()
        if limit is not None and _content_length(request) > limit:
            return json_error(413, "body_too_large", f"Request body is larger than {limit} bytes.")
        if _url_has_nul(request):
            return json_error(400, "invalid_characters", "The URL must not contain NUL characters.")
        rejected = check_body(request)
        if rejected is not None:
            return rejected
        return run(request, *args, **kwargs)

    return guarded
