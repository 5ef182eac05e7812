"""One JSON error shape for every failure: ``{"detail": str, "code": str}`` (plus ``errors`` for validation).

Library exceptions map to status codes here, so routes just call the Python
API and let bad input surface as 4xx instead of a 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, DataError, IntegrityError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from ..exceptions import (
    AgentSessionsError,
    CompactionNotConfigured,
    ContextReadOnly,
    ContextTooLarge,
    InvalidMessage,
    InvalidText,
    InvalidUsage,
    MessageCycle,
    MessageTooLarge,
    SearchNotSupported,
    SearchTooComplex,
    SessionNotFound,
)

logger = logging.getLogger(__name__)


class ApiError(Exception):
    """An error response: HTTP status, a stable machine-readable ``code`` and a human ``detail``."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail


def not_found(what: str = "session") -> ApiError:
    """404 that says what is missing but never whether it exists for someone else."""
    return ApiError(404, f"{what}_not_found", f"No such {what}.")


def error_body(status: int, code: str, detail: str, errors: list | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": detail, "code": code}
    if errors is not None:
        body["errors"] = errors
    return body


def _clean_validation_errors(errors: list[dict]) -> list[dict]:
    """Pydantic's errors without the parts that are not JSON (exception objects in ``ctx``, raw input)."""
    cleaned = []
    for error in errors:
        item = {
            "loc": [str(p) for p in error.get("loc", ())],
            "msg": str(error.get("msg", "")),
            "type": error.get("type"),
        }
        cleaned.append(item)
    return cleaned


# Library exceptions → (status, code).  Looked up along the exception's MRO.
LIBRARY_ERRORS: dict[type[Exception], tuple[int, str]] = {
    MessageTooLarge: (413, "message_too_large"),
    MessageCycle: (422, "message_cycle"),
    InvalidText: (422, "invalid_text"),
    InvalidMessage: (422, "invalid_message"),
    ContextReadOnly: (409, "context_read_only"),
    ContextTooLarge: (422, "context_too_large"),
    CompactionNotConfigured: (409, "compaction_not_configured"),
    SearchNotSupported: (409, "search_not_supported"),
    SessionNotFound: (404, "session_not_found"),
    InvalidUsage: (422, "invalid_usage"),
    SearchTooComplex: (400, "search_too_complex"),
    AgentSessionsError: (400, "bad_request"),
}

HTTP_CODES = {
    400: "bad_request",
    401: "not_authenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    412: "precondition_failed",
    413: "too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    500: "server_error",
    503: "service_unavailable",
}

# Messages of permanent database errors that mean "this value can never be stored" (413), by vendor.
_TOO_LARGE_MARKERS = ("too long for tsvector", "index row size", "too big", "too long", "exceeds maximum")


def _sqlstate(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return str(getattr(cause, "sqlstate", None) or getattr(exc, "sqlstate", None) or "")


def classify_database_error(exc: DatabaseError) -> tuple[int, str, str]:
    """(status, code, detail) for a database error: input it can never store is 413/422, an outage 503.

    SQLSTATE class 54 (program limit exceeded: tsvector or index row too large)
    and over-size messages are 413; class 22 (data exception) and DataError
    are 422; integrity violations 409; anything else (connection lost, server
    shutting down, SQLite busy) is an outage worth retrying.
    """
    state = _sqlstate(exc)
    text = str(exc).lower()
    if state.startswith("54") or any(marker in text for marker in _TOO_LARGE_MARKERS):
        return 413, "too_large", "A value in the request is too large to store."
    if isinstance(exc, DataError) or state.startswith("22"):
        return 422, "unstorable_value", "A value in the request cannot be stored."
    if isinstance(exc, IntegrityError) or state.startswith("23"):
        return 409, "conflict", "The request conflicts with stored data; re-read and retry."
    return 503, "database_unavailable", "The database is unavailable; retry shortly."


def install(api: NinjaAPI) -> None:
    """Register the handlers on ``api`` (they replace ninja's defaults)."""

    def respond(request: HttpRequest, status: int, code: str, detail: str, errors: list | None = None) -> HttpResponse:
        return api.create_response(request, error_body(status, code, detail, errors), status=status)

    def on_api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
        return respond(request, exc.status, exc.code, exc.detail)

    def on_validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        return respond(request, 422, "validation_error", "Request is invalid.", _clean_validation_errors(exc.errors))

    def on_auth(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        response = respond(
            request, 401, "not_authenticated", "Authentication required: send Authorization: Bearer <key>."
        )
        response["WWW-Authenticate"] = "Bearer"
        return response

    def on_http(request: HttpRequest, exc: HttpError) -> HttpResponse:
        status = exc.status_code
        code = "malformed_json" if status == 400 and "parse" in str(exc).lower() else HTTP_CODES.get(status, "error")
        return respond(request, status, code, str(exc))

    def on_404(request: HttpRequest, exc: Http404) -> HttpResponse:
        return respond(request, 404, "not_found", "Not found.")

    def on_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
        return respond(request, 413, "body_too_large", "Request body is too large.")

    def on_library(request: HttpRequest, exc: AgentSessionsError) -> HttpResponse:
        for cls in type(exc).__mro__:
            if cls in LIBRARY_ERRORS:
                status, code = LIBRARY_ERRORS[cls]
                detail = str(exc) if status != 404 else "No such session."
                return respond(request, status, code, detail)
        return respond(request, 400, "bad_request", str(exc))

    def on_database_error(request: HttpRequest, exc: DatabaseError) -> HttpResponse:
        status, code, detail = classify_database_error(exc)
        if status != 503:
            logger.info("rejected %s %s: %s", request.method, request.path, exc)
            return respond(request, status, code, detail)
        # The database went away (restart, failover): the request may be retried.
        logger.warning("database unavailable in %s %s: %s", request.method, request.path, exc)
        response = respond(request, status, code, detail)
        response["Retry-After"] = "2"
        return response

    def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
        logger.exception("unhandled error in %s %s", request.method, request.path, exc_info=exc)
        return respond(request, 500, "server_error", "Internal server error.")

    # ninja's annotation lets a handler receive the class as well as the instance; it passes instances.
    handlers: list[tuple[type[Exception], Callable[..., HttpResponse]]] = [
        (ApiError, on_api_error),
        (ValidationError, on_validation),
        (AuthenticationError, on_auth),
        (HttpError, on_http),
        (Http404, on_404),
        (RequestDataTooBig, on_too_big),
        (AgentSessionsError, on_library),
        (DatabaseError, on_database_error),
        (Exception, on_unexpected),
    ]
    for exc_class, handler in handlers:
        api.add_exception_handler(exc_class, handler)


def json_error(status: int, code: str, detail: str) -> HttpResponse:
    """An error response built without the API (for checks that run before ninja takes over)."""
    return HttpResponse(json.dumps(error_body(status, code, detail)), status=status, content_type="application/json")
