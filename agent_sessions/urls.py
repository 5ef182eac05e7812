"""URLs of agent_sessions: the JSON API (docs at ``docs``, schema at ``openapi.json``).

Mount with ``path("api/", include("agent_sessions.urls"))``.
"""

from django.urls import path

from .api.main import api

urlpatterns = [
    path("", api.urls),
]
