"""Full-text matches as querysets the admin's changelists can filter, count and paginate.

A changelist's search is one condition the database evaluates itself: ``seq IN (…)`` (or
``id IN (…)`` for sessions) around the storage's own search SQL, unranked, so the join
with the full-text index happens in the database and the SQL sent stays a few hundred bytes
whatever the number of hits. :class:`EstimatingPaginator` counts exactly up to
:data:`EXACT_COUNT` rows and takes the planner's estimate past it (Postgres), saying so on
the page. :func:`matches` (the keys of up to :data:`MATCH_CAP` hits) serves one session's
tree page, which lists hits by message.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.text import smart_split
from django.utils.text import unescape_string_literal as _unescape

from ..exceptions import AgentSessionsError, SearchTooComplex
from ..querysets import InRows
from ..search import cost
from ..search.args import as_query, query_terms
from ..search.plan import MESSAGES, SUMMARIES
from ..search.query import Query
from ..search.run import with_id_lookups
from ..storage import backends

EXACT_COUNT = 10_000
"""Rows a changelist counts exactly; past it the count is the planner's estimate (where there is one)."""

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


def unquote_word(word: str) -> str:
    """A search box word as Django's field search reads it: ``"a b"`` → ``a b``."""
    if len(word) > 1 and word[0] == word[-1] and word[0] in "\"'":
        return _unescape(word)
    return word


def _parsed(search_term: str) -> tuple[Query | None, str]:
    """``(query, "")`` for a searchable term; ``(None, why)`` when the language refuses it or nothing can match."""
    try:
        query = cost.check(as_query(query_terms(search_term)))
    except SearchTooComplex as exc:
        return None, str(exc)
    except (AgentSessionsError, ValueError):
        return None, ""
    return (query, "") if query else (None, "")


@dataclass(frozen=True)
class Condition:
    """A changelist's full-text filter: ``q`` is None when nothing can match (``refused`` says why, if refused)."""

    q: Q | None = None
    refused: str = ""


def text_condition(
    search_term: str, *, using: str, column: str = "seq", summaries: bool = False, exact_ids: bool = False
) -> Condition:
    """Rows whose ``pk`` is the ``column`` (``seq``: messages, ``session_id``: sessions) of a message matching
    ``search_term``, as one ``pk IN (search SQL)`` condition the database evaluates with its index.
    ``summaries``: of a compaction summary instead (the compaction changelist). ``exact_ids`` (messages):
    also the messages whose id or session id is the term, inside the same ``IN``: an ``OR`` beside it
    would make the database test every row instead of joining the hits."""
    query, refused = _parsed(search_term)
    sql, params = "", []
    if query is not None:
        target = SUMMARIES if summaries else MESSAGES
        with connections[using].cursor() as cursor:  # the SQLite compiler probes its tokenizer
            sql, params = backends.for_alias(using).match_sql(cursor, query, None, column, target)
    words = [unquote_word(w) for w in smart_split(search_term)]
    if exact_ids and len(words) == 1 and words[0]:
        sql, params = with_id_lookups(sql, params, words[0])
    if not sql:
        return Condition(refused=refused)
    return Condition(Q(InRows("pk", (sql, params))), refused=refused)


class EstimatingPaginator(Paginator):
    """Counts exactly up to :data:`EXACT_COUNT` rows, then takes the database's estimate where it has one.

    ``estimated`` tells the page to say so. The exact count is ``COUNT(*)`` over the first
    ``EXACT_COUNT + 1`` rows, so it costs at most that many rows however many match."""

    estimated = False

    def __init__(self, *args, request: HttpRequest | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.request = request

    @cached_property
    def count(self) -> int:
        rows = self.object_list
        if not isinstance(rows, QuerySet):
            return super().count
        exact = rows[: EXACT_COUNT + 1].count()
        if exact <= EXACT_COUNT:
            return exact
        sql, params = rows.order_by().query.get_compiler(using=rows.db).as_sql()
        with connections[rows.db].cursor() as cursor:
            guess = backends.for_alias(rows.db).estimated_rows(cursor, sql, params)
        if guess is None:
            return rows.count()
        self.estimated = True
        count = max(guess, exact)
        if self.request is not None:
            messages.info(
                self.request,
                f"About {count:,} results (the database's estimate: counts are exact up to {EXACT_COUNT:,}).",
            )
        return count


class EstimatedCountAdmin(admin.ModelAdmin):
    """A ModelAdmin whose changelist counts with :class:`EstimatingPaginator` (and says when it estimates)."""

    paginator = EstimatingPaginator

    def get_paginator(
        self, request: HttpRequest, queryset: QuerySet, per_page: int, orphans: int = 0, allow_empty_first_page=True
    ) -> Paginator:
        return self.paginator(queryset, per_page, orphans, allow_empty_first_page, request=request)


def matches(search_term: str, *, using: str, session_id: str | None = None, cap: int | None = None) -> Matches:
    """Every message matching ``search_term`` (in one session, or all), found by the storage's own search SQL.

    A query the search language refuses (or that can match nothing) gives ``Matches(valid=False)``;
    one past the search cost limits also says why in ``refused``.
    """
    cap = MATCH_CAP if cap is None else cap
    query, refused = _parsed(search_term)
    if query is None:
        return Matches(valid=False, refused=refused)
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
