"""Who is calling, as in the JSON API: a Bearer API key (no CSRF), or a logged-in session plus CSRF."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from ..api.auth import ApiKeyAuth, LoginSessionAuth
from ..api.errors import ApiError

_NOT_AUTHENTICATED = "Authentication required: send Authorization: Bearer <key>, or log in (with a CSRF token)."


def authenticate(request: HttpRequest) -> Any:
    """The acting user (also set as ``request.auth``); a 401 without a valid credential, a 403 on a CSRF failure."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if header and scheme.lower() == "bearer":
        user = ApiKeyAuth().authenticate(request, token)
    else:
        user = LoginSessionAuth().authenticate(request, None)  # raises the 403 for a missing CSRF token
    if user is None:
        raise ApiError(401, "not_authenticated", _NOT_AUTHENTICATED)
    request.auth = user
    return user
