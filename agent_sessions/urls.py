"""URLs of agent_sessions: the JSON API (docs at ``docs``, schema at ``openapi.json``).

Mount with ``path("api/", include("agent_sessions.urls"))``; any other path
under the mount point answers a JSON 404 (add
``agent_sessions.api.middleware.ApiErrorMiddleware`` for JSON 405/414/500 too).
"""

from django.http import HttpRequest, HttpResponse
from django.urls import path, re_path

from .api.errors import json_error
from .api.main import api


def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any unknown path under the API's prefix: the API's JSON 404."""
    return json_error(404, "not_found", "Not found.")


urlpatterns = [
    path("", api.urls),
    re_path(r"^(?P<rest>.*)$", not_found),
]
