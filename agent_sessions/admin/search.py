"""Full-text matches as subqueries the admin's changelists can filter, count and paginate.

The storage's search returns one page of hits; a changelist needs every match
(its paginator counts them and slices pages), so the same compiled search is
used here as ``seq IN (…)`` / ``session_id IN (…)``, bounded by :data:`MATCH_CAP`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.db import connections
from django.db.models.expressions import RawSQL

from .. import conf
from ..exceptions import AgentSessionsError
from ..search import fts5, tsquery
from ..search.args import as_query, query_terms, scan_rows
from ..search.plan import MESSAGES, Filters

MATCH_CAP = 100_000
"""Most matching messages one admin search considers; beyond it the page says "more than"."""

@dataclass(frozen=True)
class Matches:
    """A search's matching rows as a subquery, and how many there are (``capped`` when more than ``count``)."""

    subquery: RawSQL | None
    count: int = 0
    capped: bool = False

    @property
    def label(self) -> str:
        """ "281 messages match" or "more than 100000 messages match"."""
        if self.capped:
            return f"more than {self.count} messages match"
        return f"{self.count} message{'' if self.count == 1 else 's'} match{'es' if self.count == 1 else ''}"


def _compile(cursor, vendor: str, query, session_id: str | None, limit: int) -> tuple[str, list]:
    """The storage's own search SQL, selecting just ``id, session_id`` of each hit (no snippets)."""
    target = replace(MESSAGES, columns=("id", "session_id"))
    filters = Filters(scope=session_id, limit=limit, snippets=False, scan_rows=scan_rows())
    if vendor == "postgresql":
        return tsquery.compile_query(query, target, filters, conf.pg_text_search_config())
    return fts5.compile_query(cursor, query, target, filters)


def matches(
    search_term: str,
    *,
    using: str,
    column: str = "seq",
    session_id: str | None = None,
    cap: int | None = None,
    count_only: bool = False,
) -> Matches:
    """Rows matching ``search_term`` as ``SELECT <column> …`` (``seq`` or ``session_id``), with their count.

    A query the search language refuses (or that can match nothing) gives ``Matches(None)``;
    ``count_only`` skips building the subquery.
    """
    cap = MATCH_CAP if cap is None else cap
    try:
        terms = query_terms(search_term)
        query = as_query(terms)
    except (AgentSessionsError, ValueError):
        return Matches(None)
    if not query:
        return Matches(None)
    connection = connections[using]
    with connection.cursor() as cursor:
        sql, params = _compile(cursor, connection.vendor, query, session_id, cap + 1)
        cursor.execute(f"SELECT COUNT(*) FROM ({sql}) AS counted", params)
        (count,) = cursor.fetchone()
        if count_only:
            return Matches(None, min(count, cap), count > cap)
        sql, params = _compile(cursor, connection.vendor, query, session_id, cap)
    if column == "session_id":
        subquery = f"SELECT hits.session_id FROM ({sql}) AS hits"
    else:  # the hits' rows by their unique (session_id, id)
        subquery = (
            f"SELECT msg.seq FROM {MESSAGES.table} AS msg JOIN ({sql}) AS hits"
            " ON msg.session_id = hits.session_id AND msg.id = hits.id"
        )
    return Matches(RawSQL(subquery, params), min(count, cap), count > cap)
