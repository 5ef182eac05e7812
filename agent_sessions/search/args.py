"""Search arguments made safe: the parsed query, page, roles and the scan bound."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import conf
from ..exceptions import SearchQueryError
from .query import Query, parse


class QueryTerms(list):
    """The positive words of a query (falsy when nothing can match), carrying the parsed AST.

    A plain ``list[str]`` for callers that only check or show the words; the
    backends' search functions read :attr:`query` to apply the full language.
    """

    def __init__(self, query: Query) -> None:
        super().__init__(query.words())
        self.query = query


def query_terms(query: object) -> QueryTerms:
    """Parse ``query`` (truncated to AGENT_SESSIONS_MAX_QUERY_LENGTH); empty for blank or non-text input."""
    return QueryTerms(parse(query, max_length=conf.max_query_length()))


def as_query(terms: object) -> Query:
    """The AST behind ``terms``: a Query, a QueryTerms, or a plain list of words (all required)."""
    if isinstance(terms, Query):
        return terms
    parsed = getattr(terms, "query", None)
    if isinstance(parsed, Query):
        return parsed
    if isinstance(terms, str):
        return parse(terms, max_length=conf.max_query_length())
    return Query.all_of(terms if isinstance(terms, Iterable) else [])


def scan_rows() -> int:
    """AGENT_SESSIONS_SEARCH_SCAN_ROWS: the bound of the unindexed (short CJK) fallback."""
    return conf.search_scan_rows()


MAX_PAGE = 10**9
_MAX_PAGE = MAX_PAGE


def page(limit: object, offset: object = 0) -> tuple[int, int]:
    """``limit`` and ``offset`` as sane non-negative ints (SearchQueryError when not numbers)."""
    try:
        as_int: Any = int  # limit and offset come from callers and tool calls: anything int() takes
        return min(max(0, as_int(limit)), _MAX_PAGE), min(max(0, as_int(offset)), _MAX_PAGE)
    except (TypeError, ValueError, OverflowError) as exc:
        raise SearchQueryError(f"limit and offset must be integers: {exc}") from None


def roles(role: object) -> tuple[str, ...] | None:
    """``None`` (any role), or the roles a hit may have (a string or an iterable of strings)."""
    if role is None:
        return None
    given: Any = [role] if isinstance(role, str) else role
    try:
        values = tuple(given)
    except TypeError:
        raise SearchQueryError("role must be a string or an iterable of strings") from None
    if not all(isinstance(r, str) for r in values):
        raise SearchQueryError("role must be a string or an iterable of strings")
    return tuple(r for r in values if "\x00" not in r)
