"""The bound on a query's cost: how many terms it may have, and how many of them scan.

A search costs about (rows its indexed terms select) × (its terms), and a term no index
serves (a CJK word under 3 characters) is tested on up to ``SEARCH_SCAN_ROWS`` rows. ANDed
scanning terms stop at a row's first miss; alternatives OR'd together are each tested on every
row that matches none of them, so those are what is capped.  The terms and the scanning
alternatives of any one OR group are capped here, before any SQL runs, so every entry point
(Session, manager, API, tools, admin, querysets) refuses the same queries with
:class:`SearchTooComplex`.
"""

from __future__ import annotations

from .. import conf
from ..exceptions import SearchTooComplex
from .query import MAX_TERMS, Query


def limits() -> tuple[int, int]:
    """``(most terms, most scanning alternatives in one OR group)`` (terms capped at the parser's MAX_TERMS)."""
    return min(conf.search_max_terms(), MAX_TERMS), conf.search_max_scan_terms()


def check(query: Query) -> Query:
    """``query`` itself when within the limits; SearchTooComplex saying which limit it passes otherwise."""
    terms = [*query.terms, *query.excluded]
    most_terms, most_scanning = limits()
    if len(terms) > most_terms:
        raise SearchTooComplex(
            f"search query has more than {most_terms} terms (words, phrases and exclusions); use fewer words"
        )
    scanning = max((sum(1 for t in group.terms if t.short) for group in query.groups), default=0)
    if most_scanning == 0:  # no scanning term at all
        scanning = sum(1 for t in terms if t.short)
    if scanning > most_scanning:
        raise SearchTooComplex(
            f"search query ORs {scanning} terms of one or two CJK (or other unspaced-script) characters, "
            f"which no index serves; at most {most_scanning} are allowed: use longer words"
        )
    return query
