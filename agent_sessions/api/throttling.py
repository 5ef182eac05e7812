"""Rate limits of the JSON API, per API key and per user, with django-ninja's throttling.

Two limits apply to every authenticated request (after authentication, so they key on who is
calling): ``AGENT_SESSIONS_API_KEY_RATE_LIMIT`` per API key and ``AGENT_SESSIONS_API_USER_RATE_LIMIT``
per user, across all of that user's keys and its login session.  A rate is ninja's
``"<requests>/<period>"`` (``"600/min"``, ``"10/s"``, ``"5000/hour"``); ``None`` turns that limit off.
Over a limit the API answers 429 ``rate_limited`` with ``Retry-After`` (whole seconds).  The counts
live in Django's default cache: per process with the default local-memory cache, shared by every
process with Redis or Memcached (docs/settings.md).  The rates are read on each request, so a
settings change applies at once.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from ninja.throttling import BaseThrottle, SimpleRateThrottle

from .. import conf


class _ConfiguredRateThrottle(SimpleRateThrottle):
    """A ninja rate throttle whose rate is a setting, read on each request (None: no limit)."""

    setting = ""

    def __init__(self) -> None:  # ninja's would read a rate now, from its own settings
        self.rate = None
        self.num_requests = self.duration = None

    def allow_request(self, request: HttpRequest) -> bool:
        rate = conf.get(self.setting)
        if rate is None:
            return True
        if rate != self.rate:
            try:
                self.num_requests, self.duration = self.parse_rate(rate)
            except (ValueError, AttributeError, TypeError):
                raise ImproperlyConfigured(
                    f"AGENT_SESSIONS_{self.setting} = {rate!r}: give '<requests>/<period>' (e.g. '600/min') or None"
                ) from None
            self.rate = rate
        return super().allow_request(request)

    def ident(self, request: HttpRequest) -> Any:
        raise NotImplementedError

    def get_cache_key(self, request: HttpRequest) -> str | None:
        ident = self.ident(request)
        if ident is None:
            return None
        return f"agent_sessions_throttle_{self.scope}_{ident}"


class ApiKeyRateThrottle(_ConfiguredRateThrottle):
    """Requests per API key (``AGENT_SESSIONS_API_KEY_RATE_LIMIT``); a login session has no key and passes."""

    scope = "key"
    setting = "API_KEY_RATE_LIMIT"

    def ident(self, request: HttpRequest) -> Any:
        key = getattr(request, "api_key", None)
        return None if key is None else key.pk


class UserRateThrottle(_ConfiguredRateThrottle):
    """Requests per user (``AGENT_SESSIONS_API_USER_RATE_LIMIT``), whatever key or login session they come with."""

    scope = "user"
    setting = "API_USER_RATE_LIMIT"

    def ident(self, request: HttpRequest) -> Any:
        user = getattr(request, "auth", None)
        return None if user is None else user.pk


def throttles() -> list[BaseThrottle]:
    """The API's throttles, per key first."""
    return [ApiKeyRateThrottle(), UserRateThrottle()]
