"""An async view for the ASGI test of the async twins (tests/test_async_asgi.py): one turn of a
conversation, an append and a history read through the twins, mounted beside the project's URLs.
It answers with the monotonic times its database work began and ended, so the test can see overlap."""

import time

from django.http import JsonResponse
from django.urls import path

from agent_sessions.manager import SessionManager
from project.urls import urlpatterns as project_urls

MANAGER = SessionManager()


async def turn(request, session_id: str) -> JsonResponse:
    began = time.monotonic()
    session = await MANAGER.aget_session(session_id)
    number = request.GET.get("n", "0")
    await session.aappend_message({"id": f"m{number}", "role": "user", "parts": [{"type": "text", "text": number}]})
    history = await session.aget_history()
    return JsonResponse({"messages": len(history), "span": [began, time.monotonic()]})


urlpatterns = [path("async-turn/<str:session_id>", turn), *project_urls]
