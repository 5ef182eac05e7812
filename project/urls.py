"""URLs of the demo project: the admin, the agent_sessions app, and a chat on a fake model."""

from django.contrib import admin
from django.urls import include, path

from agent_sessions.chat import chat_urls

from .chat_demo import chat_page, fake_model

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/chat", include(chat_urls(respond=fake_model))),
    path("api/", include("agent_sessions.urls")),
    path("chat/", chat_page, name="chat_demo"),
]
