"""HTTP conventions of the API: ETags and ``If-Match`` preconditions, ``Location`` URLs, pagination."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from django.http import HttpRequest, HttpResponse
from ninja import Query
from ninja.renderers import JSONRenderer

from .. import conf
from .errors import ApiError
from .middleware import api_prefix
from .schemas import MAX_INT


def etag(*parts: Any) -> str:
    """A strong ETag over the given values (any JSON-able data; datetimes as text)."""
    digest = hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode("utf-8", "surrogatepass"))
    return f'"{digest.hexdigest()[:32]}"'


def session_etag(row: Any) -> str:
    """ETag of a session row: every field a client sees."""
    return etag(
        row.id, row.name, row.parent_session_id, row.model, row.source, row.input_tokens, row.output_tokens,
        float(row.estimated_cost or 0), row.end_reason, row.updated_at,
    )  # fmt: skip


def message_etag(message: Mapping[str, Any] | None) -> str | None:
    """ETag of a stored message (None when it does not exist)."""
    return None if message is None else etag(message)


def check_if_match(request: HttpRequest, current: str | None) -> None:
    """412 when the request's ``If-Match`` names no current representation (``*``: any existing one)."""
    header = request.headers.get("If-Match")
    if header is None:
        return
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}
    if current is not None and ("*" in tags or current in tags):
        return
    raise ApiError(412, "precondition_failed", "If-Match does not match the current ETag; re-read and retry.")


def url(*segments: str) -> str:
    """Absolute path of an API resource (each segment percent-encoded), e.g. ``url("sessions", id)``."""
    return (api_prefix() or "/") + "/".join(quote(s, safe="") for s in segments)


def set_location(response: HttpResponse, *segments: str) -> None:
    response["Location"] = url(*segments)


PAGE_LIMIT = Query(None, ge=1, le=MAX_INT, description="Page size (default and cap: AGENT_SESSIONS_API_MAX_PAGE_SIZE).")
PAGE_OFFSET = Query(0, ge=0, le=MAX_INT)
"""The ``limit`` and ``offset`` query parameters of the API's paginated lists (see :func:`page_size`)."""


def page_size(limit: int | None) -> int:
    """The page size to use: the client's, capped by ``AGENT_SESSIONS_API_MAX_PAGE_SIZE`` (the cap by default)."""
    cap = conf.api_max_page_size()
    return cap if limit is None else min(limit, cap)


def page(items: list, limit: int | None, offset: int, *, whole: bool = False) -> tuple[list, int, int]:
    """(items of the page, the total, the page size) of a fully loaded list.

    ``whole``: without a ``limit`` the page is the rest of the list, and a limit is not capped (for
    history, which clients have always read in one piece and which is loaded whole anyway)."""
    if whole:
        size = len(items) if limit is None else limit
    else:
        size = page_size(limit)
    return items[offset : offset + size], len(items), size


# The renderer build_api() leaves ninja with (its default), for the responses built here.
_RENDERER = JSONRenderer()
_CONTENT_TYPE = f"{_RENDERER.media_type}; charset={_RENDERER.charset}"


def stored_messages(request: HttpRequest, body: Mapping[str, Any], *, etag: str | None = None) -> HttpResponse:
    """A 200 of ``body`` (stored messages: a page, a leaf, one message) rendered as ninja renders any
    response, without checking it against the route's response schema first; ``etag``: its header.

    The messages were checked when they were stored, and the schema (``UIMessageOut``) only names
    ``id``, ``role`` and ``parts`` and lets everything else through, so the check could only turn
    a foreign writer's malformed row into a 500.  It would also cost more than rendering the JSON
    (docs/performance.md, H2)."""
    response = HttpResponse(_RENDERER.render(request, body, response_status=200), content_type=_CONTENT_TYPE)
    if etag is not None:
        response["ETag"] = etag
    return response
