"""Owner-scoped message search across sessions.

The storage's search ranks every session's messages together; a caller may
only see hits in its own sessions.  Hits come best first, so asking for
successively larger pages (×4 each time) and keeping the caller's hits yields
exactly the caller's best ``limit`` — it stops as soon as it has them or the
matches are exhausted, so the work follows how many foreign hits outrank them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from ..storage import orm
from ..types import SearchResult
from .errors import ApiError

if TYPE_CHECKING:
    from agent_sessions import Session

GROWTH = 4


def _run(fn: Callable[[], list[SearchResult]]) -> list[SearchResult]:
    try:
        return fn()
    except ValueError as exc:  # a query the engine refuses (never a database error)
        raise ApiError(400, "invalid_query", str(exc) or "Invalid search query.") from None


def search_session(session: Session, query: str, limit: int) -> list[SearchResult]:
    """Hits in one session (the caller owns it)."""
    return _run(lambda: session.search(query, limit=limit))


def search_owned(
    query: str, limit: int, *, using: str, allowed: Callable[[set[str]], set[str]] | None
) -> list[SearchResult]:
    """Best ``limit`` hits across sessions; ``allowed(ids)`` returns which session ids the caller may see
    (None: every session, for staff)."""
    if allowed is None:
        return _run(lambda: orm.search(query, session_id=None, limit=limit, using=using))
    fetch = limit
    while True:
        hits = _run(partial(orm.search, query, session_id=None, limit=fetch, using=using))
        visible = allowed({h.session_id for h in hits if h.session_id is not None})
        kept = [h for h in hits if h.session_id in visible]
        if len(kept) >= limit or len(hits) < fetch:
            return kept[:limit]
        fetch *= GROWTH
