"""URLs of the demo project: the admin and the agent_sessions app."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("agent_sessions.urls")),
]
