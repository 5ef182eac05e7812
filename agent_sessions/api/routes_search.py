"""Full-text search: within one session, or across the caller's sessions."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router

from .access import owned_manager, search_owner
from .config import get_manager
from .http import page_size
from .schemas import ERROR_STATUSES, MAX_INT, NO_NUL_PATTERN, ErrorOut, SearchOut
from .search import search_owned, search_session

router = Router(tags=["search"])

_Q = Query(
    ...,
    pattern=NO_NUL_PATTERN,
    description="Words to find (all of them); quotes, OR and -exclusions where the backend supports them.",
)
_LIMIT = Query(20, ge=1, le=MAX_INT, description="Hits to return (capped by AGENT_SESSIONS_API_MAX_PAGE_SIZE).")
_OFFSET = Query(0, ge=0, le=10_000, description="Hits to skip (best first), for the next page.")


@router.get("/search", response={200: SearchOut, ERROR_STATUSES: ErrorOut}, summary="Search all your sessions")
def search_all(request: HttpRequest, q: str = _Q, limit: int = _LIMIT, offset: int = _OFFSET):
    """Best matches across the caller's sessions (each hit names its ``session_id``)."""
    manager = get_manager()
    limit = page_size(limit)
    hits = search_owned(q, offset + limit, using=manager.using, owner=search_owner(request))[offset:]
    return {"results": hits, "limit": limit, "offset": offset}


@router.get(
    "/sessions/{session_id}/search", response={200: SearchOut, ERROR_STATUSES: ErrorOut}, summary="Search a session"
)
def search_one(request: HttpRequest, session_id: str, q: str = _Q, limit: int = _LIMIT, offset: int = _OFFSET):
    """Best matches within one session."""
    manager = owned_manager(request, session_id)
    limit = page_size(limit)
    hits = search_session(manager.get_session(session_id), q, offset + limit)[offset:]
    return {"results": hits, "limit": limit, "offset": offset}
