"""Who is calling: API keys (``Authorization: Bearer``) or a Django login session with CSRF.

Both return the acting user.  A missing or wrong credential is a 401; a
logged-in browser that sends an unsafe request without a valid CSRF token is a
403.  (Ninja's own ``django_auth`` checks CSRF before it knows whether anyone is
logged in, which would turn an anonymous POST into a 403 instead of a 401.)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import router
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from .. import conf
from ..credentials import PREFIX_LENGTH, TOKEN_TAG, digests_match, token_prefix
from ..models import ApiKey
from ..storage import api_keys
from .errors import ApiError

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_MAX_TOKEN_LENGTH = 200


def _active(user: Any) -> bool:
    return user is not None and getattr(user, "is_active", False)


class ApiKeyAuth(HttpBearer):
    """``Authorization: Bearer ask_…``: the key's owner, if the key is not revoked and the owner is active."""

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        token = token.strip()
        if not token.startswith(TOKEN_TAG) or len(token) <= PREFIX_LENGTH or len(token) > _MAX_TOKEN_LENGTH:
            return None
        for key in _candidates(token_prefix(token)):
            if digests_match(token, key.hashed_secret):
                if not _active(key.owner):
                    return None
                _touch(key)
                request.api_key = key
                return key.owner
        return None


def _candidates(prefix: str) -> list[ApiKey]:
    """Unrevoked keys whose token starts with ``prefix``, each with its owner loaded."""
    return api_keys.candidates(router.db_for_read(ApiKey), get_user_model(), prefix)


def _touch(key: ApiKey) -> None:
    """Record use, at most once per ``API_KEY_TOUCH_SECONDS`` (no write on every request)."""
    now = timezone.now()
    interval = timedelta(seconds=conf.api_key_touch_seconds())
    if key.last_used_at is None or now - key.last_used_at >= interval:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now


class LoginSessionAuth(APIKeyCookie):
    """The Django session cookie: the logged-in user; unsafe methods also need a valid CSRF token."""

    openapi_name = "sessionid"

    def __init__(self) -> None:
        from django.conf import settings

        self.param_name = settings.SESSION_COOKIE_NAME
        super().__init__(csrf=False)

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated or not _active(user):
            return None
        if request.method not in SAFE_METHODS and check_csrf(request) is not None:
            raise ApiError(403, "csrf_failed", "CSRF verification failed: send the X-CSRFToken header.")
        return user


def is_staff(user: Any) -> bool:
    """Staff (and superusers) see and change every session."""
    return bool(getattr(user, "is_staff", False) or getattr(user, "is_superuser", False))
