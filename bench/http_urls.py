"""The project's URLs plus ``/bare/``: the floor for the HTTP workload.

Each bare endpoint does what the API's does minus the library: the same API-key auth
(``ApiKeyAuth``), the same request schema, then the one SQL statement the operation
needs (the append's lock + ``INSERT … SELECT``, the path CTE, the FTS query with the caller's
sessions only, our ranking and snippets, as ours sends it) through
the bare DB-API connection, answered as JSON by Ninja.
"""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest
from django.urls import include, path
from ninja import NinjaAPI

from agent_sessions.api.access import search_owner
from agent_sessions.api.auth import ApiKeyAuth
from agent_sessions.api.schemas import AppendIn, message_dict

from .workloads import Raw

bare = NinjaAPI(urls_namespace="bare", auth=ApiKeyAuth(), docs_url=None, openapi_url=None)


@bare.post("/sessions/{session_id}/messages")
def append(request: HttpRequest, session_id: str, payload: AppendIn):
    message = message_dict(payload.message)
    Raw(connection.alias).append(session_id, message)
    return {"id": message["id"], "inserted": True}


@bare.get("/sessions/{session_id}/history")
def history(request: HttpRequest, session_id: str):
    messages = Raw(connection.alias).history(session_id)
    return {"messages": messages, "count": len(messages)}


def _hits(rows: list) -> dict:
    return {"results": [{"id": r[0], "role": r[1], "content": r[2], "session_id": r[4]} for r in rows]}


@bare.get("/search")
def search(request: HttpRequest, q: str):
    """Our query written by hand: the caller's sessions only, our ranking, snippets."""
    return _hits(Raw(connection.alias).search_same(q, owner=search_owner(request)))


@bare.get("/search-plain")
def search_plain(request: HttpRequest, q: str):
    """The plainer query an expert might start from: every session, ``ts_rank``, no snippets (shown, not a goal)."""
    return _hits(Raw(connection.alias).search(q))


urlpatterns = [
    path("bare/", bare.urls),
    path("", include("project.urls")),
]
