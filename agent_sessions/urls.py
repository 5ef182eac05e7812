"""URLs of agent_sessions: the JSON API (docs at ``docs``, schema at ``openapi.json``).

Mount with ``path("api/", include("agent_sessions.urls"))``; any other path
under the mount point answers a JSON 404 (add
``agent_sessions.api.middleware.ApiErrorMiddleware`` for JSON 405/414/500 too).
"""

from django.http import HttpRequest, HttpResponse
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt

from .api.errors import json_error
from .api.main import api
from .api.routes_events import session_events


@csrf_exempt  # it changes nothing: a POST from a logged-in browser is a 404, not a CSRF 403
def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any unknown path under the API's prefix, under every method: the API's JSON 404."""
    return json_error(404, "not_found", "Not found.")


urlpatterns = [
    # The mount point itself first: ninja's root view (kept for reversing its paths) is not CSRF-exempt.
    path("", not_found),
    # Server-Sent Events, a plain async view beside ninja's JSON routes (docs/live-sessions.md).
    re_path(r"^sessions/(?P<session_id>.+)/events$", session_events, name="agent_sessions_events"),
    path("", api.urls),
    re_path(r"^(?P<rest>.*)$", not_found),
]
