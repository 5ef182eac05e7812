"""Strict JSON responses: a float JSON cannot carry (NaN, ±Infinity) is sent as ``null``.

Python's encoder writes ``NaN`` and ``Infinity`` by default, which ``JSON.parse`` and every
strict parser refuse, so one such number in a stored row (a foreign writer's cost of
``'Infinity'``) would break a client's whole response.  The schemas already turn such
values into ``null`` where a stored float is read; this renderer is the net for any other.
"""

from __future__ import annotations

import math
from typing import Any

from django.http import HttpRequest
from ninja.renderers import JSONRenderer


def finite(value: Any) -> Any:
    """``value`` with every float that is not finite replaced by None (containers copied only then)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


class StrictJSONRenderer(JSONRenderer):
    """Ninja's JSON renderer with ``allow_nan=False``; a body holding NaN or ±Infinity is sent with ``null``."""

    json_dumps_params = {"allow_nan": False}

    def render(self, request: HttpRequest, data: Any, *, response_status: int) -> Any:
        try:
            return super().render(request, data, response_status=response_status)
        except ValueError:  # "Out of range float values are not JSON compliant": rare, so walked only then
            return super().render(request, finite(data), response_status=response_status)
