"""Full-text matches as querysets the admin's changelists can filter, count and paginate.

The storage's search returns one page of hits; a changelist needs every match
(its paginator counts them and slices pages), so the same compiled search is
run here for the keys of all hits, up to :data:`MATCH_CAP`, and turned into
ORM filters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.db import connections
from django.db.models import Q

from .. import conf
from ..exceptions import AgentSessionsError
from ..search import fts5, tsquery
from ..search.args import as_query, query_terms, scan_rows
from ..search.plan import MESSAGES, Filters

MATCH_CAP = 10_000
"""Most matching messages one admin search considers; beyond it the page says "more than"."""


@dataclass(frozen=True)
class Matches:
    """The ``(session_id, message_id)`` of every match (at most the cap; ``capped`` when there were more)."""

    keys: tuple[tuple[str, str], ...] = ()
    capped: bool = False
    valid: bool = True

    @property
    def count(self) -> int:
        return len(self.keys)

    @property
    def label(self) -> str:
        """ "281 messages match" or "more than 10000 messages match"."""
        if self.capped:
            return f"more than {self.count} messages match"
        return f"{self.count} message{'' if self.count == 1 else 's'} match{'es' if self.count == 1 else ''}"

    def sessions(self) -> Q:
        """Sessions having a match (a filter on the session registry)."""
        return Q(pk__in={session_id for session_id, _ in self.keys})

    def messages(self) -> Q:
        """The matching messages (a filter on ``Message``), one ``IN`` per session."""
        by_session: dict[str, list[str]] = {}
        for session_id, message_id in self.keys:
            by_session.setdefault(session_id, []).append(message_id)
        match = Q(pk__in=[])
        for session_id, ids in by_session.items():
            match |= Q(session_id=session_id, message_id__in=ids)
        return match


def _compile(cursor, vendor: str, query, session_id: str | None, limit: int) -> tuple[str, list]:
    """The storage's own search SQL, selecting just ``id, session_id`` of each hit (no snippets)."""
    target = replace(MESSAGES, columns=("id", "session_id"))
    filters = Filters(scope=session_id, limit=limit, snippets=False, scan_rows=scan_rows())
    if vendor == "postgresql":
        return tsquery.compile_query(query, target, filters, conf.pg_text_search_config())
    return fts5.compile_query(cursor, query, target, filters)


def matches(search_term: str, *, using: str, session_id: str | None = None, cap: int | None = None) -> Matches:
    """Every message matching ``search_term`` (in one session, or all), found by the storage's own search SQL.

    A query the search language refuses (or that can match nothing) gives ``Matches(valid=False)``.
    """
    cap = MATCH_CAP if cap is None else cap
    try:
        query = as_query(query_terms(search_term))
    except (AgentSessionsError, ValueError):
        return Matches(valid=False)
    if not query:
        return Matches(valid=False)
    connection = connections[using]
    with connection.cursor() as cursor:
        sql, params = _compile(cursor, connection.vendor, query, session_id, cap + 1)
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    keys = tuple((sid, mid) for mid, sid, *_ in rows[:cap])
    return Matches(keys, capped=len(rows) > cap)
