"""Full-text matches as querysets the admin's changelists can filter, count and paginate.

The storage's search returns one page of hits; a changelist needs every match
(its paginator counts them and slices pages), so the same compiled search is
run here for the keys of all hits, up to :data:`MATCH_CAP`, and turned into
ORM filters.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import admin, messages
from django.db import connections
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.text import smart_split

from ..exceptions import AgentSessionsError, SearchTooComplex
from ..search import cost
from ..search.args import as_query, query_terms
from ..storage import backends

MATCH_CAP = 10_000
"""Most matching messages one admin search considers; beyond it the page says "more than"."""


@dataclass(frozen=True)
class Matches:
    """The ``(session_id, message_id)`` of every match (at most the cap; ``capped`` when there were more)."""

    keys: tuple[tuple[str, str], ...] = ()
    capped: bool = False
    valid: bool = True
    seqs: tuple[int, ...] = ()
    refused: str = ""  # why the search language refused the query (SearchTooComplex), for the page

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
        """The matching messages (a filter on ``Message``): two ``IN`` lists, never one test per session,
        so hits in thousands of sessions stay one flat condition (SQLite caps expression depth)."""
        return Q(session_id__in={session_id for session_id, _ in self.keys}, pk__in=self.seqs)


def matches(search_term: str, *, using: str, session_id: str | None = None, cap: int | None = None) -> Matches:
    """Every message matching ``search_term`` (in one session, or all), found by the storage's own search SQL.

    A query the search language refuses (or that can match nothing) gives ``Matches(valid=False)``;
    one past the search cost limits also says why in ``refused``.
    """
    cap = MATCH_CAP if cap is None else cap
    try:
        query = cost.check(as_query(query_terms(search_term)))
    except SearchTooComplex as exc:
        return Matches(valid=False, refused=str(exc))
    except (AgentSessionsError, ValueError):
        return Matches(valid=False)
    if not query:
        return Matches(valid=False)
    with connections[using].cursor() as cursor:
        rows = backends.for_alias(using).match_keys(cursor, query, session_id, cap + 1)
    keys = tuple((sid, mid) for mid, sid, *_ in rows[:cap])
    return Matches(keys, capped=len(rows) > cap, seqs=tuple(seq for _, _, seq, *_ in rows[:cap]))


def bounded_words(request: HttpRequest, search_term: str) -> str:
    """The search box's first SEARCH_MAX_TERMS words (a warning on the page when more were typed).

    Django's field search ANDs one condition per word: a pasted paragraph would become a
    condition deeper than SQLite accepts, and the search language takes no more words anyway.
    """
    most, _ = cost.limits()
    words = list(smart_split(search_term))
    if len(words) <= most:
        return search_term
    messages.warning(request, f"Search: only the first {most} of {len(words)} words are matched against ids and names.")
    return " ".join(words[:most])


class BoundedSearchAdmin(admin.ModelAdmin):
    """A ModelAdmin whose search box matches at most SEARCH_MAX_TERMS words (see :func:`bounded_words`)."""

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        return super().get_search_results(request, queryset, bounded_words(request, search_term))
