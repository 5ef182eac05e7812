"""Run a compiled search on a cursor: argument checks, compile, execute, finish snippets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from . import args, cost
from .plan import ENTRIES, MESSAGES, SUMMARIES, Filters, Target, finish
from .query import Query

Compiler = Callable[[object, Query, Target, Filters], tuple[str, list]]
"""``(cursor, query, target, filters) -> (sql, params)``; the cursor lets a compiler probe the engine."""


def search_rows(
    cursor,
    compile_query: Compiler,
    target: Target,
    terms: object,
    *,
    scope: str | None,
    limit: object,
    offset: object = 0,
    role: object = None,
    snippets: bool = False,
    owner: object = None,
) -> list[tuple]:
    """Rows of ``target.columns`` (plus a snippet when asked), best match first; ``[]`` if nothing can match.

    ``owner``: only rows whose scope that owner has (``Target.owned_scopes``), filtered in the same query.
    A query past the cost limits (:mod:`.cost`) raises SearchTooComplex before anything runs."""
    query = cost.check(args.as_query(terms))
    limit, offset = args.page(limit, offset)
    filters = Filters(
        scope=scope,
        roles=args.roles(role),
        limit=limit,
        offset=offset,
        snippets=bool(snippets),
        scan_rows=args.scan_rows(),
        owner=owner,
    )
    if not query or limit == 0 or (scope is not None and (not isinstance(scope, str) or "\x00" in scope)):
        return []
    sql, params = compile_query(cursor, query, target, filters)
    cursor.execute(sql, params)
    return finish(cursor.fetchall(), query, target, filters)


MATCH_KEYS = replace(MESSAGES, columns=("id", "session_id", "seq"))
"""Messages as ``(id, session_id, seq)`` rows, no snippets: the keys of every hit."""


def match_keys(cursor, compile_query: Compiler, query: Query, scope: str | None, limit: int) -> list[tuple]:
    """``(id, session_id, seq)`` of up to ``limit`` messages matching ``query`` (in ``scope`` if given), best
    first; ``query`` must be non-empty and checked against the cost limits."""
    filters = Filters(scope=scope, limit=limit, snippets=False, scan_rows=args.scan_rows())
    sql, params = compile_query(cursor, query, MATCH_KEYS, filters)
    cursor.execute(sql, params)
    return cursor.fetchall()


RANKED_MESSAGES = replace(MESSAGES, columns=("seq",))
"""Messages as ``(seq, snippet, rank)`` rows: what a queryset joins to."""


def ranked_message_sql(cursor, compile_query: Compiler, query: Query, scope: str | None) -> tuple[str, list]:
    """``(sql, params)``: every message matching ``query`` (in ``scope`` if given) as ``seq, NULL, rank`` rows.

    For :meth:`agent_sessions.querysets.MessageQuerySet.search`, which joins it;
    ``query`` must be non-empty (check with ``bool(query)`` first).
    """
    filters = Filters(scope=scope, limit=args.MAX_PAGE, scan_rows=args.scan_rows(), ranked=True)
    return compile_query(cursor, cost.check(query), RANKED_MESSAGES, filters)


def match_sql(
    cursor, compile_query: Compiler, query: Query, scope: str | None, column: str = "seq", target: Target = MESSAGES
) -> tuple[str, list]:
    """``(sql, params)`` selecting ``column`` (``seq`` or ``session_id``) of every row of ``target`` (messages,
    or :data:`~.plan.SUMMARIES`) matching ``query`` (in ``scope`` if given).

    Unranked and unordered: a condition the database evaluates itself (``seq IN (…)``), so a
    changelist filters, counts and pages its hits without their keys crossing the wire.
    ``query`` must be non-empty and checked against the cost limits."""
    if column not in ("seq", "session_id"):
        raise ValueError(f"no such key column: {column!r}")
    filters = Filters(scope=scope, scan_rows=args.scan_rows(), keys=column)
    return compile_query(cursor, query, replace(target, columns=("seq",)), filters)


MESSAGE_BY_ID = "SELECT seq FROM assistant_messages WHERE id = %s"
MESSAGES_OF_SESSION = "SELECT seq FROM assistant_messages WHERE session_id = %s"


def with_id_lookups(sql: str, params: list, term: str) -> tuple[str, list]:
    """``sql`` (``seq`` rows, or empty for none) plus the messages whose id or session id is ``term``.

    One ``UNION ALL`` inside the caller's ``IN``: an ``OR`` beside the ``IN`` would make the
    database test every row instead of joining the hits (docs/performance.md, S3)."""
    selects = [s for s in (sql, MESSAGE_BY_ID, MESSAGES_OF_SESSION) if s]
    return " UNION ALL ".join(selects), [*params, term, term]


@dataclass(frozen=True)
class Searcher:
    """A backend's ``search_messages`` / ``search_entries``, over its own compiler."""

    compile_query: Compiler

    def search_messages(
        self,
        cursor,
        session_id: str | None,
        terms,
        limit: int,
        *,
        offset: int = 0,
        role: str | tuple[str, ...] | None = None,
        snippets: bool = False,
        owner: object = None,
    ) -> list[tuple]:
        """Rows ``(id, role, text_content, created_at, session_id)`` (+ ``snippet`` when asked), best first.

        ``terms``: a parsed query (``query_terms``) or a plain list of required words; ``owner``: only
        messages of sessions that user owns (``assistant_sessions.owner_id``).
        """
        return search_rows(
            cursor, self.compile_query, MESSAGES, terms,
            scope=session_id, limit=limit, offset=offset, role=role, snippets=snippets, owner=owner,
        )  # fmt: skip

    def search_summaries(
        self,
        cursor,
        session_id: str | None,
        terms,
        limit: int,
        *,
        offset: int = 0,
        snippets: bool = False,
        owner: object = None,
    ) -> list[tuple]:
        """Compaction summaries matching ``terms``: rows ``(id, summary, created_at, session_id)`` (+ snippet)."""
        return search_rows(
            cursor, self.compile_query, SUMMARIES, terms,
            scope=session_id, limit=limit, offset=offset, snippets=snippets, owner=owner,
        )  # fmt: skip

    def search_entries(
        self, cursor, label: str, terms, limit: int, *, offset: int = 0, snippets: bool = False
    ) -> list[tuple]:
        """Rows ``(key, content)`` (+ ``snippet`` when asked) of one label's entries, best match first."""
        return search_rows(
            cursor, self.compile_query, ENTRIES, terms, scope=label, limit=limit, offset=offset, snippets=snippets
        )

    def match_keys(self, cursor, query: Query, scope: str | None, limit: int) -> list[tuple]:
        """``(id, session_id, seq)`` of up to ``limit`` matches (see :func:`match_keys`)."""
        return match_keys(cursor, self.compile_query, query, scope, limit)

    def match_sql(
        self, cursor, query: Query, scope: str | None, column: str = "seq", target: Target = MESSAGES
    ) -> tuple[str, list]:
        """SQL of ``column`` of every match, unordered (see :func:`match_sql`)."""
        return match_sql(cursor, self.compile_query, query, scope, column, target)

    def ranked_messages(self, cursor, query: Query, scope: str | None) -> tuple[str, list]:
        """SQL of every matching message as ``seq, snippet, rank`` rows (see :func:`ranked_message_sql`)."""
        return ranked_message_sql(cursor, self.compile_query, query, scope)
