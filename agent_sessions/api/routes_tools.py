"""AI tools of a session: their JSON Schemas, and running one with JSON arguments.

``session_search`` is scoped to the caller's sessions here (the manager's own
tool searches every session, which an API client must not see).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router

from ..manager.history import TOOL_LIMIT, session_search_tool
from ..tools import Tool
from .access import owned_manager, search_owner
from .errors import ApiError, not_found
from .http import page
from .schemas import ERROR_STATUSES, MAX_INT, ErrorOut, ToolCallIn, ToolList, ToolResultOut
from .search import search_owned

router = Router(tags=["tools"])


def _tools(request: HttpRequest, session_id: str) -> dict[str, Tool]:
    manager = owned_manager(request, session_id)
    owner = search_owner(request)

    def search(query: str, *, limit: int = TOOL_LIMIT) -> list:
        return search_owned(query, limit, using=manager.using, owner=owner)

    tools = dict(manager.get_session(session_id).tools())
    scoped = session_search_tool(search)
    tools[scoped.name] = scoped
    return tools


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


@router.get("/sessions/{session_id}/tools", response={200: ToolList, ERROR_STATUSES: ErrorOut}, summary="List tools")
def list_tools(
    request: HttpRequest,
    session_id: str,
    limit: int | None = Query(None, ge=1, le=MAX_INT),
    offset: int = Query(0, ge=0, le=MAX_INT),
):
    """Each tool's name, description and JSON Schema ``parameters`` (ready for an LLM SDK); a page, ``count``
    is the total."""
    tools, count, size = page(list(_tools(request, session_id).values()), limit, offset)
    return {"tools": tools, "count": count, "limit": size, "offset": offset}


@router.post(
    "/sessions/{session_id}/tools/{name}",
    response={200: ToolResultOut, ERROR_STATUSES: ErrorOut},
    summary="Execute a tool",
)
def execute_tool(request: HttpRequest, session_id: str, name: str, payload: ToolCallIn):
    """Run a tool with JSON ``arguments``; the result is the text the model would read (``Error: …`` on bad
    arguments — a tool reports, it never fails the request)."""
    tool = _tools(request, session_id).get(name)
    if tool is None:
        raise not_found("tool")
    if _has_nul(payload.arguments):
        raise ApiError(422, "invalid_arguments", "Tool arguments must not contain NUL characters.")
    # Undeclared keys reach Tool.validate, which answers "Error: unknown argument(s) …" and runs nothing.
    return {"name": name, "result": tool.execute(**payload.arguments)}
