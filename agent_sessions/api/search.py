"""Owner-scoped message search across sessions.

The storage's search ranks every session's messages together; a caller may only see hits in its own
sessions.  The owner filter runs inside the ranking query (``session_id IN (the caller's sessions)``), so
a page costs one query whatever the number of other users' hits that outrank the caller's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..exceptions import SearchTooComplex
from ..storage import orm
from ..types import SearchResult
from .errors import ApiError

if TYPE_CHECKING:
    from agent_sessions import Session


def _run(fn: Callable[[], list[SearchResult]]) -> list[SearchResult]:
    try:
        return fn()
    except SearchTooComplex:
        raise  # 400 "search_too_complex", mapped with the library's errors
    except ValueError as exc:  # a query the engine refuses (never a database error)
        raise ApiError(400, "invalid_query", str(exc) or "Invalid search query.") from None


def search_session(session: Session, query: str, limit: int) -> list[SearchResult]:
    """Hits in one session (the caller owns it)."""
    return _run(lambda: session.search(query, limit=limit))


def search_owned(query: str, limit: int, *, using: str, owner: Any) -> list[SearchResult]:
    """Best ``limit`` hits across the sessions ``owner`` (a user id) owns; ``owner`` None: every session (staff).

    The same hits, in the same order, as the storage's search across all sessions with the other users'
    hits left out."""
    return _run(lambda: orm.search(query, session_id=None, limit=limit, using=using, owner=owner))
